package walog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dirFiles returns every file in dir with its bytes.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

// segmentFiles returns the first sequences of the segments in dir.
func segmentFiles(t *testing.T, dir string) []uint64 {
	t.Helper()
	var firsts []uint64
	for name := range dirFiles(t, dir) {
		if s, ok := strings.CutSuffix(name, segSuffix); ok {
			first, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("segment %s: %v", name, err)
			}
			firsts = append(firsts, first)
		}
	}
	slices.Sort(firsts)
	return firsts
}

func mustOpen(t *testing.T, dir string, opts LocalOptions) *Log {
	t.Helper()
	l, err := OpenDir(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustClose(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func payloadOf(seq uint64) []byte { return fmt.Appendf(nil, "payload of entry %d", seq) }

// fill appends entries first..last (which must be the next sequences) with
// payloadOf(seq).
func fill(t *testing.T, l *Log, first, last uint64) {
	t.Helper()
	for seq := first; seq <= last; seq++ {
		got, err := l.Append(context.Background(), payloadOf(seq))
		if err != nil {
			t.Fatal(err)
		}
		if got != seq {
			t.Fatalf("Append returned %d, want %d", got, seq)
		}
	}
}

func checkReplay(t *testing.T, l *Log, first, last uint64) {
	t.Helper()
	es := replayAll(t, l)
	if uint64(len(es)) != last+1-first {
		t.Fatalf("replayed %d entries, want %d..%d", len(es), first, last)
	}
	for i, e := range es {
		if e.Seq != first+uint64(i) || !bytes.Equal(e.Payload, payloadOf(e.Seq)) {
			t.Fatalf("replayed entry %d: seq %d payload %q", i, e.Seq, e.Payload)
		}
	}
}

// TestTornTailRepair: reopening cuts a torn last record and keeps the
// intact prefix; new entries follow it.
func TestTornTailRepair(t *testing.T) {
	t.Parallel()
	rec6 := AppendRecord(nil, 6, payloadOf(6))
	cases := []struct {
		name string
		tear func(b []byte) []byte
		last uint64
	}{
		{"cut mid-body", func(b []byte) []byte { return b[:len(b)-5] }, 4},
		{"cut mid-header", func(b []byte) []byte { return b[:len(b)-RecordSize(len(payloadOf(5)))+7] }, 4},
		{"partial next record", func(b []byte) []byte { return append(b, rec6[:len(rec6)-2]...) }, 5},
		{"garbage next record", func(b []byte) []byte {
			bad := bytes.Clone(rec6)
			bad[len(bad)-3] ^= 0x55
			return append(b, bad...)
		}, 5},
		{"zero-filled tail", func(b []byte) []byte { return append(b, make([]byte, 8192)...) }, 5},
		// A header torn after its sequence field reads as length 0 with a
		// checksum of 0, which is the checksum of nothing: not an entry.
		{"header torn after the sequence, then zeros", func(b []byte) []byte {
			return append(append(b, rec6[:8]...), make([]byte, 4096)...)
		}, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, LocalOptions{})
			fill(t, l, 1, 5)
			mustClose(t, l)
			path := filepath.Join(dir, segName(1))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.tear(b), 0o644); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, dir, LocalOptions{})
			if got := l.Last(); got != tc.last {
				t.Fatalf("Last after repair %d, want %d", got, tc.last)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(tc.last) * int64(RecordSize(len(payloadOf(1)))); fi.Size() != want {
				t.Fatalf("segment is %d bytes after repair, want the intact %d", fi.Size(), want)
			}
			checkReplay(t, l, 1, tc.last)
			fill(t, l, tc.last+1, 8)
			mustClose(t, l)
			l = mustOpen(t, dir, LocalOptions{})
			defer l.Close()
			checkReplay(t, l, 1, 8)
		})
	}
}

