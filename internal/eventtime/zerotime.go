package eventtime

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// zeroSeconds is Go's zero time.Time in seconds since the Unix epoch.
var zeroSeconds = time.Time{}.Unix()

// ZeroTime returns Go's zero time.Time in unit, as a plain time.Time
// field encodes it (0001-01-01T00:00:00Z), or false when unit cannot hold
// it (nanoseconds: encoding such a field fails instead).
func ZeroTime(unit arrow.TimeUnit) (int64, bool) {
	switch unit {
	case arrow.Second:
		return zeroSeconds, true
	case arrow.Millisecond:
		return zeroSeconds * 1e3, true
	case arrow.Microsecond:
		return zeroSeconds * 1e6, true
	}
	return 0, false
}

// ZeroTimeAsNull returns rec with Go's zero time in the timestamp column
// col made null, and owns rec from then on. Rows typed by Go code write
// "no time" as the zero time.Time; as an event time it must count as
// none (a null: dropped or routed, never a year-1 row that is late for
// every window). Columns of other types, and batches without a zero
// time, are returned as they are, without a copy.
func ZeroTimeAsNull(rec arrow.RecordBatch, col int) arrow.RecordBatch {
	a, ok := rec.Column(col).(*array.Timestamp)
	if !ok {
		return rec
	}
	zero, ok := ZeroTime(a.DataType().(*arrow.TimestampType).Unit)
	if !ok {
		return rec
	}
	vals := a.TimestampValues()
	n, zeros := a.Len(), 0
	for i := range n {
		if a.IsValid(i) && int64(vals[i]) == zero {
			zeros++
		}
	}
	if zeros == 0 {
		return rec
	}
	// The same values under a validity bitmap without the zeros.
	d := a.Data()
	off := d.Offset()
	bits := memory.NewResizableBuffer(memory.DefaultAllocator)
	bits.Resize(int(bitutil.BytesForBits(int64(off + n))))
	bm := bits.Bytes()
	clear(bm)
	for i := range n {
		if a.IsValid(i) && int64(vals[i]) != zero {
			bitutil.SetBit(bm, off+i)
		}
	}
	nd := array.NewData(a.DataType(), n, []*memory.Buffer{bits, d.Buffers()[1]}, nil, a.NullN()+zeros, off)
	bits.Release()
	fixed := array.MakeFromData(nd)
	nd.Release()
	cols := append([]arrow.Array(nil), rec.Columns()...)
	cols[col] = fixed
	fs := append([]arrow.Field(nil), rec.Schema().Fields()...)
	fs[col].Nullable = true
	out := array.NewRecordBatch(arrow.NewSchema(fs, nil), cols, rec.NumRows())
	fixed.Release()
	rec.Release()
	return out
}
