package walog

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"
)

// replayFrom returns the entries ReplayFrom(seq) yields, payloads copied.
func replayFrom(t *testing.T, l *Log, seq uint64) []Entry {
	t.Helper()
	r, err := l.ReplayFrom(seq)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var es []Entry
	for {
		e, err := r.Next()
		if err == io.EOF {
			return es
		}
		if err != nil {
			t.Fatal(err)
		}
		e.Payload = append([]byte(nil), e.Payload...)
		es = append(es, e)
	}
}

// checkHeld fails unless es are entries first..last with payloadOf.
func checkHeld(t *testing.T, what string, es []Entry, first, last uint64) {
	t.Helper()
	var got, want []uint64
	for _, e := range es {
		got = append(got, e.Seq)
		if !bytes.Equal(e.Payload, payloadOf(e.Seq)) {
			t.Fatalf("%s: entry %d holds %q", what, e.Seq, e.Payload)
		}
	}
	for s := first; s <= last && last != 0; s++ {
		want = append(want, s)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: entries %v, want %d..%d", what, got, first, last)
	}
}

// Hold keeps every entry the cursor has passed until the retention floor
// passes it too: segments go only once both have passed all their
// entries, a floor that moves without the cursor still releases at the
// next save, ReplayFrom reads the kept entries below the cursor, and a
// reopened log starts its floor at the oldest entry stored.
func TestHoldKeepsEntriesUntilTheFloor(t *testing.T) {
	t.Parallel()
	for _, recycle := range []bool{true, false} {
		t.Run(fmt.Sprintf("recycle=%v", recycle), func(t *testing.T) {
			dir := t.TempDir()
			size := RecordSize(len(payloadOf(10)))
			opts := LocalOptions{SegmentBytes: int64(4 * size), NoRecycle: !recycle, Options: Options{Hold: true}}
			l := mustOpen(t, dir, opts)
			if f := l.Floor(); f != 1 {
				t.Fatalf("floor of a new log %d, want 1", f)
			}
			fill(t, l, 1, 14) // segments 1, 5, 9, 13
			for seq := uint64(1); seq <= 14; seq++ {
				l.Ack(seq)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := segmentFiles(t, dir); !slices.Equal(got, []uint64{1, 5, 9, 13}) {
				t.Fatalf("segments %v with the floor at 1, want all four", got)
			}
			checkHeld(t, "Replay (after the cursor)", replayAll(t, l), 0, 0)
			checkHeld(t, "ReplayFrom(1)", replayFrom(t, l, 1), 1, 14)
			checkHeld(t, "ReplayFrom(7)", replayFrom(t, l, 7), 7, 14)

			// The floor moves without the cursor: the next save releases.
			l.SetFloor(6)
			l.SetFloor(3) // backwards: ignored
			if f := l.Floor(); f != 6 {
				t.Fatalf("floor %d, want 6", f)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := segmentFiles(t, dir); !slices.Equal(got, []uint64{5, 9, 13}) {
				t.Fatalf("segments %v with the floor at 6, want 5 9 13 (5..8 holds 6)", got)
			}
			checkHeld(t, "ReplayFrom(Floor())", replayFrom(t, l, l.Floor()), 6, 14)
			mustClose(t, l)

			// A crash loses the floor: the reopened log starts it at the
			// oldest entry stored, and keeps everything from there.
			l = mustOpen(t, dir, opts)
			if f, c := l.Floor(), l.Cursor(); f != 5 || c != 14 {
				t.Fatalf("reopened: floor %d, cursor %d; want 5, 14", f, c)
			}
			checkHeld(t, "reopened ReplayFrom(Floor())", replayFrom(t, l, l.Floor()), 5, 14)
			fill(t, l, 15, 20)
			for seq := uint64(15); seq <= 20; seq++ {
				l.Ack(seq)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := segmentFiles(t, dir); !slices.Equal(got, []uint64{5, 9, 13, 17}) {
				t.Fatalf("segments %v after the cursor passed 20 with the floor at 5", got)
			}
			// A floor ahead of the persisted cursor releases only what the
			// cursor has passed.
			fill(t, l, 21, 24)
			l.SetFloor(25)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := segmentFiles(t, dir); !slices.Equal(got, []uint64{21}) {
				t.Fatalf("segments %v with the floor at 25 and the cursor at 20, want 21", got)
			}
			checkHeld(t, "Replay", replayAll(t, l), 21, 24)
			mustClose(t, l)

			// Opened without Hold, the log deletes what its cursor passed.
			l = mustOpen(t, dir, LocalOptions{SegmentBytes: opts.SegmentBytes, NoRecycle: !recycle})
			l.SetFloor(1) // does nothing without Hold
			if f := l.Floor(); f != 21 {
				t.Fatalf("floor without Hold %d, want the cursor's successor 21", f)
			}
			fill(t, l, 25, 26)
			for seq := uint64(21); seq <= 26; seq++ {
				l.Ack(seq)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := segmentFiles(t, dir); !slices.Equal(got, []uint64{25}) {
				t.Fatalf("segments %v without Hold, want 25", got)
			}
			mustClose(t, l)
		})
	}
}

// A process crash (the directory as it is while the log is open) keeps
// the held entries: the floor is not persisted, and the reopened log
// holds every entry from the oldest segment on.
func TestHoldSurvivesACrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	size := RecordSize(len(payloadOf(10)))
	opts := LocalOptions{SegmentBytes: int64(4 * size), Options: Options{Hold: true}}
	l := mustOpen(t, dir, opts)
	defer l.Close()
	fill(t, l, 1, 10)
	for seq := uint64(1); seq <= 10; seq++ {
		l.Ack(seq)
	}
	l.SetFloor(5)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	crashed := copyDir(t, dir)
	l2 := mustOpen(t, crashed, opts)
	defer l2.Close()
	if f, c := l2.Floor(), l2.Cursor(); f != 5 || c != 10 {
		t.Fatalf("after the crash: floor %d, cursor %d; want 5, 10", f, c)
	}
	checkHeld(t, "ReplayFrom(1)", replayFrom(t, l2, 1), 5, 10)
	checkHeld(t, "Replay", replayAll(t, l2), 0, 0)
}

// The object-store backend honours the floor the same way: a segment
// goes once the cursor and the floor have both passed it, and a reopened
// log starts its floor at the oldest segment kept.
func TestObjectStoreHold(t *testing.T) {
	t.Parallel()
	c, bucket := objBucket(t)
	opts := objOpts(c, bucket)
	opts.Sync = SyncAlways // one segment per entry
	opts.Hold = true
	l := objOpen(t, opts)
	objAppend(t, l, 1, 6)
	for s := uint64(1); s <= 6; s++ {
		l.Ack(s)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := objSegments(t, c, bucket), objSegNames(1, 2, 3, 4, 5, 6); !slices.Equal(got, want) {
		t.Fatalf("segments %v with the floor at 1, want %v", got, want)
	}
	if got := objReplay(t, l); len(got) != 0 {
		t.Fatalf("Replay after the cursor: %v", got)
	}
	objReplayFrom := func(l *Log, seq uint64) []string {
		var got []string
		for _, e := range replayFrom(t, l, seq) {
			got = append(got, fmt.Sprintf("%d:%s", e.Seq, e.Payload))
		}
		return got
	}
	if got, want := objReplayFrom(l, 2), objEntries(2, 6); !slices.Equal(got, want) {
		t.Fatalf("ReplayFrom(2) = %v, want %v", got, want)
	}
	l.SetFloor(4)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := objSegments(t, c, bucket), objSegNames(4, 5, 6); !slices.Equal(got, want) {
		t.Fatalf("segments %v with the floor at 4, want %v", got, want)
	}
	objClose(t, l)

	l = objOpen(t, opts)
	if f, cur := l.Floor(), l.Cursor(); f != 4 || cur != 6 {
		t.Fatalf("reopened: floor %d, cursor %d; want 4, 6", f, cur)
	}
	if got, want := objReplayFrom(l, l.Floor()), objEntries(4, 6); !slices.Equal(got, want) {
		t.Fatalf("reopened ReplayFrom(Floor()) = %v, want %v", got, want)
	}
	// A floor past everything: the newest segment stays, as always.
	l.SetFloor(7)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := objSegments(t, c, bucket), objSegNames(6); !slices.Equal(got, want) {
		t.Fatalf("segments %v with the floor at 7, want %v", got, want)
	}
	objClose(t, l)
}
