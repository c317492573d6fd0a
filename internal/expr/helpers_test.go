package expr

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var (
	tsMs = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	tsNs = &arrow.TimestampType{Unit: arrow.Nanosecond}
	tsS  = &arrow.TimestampType{Unit: arrow.Second, TimeZone: "Europe/Berlin"}
)

// testSchema is the schema of testRecord.
var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "j", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
	{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "ts", Type: tsMs, Nullable: true},
	{Name: "tsn", Type: tsNs, Nullable: true},
	{Name: "tss", Type: tsS, Nullable: true},
	{Name: "order id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "lst", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
}, nil)

// testRecord returns a 4-row record of testSchema:
//
//	row  i     j     f     f32   i32   u8    u64   s          ls     b      ts     tsn            tss
//	0    1     2     1.5   0.5   10    1     1     "DE"       "x"    true   1000   1000000000     1
//	1    null  0     -2.5  null  -3    2     2     "fr"       null   false  -1     -1             -1
//	2    -7    3     null  2     null  null  null  null       "Ünï"  null   null   null           null
//	3    10    null  0     -1    7     255   3     "Ünïcödé"  ""     true   1500   1500000000     2
//
// "order id" is 100, 200, 300, 400; lst is an empty list in every row.
func testRecord(t testing.TB, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, testSchema)
	defer b.Release()
	v := []bool{true, false, true, true}
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 0, -7, 10}, v)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{2, 0, 3, 0}, []bool{true, true, true, false})
	b.Field(2).(*array.Float64Builder).AppendValues([]float64{1.5, -2.5, 0, 0}, []bool{true, true, false, true})
	b.Field(3).(*array.Float32Builder).AppendValues([]float32{0.5, 0, 2, -1}, v)
	b.Field(4).(*array.Int32Builder).AppendValues([]int32{10, -3, 0, 7}, []bool{true, true, false, true})
	b.Field(5).(*array.Uint8Builder).AppendValues([]uint8{1, 2, 0, 255}, []bool{true, true, false, true})
	b.Field(6).(*array.Uint64Builder).AppendValues([]uint64{1, 2, 0, 3}, []bool{true, true, false, true})
	b.Field(7).(*array.StringBuilder).AppendValues([]string{"DE", "fr", "", "Ünïcödé"}, []bool{true, true, false, true})
	b.Field(8).(*array.LargeStringBuilder).AppendValues([]string{"x", "", "Ünï", ""}, []bool{true, false, true, true})
	b.Field(9).(*array.BooleanBuilder).AppendValues([]bool{true, false, false, true}, []bool{true, true, false, true})
	b.Field(10).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1000, -1, 0, 1500}, []bool{true, true, false, true})
	b.Field(11).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1e9, -1, 0, 1.5e9}, []bool{true, true, false, true})
	b.Field(12).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1, -1, 0, 2}, []bool{true, true, false, true})
	b.Field(13).(*array.Int64Builder).AppendValues([]int64{100, 200, 300, 400}, nil)
	lb := b.Field(14).(*array.ListBuilder)
	for range 4 {
		lb.Append(true)
	}
	return b.NewRecordBatch()
}

// render formats the values of arr as "v0, v1, ...", with null for nulls,
// quoted strings, and timestamps as their raw ticks.
func render(arr arrow.Array) string {
	parts := make([]string, arr.Len())
	for i := range parts {
		if arr.IsNull(i) || arr.DataType().ID() == arrow.NULL {
			parts[i] = "null"
			continue
		}
		switch a := arr.(type) {
		case *array.Int64:
			parts[i] = strconv.FormatInt(a.Value(i), 10)
		case *array.Int32:
			parts[i] = strconv.FormatInt(int64(a.Value(i)), 10)
		case *array.Float64:
			parts[i] = formatTestFloat(a.Value(i))
		case *array.Float32:
			parts[i] = formatTestFloat(float64(a.Value(i)))
		case *array.String:
			parts[i] = strconv.Quote(a.Value(i))
		case *array.LargeString:
			parts[i] = strconv.Quote(a.Value(i))
		case *array.Boolean:
			parts[i] = strconv.FormatBool(a.Value(i))
		case *array.Timestamp:
			parts[i] = "t" + strconv.FormatInt(int64(a.Value(i)), 10)
		default:
			parts[i] = fmt.Sprint(arr.GetOneForMarshal(i))
		}
	}
	return strings.Join(parts, ", ")
}

func formatTestFloat(f float64) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// evalString compiles src against testSchema, evaluates it on the test
// record and renders the result, or returns the error text.
func evalString(t *testing.T, src string, fold bool) (string, arrow.DataType) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	e, err := compile(src, testSchema, fold)
	if err != nil {
		return "compile error: " + err.Error(), nil
	}
	out, err := e.Eval(rec)
	if err != nil {
		return "eval error: " + err.Error(), nil
	}
	defer out.Release()
	if out.Len() != int(rec.NumRows()) {
		t.Errorf("%s: result has %d rows, want %d", src, out.Len(), rec.NumRows())
	}
	if !arrow.TypeEqual(out.DataType(), e.Type()) {
		t.Errorf("%s: result type %s, Type() says %s", src, out.DataType(), e.Type())
	}
	return render(out), out.DataType()
}

type evalCase struct {
	src  string
	want string // rendered result, or "compile error: ..." / "eval error: ..." prefix
}

// runEvalCases checks each case with and without constant folding.
func runEvalCases(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, tc := range cases {
		for _, fold := range []bool{true, false} {
			got, _ := evalString(t, tc.src, fold)
			if got != tc.want && !(strings.HasSuffix(tc.want, "...") && strings.HasPrefix(got, strings.TrimSuffix(tc.want, "..."))) {
				t.Errorf("%s (fold=%v):\n got  %s\n want %s", tc.src, fold, got, tc.want)
			}
		}
	}
}