// TestCorruptionRefused: damage a crash cannot explain is an error naming
// the segment and offset, and the refused open changes nothing on disk.
func TestCorruptionRefused(t *testing.T) {
	t.Parallel()
	opts := LocalOptions{SegmentBytes: 4 * int64(RecordSize(len(payloadOf(10))))}
	setup := func(t *testing.T) string {
		dir := t.TempDir()
		l := mustOpen(t, dir, opts)
		fill(t, l, 1, 12)
		mustClose(t, l)
		if got := segmentFiles(t, dir); !slices.Equal(got, []uint64{1, 5, 9}) {
			t.Fatalf("segments %v, want 1 5 9", got)
		}
		return dir
	}
	recOff := func(i int) int { // offset of the i-th record (from 0) in segment 1, and of the first two in segment 9
		return i * RecordSize(len(payloadOf(1)))
	}
	cases := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		segment string
		offset  int64
		reason  string
	}{
		{"flipped payload byte in a middle record", func(t *testing.T, dir string) {
			path := filepath.Join(dir, segName(1))
			b, _ := os.ReadFile(path)
			b[recOff(1)+headerSize+3] ^= 0x20
			os.WriteFile(path, b, 0o644)
		}, segName(1), int64(recOff(1)), "checksum"},
		{"torn tail in a segment that is not the newest", func(t *testing.T, dir string) {
			path := filepath.Join(dir, segName(5))
			b, _ := os.ReadFile(path)
			os.WriteFile(path, b[:len(b)-3], 0o644)
		}, segName(5), int64(recOff(3)), "not the newest"},
		// In the newest segment, a bad record that a valid one follows is
		// damage, not a torn tail: cutting there would drop the entries
		// after it (here 11 and 12).
		{"flipped length bit in a middle record of the newest segment", func(t *testing.T, dir string) {
			path := filepath.Join(dir, segName(9))
			b, _ := os.ReadFile(path)
			b[recOff(1)+9] ^= 0x01 // the length grows by 64 KiB: past the end of the file
			os.WriteFile(path, b, 0o644)
		}, segName(9), int64(recOff(1)), fmt.Sprintf("a valid entry (sequence 11) follows at offset %d", recOff(1)+RecordSize(len(payloadOf(10))))},
		{"length of 0 in a middle record of the newest segment", func(t *testing.T, dir string) {
			path := filepath.Join(dir, segName(9))
			b, _ := os.ReadFile(path)
			copy(b[recOff(1)+8:], []byte{0, 0, 0, 0})
			os.WriteFile(path, b, 0o644)
		}, segName(9), int64(recOff(1)), "length 0"},
		{"missing middle segment", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, segName(5)))
		}, segName(9), 0, "previous one ends at 4"},
		{"missing oldest segment", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, segName(1)))
		}, segName(5), 0, "missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := setup(t)
			tc.damage(t, dir)
			before := dirFiles(t, dir)
			l, err := OpenDir(dir, opts)
			if err == nil {
				l.Close()
				t.Fatal("opened a corrupt log")
			}
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *CorruptError", err)
			}
			if ce.Segment != tc.segment || ce.Offset != tc.offset || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("error names %s at %d (%s), want %s at %d (%s)", ce.Segment, ce.Offset, ce.Reason, tc.segment, tc.offset, tc.reason)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.segment) || !strings.Contains(msg, fmt.Sprintf("offset %d", tc.offset)) {
				t.Fatalf("message %q does not name the segment and offset", msg)
			}
			if after := dirFiles(t, dir); !maps.EqualFunc(before, after, bytes.Equal) {
				t.Fatal("a refused open changed the directory")
			}
			// The lock was released: a later open fails the same way, not on the lock.
			if _, err := OpenDir(dir, opts); !errors.As(err, &ce) {
				t.Fatalf("second attempt: %v", err)
			}
		})
	}

	t.Run("unreadable cursor", func(t *testing.T) {
		dir := setup(t)
		for _, name := range cursorSlotNames {
			os.WriteFile(filepath.Join(dir, name), []byte("AFWALCS1 garbage"), 0o644)
		}
		before := dirFiles(t, dir)
		if _, err := OpenDir(dir, opts); err == nil || !strings.Contains(err.Error(), "cursor") {
			t.Fatalf("open with a damaged cursor: %v", err)
		}
		if after := dirFiles(t, dir); !maps.EqualFunc(before, after, bytes.Equal) {
			t.Fatal("a refused open changed the directory")
		}
	})
	t.Run("unexpected segment name", func(t *testing.T) {
		dir := setup(t)
		os.WriteFile(filepath.Join(dir, "7.wal"), nil, 0o644)
		if _, err := OpenDir(dir, opts); err == nil || !strings.Contains(err.Error(), "7.wal") {
			t.Fatalf("open with a stray segment: %v", err)
		}
	})
}

