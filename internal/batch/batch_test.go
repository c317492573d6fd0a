package batch

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// randomArray builds an array of type dt with n rows, about a third null
// when nulls is set.
func randomArray(t testing.TB, rng *rand.Rand, dt arrow.DataType, n int, nulls bool) arrow.Array {
	t.Helper()
	b := array.NewBuilder(memory.DefaultAllocator, dt)
	defer b.Release()
	for i := 0; i < n; i++ {
		if nulls && rng.IntN(3) == 0 {
			b.AppendNull()
			continue
		}
		switch bb := b.(type) {
		case *array.Int64Builder:
			bb.Append(rng.Int64() - rng.Int64())
		case *array.Int32Builder:
			bb.Append(rng.Int32() - rng.Int32())
		case *array.Int16Builder:
			bb.Append(int16(rng.IntN(1 << 16)))
		case *array.Uint64Builder:
			bb.Append(rng.Uint64())
		case *array.Float64Builder:
			bb.Append(rng.NormFloat64() * 1e6)
		case *array.Float32Builder:
			bb.Append(float32(rng.NormFloat64()))
		case *array.TimestampBuilder:
			bb.Append(arrow.Timestamp(rng.Int64N(1 << 50)))
		case *array.Date32Builder:
			bb.Append(arrow.Date32(rng.Int32N(100000)))
		case *array.StringBuilder:
			bb.Append(fmt.Sprintf("s%d-%x", i, rng.Uint32()))
		case *array.LargeStringBuilder:
			bb.Append(fmt.Sprintf("L%d", rng.IntN(1000)))
		case *array.BinaryBuilder:
			bb.Append([]byte{byte(i), byte(rng.IntN(256)), 0})
		case *array.BooleanBuilder:
			bb.Append(rng.IntN(2) == 0)
		default:
			t.Fatalf("no generator for %s", dt)
		}
	}
	return b.NewArray()
}

var testTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Int32,
	arrow.PrimitiveTypes.Float64,
	arrow.PrimitiveTypes.Float32,
	&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"},
	arrow.BinaryTypes.String,
	arrow.FixedWidthTypes.Boolean,
	// compute-kernel fallback
	arrow.PrimitiveTypes.Int16,
	arrow.PrimitiveTypes.Uint64,
	arrow.PrimitiveTypes.Date32,
	arrow.BinaryTypes.LargeString,
	arrow.BinaryTypes.Binary,
}

// checkTaken verifies that got holds the rows of src at idx, comparing each
// value independently of batch's code.
func checkTaken(t *testing.T, src, got arrow.Array, idx []int32) {
	t.Helper()
	if !arrow.TypeEqual(got.DataType(), src.DataType()) {
		t.Fatalf("type %s, want %s", got.DataType(), src.DataType())
	}
	if got.Len() != len(idx) {
		t.Fatalf("len %d, want %d", got.Len(), len(idx))
	}
	wantNulls := 0
	for j, i := range idx {
		if src.IsNull(int(i)) {
			wantNulls++
			if !got.IsNull(j) {
				t.Fatalf("row %d (src %d): got %s, want null", j, i, got.ValueStr(j))
			}
			continue
		}
		if got.IsNull(j) {
			t.Fatalf("row %d (src %d): got null, want %s", j, i, src.ValueStr(int(i)))
		}
		if g, w := got.ValueStr(j), src.ValueStr(int(i)); g != w {
			t.Fatalf("row %d (src %d): got %s, want %s", j, i, g, w)
		}
	}
	if got.NullN() != wantNulls {
		t.Fatalf("NullN %d, want %d", got.NullN(), wantNulls)
	}
}

func TestTakeArrayAllTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, dt := range testTypes {
		for _, nulls := range []bool{false, true} {
			for _, sliced := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/nulls=%v/sliced=%v", dt, nulls, sliced), func(t *testing.T) {
					full := randomArray(t, rng, dt, 60, nulls)
					defer full.Release()
					src := full
					if sliced {
						src = array.NewSlice(full, 13, 47)
						defer src.Release()
					}
					idxSets := [][]int32{
						{},
						{0},
						{int32(src.Len() - 1)},
					}
					perm := make([]int32, src.Len())
					for i := range perm {
						perm[i] = int32(src.Len() - 1 - i)
					}
					idxSets = append(idxSets, perm)
					rnd := make([]int32, 100) // with repeats
					for i := range rnd {
						rnd[i] = int32(rng.IntN(src.Len()))
					}
					idxSets = append(idxSets, rnd)
					for _, idx := range idxSets {
						got, err := TakeArray(src, idx)
						if err != nil {
							t.Fatal(err)
						}
						checkTaken(t, src, got, idx)
						got.Release()
					}
				})
			}
		}
	}
}

