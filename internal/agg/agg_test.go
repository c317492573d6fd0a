package agg

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/job"
)

var (
	i64 = arrow.PrimitiveTypes.Int64
	f64 = arrow.PrimitiveTypes.Float64
	f32 = arrow.PrimitiveTypes.Float32
	tms = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	str = arrow.BinaryTypes.String
	bln = arrow.FixedWidthTypes.Boolean
)

var intTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32,
}

// wantType is the rule that aggregates keep the input's numeric type,
// written out: the output type of fn over in, or nil
// when fn cannot aggregate in.
func wantType(fn string, in arrow.DataType) arrow.DataType {
	isInt := false
	for _, t := range intTypes {
		isInt = isInt || arrow.TypeEqual(t, in)
	}
	isTS := in.ID() == arrow.TIMESTAMP
	switch fn {
	case Count:
		return i64
	case Sum, Min, Max:
		switch {
		case isInt:
			return i64
		case in.ID() == arrow.FLOAT64:
			return f64
		case in.ID() == arrow.FLOAT32:
			return f32
		case isTS && fn != Sum:
			return in
		}
	case Avg:
		if isInt || in.ID() == arrow.FLOAT64 || in.ID() == arrow.FLOAT32 {
			return f64
		}
	case First, Last:
		if isInt || isTS || in.ID() == arrow.FLOAT64 || in.ID() == arrow.FLOAT32 || in.ID() == arrow.STRING || in.ID() == arrow.BOOL {
			return in
		}
	}
	return nil
}

func TestOutputTypes(t *testing.T) {
	inputs := append(append([]arrow.DataType(nil), intTypes...), f64, f32, tms,
		&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "Asia/Tokyo"}, str, bln,
		arrow.PrimitiveTypes.Uint64, arrow.FixedWidthTypes.Date32, arrow.BinaryTypes.Binary)
	for _, in := range inputs {
		schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: in, Nullable: true}}, nil)
		for _, fn := range Functions {
			set, err := Compile([]Spec{{Function: fn, Field: "x"}}, schema, "aggs")
			want := wantType(fn, in)
			if want == nil {
				if err == nil {
					t.Errorf("%s(%s) compiled to %s, want an error", fn, in, set.Fields()[0].Type)
					continue
				}
				fes := flatten(err)
				if len(fes) != 1 || fes[0].Path != "aggs[0].field" {
					t.Errorf("%s(%s): error %v, want one at aggs[0].field", fn, in, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s(%s): %v", fn, in, err)
				continue
			}
			f := set.Fields()
			if len(f) != 1 || !arrow.TypeEqual(f[0].Type, want) || !f[0].Nullable || f[0].Name != fn+"_x" {
				t.Errorf("%s(%s) field = %v, want %s_x: %s nullable", fn, in, f, fn, want)
			}
		}
	}
}

