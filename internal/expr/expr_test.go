package expr

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestBareColumn(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	for i, f := range testSchema.Fields() {
		if f.Name == "lst" {
			continue
		}
		for _, src := range []string{"`" + f.Name + "`", "(`" + f.Name + "`)"} {
			e, err := Compile(src, testSchema)
			if err != nil {
				t.Fatalf("Compile(%q): %v", src, err)
			}
			if !arrow.TypeEqual(e.Type(), f.Type) {
				t.Errorf("%s: Type() = %s, want %s", src, e.Type(), f.Type)
			}
			out, err := e.Eval(rec)
			if err != nil {
				t.Fatalf("Eval(%q): %v", src, err)
			}
			if out != rec.Column(i) {
				t.Errorf("%s: Eval did not return the record's column", src)
			}
			out.Release() // balances the Retain; the checked allocator verifies
		}
	}
}

func TestTypes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		src  string
		want arrow.DataType
	}{
		{"i + 1", arrow.PrimitiveTypes.Int64},
		{"i32 + 1", arrow.PrimitiveTypes.Int64},
		{"f32 * 1", arrow.PrimitiveTypes.Float64},
		{"i / 2.0", arrow.PrimitiveTypes.Float64},
		{"s + 'x'", arrow.BinaryTypes.String},
		{"ls + 'x'", arrow.BinaryTypes.String},
		{"i > 1", arrow.FixedWidthTypes.Boolean},
		{"ts + 1", tsMs},
		{"1 + tss", tsS},
		{"ts - tsn", arrow.PrimitiveTypes.Int64},
		{"coalesce(tss, ts)", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: tsS.TimeZone}},
		{"if(b, tsn, ts)", tsNs},
		{"null", arrow.Null},
		{"null + null", arrow.Null},
		{"1", arrow.PrimitiveTypes.Int64},
		{"abs(f)", arrow.PrimitiveTypes.Float64},
		{"round(i)", arrow.PrimitiveTypes.Int64},
		{"to_string(i)", arrow.BinaryTypes.String},
	}
	for _, tc := range cases {
		e, err := Compile(tc.src, testSchema)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.src, err)
			continue
		}
		if !arrow.TypeEqual(e.Type(), tc.want) {
			t.Errorf("%s: Type() = %s, want %s", tc.src, e.Type(), tc.want)
		}
		_, got := evalString(t, tc.src, true)
		if got == nil || !arrow.TypeEqual(got, tc.want) {
			t.Errorf("%s: Eval type = %v, want %s", tc.src, got, tc.want)
		}
	}
}

