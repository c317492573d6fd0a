package walog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/blob"
)

// The object backend over blob.MemStorage: the same code paths as over
// S3 (conditional PUTs, LIST, deletes), without a server.

func memOpen(t *testing.T, st blob.Storage) *Log {
	t.Helper()
	opts := ObjectStoreOptions{
		S3:      blob.Options{Endpoint: "unused:1"},
		Options: Options{Logger: slog.New(slog.DiscardHandler)},
		Bucket:  "mem",
		NodeID:  "node-0",
		Stream:  "orders",
	}
	if err := opts.validate(); err != nil {
		t.Fatal(err)
	}
	l, err := openStorage(context.Background(), opts, st)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestObjectStoreMemAppendAckReopen(t *testing.T) {
	t.Parallel()
	st := &blob.MemStorage{}
	l := memOpen(t, st)
	objAppend(t, l, 1, 10)
	for _, s := range []uint64{1, 2, 3, 4} {
		if err := l.Ack(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, _, err := st.ReadObject(context.Background(), objNS+manifestObject)
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeManifest(b)
	if err != nil || m.Cursor != 4 || m.MaxSealedSeq != 10 {
		t.Fatalf("manifest %+v, %v", m, err)
	}
	l = memOpen(t, st)
	defer l.Close()
	if l.Cursor() != 4 || l.Last() != 10 {
		t.Fatalf("reopened: cursor %d, last %d; want 4, 10", l.Cursor(), l.Last())
	}
	if got, want := objReplay(t, l), objEntries(5, 10); !slices.Equal(got, want) {
		t.Fatalf("replay = %v, want %v", got, want)
	}
}

func TestObjectStoreMemDeletesAndConflict(t *testing.T) {
	t.Parallel()
	st := &blob.MemStorage{}
	a := memOpen(t, st)
	defer a.Close()
	for i := 1; i <= 3; i++ {
		objAppend(t, a, i, i)
		if err := a.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	a.Ack(1)
	a.Ack(2)
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	segs, _ := st.List(context.Background(), objNS+segmentsDir)
	if want := []string{objNS + segmentsDir + objectSegmentName(3)}; !slices.Equal(segs, want) {
		t.Fatalf("segments after acking 2 of 3 = %v, want %v", segs, want)
	}
	b := memOpen(t, st) // a node_id collision
	defer b.Close()
	objAppend(t, a, 4, 4)
	a.Ack(3)
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	// b's manifest (cursor 3, segment 3 only) differs from a's (segments
	// 3 and 4): a 412 whose current body equals b's would count as b's own.
	b.Ack(3)
	if err := b.Flush(); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale writer's Flush: %v, want ErrConflict", err)
	}
	if _, err := b.Append(context.Background(), fmt.Appendf(nil, "x")); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale writer's Append: %v, want ErrConflict", err)
	}
}