func flatten(err error) []*job.FieldError {
	var out []*job.FieldError
	var walk func(error)
	walk = func(e error) {
		if fe, ok := e.(*job.FieldError); ok {
			out = append(out, fe)
			return
		}
		if u, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

func TestOutputName(t *testing.T) {
	cases := []struct {
		s    Spec
		want string
	}{
		{Spec{Function: Count}, "count"},
		{Spec{Function: Count, Field: "x"}, "count_x"},
		{Spec{Function: Sum, Field: "amount"}, "sum_amount"},
		{Spec{Function: Sum, Field: "amount", As: "total"}, "total"},
	}
	for _, tc := range cases {
		if got := tc.s.OutputName(); got != tc.want {
			t.Errorf("%+v: OutputName = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestCompileAndCheckErrors(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: i64}, {Name: "s", Type: str}}, nil)
	cases := []struct {
		name  string
		specs []Spec
		paths []string // expected error paths, in order
		check []string // the subset Check (no schema) must report
	}{
		{"empty", nil, []string{"cfg"}, []string{"cfg"}},
		{"ok", []Spec{{Function: Count}, {Function: Sum, Field: "n"}, {Function: First, Field: "s"}}, nil, nil},
		{
			"everything at once",
			[]Spec{
				{Function: "median", Field: "n"},             // unknown function
				{Function: Sum},                              // needs a field
				{Function: Max, Field: "nope"},               // unknown column
				{Function: Avg, Field: "s"},                  // wrong type
				{Function: Min, Field: "n", As: "m"},         // fine
				{Function: Max, Field: "n", As: "m"},         // duplicate name
				{Function: Count, Field: "n", As: "count_n"}, // fine
			},
			[]string{"cfg[0].function", "cfg[1].field", "cfg[2].field", "cfg[3].field", "cfg[5].as"},
			[]string{"cfg[0].function", "cfg[1].field", "cfg[5].as"},
		},
		{"default names clash", []Spec{{Function: Count}, {Function: Count, As: "count"}}, []string{"cfg[1].as"}, []string{"cfg[1].as"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set, err := Compile(tc.specs, schema, "cfg")
			gotPaths := func(err error) []string {
				var ps []string
				for _, fe := range flatten(err) {
					ps = append(ps, fe.FieldPath())
					if fe.FieldReason() == "" || !strings.HasPrefix(fe.Error(), fe.Path+": ") {
						t.Errorf("bad error text %q", fe.Error())
					}
				}
				return ps
			}
			if fmt.Sprint(gotPaths(err)) != fmt.Sprint(tc.paths) {
				t.Fatalf("Compile error paths %v, want %v (error: %v)", gotPaths(err), tc.paths, err)
			}
			if tc.paths == nil {
				if set == nil || set.Len() != len(tc.specs) {
					t.Fatalf("set = %v", set)
				}
			} else if set != nil {
				t.Fatal("Compile returned a set with an error")
			}
			if err != nil && len(strings.Split(err.Error(), "\n")) != len(tc.paths) {
				t.Errorf("error text has a line per problem: %q", err)
			}
			cerr := Check(tc.specs, "cfg")
			if fmt.Sprint(gotPaths(cerr)) != fmt.Sprint(tc.check) {
				t.Fatalf("Check error paths %v, want %v", gotPaths(cerr), tc.check)
			}
		})
	}
	// The duplicate's reason names the earlier one.
	_, err := Compile([]Spec{{Function: Min, Field: "n", As: "m"}, {Function: Max, Field: "n", As: "m"}}, schema, "cfg")
	if err == nil || !strings.Contains(err.Error(), "cfg[0]") {
		t.Fatalf("duplicate error %v does not name cfg[0]", err)
	}
}

// cell is one input value as the test sees it.
type cell struct {
	null bool
	i    int64
	f    float64
	s    string
	b    bool
}

// column builds an array of dt from cells.
func column(t testing.TB, dt arrow.DataType, cells []cell) arrow.Array {
	t.Helper()
	b := array.NewBuilder(memory.DefaultAllocator, dt)
	defer b.Release()
	for _, c := range cells {
		if c.null {
			b.AppendNull()
			continue
		}
		switch bb := b.(type) {
		case *array.Int8Builder:
			bb.Append(int8(c.i))
		case *array.Int16Builder:
			bb.Append(int16(c.i))
		case *array.Int32Builder:
			bb.Append(int32(c.i))
		case *array.Int64Builder:
			bb.Append(c.i)
		case *array.Uint8Builder:
			bb.Append(uint8(c.i))
		case *array.Uint16Builder:
			bb.Append(uint16(c.i))
		case *array.Uint32Builder:
			bb.Append(uint32(c.i))
		case *array.TimestampBuilder:
			bb.Append(arrow.Timestamp(c.i))
		case *array.Float64Builder:
			bb.Append(c.f)
		case *array.Float32Builder:
			bb.Append(float32(c.f))
		case *array.StringBuilder:
			bb.Append(c.s)
		case *array.BooleanBuilder:
			bb.Append(c.b)
		default:
			t.Fatalf("no builder for %s", dt)
		}
	}
	return b.NewArray()
}

// randomCell draws a value representable in dt.
func randomCell(rng *rand.Rand, dt arrow.DataType, nanRate int) cell {
	if rng.IntN(4) == 0 {
		return cell{null: true}
	}
	var c cell
	switch dt.ID() {
	case arrow.INT8:
		c.i = int64(int8(rng.Uint32()))
	case arrow.INT16:
		c.i = int64(int16(rng.Uint32()))
	case arrow.INT32:
		c.i = int64(int32(rng.Uint32()))
	case arrow.INT64, arrow.TIMESTAMP:
		c.i = rng.Int64N(2e12) - 1e12
	case arrow.UINT8:
		c.i = int64(uint8(rng.Uint32()))
	case arrow.UINT16:
		c.i = int64(uint16(rng.Uint32()))
	case arrow.UINT32:
		c.i = int64(rng.Uint32())
	case arrow.FLOAT64:
		c.f = rng.NormFloat64() * 1e3
		if nanRate > 0 && rng.IntN(nanRate) == 0 {
			c.f = math.NaN()
		}
	case arrow.FLOAT32:
		c.f = float64(float32(rng.NormFloat64() * 1e3))
		if nanRate > 0 && rng.IntN(nanRate) == 0 {
			c.f = math.NaN()
		}
	case arrow.STRING:
		c.s = fmt.Sprintf("v%d", rng.IntN(1000))
	case arrow.BOOL:
		c.b = rng.IntN(2) == 0
	}
	return c
}

// expected is an output value: null, or one of i/f/s/b.
type expected struct {
	null bool
	i    int64
	f    float64
	s    string
	b    bool
}

// reference computes fn over the cells of one group, in order, with plain
// loops. isFloat says whether the input is a float column.
func reference(fn string, cells []cell, isFloat bool, countRows bool) expected {
	var nonNull []cell
	for _, c := range cells {
		if !c.null {
			nonNull = append(nonNull, c)
		}
	}
	switch fn {
	case Count:
		if countRows {
			return expected{i: int64(len(cells))}
		}
		return expected{i: int64(len(nonNull))}
	}
	if len(nonNull) == 0 {
		return expected{null: true}
	}
	switch fn {
	case Sum:
		if isFloat {
			s := 0.0
			for _, c := range nonNull {
				s += c.f
			}
			return expected{f: s}
		}
		var s int64
		for _, c := range nonNull {
			s += c.i
		}
		return expected{i: s}
	case Avg:
		s := 0.0
		for _, c := range nonNull {
			if isFloat {
				s += c.f
			} else {
				s += float64(c.i)
			}
		}
		return expected{f: s / float64(len(nonNull))}
	case Min, Max:
		if isFloat {
			var best float64
			have := false
			for _, c := range nonNull {
				if math.IsNaN(c.f) {
					continue
				}
				if !have || (fn == Min && c.f < best) || (fn == Max && c.f > best) {
					best, have = c.f, true
				}
			}
			if !have {
				return expected{f: math.NaN()} // every non-null value was NaN
			}
			return expected{f: best}
		}
		best := nonNull[0].i
		for _, c := range nonNull {
			if (fn == Min && c.i < best) || (fn == Max && c.i > best) {
				best = c.i
			}
		}
		return expected{i: best}
	case First:
		c := nonNull[0]
		return expected{i: c.i, f: c.f, s: c.s, b: c.b}
	case Last:
		c := nonNull[len(nonNull)-1]
		return expected{i: c.i, f: c.f, s: c.s, b: c.b}
	}
	panic(fn)
}

// value reads row r of an output array as an expected.
func value(t testing.TB, a arrow.Array, r int) expected {
	t.Helper()
	if a.IsNull(r) {
		return expected{null: true}
	}
	switch x := a.(type) {
	case *array.Int64:
		return expected{i: x.Value(r)}
	case *array.Int32:
		return expected{i: int64(x.Value(r))}
	case *array.Int16:
		return expected{i: int64(x.Value(r))}
	case *array.Int8:
		return expected{i: int64(x.Value(r))}
	case *array.Uint32:
		return expected{i: int64(x.Value(r))}
	case *array.Uint16:
		return expected{i: int64(x.Value(r))}
	case *array.Uint8:
		return expected{i: int64(x.Value(r))}
	case *array.Timestamp:
		return expected{i: int64(x.Value(r))}
	case *array.Float64:
		return expected{f: x.Value(r)}
	case *array.Float32:
		return expected{f: float64(x.Value(r))}
	case *array.String:
		return expected{s: x.Value(r)}
	case *array.Boolean:
		return expected{b: x.Value(r)}
	}
	t.Fatalf("unexpected output type %s", a.DataType())
	return expected{}
}

func sameValue(got, want expected, f32out bool) bool {
	if got.null || want.null {
		return got.null == want.null
	}
	if f32out {
		want.f = float64(float32(want.f))
	}
	if math.IsNaN(want.f) || math.IsNaN(got.f) {
		return math.IsNaN(want.f) && math.IsNaN(got.f)
	}
	return got.i == want.i && got.f == want.f && got.s == want.s && got.b == want.b
}

// TestAgainstReference folds random batches into random groups and compares
// every function over every input type with the plain-loop reference.
func TestAgainstReference(t *testing.T) {
	types := append(append([]arrow.DataType(nil), intTypes...), f64, f32, tms, str, bln)
	rng := rand.New(rand.NewPCG(31, 32))
	for _, dt := range types {
		isFloat := dt.ID() == arrow.FLOAT64 || dt.ID() == arrow.FLOAT32
		var specs []Spec
		for _, fn := range Functions {
			if wantType(fn, dt) != nil {
				specs = append(specs, Spec{Function: fn, Field: "x"})
			}
		}
		specs = append(specs, Spec{Function: Count, As: "rows"})
		schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: i64}, {Name: "x", Type: dt, Nullable: true}}, nil)
		for iter := 0; iter < 30; iter++ {
			t.Run(fmt.Sprintf("%s/%d", dt, iter), func(t *testing.T) {
				set, err := Compile(specs, schema, "aggs")
				if err != nil {
					t.Fatal(err)
				}
				st := set.NewState()
				groups := 1 + rng.IntN(6)
				perGroup := make([][]cell, groups+2) // two groups only ever see nulls or nothing
				st.Grow(groups + 2)
				nanRate := 0
				if iter%2 == 1 {
					nanRate = 1 + rng.IntN(6)
				}
				for b := 0; b < 1+rng.IntN(4); b++ {
					rows := rng.IntN(40)
					cells := make([]cell, rows)
					gid := make([]int32, rows)
					for r := range cells {
						gid[r] = int32(rng.IntN(groups+2) - 1) // -1 is skipped
						if gid[r] == int32(groups) {
							cells[r] = cell{null: true}
						} else {
							cells[r] = randomCell(rng, dt, nanRate)
						}
						if gid[r] == int32(groups+1) {
							gid[r] = -1 // group groups+1 sees no row at all
						}
						if gid[r] >= 0 {
							perGroup[gid[r]] = append(perGroup[gid[r]], cells[r])
						}
					}
					kb := array.NewInt64Builder(memory.DefaultAllocator)
					for r := 0; r < rows; r++ {
						kb.Append(int64(gid[r]))
					}
					kcol := kb.NewArray()
					kb.Release()
					xcol := column(t, dt, cells)
					rec := array.NewRecordBatch(schema, []arrow.Array{kcol, xcol}, int64(rows))
					kcol.Release()
					xcol.Release()
					if err := st.Update(rec, gid); err != nil {
						t.Fatal(err)
					}
					rec.Release()
				}
				// Build in a shuffled order with a repeat.
				order := rng.Perm(groups + 2)
				ids := make([]int32, 0, len(order)+1)
				for _, g := range order {
					ids = append(ids, int32(g))
				}
				ids = append(ids, ids[0])
				arrs := st.Build(ids)
				defer func() {
					for _, a := range arrs {
						a.Release()
					}
				}()
				if len(arrs) != len(specs) {
					t.Fatalf("%d arrays for %d aggregates", len(arrs), len(specs))
				}
				for k, sp := range specs {
					a := arrs[k]
					if !arrow.TypeEqual(a.DataType(), set.Fields()[k].Type) || a.Len() != len(ids) {
						t.Fatalf("%s: array %s len %d, want %s len %d", sp.OutputName(), a.DataType(), a.Len(), set.Fields()[k].Type, len(ids))
					}
					for r, g := range ids {
						want := reference(sp.Function, perGroup[g], isFloat, sp.Field == "")
						got := value(t, a, r)
						if !sameValue(got, want, a.DataType().ID() == arrow.FLOAT32) {
							t.Fatalf("%s of group %d (%d cells %v): got %+v, want %+v", sp.OutputName(), g, len(perGroup[g]), perGroup[g], got, want)
						}
					}
				}
			})
		}
	}
}

func TestAllNullGroupIsNull(t *testing.T) {
	// Never a sentinel such as 0, MaxInt64 or +Inf.
	for _, dt := range []arrow.DataType{i64, arrow.PrimitiveTypes.Int32, f64, f32, tms, str, bln} {
		schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: dt, Nullable: true}}, nil)
		var specs []Spec
		for _, fn := range Functions {
			if wantType(fn, dt) != nil {
				specs = append(specs, Spec{Function: fn, Field: "x"})
			}
		}
		set, err := Compile(specs, schema, "a")
		if err != nil {
			t.Fatal(err)
		}
		st := set.NewState()
		st.Grow(2)
		col := column(t, dt, []cell{{null: true}, {null: true}})
		rec := array.NewRecordBatch(schema, []arrow.Array{col}, 2)
		col.Release()
		if err := st.Update(rec, []int32{0, 0}); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		arrs := st.Build([]int32{0, 1}) // group 1 saw nothing at all
		for k, sp := range specs {
			for r := 0; r < 2; r++ {
				if sp.Function == Count {
					if v := arrs[k].(*array.Int64).Value(r); arrs[k].IsNull(r) || v != 0 {
						t.Errorf("%s count row %d = %s, want 0", dt, r, arrs[k].ValueStr(r))
					}
					continue
				}
				if !arrs[k].IsNull(r) {
					t.Errorf("%s %s of an all-null group = %s, want null", dt, sp.Function, arrs[k].ValueStr(r))
				}
			}
			arrs[k].Release()
		}
	}
}

