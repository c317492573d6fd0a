package arrowjson

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// roundTripFields is the schema of the random records; wide is what
// decoding gives back: Int32 widens to Int64, every other type is kept.
func roundTripFields(wide bool) []arrow.Field {
	n32 := arrow.DataType(arrow.PrimitiveTypes.Int32)
	if wide {
		n32 = i64
	}
	return []arrow.Field{
		f("i", i64), f("f", f64), f("s", utf8T), f("b", boo), f("n32", n32),
		f("st", arrow.StructOf(f("x", i64), f("y", utf8T))),
		f("l", arrow.ListOf(i64)),
		f("ls", arrow.ListOf(arrow.StructOf(f("z", f64)))),
	}
}

var specialRunes = []rune{'"', '\\', '/', '\n', '\r', '\t', '\b', '\f', 0, 0x1f, 0x7f, 'é', '😀', 0x2028, 0xfffd, 0x10ffff}

func randString(r *rand.Rand) string {
	var sb strings.Builder
	for n := r.IntN(8); n > 0; n-- {
		switch r.IntN(3) {
		case 0:
			sb.WriteRune(specialRunes[r.IntN(len(specialRunes))])
		case 1:
			sb.WriteRune(rune('a' + r.IntN(26)))
		default:
			c := rune(r.IntN(0x10ffff))
			if c >= 0xd800 && c < 0xe000 {
				c = 'x'
			}
			sb.WriteRune(c)
		}
	}
	return sb.String()
}

func randFloat(r *rand.Rand) float64 {
	switch r.IntN(6) {
	case 0:
		return float64(r.Int64N(2000) - 1000) // integral: written "10.0", read back as float
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return math.Float64frombits(r.Uint64() &^ (0x7ff << 52)) // subnormal
	case 3:
		return (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(600)-300))
	default:
		if v := math.Float64frombits(r.Uint64()); !math.IsNaN(v) && !math.IsInf(v, 0) {
			return v
		}
		return 1.5
	}
}

// appendRandomRow appends one row to the builders of both records; full
// rows have no nulls and no empty lists, so that every type is inferred.
func appendRandomRow(r *rand.Rand, orig, wide *array.RecordBuilder, full bool) {
	null := func() bool { return !full && r.IntN(5) == 0 }
	iv, fv, sv, bv, nv := r.Int64(), randFloat(r), randString(r), r.IntN(2) == 0, int32(r.Uint32())
	nulls := [8]bool{}
	for c := range nulls {
		nulls[c] = null()
	}
	x, y, xNull, yNull := r.Int64N(1e6)-5e5, randString(r), null(), null()
	ln := 1 + r.IntN(4)
	if !full {
		ln = r.IntN(4)
	}
	lv := make([]int64, ln)
	lnull := make([]bool, ln)
	for k := range lv {
		lv[k], lnull[k] = r.Int64(), k > 0 && null()
	}
	zs := make([]float64, ln)
	znull := make([]bool, ln)
	for k := range zs {
		zs[k], znull[k] = randFloat(r), k > 0 && null()
	}
	for _, rb := range []*array.RecordBuilder{orig, wide} {
		appendOr(rb.Field(0), nulls[0], func(b array.Builder) { b.(*array.Int64Builder).Append(iv) })
		appendOr(rb.Field(1), nulls[1], func(b array.Builder) { b.(*array.Float64Builder).Append(fv) })
		appendOr(rb.Field(2), nulls[2], func(b array.Builder) { b.(*array.StringBuilder).Append(sv) })
		appendOr(rb.Field(3), nulls[3], func(b array.Builder) { b.(*array.BooleanBuilder).Append(bv) })
		appendOr(rb.Field(4), nulls[4], func(b array.Builder) {
			if ib, ok := b.(*array.Int32Builder); ok {
				ib.Append(nv)
			} else {
				b.(*array.Int64Builder).Append(int64(nv))
			}
		})
		appendOr(rb.Field(5), nulls[5], func(b array.Builder) {
			sb := b.(*array.StructBuilder)
			sb.Append(true)
			appendOr(sb.FieldBuilder(0), xNull, func(b array.Builder) { b.(*array.Int64Builder).Append(x) })
			appendOr(sb.FieldBuilder(1), yNull, func(b array.Builder) { b.(*array.StringBuilder).Append(y) })
		})
		appendOr(rb.Field(6), nulls[6], func(b array.Builder) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Int64Builder).AppendValues(lv, invert(lnull))
		})
		appendOr(rb.Field(7), nulls[7], func(b array.Builder) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			sb := lb.ValueBuilder().(*array.StructBuilder)
			for k := range zs {
				if znull[k] {
					sb.AppendNull()
					continue
				}
				sb.Append(true)
				sb.FieldBuilder(0).(*array.Float64Builder).Append(zs[k])
			}
		})
	}
}

func appendOr(b array.Builder, null bool, value func(array.Builder)) {
	if null {
		b.AppendNull()
		return
	}
	value(b)
}

func invert(nulls []bool) []bool {
	valid := make([]bool, len(nulls))
	for i, n := range nulls {
		valid[i] = !n
	}
	return valid
}

// Random records survive Encode then Decode: same columns, same values,
// Int32 widened to Int64 (JSON has one integer type). Each record's first
// row is complete, so every column and element type can be inferred.
func TestRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		roundTripOnce(t, mem, r)
	}
}

// FuzzRoundTrip is TestRoundTrip with the random source's seed fuzzed.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		roundTripOnce(t, mem, rand.New(rand.NewPCG(s1, s2)))
	})
}

func roundTripOnce(t *testing.T, mem memory.Allocator, r *rand.Rand) {
	t.Helper()
	orig := array.NewRecordBuilder(mem, arrow.NewSchema(roundTripFields(false), nil))
	wide := array.NewRecordBuilder(mem, arrow.NewSchema(roundTripFields(true), nil))
	nrows := 1 + r.IntN(20)
	for row := 0; row < nrows; row++ {
		appendRandomRow(r, orig, wide, row == 0)
	}
	in, want := orig.NewRecordBatch(), wide.NewRecordBatch()
	orig.Release()
	wide.Release()
	defer in.Release()
	defer want.Release()

	lines, err := Encode(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]int, len(lines))
	for i := range rows {
		rows[i] = i
	}
	got, err := decodeRows(mem, lines, rows, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, lines)
	}
	defer got.Release()
	if !got.Schema().Equal(want.Schema()) || !array.RecordEqual(got, want) {
		t.Fatalf("got %v\nwant %v\nJSON %s", got, want, lines)
	}
}
