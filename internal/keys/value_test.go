package keys

import (
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Encode gives the bytes a row of the same key carries (RowBytes), so a
// key given as a Go value or as text finds the state its rows made.
func TestEncodeMatchesRowBytes(t *testing.T) {
	ts := time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	cases := []struct {
		typ   arrow.DataType
		row   func(array.Builder)
		goVal any
		text  string
	}{
		{arrow.BinaryTypes.String, func(b array.Builder) { b.(*array.StringBuilder).Append("alice") }, "alice", "alice"},
		{arrow.BinaryTypes.Binary, func(b array.Builder) { b.(*array.BinaryBuilder).Append([]byte{0, 1}) }, []byte{0, 1}, "\x00\x01"},
		{arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.(*array.Int64Builder).Append(-42) }, int64(-42), "-42"},
		{arrow.PrimitiveTypes.Int32, func(b array.Builder) { b.(*array.Int32Builder).Append(-7) }, -7, "-7"},
		{arrow.PrimitiveTypes.Int8, func(b array.Builder) { b.(*array.Int8Builder).Append(100) }, uint8(100), "100"},
		{arrow.PrimitiveTypes.Uint64, func(b array.Builder) { b.(*array.Uint64Builder).Append(1 << 63) }, uint64(1 << 63), "9223372036854775808"},
		{arrow.PrimitiveTypes.Uint16, func(b array.Builder) { b.(*array.Uint16Builder).Append(65535) }, 65535, "65535"},
		{arrow.PrimitiveTypes.Float64, func(b array.Builder) { b.(*array.Float64Builder).Append(2.5) }, 2.5, "2.5"},
		{arrow.PrimitiveTypes.Float32, func(b array.Builder) { b.(*array.Float32Builder).Append(0.1) }, float32(0.1), "0.1"},
		{arrow.FixedWidthTypes.Boolean, func(b array.Builder) { b.(*array.BooleanBuilder).Append(true) }, true, "true"},
		{&arrow.TimestampType{Unit: arrow.Millisecond}, func(b array.Builder) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMilli())) }, ts, ts.Format(time.RFC3339Nano)},
		{arrow.FixedWidthTypes.Date32, func(b array.Builder) { b.(*array.Date32Builder).Append(arrow.Date32FromTime(ts)) }, ts, "20516"},
		{&arrow.DurationType{Unit: arrow.Millisecond}, func(b array.Builder) { b.(*array.DurationBuilder).Append(1500) }, 1500 * time.Millisecond, "1.5s"},
	}
	for _, c := range cases {
		b := array.NewBuilder(memory.DefaultAllocator, c.typ)
		c.row(b)
		col := b.NewArray()
		want, err := RowBytes(col, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []any{c.goVal, c.text} {
			got, err := Encode(c.typ, v)
			if err != nil {
				t.Errorf("%s: Encode(%#v): %v", c.typ, v, err)
				continue
			}
			if string(got) != string(want) {
				t.Errorf("%s: Encode(%#v) = %x, the row's bytes are %x", c.typ, v, got, want)
			}
		}
		col.Release()
		b.Release()
	}
}

func TestEncodeRefusesWrongTypes(t *testing.T) {
	cases := []struct {
		typ arrow.DataType
		v   any
	}{
		{arrow.PrimitiveTypes.Int64, "abc"},
		{arrow.PrimitiveTypes.Int64, 1.5},
		{arrow.PrimitiveTypes.Int8, 300},
		{arrow.PrimitiveTypes.Uint32, -1},
		{arrow.FixedWidthTypes.Boolean, "maybe"},
		{arrow.BinaryTypes.String, 42},
		{&arrow.TimestampType{Unit: arrow.Millisecond}, "yesterday"},
		{arrow.PrimitiveTypes.Int64, struct{}{}},
	}
	for _, c := range cases {
		_, err := Encode(c.typ, c.v)
		var te *TypeError
		if !errors.As(err, &te) {
			t.Errorf("Encode(%s, %#v) = %v, want a *TypeError", c.typ, c.v, err)
		}
	}
}

func TestFindDoesNotAdd(t *testing.T) {
	tb, _ := NewTable(arrow.PrimitiveTypes.Int64)
	k, _ := Encode(arrow.PrimitiveTypes.Int64, 5)
	if _, ok := tb.Find(k); ok || tb.Len() != 0 {
		t.Fatalf("Find of an absent key found it or added it (len %d)", tb.Len())
	}
	id, _ := tb.IDOfBytes(k)
	if got, ok := tb.Find(k); !ok || got != id {
		t.Fatalf("Find = %d, %v; want %d", got, ok, id)
	}
}

// Compare orders keys as their values order, whatever the bytes.
func TestCompareOrdersValues(t *testing.T) {
	cases := []struct {
		typ  arrow.DataType
		a, b any
	}{
		{arrow.PrimitiveTypes.Int64, -5, 3},
		{arrow.PrimitiveTypes.Int32, -100, -99},
		{arrow.PrimitiveTypes.Uint64, uint64(1), uint64(1 << 63)},
		{arrow.PrimitiveTypes.Float64, -2.5, 0.5},
		{arrow.PrimitiveTypes.Float64, -2.5, -1.0},
		{arrow.BinaryTypes.String, "ab", "abc"},
		{arrow.FixedWidthTypes.Boolean, false, true},
	}
	for _, c := range cases {
		a, _ := Encode(c.typ, c.a)
		b, _ := Encode(c.typ, c.b)
		if Compare(c.typ, a, b) >= 0 || Compare(c.typ, b, a) <= 0 || Compare(c.typ, a, a) != 0 {
			t.Errorf("%s: %v < %v does not hold in Compare", c.typ, c.a, c.b)
		}
	}
}