// run compiles specs over one column x of type dt, folds the batches (all
// rows into group 0) and returns the outputs of group 0.
func run(t *testing.T, dt arrow.DataType, specs []Spec, batches ...[]cell) ([]arrow.Array, error) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: dt, Nullable: true}}, nil)
	set, err := Compile(specs, schema, "a")
	if err != nil {
		t.Fatal(err)
	}
	st := set.NewState()
	st.Grow(1)
	for _, cells := range batches {
		col := column(t, dt, cells)
		rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(cells)))
		col.Release()
		err := st.Update(rec, make([]int32, len(cells)))
		rec.Release()
		if err != nil {
			return nil, err
		}
	}
	return st.Build([]int32{0}), nil
}

func floats(vs ...float64) []cell {
	out := make([]cell, len(vs))
	for i, v := range vs {
		out[i] = cell{f: v}
	}
	return out
}

func TestNaNRules(t *testing.T) {
	nan := math.NaN()
	specs := []Spec{{Function: Sum, Field: "x"}, {Function: Avg, Field: "x"}, {Function: Min, Field: "x"}, {Function: Max, Field: "x"}}
	cases := []struct {
		name  string
		cells []cell
		want  [4]float64 // sum, avg, min, max
	}{
		{"no NaN", floats(3, -1, 2), [4]float64{4, 4.0 / 3, -1, 3}},
		{"NaN among values", floats(3, nan, -1), [4]float64{nan, nan, -1, 3}},
		{"NaN first", floats(nan, 5, 7), [4]float64{nan, nan, 5, 7}},
		{"all NaN", floats(nan, nan), [4]float64{nan, nan, nan, nan}},
		{"NaN and nulls", append(floats(nan), cell{null: true}), [4]float64{nan, nan, nan, nan}},
		{"infinities", floats(math.Inf(1), 1, math.Inf(-1)), [4]float64{nan, nan, math.Inf(-1), math.Inf(1)}},
	}
	for _, dt := range []arrow.DataType{f64, f32} {
		for _, tc := range cases {
			arrs, err := run(t, dt, specs, tc.cells)
			if err != nil {
				t.Fatal(err)
			}
			for k := range specs {
				got := value(t, arrs[k], 0)
				want := expected{f: tc.want[k]}
				if !sameValue(got, want, arrs[k].DataType().ID() == arrow.FLOAT32) {
					t.Errorf("%s %s %s: got %v, want %v", dt, tc.name, specs[k].Function, got.f, tc.want[k])
				}
				arrs[k].Release()
			}
		}
	}
}

