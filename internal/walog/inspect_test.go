package walog

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/blob"
)

// inspectAll is InspectDir collecting every entry (payloads copied).
func inspectAll(t *testing.T, dir string) (Inspection, []Entry) {
	t.Helper()
	var es []Entry
	in, err := InspectDir(dir, func(e Entry) error {
		es = append(es, Entry{Seq: e.Seq, Payload: bytes.Clone(e.Payload)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return in, es
}

// A log written by the real writer: InspectDir reports the cursor, the
// segments and every entry as they were written, while the writer holds
// the log open, and changes no byte of it.
func TestInspectDirReportsWhatWasWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	size := RecordSize(len(payloadOf(10)))
	l := mustOpen(t, dir, LocalOptions{SegmentBytes: int64(4 * size), Retain: true})
	fill(t, l, 1, 14) // segments 1, 5, 9, 13
	for _, seq := range []uint64{1, 2, 3, 4, 5, 6, 8, 9} {
		l.Ack(seq) // 7 is not acknowledged: the cursor stops at 6
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	before := dirFiles(t, dir)
	in, es := inspectAll(t, dir)
	if !maps.EqualFunc(before, dirFiles(t, dir), bytes.Equal) {
		t.Fatal("InspectDir changed the directory")
	}
	if in.Cursor != 6 || in.First != 1 || in.Last != 14 || in.Pending != 8 || in.Torn != "" {
		t.Fatalf("inspection %+v; want cursor 6, entries 1..14, 8 pending", in)
	}
	bytesOf := func(first, last uint64) (n int64) {
		for seq := first; seq <= last; seq++ {
			n += int64(RecordSize(len(payloadOf(seq))))
		}
		return n
	}
	want := []SegmentInfo{
		{Name: segName(1), First: 1, Last: 4, Entries: 4, Bytes: bytesOf(1, 4), Passed: true},
		{Name: segName(5), First: 5, Last: 8, Entries: 4, Bytes: bytesOf(5, 8)},
		{Name: segName(9), First: 9, Last: 12, Entries: 4, Bytes: bytesOf(9, 12)},
		{Name: segName(13), First: 13, Last: 14, Entries: 2, Bytes: bytesOf(13, 14)},
	}
	if !slices.Equal(in.Segments, want) {
		t.Fatalf("segments\n%+v\nwant\n%+v", in.Segments, want)
	}
	if len(es) != 14 {
		t.Fatalf("%d entries, want 14", len(es))
	}
	for i, e := range es {
		if e.Seq != uint64(i+1) || !bytes.Equal(e.Payload, payloadOf(e.Seq)) {
			t.Fatalf("entry %d: seq %d payload %q", i, e.Seq, e.Payload)
		}
	}
	mustClose(t, l)

	// Pending is what a restart replays.
	l = mustOpen(t, dir, LocalOptions{SegmentBytes: int64(4 * size), Retain: true})
	defer mustClose(t, l)
	if got := len(replayAll(t, l)); got != in.Pending {
		t.Fatalf("a restart replays %d entries, the inspection said %d", got, in.Pending)
	}
}

// A torn tail is reported and left in place; the open that follows cuts
// it. Damage a restart would refuse fails the inspection with the error
// OpenDir gives.
func TestInspectDirTornAndCorrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := mustOpen(t, dir, LocalOptions{})
	fill(t, l, 1, 3)
	l.Ack(1)
	mustClose(t, l)
	seg := filepath.Join(dir, segName(1))
	whole, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	torn := append(bytes.Clone(whole), AppendRecord(nil, 4, payloadOf(4))[:10]...)
	if err := os.WriteFile(seg, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	in, _ := inspectAll(t, dir)
	if in.Torn == "" || in.Last != 3 || in.Pending != 2 {
		t.Fatalf("inspection %+v; want a torn tail after entry 3, 2 pending", in)
	}
	if b, _ := os.ReadFile(seg); !bytes.Equal(b, torn) {
		t.Fatal("InspectDir cut the torn tail")
	}

	// Flip a payload byte of entry 2: a bad record with a valid one after it.
	bad := bytes.Clone(whole)
	bad[RecordSize(len(payloadOf(1)))+headerSize] ^= 1
	if err := os.WriteFile(seg, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, ierr := InspectDir(dir, nil)
	_, oerr := OpenDir(dir, LocalOptions{})
	var ce *CorruptError
	if !errors.As(ierr, &ce) || !errors.Is(ierr, ErrCorrupt) || oerr == nil || ierr.Error() != oerr.Error() {
		t.Fatalf("inspect: %v\nopen:    %v\nwant the same *CorruptError", ierr, oerr)
	}

	if _, err := InspectDir(filepath.Join(dir, "nope"), nil); err == nil {
		t.Fatal("a missing directory must be an error")
	}
}

// Damage in a segment the cursor has passed does not stop a restart (it
// does not read it): the inspection reports it on the segment.
func TestInspectDirDamagedPassedSegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	size := RecordSize(len(payloadOf(1)))
	l := mustOpen(t, dir, LocalOptions{SegmentBytes: int64(2 * size), Retain: true})
	fill(t, l, 1, 5) // segments 1, 3, 5
	for seq := uint64(1); seq <= 4; seq++ {
		l.Ack(seq)
	}
	mustClose(t, l)
	seg := filepath.Join(dir, segName(1))
	b, _ := os.ReadFile(seg)
	b[headerSize] ^= 1 // entry 1's payload; entry 2 follows
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	in, _ := inspectAll(t, dir)
	if in.Segments[0].Damage == "" || !in.Segments[0].Passed || in.Segments[0].Entries != 0 {
		t.Fatalf("first segment %+v; want passed, damaged, no entry read", in.Segments[0])
	}
	if in.Cursor != 4 || in.Pending != 1 || in.First != 3 {
		t.Fatalf("inspection %+v", in)
	}
	l = mustOpen(t, dir, LocalOptions{SegmentBytes: int64(2 * size), Retain: true})
	mustClose(t, l)
}

// The object-store backend: the same through blob.MemStorage, and
// FindNamespaces finds the log from any prefix above it.
func TestInspectObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &blob.MemStorage{}
	l := memOpen(t, st)
	objAppend(t, l, 1, 6) // group commit: one segment each
	for _, s := range []uint64{1, 2, 3, 5} {
		l.Ack(s)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"", "arkflow", "arkflow/wal/", "arkflow/wal/node-0/orders"} {
		ns, err := FindNamespaces(ctx, st, "mem", prefix)
		if err != nil || len(ns) != 1 || ns[0] != (Namespace{Prefix: "arkflow/wal", NodeID: "node-0", Stream: "orders"}) {
			t.Fatalf("FindNamespaces(%q) = %+v, %v", prefix, ns, err)
		}
	}
	var seqs []uint64
	in, err := InspectObjects(ctx, st, "mem", "arkflow/wal", "node-0", "orders", func(e Entry) error {
		if string(e.Payload) != "e"+string(rune('0'+e.Seq)) {
			t.Errorf("entry %d: payload %q", e.Seq, e.Payload)
		}
		seqs = append(seqs, e.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The cursor save deleted the segments of entries 1..3.
	if in.Cursor != 3 || in.First != 4 || in.Last != 6 || in.Pending != 3 || !slices.Equal(seqs, []uint64{4, 5, 6}) {
		t.Fatalf("inspection %+v, entries %v", in, seqs)
	}
	if len(in.Segments) != 3 || in.Segments[0] != (SegmentInfo{Name: objNS + segmentsDir + objectSegmentName(4), First: 4, Last: 4, Entries: 1, Bytes: int64(RecordSize(2))}) {
		t.Fatalf("segments %+v", in.Segments)
	}
	mustClose(t, l)
	l = memOpen(t, st)
	defer mustClose(t, l)
	if got := len(replayAll(t, l)); got != in.Pending {
		t.Fatalf("a restart replays %d entries, the inspection said %d", got, in.Pending)
	}
	if _, err := InspectObjects(ctx, st, "mem", "arkflow/wal", "node-0", "", nil); err == nil {
		t.Fatal("an empty stream must be an error")
	}
}

// FuzzInspectDir: a segment and a cursor slot of any bytes. InspectDir
// fails exactly when OpenDir does, and otherwise counts as pending what
// the opened log replays.
func FuzzInspectDir(f *testing.F) {
	var seg []byte
	for seq := uint64(1); seq <= 3; seq++ {
		seg = AppendRecord(seg, seq, payloadOf(seq))
	}
	f.Add(seg, encodeCursorSlot(nil, 1, 1, nil))
	f.Add(seg[:len(seg)-3], encodeCursorSlot(nil, 1, 0, []byte("meta")))
	f.Add(append(bytes.Clone(seg), 0, 0, 0), []byte{})
	f.Add([]byte{}, encodeCursorSlot(nil, 2, 7, nil))
	f.Fuzz(func(t *testing.T, seg, cursor []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segName(1)), seg, 0o644); err != nil {
			t.Fatal(err)
		}
		if len(cursor) > 0 {
			if err := os.WriteFile(filepath.Join(dir, cursorSlotNames[0]), cursor, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		in, ierr := InspectDir(dir, nil)
		l, oerr := OpenDir(dir, LocalOptions{NoRecycle: true})
		if (ierr == nil) != (oerr == nil) {
			t.Fatalf("inspect: %v; open: %v", ierr, oerr)
		}
		if oerr != nil {
			return
		}
		defer l.Close()
		r, err := l.Replay()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, err := r.Next(); err == nil; _, err = r.Next() {
			n++
		}
		r.Close()
		if n != in.Pending || l.Cursor() != in.Cursor {
			t.Fatalf("open replays %d after cursor %d; inspection: %d pending after %d", n, l.Cursor(), in.Pending, in.Cursor)
		}
	})
}