func TestAccessors(t *testing.T) {
	t.Parallel()
	src := "i + j > i * 2 and lower(s) == 'de' or `order id` is null"
	e, err := Compile(src, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if e.String() != src {
		t.Errorf("String() = %q", e.String())
	}
	want := []string{"i", "j", "order id", "s"}
	if got := e.Columns(); !slices.Equal(got, want) {
		t.Errorf("Columns() = %q, want %q", got, want)
	}
	e.Columns()[0] = "changed"
	if got := e.Columns(); !slices.Equal(got, want) {
		t.Errorf("Columns() is not a copy: %q", got)
	}
	e, _ = Compile("1 + 2", testSchema)
	if got := e.Columns(); len(got) != 0 {
		t.Errorf("Columns() = %q, want none", got)
	}
}

func TestEvalSchemaMismatch(t *testing.T) {
	t.Parallel()
	e, err := Compile("amount > 1", benchSchema)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	if _, err := e.Eval(rec); err == nil || !strings.Contains(err.Error(), "record schema does not match") {
		t.Errorf("Eval on another schema: err = %v", err)
	}
	if _, err := e.EvalMask(rec); err == nil {
		t.Errorf("EvalMask on another schema: no error")
	}
	// Same names, different type.
	other := arrow.NewSchema([]arrow.Field{
		{Name: "amount", Type: arrow.PrimitiveTypes.Int32},
		{Name: "country", Type: arrow.BinaryTypes.String},
		{Name: "ts", Type: tsMs},
	}, nil)
	rec2 := makeBenchRecord(mem, other, 8)
	defer rec2.Release()
	_, err = e.Eval(rec2)
	if err == nil || err.Error() != `record schema does not match the expression's: field 0 is "amount" (int32), want "amount" (int64)` {
		t.Errorf("Eval with a changed type: err = %v", err)
	}
	// Same names and types, different time zone.
	other = arrow.NewSchema([]arrow.Field{
		{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
		{Name: "country", Type: arrow.BinaryTypes.String},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
	}, nil)
	rec3 := makeBenchRecord(mem, other, 8)
	defer rec3.Release()
	if _, err := e.Eval(rec3); err == nil {
		t.Errorf("Eval with a changed time zone: no error")
	}
	// An equal schema that is another *Schema is fine.
	same := arrow.NewSchema(benchSchema.Fields(), nil)
	rec4 := makeBenchRecord(mem, same, 8)
	defer rec4.Release()
	out, err := e.Eval(rec4)
	if err != nil {
		t.Errorf("Eval with an equal schema: %v", err)
	} else {
		out.Release()
	}
	if _, err := e.Eval(nil); err == nil {
		t.Errorf("Eval(nil): no error")
	}
}

func TestUint64Overflow(t *testing.T) {
	t.Parallel()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "u", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.Uint64Builder).AppendValues([]uint64{1, math.MaxUint64, math.MaxInt64 + 1, 7}, []bool{true, true, false, true})
	b.Field(1).(*array.BooleanBuilder).AppendValues([]bool{true, false, true, true}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()

	cases := []evalCase{
		{"u + 1", `eval error: column 1: value 18446744073709551615 of uint64 column "u" at row 1 overflows int64`},
		{"2 * u", `eval error: column 5: value 18446744073709551615 of uint64 column "u" at row 1 overflows int64`},
		{"if(ok, u, 0)", "1, 0, null, 7"}, // row 1 is not used; row 2 is null
		{"ok and u > 0", "true, false, null, true"},
		{"u", "1, 18446744073709551615, null, 7"}, // bare: the column itself
	}
	for _, tc := range cases {
		e, err := Compile(tc.src, schema)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.src, err)
		}
		out, err := e.Eval(rec)
		var got string
		if err != nil {
			got = "eval error: " + err.Error()
		} else {
			if u, ok := out.(*array.Uint64); ok {
				parts := make([]string, u.Len())
				for i := range parts {
					parts[i] = u.ValueStr(i)
					if u.IsNull(i) {
						parts[i] = "null"
					}
				}
				got = strings.Join(parts, ", ")
			} else {
				got = render(out)
			}
			out.Release()
		}
		if got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.src, got, tc.want)
		}
	}
}

func TestEvalMask(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	cases := []struct {
		src  string
		want []bool
	}{
		{"i > 0", []bool{true, false, false, true}},
		{"b", []bool{true, false, false, true}},
		{"not b", []bool{false, true, false, false}},
		{"b or i > 0", []bool{true, false, false, true}},
		{"b and s == 'DE'", []bool{true, false, false, false}},
		{"true", []bool{true, true, true, true}},
		{"false", []bool{false, false, false, false}},
		{"null and true", []bool{false, false, false, false}},
		{"i is null", []bool{false, true, false, false}},
		{"i in (1, null)", []bool{true, false, false, false}},
		{"i not in (1, null)", []bool{false, false, false, false}},
	}
	for _, tc := range cases {
		e, err := Compile(tc.src, testSchema)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.src, err)
		}
		got, err := e.EvalMask(rec)
		if err != nil {
			t.Errorf("EvalMask(%q): %v", tc.src, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("EvalMask(%q) = %v, want %v", tc.src, got, tc.want)
		}
	}
	for _, src := range []string{"i", "i + 1", "null", "s"} {
		e, err := Compile(src, testSchema)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.EvalMask(rec); err == nil || !strings.Contains(err.Error(), "a filter needs bool") {
			t.Errorf("EvalMask(%q): err = %v, want a type error", src, err)
		}
	}
	e, _ := Compile("i * 9223372036854775807 > 0", testSchema)
	var ee *Error
	if _, err := e.EvalMask(rec); !errors.As(err, &ee) || ee.Pos != 1 {
		t.Errorf("EvalMask overflow: err = %v, want *Error at column 1", err)
	}
}