func TestFloat32SumAccumulatesInFloat64(t *testing.T) {
	// 2^24 + 1 + 1 is exact in float64 but float32 addition would stay at 2^24.
	arrs, err := run(t, f32, []Spec{{Function: Sum, Field: "x"}}, floats(1<<24, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer arrs[0].Release()
	if got := arrs[0].(*array.Float32).Value(0); got != 1<<24+2 {
		t.Fatalf("sum = %v, want %v", got, 1<<24+2)
	}
}

func ints(vs ...int64) []cell {
	out := make([]cell, len(vs))
	for i, v := range vs {
		out[i] = cell{i: v}
	}
	return out
}

func TestSumOverflow(t *testing.T) {
	specs := []Spec{{Function: Sum, Field: "x", As: "total"}}
	cases := []struct {
		name     string
		batches  [][]cell
		overflow bool
		want     int64
	}{
		{"max", [][]cell{ints(math.MaxInt64-1, 1)}, false, math.MaxInt64},
		{"min", [][]cell{ints(math.MinInt64+1, -1)}, false, math.MinInt64},
		{"mixed signs never overflow", [][]cell{ints(math.MaxInt64, math.MinInt64, math.MaxInt64)}, false, math.MaxInt64 - 1},
		{"positive", [][]cell{ints(math.MaxInt64, 1)}, true, 0},
		{"negative", [][]cell{ints(math.MinInt64, -1)}, true, 0},
		{"across batches", [][]cell{ints(math.MaxInt64 / 2), ints(math.MaxInt64/2 + 2)}, true, 0},
		{"null skipped", [][]cell{append(ints(math.MaxInt64), cell{null: true})}, false, math.MaxInt64},
	}
	for _, tc := range cases {
		arrs, err := run(t, i64, specs, tc.batches...)
		if tc.overflow {
			if err == nil {
				t.Errorf("%s: no overflow error (sum %s)", tc.name, arrs[0].ValueStr(0))
				continue
			}
			if !strings.Contains(err.Error(), `"total"`) || !strings.Contains(err.Error(), "overflow") {
				t.Errorf("%s: error %q does not name the aggregate", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := arrs[0].(*array.Int64).Value(0); got != tc.want {
			t.Errorf("%s: sum = %d, want %d", tc.name, got, tc.want)
		}
		arrs[0].Release()
	}
	// Uint32 values near their maximum sum without overflow into int64.
	arrs, err := run(t, arrow.PrimitiveTypes.Uint32, specs, ints(math.MaxUint32, math.MaxUint32, math.MaxUint32))
	if err != nil {
		t.Fatal(err)
	}
	if got := arrs[0].(*array.Int64).Value(0); got != 3*math.MaxUint32 {
		t.Fatalf("uint32 sum = %d", got)
	}
}

func TestTimestampMinMaxKeepType(t *testing.T) {
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "America/New_York"}
	arrs, err := run(t, ts, []Spec{{Function: Min, Field: "x"}, {Function: Max, Field: "x"}, {Function: First, Field: "x"}, {Function: Last, Field: "x"}},
		append(ints(5, -3, 9), cell{null: true}))
	if err != nil {
		t.Fatal(err)
	}
	want := []arrow.Timestamp{-3, 9, 5, 9}
	for k, a := range arrs {
		if !arrow.TypeEqual(a.DataType(), ts) {
			t.Errorf("output %d type %s, want %s", k, a.DataType(), ts)
		}
		if got := a.(*array.Timestamp).Value(0); got != want[k] {
			t.Errorf("output %d = %d, want %d", k, got, want[k])
		}
		a.Release()
	}
}

func TestFirstLastIntKeepType(t *testing.T) {
	// The package doc: "first and last keep the input type".
	for _, dt := range intTypes {
		arrs, err := run(t, dt, []Spec{{Function: First, Field: "x"}, {Function: Last, Field: "x"}}, append([]cell{{null: true}}, ints(7, 3, 100)...))
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range []int64{7, 100} {
			if !arrow.TypeEqual(arrs[k].DataType(), dt) {
				t.Errorf("%s: output type %s, want the input type", dt, arrs[k].DataType())
			}
			if got := value(t, arrs[k], 0); got.null || got.i != want {
				t.Errorf("%s: output %d = %+v, want %d", dt, k, got, want)
			}
			arrs[k].Release()
		}
	}
}

func TestFirstStringSurvivesBatch(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: str}}, nil)
	set, err := Compile([]Spec{{Function: First, Field: "x"}, {Function: Last, Field: "x"}}, schema, "a")
	if err != nil {
		t.Fatal(err)
	}
	st := set.NewState()
	st.Grow(1)
	col := column(t, str, []cell{{s: "hello"}, {s: "world"}})
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 2)
	if err := st.Update(rec, []int32{0, 0}); err != nil {
		t.Fatal(err)
	}
	// Scribble over the batch's string bytes, as a reused buffer would.
	data := col.(*array.String).ValueBytes()
	for i := range data {
		data[i] = '#'
	}
	col.Release()
	rec.Release()
	arrs := st.Build([]int32{0})
	if a, b := arrs[0].(*array.String).Value(0), arrs[1].(*array.String).Value(0); a != "hello" || b != "world" {
		t.Fatalf("first, last = %q, %q", a, b)
	}
}