// TestSegmentRotation: a segment is closed at SegmentBytes and the next is
// named after its first sequence; an entry larger than SegmentBytes gets a
// segment of its own.
func TestSegmentRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	size := RecordSize(len(payloadOf(10)))
	opts := LocalOptions{SegmentBytes: int64(4 * size)}
	l := mustOpen(t, dir, opts)
	fill(t, l, 1, 18)
	big := bytes.Repeat([]byte("B"), 10*size)
	if seq, err := l.Append(context.Background(), big); err != nil || seq != 19 {
		t.Fatalf("big append: %d, %v", seq, err)
	}
	fill(t, l, 20, 21)
	mustClose(t, l)
	want := []uint64{1, 5, 9, 13, 17, 19, 20}
	if got := segmentFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	files := dirFiles(t, dir)
	for _, first := range want {
		seg, err := DecodeSegment(segName(first), files[segName(first)], first)
		if err != nil || seg.Torn != "" || len(seg.Entries) == 0 {
			t.Fatalf("segment %d: %d entries, torn %q, %v", first, len(seg.Entries), seg.Torn, err)
		}
	}
	l = mustOpen(t, dir, opts)
	defer l.Close()
	es := replayAll(t, l)
	if len(es) != 21 || !bytes.Equal(es[18].Payload, big) || es[20].Seq != 21 {
		t.Fatalf("replayed %d entries", len(es))
	}
}

// TestSegmentDeletion: once the persisted cursor passes every entry of a
// segment it is deleted (Flush persists the cursor), unless Retain is set.
func TestSegmentDeletion(t *testing.T) {
	t.Parallel()
	size := RecordSize(len(payloadOf(10)))
	for _, retain := range []bool{false, true} {
		t.Run(fmt.Sprintf("retain=%v", retain), func(t *testing.T) {
			dir := t.TempDir()
			opts := LocalOptions{SegmentBytes: int64(4 * size), Retain: retain}
			l := mustOpen(t, dir, opts)
			fill(t, l, 1, 14) // segments 1, 5, 9, 13
			for seq := uint64(1); seq <= 10; seq++ {
				l.Ack(seq)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			want := []uint64{9, 13}
			if retain {
				want = []uint64{1, 5, 9, 13}
			}
			if got := segmentFiles(t, dir); !slices.Equal(got, want) {
				t.Fatalf("segments %v, want %v", got, want)
			}
			// Acknowledging the whole of the active segment keeps it: new
			// entries go there.
			for seq := uint64(11); seq <= 14; seq++ {
				l.Ack(seq)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := segmentFiles(t, dir); !retain && !slices.Equal(got, []uint64{13}) {
				t.Fatalf("segments %v, want 13", got)
			}
			fill(t, l, 15, 16)
			mustClose(t, l)
			l = mustOpen(t, dir, opts)
			if c := l.Cursor(); c != 14 {
				t.Fatalf("cursor %d after reopen", c)
			}
			checkReplay(t, l, 15, 16)
			mustClose(t, l)
			if retain {
				// Retained segments are skipped on open, and deleted once a
				// log without Retain persists its cursor.
				l = mustOpen(t, dir, LocalOptions{SegmentBytes: opts.SegmentBytes})
				l.Ack(15)
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				if got := segmentFiles(t, dir); !slices.Equal(got, []uint64{13}) {
					t.Fatalf("segments %v after dropping Retain", got)
				}
				mustClose(t, l)
			}
		})
	}
}

// TestLock: one writer per directory; Close releases it at once, so a dry
// run's open can be followed by the real one.
func TestLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := mustOpen(t, dir, LocalOptions{})
	_, err := OpenDir(dir, LocalOptions{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, lockName)) || !strings.Contains(err.Error(), "another writer") {
		t.Fatalf("second open: %v", err)
	}
	fill(t, l, 1, 2)
	mustClose(t, l)
	for range 3 { // dry run, then the real open, then again
		l = mustOpen(t, dir, LocalOptions{})
		checkReplay(t, l, 1, 2)
		mustClose(t, l)
	}
}

// TestCursorMetaPersisted: the bytes CursorMeta returns are stored with the
// cursor they were computed for and come back after a restart.
func TestCursorMetaPersisted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var calls []uint64
	opts := LocalOptions{Options: Options{CursorMeta: func(c uint64) []byte {
		calls = append(calls, c)
		return fmt.Appendf(nil, `{"offset":%d}`, c*10)
	}}}
	l := mustOpen(t, dir, opts)
	if m := l.CursorMeta(); m != nil {
		t.Fatalf("fresh log has meta %q", m)
	}
	fill(t, l, 1, 5)
	l.Ack(1)
	l.Ack(2)
	l.Ack(4)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if m := string(l.CursorMeta()); m != `{"offset":20}` {
		t.Fatalf("meta %q", m)
	}
	mustClose(t, l) // nothing new to persist: meta is not asked again
	if !slices.Equal(calls, []uint64{2}) {
		t.Fatalf("CursorMeta called with %v", calls)
	}
	l = mustOpen(t, dir, LocalOptions{})
	if m := string(l.CursorMeta()); m != `{"offset":20}` || l.Cursor() != 2 {
		t.Fatalf("after reopen: cursor %d, meta %q", l.Cursor(), m)
	}
	checkReplay(t, l, 3, 5)
	mustClose(t, l)
}

