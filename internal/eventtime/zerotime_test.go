package eventtime_test

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
)

// The zero time.Time of a timestamp column becomes null, in every unit
// that can hold it, in a slice of a batch (an offset) that already has
// nulls; other values, other columns and the other units are kept.
func TestZeroTimeAsNull(t *testing.T) {
	zero := time.Time{}
	for _, unit := range []arrow.TimeUnit{arrow.Second, arrow.Millisecond, arrow.Microsecond} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		typ := &arrow.TimestampType{Unit: unit, TimeZone: "UTC"}
		in := func(t time.Time) arrow.Timestamp {
			v, err := arrow.TimestampFromTime(t, unit)
			if err != nil {
				panic(err)
			}
			return v
		}
		now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
		// Rows: 0 now, 1 zero, 2 null, 3 zero, 4 now+1s, 5 zero; the slice
		// drops row 0, so the batch is rows 1..5.
		tb := array.NewTimestampBuilder(mem, typ)
		tb.AppendValues([]arrow.Timestamp{in(now), in(zero)}, nil)
		tb.AppendNull()
		tb.AppendValues([]arrow.Timestamp{in(zero), in(now.Add(time.Second)), in(zero)}, nil)
		ts := tb.NewArray()
		ib := array.NewInt64Builder(mem)
		ib.AppendValues([]int64{0, 1, 2, 3, 4, 5}, nil)
		ids := ib.NewArray()
		schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "ts", Type: typ}}, nil)
		full := array.NewRecordBatch(schema, []arrow.Array{ids, ts}, 6)
		ts.Release()
		ids.Release()
		rec := full.NewSlice(1, 6)
		full.Release()

		out := eventtime.ZeroTimeAsNull(rec, 1)
		col := out.Column(1).(*array.Timestamp)
		wantNull := []bool{true, true, true, false, true}
		for i, w := range wantNull {
			if col.IsNull(i) != w {
				t.Errorf("%s: row %d null = %v, want %v", unit, i, col.IsNull(i), w)
			}
		}
		if col.NullN() != 4 {
			t.Errorf("%s: %d nulls, want 4", unit, col.NullN())
		}
		if got := col.Value(3).ToTime(unit); !got.Equal(now.Add(time.Second)) {
			t.Errorf("%s: row 3 = %v", unit, got)
		}
		if id := out.Column(0).(*array.Int64).Value(0); id != 1 {
			t.Errorf("%s: id column moved: %d", unit, id)
		}
		if !out.Schema().Field(1).Nullable {
			t.Errorf("%s: the column must be nullable now", unit)
		}
		out.Release()
		mem.AssertSize(t, 0)
	}
}

// A batch without a zero time, or a column that is not a timestamp, is
// returned as it is.
func TestZeroTimeAsNullKeeps(t *testing.T) {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{time.Time{}.Unix() * 1000}, nil)
	a := b.NewArray()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "ts", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{a}, 1)
	a.Release()
	if out := eventtime.ZeroTimeAsNull(rec, 0); out != rec || out.Column(0).NullN() != 0 {
		t.Fatal("an Int64 column was changed")
	}
	rec.Release()
}
