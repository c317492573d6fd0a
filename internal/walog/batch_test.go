package walog

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func testBatch(t testing.TB, n int) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil))
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append("row")
	}
	return b.NewRecordBatch()
}

// A batch payload decodes to the source name and rows it was encoded
// with.
func TestBatchRoundTrip(t *testing.T) {
	t.Parallel()
	rec := testBatch(t, 3)
	defer rec.Release()
	p, err := EncodeBatch(nil, "clicks", rec)
	if err != nil {
		t.Fatal(err)
	}
	src, got, err := DecodeBatch(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if src != "clicks" || !array.RecordEqual(rec, got) {
		t.Fatalf("decoded %q, %v", src, got)
	}
	for _, short := range [][]byte{nil, p[:3], p[:8], p[:len(p)-1]} {
		if _, r, err := DecodeBatch(short, nil); err == nil {
			r.Release()
			t.Fatalf("a payload of %d of %d bytes decoded", len(short), len(p))
		}
	}
}

// FuzzBatchSource: the source name of a payload from disk. Any bytes give
// a name or an error without a panic, and a name is what EncodeBatch
// writes in front of the rows.
func FuzzBatchSource(f *testing.F) {
	rec := testBatch(f, 2)
	p, err := EncodeBatch(nil, "in", rec)
	rec.Release()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(p)
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 9, 'x'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, p []byte) {
		src, err := BatchSource(p)
		if err != nil {
			return
		}
		if len(src) > MaxSourceName || !bytes.HasPrefix(p[4:], []byte(src)) || int(binary.BigEndian.Uint32(p)) != len(src) {
			t.Fatalf("source %q from %x", src, p)
		}
	})
}
