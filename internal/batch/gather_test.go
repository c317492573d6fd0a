package batch

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Gather takes rows from many arrays of one type — with nulls, sliced
// arrays, and null places — exactly as reading each value one by one
// does, for the types with a fast path and for one without.
func TestGatherMatchesValueByValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Float64,
		arrow.PrimitiveTypes.Float32, &arrow.TimestampType{Unit: arrow.Millisecond}, arrow.BinaryTypes.String,
		arrow.FixedWidthTypes.Boolean, arrow.PrimitiveTypes.Int16}
	for _, typ := range types {
		t.Run(typ.String(), func(t *testing.T) {
			var arrays []arrow.Array
			for range 5 {
				b := array.NewBuilder(memory.DefaultAllocator, typ)
				n := 1 + rng.IntN(20)
				for i := range n {
					if rng.IntN(5) == 0 {
						b.AppendNull()
						continue
					}
					v := int64(rng.IntN(1000))
					switch bb := b.(type) {
					case *array.Int64Builder:
						bb.Append(v)
					case *array.Int32Builder:
						bb.Append(int32(v))
					case *array.Int16Builder:
						bb.Append(int16(v))
					case *array.Float64Builder:
						bb.Append(float64(v) / 3)
					case *array.Float32Builder:
						bb.Append(float32(v) / 3)
					case *array.TimestampBuilder:
						bb.Append(arrow.Timestamp(v))
					case *array.StringBuilder:
						bb.Append(fmt.Sprintf("s%d-%d", v, i))
					case *array.BooleanBuilder:
						bb.Append(v%2 == 0)
					}
				}
				a := b.NewArray()
				b.Release()
				if a.Len() > 3 { // a slice, so that offsets matter
					s := array.NewSlice(a, 1, int64(a.Len()-1))
					a.Release()
					a = s
				}
				defer a.Release()
				arrays = append(arrays, a)
			}
			var src, row []int32
			for range 200 {
				s := int32(rng.IntN(len(arrays)+1)) - 1 // -1: a null place
				r := int32(0)
				if s >= 0 {
					r = int32(rng.IntN(arrays[s].Len()))
				}
				src, row = append(src, s), append(row, r)
			}
			got, err := Gather(typ, arrays, src, row)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if got.Len() != len(src) || !arrow.TypeEqual(got.DataType(), typ) {
				t.Fatalf("got %d values of %s", got.Len(), got.DataType())
			}
			for i, s := range src {
				want := "(null)"
				if s >= 0 && arrays[s].IsValid(int(row[i])) {
					want = arrays[s].ValueStr(int(row[i]))
				}
				g := "(null)"
				if got.IsValid(i) {
					g = got.ValueStr(i)
				}
				if g != want {
					t.Fatalf("value %d (array %d row %d): %s, want %s", i, s, row[i], g, want)
				}
			}
		})
	}
}