// TestCursorAheadOfEntries: entries acknowledged and covered by the
// persisted cursor may be lost in a power failure when they were never
// synced (periodic or none). The log reopens at the cursor and goes on
// with the next sequence.
func TestCursorAheadOfEntries(t *testing.T) {
	t.Parallel()
	for _, lost := range []string{"tail", "segment"} {
		t.Run(lost, func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, LocalOptions{Options: Options{Sync: SyncNone}})
			fill(t, l, 1, 10)
			for seq := uint64(1); seq <= 10; seq++ {
				l.Ack(seq)
			}
			mustClose(t, l)
			path := filepath.Join(dir, segName(1))
			if lost == "tail" {
				// Only entries 1..7 reached the disk, and half of 8.
				keep := 7*RecordSize(len(payloadOf(1))) + 9
				if err := os.Truncate(path, int64(keep)); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			for round := range 2 {
				l = mustOpen(t, dir, LocalOptions{})
				if c, last := l.Cursor(), l.Last(); c != 10 || last != uint64(10+round) {
					t.Fatalf("round %d: cursor %d, last %d", round, c, last)
				}
				if round == 0 {
					checkReplay(t, l, 11, 10)
					fill(t, l, 11, 11)
				} else {
					checkReplay(t, l, 11, 11)
				}
				mustClose(t, l)
			}
			if got := segmentFiles(t, dir); got[len(got)-1] != 11 {
				t.Fatalf("segments %v: entry 11 is not in a segment named for it", got)
			}
		})
	}
}

