package rowbin

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var allTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
	arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Boolean,
	arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary,
	&arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date64,
	arrow.FixedWidthTypes.Duration_ms,
}

// randomRecord makes rows of every supported type, about a fifth null,
// with values from the whole range of each type (strings of 0-40 bytes).
func randomRecord(t *testing.T, rng *rand.Rand, rows int) arrow.RecordBatch {
	t.Helper()
	fields := make([]arrow.Field, len(allTypes))
	for i, ty := range allTypes {
		fields[i] = arrow.Field{Name: ty.String(), Type: ty, Nullable: true}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for r := 0; r < rows; r++ {
		for i := range allTypes {
			fb := b.Field(i)
			if rng.IntN(5) == 0 {
				fb.AppendNull()
				continue
			}
			u := rng.Uint64()
			str := make([]byte, rng.IntN(41))
			for k := range str {
				str[k] = byte(rng.Uint32())
			}
			switch fb := fb.(type) {
			case *array.Int8Builder:
				fb.Append(int8(u))
			case *array.Int16Builder:
				fb.Append(int16(u))
			case *array.Int32Builder:
				fb.Append(int32(u))
			case *array.Int64Builder:
				fb.Append(int64(u))
			case *array.Uint8Builder:
				fb.Append(uint8(u))
			case *array.Uint16Builder:
				fb.Append(uint16(u))
			case *array.Uint32Builder:
				fb.Append(uint32(u))
			case *array.Uint64Builder:
				fb.Append(u)
			case *array.Float32Builder:
				fb.Append(rng.Float32() * float32(int32(u)))
			case *array.Float64Builder:
				fb.Append(rng.NormFloat64() * 1e300)
			case *array.BooleanBuilder:
				fb.Append(u%2 == 0)
			case *array.StringBuilder:
				fb.Append(string(str))
			case *array.LargeStringBuilder:
				fb.Append(string(str))
			case *array.BinaryBuilder:
				fb.Append(str)
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(int64(u)))
			case *array.Date32Builder:
				fb.Append(arrow.Date32(int32(u)))
			case *array.Date64Builder:
				fb.Append(arrow.Date64(int64(u)))
			case *array.DurationBuilder:
				fb.Append(arrow.Duration(int64(u)))
			default:
				t.Fatalf("no values for %T", fb)
			}
		}
	}
	return b.NewRecordBatch()
}

// Every row of every supported type, nulls included, decodes to the
// values it was encoded from (compared with array.Equal, in a shuffled
// order of rows and a subset of columns).
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	rec := randomRecord(t, rng, 300)
	defer rec.Release()
	cols := rng.Perm(len(allTypes))[:len(allTypes)-3]
	c, err := New(rec.Schema(), cols)
	if err != nil {
		t.Fatal(err)
	}
	order := rng.Perm(int(rec.NumRows()))
	bs := make([]array.Builder, len(cols))
	for k, i := range cols {
		bs[k] = array.NewBuilder(memory.DefaultAllocator, rec.Schema().Field(i).Type)
		defer bs[k].Release()
	}
	var buf []byte
	for _, r := range order {
		buf = c.Append(buf[:0], rec, r)
		if err := c.Decode(buf, bs); err != nil {
			t.Fatalf("row %d: %v", r, err)
		}
	}
	idx := array.NewInt32Builder(memory.DefaultAllocator)
	defer idx.Release()
	for k, i := range cols {
		got := bs[k].NewArray()
		for j, r := range order {
			want := rec.Column(i)
			if got.IsNull(j) != want.IsNull(r) || (!want.IsNull(r) && got.ValueStr(j) != want.ValueStr(r)) {
				t.Fatalf("column %s row %d: got %q (null %v), want %q (null %v)", rec.ColumnName(i), r, got.ValueStr(j), got.IsNull(j), want.ValueStr(r), want.IsNull(r))
			}
		}
		got.Release()
	}
}

// A column of a type the codec cannot hold is refused by name.
func TestUnsupportedTypeNamed(t *testing.T) {
	t.Parallel()
	s := arrow.NewSchema([]arrow.Field{{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)}}, nil)
	if _, err := New(s, []int{0}); err == nil || err.Error() != `column "tags" has type list<item: utf8, nullable>, which a row kept in state cannot hold` {
		t.Fatalf("err = %v", err)
	}
}

// Bytes that are not a whole row (cut short, with a bad flag, with bytes
// after the row, with a length past the end) are refused, and nothing is
// appended.
func TestCorruptRowsRefused(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	rec := randomRecord(t, rng, 20)
	defer rec.Release()
	cols := make([]int, len(allTypes))
	for i := range cols {
		cols[i] = i
	}
	c, err := New(rec.Schema(), cols)
	if err != nil {
		t.Fatal(err)
	}
	row := c.Append(nil, rec, 0)
	bad := [][]byte{row[:len(row)-1], append(append([]byte(nil), row...), 0), {2}, nil}
	for _, b := range bad {
		bs := make([]array.Builder, len(cols))
		for i := range cols {
			bs[i] = array.NewBuilder(memory.DefaultAllocator, rec.Schema().Field(i).Type)
		}
		if err := c.Decode(b, bs); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%x: err = %v, want ErrCorrupt", b, err)
		}
		for i, b := range bs {
			if b.Len() != 0 {
				t.Errorf("column %d: %d values appended to a corrupt row", i, b.Len())
			}
			b.Release()
		}
	}
}

// FuzzDecode: any bytes either decode to one value per column or are
// refused, never panic.
func FuzzDecode(f *testing.F) {
	s := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}, {Name: "i", Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean}, {Name: "x", Type: arrow.BinaryTypes.Binary}}, nil)
	c, err := New(s, []int{0, 1, 2, 3})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{1, 3, 'a', 'b', 'c', 1, 1, 2, 3, 4, 5, 6, 7, 8, 1, 1, 0})
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		bs := make([]array.Builder, 4)
		for i := range bs {
			bs[i] = array.NewBuilder(memory.DefaultAllocator, s.Field(i).Type)
			defer bs[i].Release()
		}
		err := c.Decode(data, bs)
		for i, b := range bs {
			if want := map[bool]int{true: 0, false: 1}[err != nil]; b.Len() != want {
				t.Fatalf("column %d: %d values, want %d (err %v)", i, b.Len(), want, err)
			}
		}
	})
}