// TestSlicedRecord checks that array offsets are honored.
func TestSlicedRecord(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	full := testRecord(t, mem)
	defer full.Release()
	rec := full.NewSlice(1, 4)
	defer rec.Release()
	cases := []evalCase{
		{"i + j", "null, -4, null"},
		{"s == 'fr'", "true, null, false"},
		{"ls", `null, "Ünï", ""`},
		{"upper(ls)", `null, "ÜNÏ", ""`},
		{"b", "false, null, true"},
		{"not b", "true, null, false"},
		{"tss + 1500", "t0, null, t3"},
		{"f32 + u8", "null, null, 254"},
		{"to_string(f)", `"-2.5", null, "0"`},
	}
	for _, tc := range cases {
		e, err := Compile(tc.src, testSchema)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.src, err)
		}
		out, err := e.Eval(rec)
		if err != nil {
			t.Errorf("Eval(%q): %v", tc.src, err)
			continue
		}
		if got := render(out); got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.src, got, tc.want)
		}
		out.Release()
	}
}

func TestEmptyRecord(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	full := testRecord(t, mem)
	defer full.Release()
	rec := full.NewSlice(0, 0)
	defer rec.Release()
	for _, src := range []string{"i + 1", "9223372036854775807 + 1", "s + 'x'", "b", "i > 0", "1", "null", "concat(s)", "to_string(ts)"} {
		e, err := Compile(src, testSchema)
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Eval(rec)
		if err != nil {
			t.Errorf("Eval(%q) on 0 rows: %v", src, err)
			continue
		}
		if out.Len() != 0 {
			t.Errorf("Eval(%q) on 0 rows: %d rows", src, out.Len())
		}
		out.Release()
	}
}

func TestConcurrentEval(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	e, err := Compile("if(s in ('DE', 'fr'), lower(s) + to_string(i * 2), concat('x', ls)) == 'de2' or ts > '1970-01-01T00:00:01Z'", testSchema)
	if err != nil {
		t.Fatal(err)
	}
	want, err := e.EvalMask(rec)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				got, err := e.EvalMask(rec)
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("concurrent EvalMask = %v, %v; want %v", got, err, want)
					return
				}
				out, err := e.Eval(rec)
				if err != nil {
					t.Error(err)
					return
				}
				out.Release()
			}
		}()
	}
	wg.Wait()
}

// TestShortRecord checks a record whose columns are longer than its row
// count, which Arrow allows: only the first NumRows() rows count.
func TestShortRecord(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	full := testRecord(t, mem)
	defer full.Release()
	rec := array.NewRecordBatch(testSchema, full.Columns(), 2)
	defer rec.Release()
	cases := []evalCase{
		{"i + j", "3, null"},
		{"s", `"DE", "fr"`},
		{"s == 'fr'", "false, true"},
		{"f32", "0.5, null"},
	}
	for _, tc := range cases {
		e, err := Compile(tc.src, testSchema)
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Eval(rec)
		if err != nil {
			t.Errorf("Eval(%q): %v", tc.src, err)
			continue
		}
		if got := render(out); got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.src, got, tc.want)
		}
		out.Release()
		if e.Type().ID() == arrow.BOOL {
			if m, err := e.EvalMask(rec); err != nil || len(m) != 2 {
				t.Errorf("EvalMask(%q) = %v, %v", tc.src, m, err)
			}
		}
	}
}