func TestTakeArrayStringAllNull(t *testing.T) {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.AppendNull()
	b.Append("")
	b.AppendNull()
	a := b.NewArray()
	b.Release()
	defer a.Release()
	got, err := TakeArray(a, []int32{2, 1, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	checkTaken(t, a, got, []int32{2, 1, 0, 0})
}

func makeRecord(t testing.TB, rng *rand.Rand, rows int) arrow.RecordBatch {
	t.Helper()
	fields := make([]arrow.Field, len(testTypes))
	cols := make([]arrow.Array, len(testTypes))
	for i, dt := range testTypes {
		fields[i] = arrow.Field{Name: fmt.Sprintf("c%d", i), Type: dt, Nullable: true}
		cols[i] = randomArray(t, rng, dt, rows, true)
	}
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	rec := array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, int64(rows))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

func checkRecordRows(t *testing.T, src, got arrow.RecordBatch, idx []int32) {
	t.Helper()
	if !got.Schema().Equal(src.Schema()) {
		t.Fatalf("schema %s, want %s", got.Schema(), src.Schema())
	}
	if got.NumRows() != int64(len(idx)) {
		t.Fatalf("rows %d, want %d", got.NumRows(), len(idx))
	}
	for c := 0; c < int(src.NumCols()); c++ {
		checkTaken(t, src.Column(c), got.Column(c), idx)
	}
}

func TestTake(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rec := makeRecord(t, rng, 40)
	defer rec.Release()
	for _, idx := range [][]int32{{}, {5}, {39, 0, 39, 1}} {
		got, err := Take(rec, idx)
		if err != nil {
			t.Fatal(err)
		}
		checkRecordRows(t, rec, got, idx)
		got.Release()
	}
}

func TestTakeErrorNamesColumn(t *testing.T) {
	// The compute kernels have no take for sparse unions.
	dt := arrow.SparseUnionOf([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, []arrow.UnionTypeCode{0})
	ub := array.NewBuilder(memory.DefaultAllocator, dt)
	ub.AppendNull()
	ub.AppendNull()
	u := ub.NewArray()
	ub.Release()
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	ib.AppendValues([]int64{1, 2}, nil)
	i := ib.NewArray()
	ib.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "ok", Type: i.DataType()}, {Name: "weird", Type: dt, Nullable: true}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{i, u}, 2)
	i.Release()
	u.Release()
	defer rec.Release()
	got, err := Take(rec, []int32{1})
	if err == nil {
		got.Release()
		t.Fatal("Take of a sparse union succeeded; pick another unsupported type for this test")
	}
	if want := `column "weird"`; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
	out, err := Split(rec, []int32{0, 1}, 2)
	if err == nil || out != nil {
		t.Fatalf("Split = %v, %v; want the take error", out, err)
	}
	if got, err := Filter(rec, []bool{false, true}); err == nil {
		got.Release()
		t.Fatal("Filter succeeded")
	}
}

func TestSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 40; iter++ {
		rows := rng.IntN(50) + 1
		n := rng.IntN(5) + 1
		rec := makeRecord(t, rng, rows)
		dest := make([]int32, rows)
		used := rng.IntN(n) + 1 // only the first `used` destinations get rows
		for r := range dest {
			dest[r] = int32(rng.IntN(used))
		}
		out, err := Split(rec, dest, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != n {
			t.Fatalf("len(out) = %d, want %d", len(out), n)
		}
		for d := 0; d < n; d++ {
			var idx []int32
			for r, x := range dest {
				if int(x) == d {
					idx = append(idx, int32(r))
				}
			}
			switch {
			case len(idx) == 0:
				if out[d] != nil {
					t.Fatalf("dest %d: got %d rows, want nil", d, out[d].NumRows())
				}
			case len(idx) == rows:
				if out[d] != rec {
					t.Fatalf("dest %d gets every row but is not rec itself", d)
				}
			default:
				checkRecordRows(t, rec, out[d], idx)
			}
			if out[d] != nil {
				out[d].Release()
			}
		}
		rec.Release()
	}
}

func TestSplitAllToOneRetains(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	b := array.NewInt64Builder(mem)
	b.AppendValues([]int64{1, 2, 3}, nil)
	a := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "x", Type: a.DataType()}}, nil), []arrow.Array{a}, 3)
	a.Release()
	out, err := Split(rec, []int32{2, 2, 2}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != nil || out[1] != nil || out[2] != rec {
		t.Fatalf("out = %v", out)
	}
	rec.Release()
	// rec is still alive through out[2].
	if got := out[2].Column(0).(*array.Int64).Value(2); got != 3 {
		t.Fatalf("value = %d", got)
	}
	out[2].Release()
	mem.AssertSize(t, 0)
}

