package durable

import (
	"errors"
	"reflect"
	"testing"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
)

// FuzzDecodeMeta: the positions stored with a WAL cursor come from disk
// (or an object store). Any bytes decode or fail without a panic, and what
// decodes encodes to something that decodes the same.
func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeMeta(walMeta{Parallelism: 2, Positions: []connectors.Position{{Partition: 1, Offset: 40}}}))
	f.Add(encodeMeta(walMeta{Parallelism: 1, Held: true, Released: []connectors.Position{{Topic: "t", Partition: 0, Offset: 7}}}))
	f.Add([]byte(`[{"partition":0,"offset":3}]`))
	f.Add([]byte(`{"parallelism":-1,"positions":null}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		again, err := decodeMeta(encodeMeta(m))
		if err != nil {
			t.Fatalf("re-encoded meta does not decode: %v", err)
		}
		if !reflect.DeepEqual(normMeta(m), normMeta(again)) {
			t.Fatalf("round trip changed the meta: %+v → %+v", m, again)
		}
	})
}

// normMeta treats empty and nil lists alike (omitempty drops them).
func normMeta(m walMeta) walMeta {
	if len(m.Positions) == 0 {
		m.Positions = nil
	}
	if len(m.Released) == 0 {
		m.Released = nil
	}
	return m
}

// The positions stored with a cursor, as the source wrote them; none for
// empty meta; a corruption error for meta that does not decode.
func TestCursorPositions(t *testing.T) {
	t.Parallel()
	want := []connectors.Position{{Topic: "t", Partition: 1, Offset: 40}}
	for _, b := range [][]byte{encodeMeta(walMeta{Parallelism: 2, Positions: want}), []byte(`[{"topic":"t","partition":1,"offset":40}]`)} {
		got, err := CursorPositions(b)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("CursorPositions(%s) = %v, %v", b, got, err)
		}
	}
	if got, err := CursorPositions(nil); got != nil || err != nil {
		t.Fatalf("empty meta: %v, %v", got, err)
	}
	if _, err := CursorPositions([]byte("{")); !errors.Is(err, walog.ErrCorrupt) {
		t.Fatalf("bad meta: %v", err)
	}
}