func TestGrowAndReset(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: i64, Nullable: true}, {Name: "f", Type: f64, Nullable: true}, {Name: "s", Type: str, Nullable: true}, {Name: "b", Type: bln, Nullable: true}}, nil)
	specs := []Spec{
		{Function: Count},
		{Function: Sum, Field: "x"},
		{Function: Min, Field: "f"},
		{Function: Avg, Field: "x"},
		{Function: First, Field: "s"},
		{Function: Last, Field: "b"},
	}
	set, err := Compile(specs, schema, "a")
	if err != nil {
		t.Fatal(err)
	}
	st := set.NewState()
	feed := func(g int32, x int64, f float64) {
		cols := []arrow.Array{
			column(t, i64, ints(x)),
			column(t, f64, floats(f)),
			column(t, str, []cell{{s: fmt.Sprint("s", x)}}),
			column(t, bln, []cell{{b: true}}),
		}
		rec := array.NewRecordBatch(schema, cols, 1)
		for _, c := range cols {
			c.Release()
		}
		if err := st.Update(rec, []int32{g}); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	st.Grow(1)
	if st.Groups() != 1 {
		t.Fatalf("Groups = %d", st.Groups())
	}
	feed(0, 10, 2.5)
	// Grow one at a time (reallocating) and check that group 0 survives.
	for n := 2; n <= 100; n++ {
		st.Grow(n)
		feed(int32(n-1), int64(n), float64(n))
	}
	st.Grow(50) // shrinking is a no-op
	if st.Groups() != 100 {
		t.Fatalf("Groups = %d", st.Groups())
	}
	arrs := st.Build([]int32{0, 99})
	want0 := []string{"1", "10", "2.5", "10", "s10", "true"}
	want99 := []string{"1", "100", "100", "100", "s100", "true"}
	for k := range specs {
		if g := arrs[k].ValueStr(0); g != want0[k] {
			t.Errorf("%s group 0 = %s, want %s", specs[k].OutputName(), g, want0[k])
		}
		if g := arrs[k].ValueStr(1); g != want99[k] {
			t.Errorf("%s group 99 = %s, want %s", specs[k].OutputName(), g, want99[k])
		}
		arrs[k].Release()
	}
	// Reset empties a group; it can then be reused.
	st.Reset(0)
	arrs = st.Build([]int32{0, 99})
	for k := range specs {
		if specs[k].Function == Count {
			if arrs[k].ValueStr(0) != "0" {
				t.Errorf("count after Reset = %s", arrs[k].ValueStr(0))
			}
		} else if !arrs[k].IsNull(0) {
			t.Errorf("%s after Reset = %s, want null", specs[k].OutputName(), arrs[k].ValueStr(0))
		}
		if g := arrs[k].ValueStr(1); g != want99[k] {
			t.Errorf("Reset(0) changed group 99's %s to %s", specs[k].OutputName(), g)
		}
		arrs[k].Release()
	}
	feed(0, -4, -1)
	arrs = st.Build([]int32{0})
	for k, w := range []string{"1", "-4", "-1", "-4", "s-4", "true"} {
		if g := arrs[k].ValueStr(0); g != w {
			t.Errorf("%s after reuse = %s, want %s", specs[k].OutputName(), g, w)
		}
		arrs[k].Release()
	}
}

func TestResetClearsNaNFlag(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: f64, Nullable: true}}, nil)
	set, err := Compile([]Spec{{Function: Max, Field: "x"}}, schema, "a")
	if err != nil {
		t.Fatal(err)
	}
	st := set.NewState()
	st.Grow(1)
	col := column(t, f64, floats(math.NaN()))
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 1)
	col.Release()
	defer rec.Release()
	if err := st.Update(rec, []int32{0}); err != nil {
		t.Fatal(err)
	}
	st.Reset(0)
	arrs := st.Build([]int32{0})
	defer arrs[0].Release()
	if !arrs[0].IsNull(0) {
		t.Fatalf("max after Reset = %s, want null", arrs[0].ValueStr(0))
	}
}

func TestMultiErrorUnwraps(t *testing.T) {
	_, err := Compile([]Spec{{Function: "x"}, {Function: "y"}}, arrow.NewSchema(nil, nil), "p")
	var fe *job.FieldError
	if !errors.As(err, &fe) || fe.Path != "p[0].function" {
		t.Fatalf("errors.As = %v", fe)
	}
}