// copyDir copies the files of src into a new directory: what a process
// crash at this moment would leave (every write has reached the page
// cache; nothing is in flight because the test is single-threaded).
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	for name, b := range dirFiles(t, src) {
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// walModel is what the log must hold: every entry's payload, which
// entries are acknowledged in this run, and the persisted cursor.
type walModel struct {
	payloads  map[uint64][]byte
	acked     map[uint64]bool
	abandoned map[uint64]bool
	dropped   map[uint64]bool // never acknowledged in this run
	cursor    uint64          // highest contiguous acknowledged
	persisted uint64
	last      uint64
}

func (m *walModel) ack(seq uint64) {
	if seq <= m.cursor {
		return
	}
	m.acked[seq] = true
	delete(m.abandoned, seq)
	for m.acked[m.cursor+1] {
		delete(m.acked, m.cursor+1)
		m.cursor++
	}
}

// restart forgets what a restart forgets: acknowledgements and
// abandonments after the persisted cursor.
func (m *walModel) restart() {
	m.cursor = m.persisted
	m.acked = map[uint64]bool{}
	m.abandoned = map[uint64]bool{}
	m.dropped = map[uint64]bool{}
}

func (m *walModel) checkOpen(t *testing.T, l *Log) {
	t.Helper()
	if c, last := l.Cursor(), l.Last(); c != m.persisted || last != m.last {
		t.Fatalf("reopened at cursor %d, last %d; want %d, %d", c, last, m.persisted, m.last)
	}
	es := replayAll(t, l)
	if uint64(len(es)) != m.last-m.persisted {
		t.Fatalf("replayed %d entries, want %d..%d", len(es), m.persisted+1, m.last)
	}
	for i, e := range es {
		want := m.persisted + 1 + uint64(i)
		if e.Seq != want || !bytes.Equal(e.Payload, m.payloads[want]) {
			t.Fatalf("replayed entry %d is seq %d (want %d), payload intact %v", i, e.Seq, want, bytes.Equal(e.Payload, m.payloads[want]))
		}
	}
}

// TestPropertyCursor: random acknowledgement orders, entries that are never
// acknowledged, abandoned entries, Flushes at random points, clean restarts
// and simulated process crashes. The cursor never passes an unacknowledged
// entry, and after a restart Replay yields exactly the entries after the
// persisted cursor, in order, with intact payloads.
func TestPropertyCursor(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	dir := t.TempDir()
	opts := LocalOptions{
		// No background persistence: the test decides when the cursor is
		// persisted, so it knows what a crash leaves.
		Options:      Options{CursorInterval: time.Hour, Sync: SyncNone},
		SegmentBytes: 2048,
	}
	m := &walModel{payloads: map[uint64][]byte{}}
	m.restart()
	ctx := context.Background()
	cycles := 40
	if testing.Short() {
		cycles = 10
	}
	for cycle := range cycles {
		l := mustOpen(t, dir, opts)
		m.checkOpen(t, l)
		for seq := m.persisted + 1; seq <= m.last; seq++ {
			m.dropped[seq] = rng.IntN(30) == 0 // replayed, and lost again
		}
		var segs []uint64
		for op := range 60 {
			switch r := rng.IntN(100); {
			case r < 25: // append
				p := make([]byte, 1+rng.IntN(200))
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				seq, err := l.Append(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				m.last++
				if seq != m.last {
					t.Fatalf("Append returned %d, want %d", seq, m.last)
				}
				m.payloads[seq] = p
				m.dropped[seq] = rng.IntN(30) == 0 // delivery lost: never acknowledged
			case r < 70: // acknowledge a random entry near the cursor, out of order
				var candidates []uint64
				for s := m.cursor + 1; s <= min(m.last, m.cursor+32); s++ {
					if !m.acked[s] && !m.dropped[s] {
						candidates = append(candidates, s)
					}
				}
				if len(candidates) == 0 {
					continue
				}
				seq := candidates[rng.IntN(len(candidates))]
				if err := l.Ack(seq); err != nil {
					t.Fatal(err)
				}
				m.ack(seq)
				if c := l.Cursor(); c != m.cursor {
					t.Fatalf("cycle %d op %d: cursor %d after ack %d, want %d", cycle, op, c, seq, m.cursor)
				}
			case r < 76: // abandon
				if m.last == m.cursor {
					continue
				}
				seq := m.cursor + 1 + uint64(rng.IntN(int(m.last-m.cursor)))
				l.Abandon(seq)
				if !m.acked[seq] {
					m.abandoned[seq] = true
				}
			case r < 84: // await where the outcome is decided without waiting
				seq := uint64(rng.IntN(int(m.last + 1)))
				var gap uint64
				for s := m.cursor + 1; s <= seq; s++ {
					if m.abandoned[s] {
						gap = s
						break
					}
				}
				if seq > m.cursor && gap == 0 {
					continue // would park
				}
				err := l.Await(ctx, seq)
				var ae *AbandonedError
				if gap == 0 && err != nil || gap != 0 && (!errors.As(err, &ae) || ae.Seq != gap) {
					t.Fatalf("Await(%d) with cursor %d, abandoned %v: %v", seq, m.cursor, m.abandoned, err)
				}
			case r < 92: // persist the cursor
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				// Segments are deleted when a cursor is saved, and Flush
				// saves one only if it moved: a segment the previous save
				// covered can still be there if the next one was created
				// after it.
				saved := m.cursor > m.persisted
				m.persisted = m.cursor
				segs = segmentFiles(t, dir)
				for i := 0; saved && i+1 < len(segs); i++ {
					if segs[i+1]-1 <= m.persisted {
						t.Fatalf("segment %d is wholly below cursor %d and was kept (%v)", segs[i], m.persisted, segs)
					}
				}
				if len(segs) == 0 || segs[0] > m.persisted+1 {
					t.Fatalf("segments %v lose entries after cursor %d", segs, m.persisted)
				}
			default: // a crash: check what a copy of the directory holds
				crashed := copyDir(t, dir)
				lc := mustOpen(t, crashed, opts)
				saved := *m
				m.restart()
				m.checkOpen(t, lc)
				*m = saved
				mustClose(t, lc)
				os.RemoveAll(crashed)
			}
			if m.cursor > m.last {
				t.Fatalf("model cursor %d beyond last %d", m.cursor, m.last)
			}
		}
		if rng.IntN(3) == 0 {
			// A crash ends this run: continue from a copy, with the
			// cursor as last persisted.
			crashed := copyDir(t, dir)
			mustClose(t, l)
			dir = crashed
		} else {
			mustClose(t, l) // Close persists the cursor
			m.persisted = m.cursor
		}
		m.restart()
	}
	if m.last < uint64(5*cycles) || m.persisted < uint64(cycles) {
		t.Fatalf("the run was too short to mean anything: last %d, cursor %d", m.last, m.persisted)
	}
}