func TestSplitEmpty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	rec := makeRecord(t, rng, 0)
	defer rec.Release()
	out, err := Split(rec, nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 {
		t.Fatalf("len = %d", len(out))
	}
	for d, o := range out {
		if o != nil {
			t.Fatalf("dest %d not nil", d)
		}
	}
}

func TestFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for iter := 0; iter < 30; iter++ {
		rows := rng.IntN(30) + 1
		rec := makeRecord(t, rng, rows)
		keep := make([]bool, rows)
		mode := iter % 3
		var idx []int32
		for r := range keep {
			switch mode {
			case 0:
				keep[r] = rng.IntN(2) == 0
			case 1:
				keep[r] = true
			case 2:
				keep[r] = false
			}
			if keep[r] {
				idx = append(idx, int32(r))
			}
		}
		got, err := Filter(rec, keep)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(idx) == 0:
			if got != nil {
				t.Fatalf("no row kept but got %d rows", got.NumRows())
			}
		case len(idx) == rows:
			if got != rec {
				t.Fatal("every row kept but result is not rec itself")
			}
			got.Release()
		default:
			checkRecordRows(t, rec, got, idx)
			got.Release()
		}
		rec.Release()
	}
}

func TestSameSchema(t *testing.T) {
	i64, str := arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String
	md := arrow.NewMetadata([]string{"a"}, []string{"b"})
	base := arrow.NewSchema([]arrow.Field{{Name: "a", Type: i64}, {Name: "b", Type: str, Nullable: true}}, nil)
	cases := []struct {
		name string
		s    *arrow.Schema
		want bool
	}{
		{"identical", arrow.NewSchema([]arrow.Field{{Name: "a", Type: i64}, {Name: "b", Type: str, Nullable: true}}, nil), true},
		{"nullability and metadata ignored", arrow.NewSchema([]arrow.Field{{Name: "a", Type: i64, Nullable: true, Metadata: md}, {Name: "b", Type: str}}, &md), true},
		{"renamed", arrow.NewSchema([]arrow.Field{{Name: "a", Type: i64}, {Name: "c", Type: str}}, nil), false},
		{"retyped", arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32}, {Name: "b", Type: str}}, nil), false},
		{"reordered", arrow.NewSchema([]arrow.Field{{Name: "b", Type: str}, {Name: "a", Type: i64}}, nil), false},
		{"fewer", arrow.NewSchema([]arrow.Field{{Name: "a", Type: i64}}, nil), false},
		{"more", arrow.NewSchema([]arrow.Field{{Name: "a", Type: i64}, {Name: "b", Type: str}, {Name: "c", Type: str}}, nil), false},
		{"timestamp unit", arrow.NewSchema([]arrow.Field{{Name: "a", Type: &arrow.TimestampType{Unit: arrow.Millisecond}}, {Name: "b", Type: str}}, nil), false},
	}
	for _, tc := range cases {
		if got := SameSchema(base, tc.s); got != tc.want {
			t.Errorf("%s: SameSchema = %v, want %v", tc.name, got, tc.want)
		}
		if got := SameSchema(tc.s, base); got != tc.want {
			t.Errorf("%s (swapped): SameSchema = %v, want %v", tc.name, got, tc.want)
		}
	}
	ts := func(tz string) *arrow.Schema {
		return arrow.NewSchema([]arrow.Field{{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: tz}}}, nil)
	}
	if SameSchema(ts("UTC"), ts("")) {
		t.Error("timestamps with different time zones reported as the same type")
	}
}
