package arrowjson

import (
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// oneColumn builds a one-column record from arrow-go's JSON form of the
// column's values.
func oneColumn(t *testing.T, mem memory.Allocator, typ arrow.DataType, values string) arrow.RecordBatch {
	t.Helper()
	arr, _, err := array.FromJSON(mem, typ, strings.NewReader(values))
	if err != nil {
		t.Fatalf("building %s from %s: %v", typ, values, err)
	}
	defer arr.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "c", Type: typ, Nullable: true}}, nil)
	return array.NewRecordBatch(schema, []arrow.Array{arr}, int64(arr.Len()))
}

func encodeStrings(t *testing.T, rec arrow.RecordBatch, include []string) []string {
	t.Helper()
	rows, err := Encode(rec, include)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = string(r)
	}
	return out
}

func wantRows(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d rows %q, want %d rows %q", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// The expected strings below come from reading arrow-rs 58.4.0
// (arrow-json/src/writer/encoder.rs make_encoder and the encoders it
// picks; arrow-cast/src/display.rs for temporal and decimal types), the
// lexical-core float writer it calls and serde_json's string escaping.
func TestEncodeTypes(t *testing.T) {
	cases := []struct {
		name   string
		typ    arrow.DataType
		values string
		want   []string
	}{
		// PrimitiveEncoder with lexical_core::write for integers.
		{"int8", arrow.PrimitiveTypes.Int8, `[-128, 127, null]`,
			[]string{`{"c":-128}`, `{"c":127}`, `{}`}},
		{"int64", arrow.PrimitiveTypes.Int64, `[-9223372036854775808, 9223372036854775807, 0]`,
			[]string{`{"c":-9223372036854775808}`, `{"c":9223372036854775807}`, `{"c":0}`}},
		{"uint64", arrow.PrimitiveTypes.Uint64, `[18446744073709551615]`,
			[]string{`{"c":18446744073709551615}`}},
		// float_encode: lexical_core::write, plain within decimal exponents
		// [-5, 9] (lexical-write-float shared.rs write_float), ".0" kept on
		// integers (algorithm.rs write_float_positive_exponent, trim_floats
		// false), "d.0eN" scientific (write_float_scientific).
		{"float64", arrow.PrimitiveTypes.Float64,
			`[10.0, 0.1, 3.141592653589793, -2.5, 0.0, 123456789.0, 1234567890.0, 12345678901.0, 1e10, 1.5e-7, 0.00001, 0.000001, 1e300, 5e-324, 1.7976931348623157e308]`,
			[]string{`{"c":10.0}`, `{"c":0.1}`, `{"c":3.141592653589793}`, `{"c":-2.5}`, `{"c":0.0}`,
				`{"c":123456789.0}`, `{"c":1234567890.0}`, `{"c":1.2345678901e10}`, `{"c":1.0e10}`,
				`{"c":1.5e-7}`, `{"c":0.00001}`, `{"c":1.0e-6}`, `{"c":1.0e300}`, `{"c":5.0e-324}`,
				`{"c":1.7976931348623157e308}`}},
		// Shortest digits of the float32 value, not of its float64 widening.
		{"float32", arrow.PrimitiveTypes.Float32, `[0.1, 16777216.0, 1e-7]`,
			[]string{`{"c":0.1}`, `{"c":16777216.0}`, `{"c":1.0e-7}`}},
		// BooleanEncoder.
		{"bool", arrow.FixedWidthTypes.Boolean, `[true, false, null]`,
			[]string{`{"c":true}`, `{"c":false}`, `{}`}},
		// NullEncoder: every value null, so the key is never written.
		{"null", arrow.Null, `[null, null]`, []string{`{}`, `{}`}},
		// encode_string through serde_json: short escapes, \u00XX for other
		// control bytes, '/', DEL and non-ASCII as is.
		{"utf8", arrow.BinaryTypes.String, `["a\"b\\c", "\n\t\r\b\f\u0001\u001f", "/é😀\u007f", ""]`,
			[]string{`{"c":"a\"b\\c"}`, `{"c":"\n\t\r\b\f\u0001\u001f"}`, "{\"c\":\"/é😀\x7f\"}", `{"c":""}`}},
		{"large_utf8", arrow.BinaryTypes.LargeString, `["x"]`, []string{`{"c":"x"}`}},
		// BinaryEncoder: lowercase hex pairs in a string (arrow-go's JSON
		// form of binary is base64: "AKv/" is 00 ab ff).
		{"binary", arrow.BinaryTypes.Binary, `["AKv/", ""]`, []string{`{"c":"00abff"}`, `{"c":""}`}},
		// ListLikeEncoder: null elements written as null.
		{"list", arrow.ListOf(arrow.PrimitiveTypes.Int64), `[[1, null, 3], [], null]`,
			[]string{`{"c":[1,null,3]}`, `{"c":[]}`, `{}`}},
		{"large_list", arrow.LargeListOf(arrow.BinaryTypes.String), `[["a", null]]`, []string{`{"c":["a",null]}`}},
		{"list_view", arrow.ListViewOf(arrow.PrimitiveTypes.Int64), `[[1, 2], null, []]`,
			[]string{`{"c":[1,2]}`, `{}`, `{"c":[]}`}},
		{"string_view", arrow.BinaryTypes.StringView, `["a\nb"]`, []string{`{"c":"a\nb"}`}},
		{"binary_view", arrow.BinaryTypes.BinaryView, `["AAE="]`, []string{`{"c":"0001"}`}},
		{"fixed_size_binary", &arrow.FixedSizeBinaryType{ByteWidth: 2}, `["/wA="]`, []string{`{"c":"ff00"}`}},
		{"fixed_size_list", arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32), `[[1, 2], [null, 4]]`,
			[]string{`{"c":[1,2]}`, `{"c":[null,4]}`}},
		// StructArrayEncoder: null fields dropped (explicit_nulls false).
		{"struct", arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "b\"q", Type: arrow.BinaryTypes.String, Nullable: true}),
			`[{"a": 1, "b\"q": "x"}, {"a": null, "b\"q": "y"}, null, {"a": null, "b\"q": null}]`,
			[]string{`{"c":{"a":1,"b\"q":"x"}}`, `{"c":{"b\"q":"y"}}`, `{}`, `{"c":{}}`}},
		{"list_of_struct", arrow.ListOf(arrow.StructOf(arrow.Field{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true})),
			`[[{"k": 1}, null, {"k": null}]]`, []string{`{"c":[{"k":1},null,{}]}`}},
		// MapEncoder: string keys, null values skipped.
		{"map", arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64),
			`[[{"key": "x", "value": 1}, {"key": "y", "value": null}], []]`,
			[]string{`{"c":{"x":1}}`, `{"c":{}}`}},
		// Decimals: RawArrayFormatter, unquoted format_decimal_str.
		{"dec128", &arrow.Decimal128Type{Precision: 5, Scale: 2}, `["123.45", "-0.05", "0.00", "1.5"]`,
			[]string{`{"c":123.45}`, `{"c":-0.05}`, `{"c":0.00}`, `{"c":1.50}`}},
		{"dec256", &arrow.Decimal256Type{Precision: 40, Scale: 3}, `["-1234567890123456789012345.678"]`,
			[]string{`{"c":-1234567890123456789012345.678}`}},
		{"dec32_negative_scale", &arrow.Decimal32Type{Precision: 5, Scale: -2}, `["12300"]`, []string{`{"c":12300}`}},
		{"dec128_scale0", &arrow.Decimal128Type{Precision: 10, Scale: 0}, `["-42"]`, []string{`{"c":-42}`}},
		// Temporal types: JsonArrayFormatter, quoted chrono Debug forms.
		{"date32", arrow.FixedWidthTypes.Date32, `["2024-01-31", "1969-12-31"]`,
			[]string{`{"c":"2024-01-31"}`, `{"c":"1969-12-31"}`}},
		{"date64", arrow.FixedWidthTypes.Date64, `["2024-01-31"]`, []string{`{"c":"2024-01-31T00:00:00"}`}},
		{"time32s", arrow.FixedWidthTypes.Time32s, `["01:01:01"]`, []string{`{"c":"01:01:01"}`}},
		{"time32ms", arrow.FixedWidthTypes.Time32ms, `["12:34:56.5"]`, []string{`{"c":"12:34:56.500"}`}},
		{"time64us", arrow.FixedWidthTypes.Time64us, `["00:00:00.000001", "23:59:59.1234"]`,
			[]string{`{"c":"00:00:00.000001"}`, `{"c":"23:59:59.123400"}`}},
		{"time64ns", arrow.FixedWidthTypes.Time64ns, `["00:00:00.000000001"]`, []string{`{"c":"00:00:00.000000001"}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			rec := oneColumn(t, mem, c.typ, c.values)
			defer rec.Release()
			wantRows(t, encodeStrings(t, rec, nil), c.want...)
		})
	}
}

// Timestamps: arrow-cast display.rs write_timestamp; chrono's NaiveDateTime
// Debug without a zone, to_rfc3339_opts(AutoSi, use_z) with one.
func TestEncodeTimestamps(t *testing.T) {
	cases := []struct {
		unit arrow.TimeUnit
		tz   string
		v    int64
		want string
	}{
		{arrow.Millisecond, "", 1, `"1970-01-01T00:00:00.001"`},
		{arrow.Millisecond, "", -1, `"1969-12-31T23:59:59.999"`},
		{arrow.Second, "", 0, `"1970-01-01T00:00:00"`},
		{arrow.Microsecond, "", 1_000_001, `"1970-01-01T00:00:01.000001"`},
		{arrow.Microsecond, "", 1_100_000, `"1970-01-01T00:00:01.100"`},
		{arrow.Nanosecond, "", 1, `"1970-01-01T00:00:00.000000001"`},
		{arrow.Second, "", 1706702400, `"2024-01-31T12:00:00"`},
		{arrow.Millisecond, "UTC", 1, `"1970-01-01T00:00:00.001Z"`},
		{arrow.Second, "+00:00", 0, `"1970-01-01T00:00:00Z"`},
		{arrow.Second, "+05:30", 0, `"1970-01-01T05:30:00+05:30"`},
		{arrow.Second, "-0800", 0, `"1969-12-31T16:00:00-08:00"`},
		{arrow.Second, "+02", 0, `"1970-01-01T02:00:00+02:00"`},
		{arrow.Second, "America/New_York", 1706702400, `"2024-01-31T07:00:00-05:00"`},
	}
	for _, c := range cases {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		typ := &arrow.TimestampType{Unit: c.unit, TimeZone: c.tz}
		b := array.NewTimestampBuilder(mem, typ)
		b.Append(arrow.Timestamp(c.v))
		arr := b.NewArray()
		b.Release()
		rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "t", Type: typ, Nullable: true}}, nil), []arrow.Array{arr}, 1)
		arr.Release()
		wantRows(t, encodeStrings(t, rec, nil), `{"t":`+c.want+`}`)
		rec.Release()
		mem.AssertSize(t, 0)
	}
}

func TestEncodeFloatSpecialsAndHalf(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fb := array.NewFloat64Builder(mem)
	defer fb.Release()
	fb.AppendValues([]float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}, nil)
	f := fb.NewArray()
	defer f.Release()
	hb := array.NewFloat16Builder(mem)
	defer hb.Release()
	hb.AppendValues([]float16.Num{float16.New(1.5), float16.New(0.1), float16.New(2), float16.New(-0.5)}, nil)
	h := hb.NewArray()
	defer h.Release()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "h", Type: arrow.FixedWidthTypes.Float16, Nullable: true},
	}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{f, h}, 4)
	defer rec.Release()
	// float_encode writes NaN and infinities as null (a JSON null, not an
	// omitted key); f16 goes through f32 (0.1 in half precision is
	// 0.0999755859375, whose shortest float32 form is 0.099975586).
	wantRows(t, encodeStrings(t, rec, nil),
		`{"f":null,"h":1.5}`, `{"f":null,"h":0.099975586}`, `{"f":null,"h":2.0}`, `{"f":-0.0,"h":-0.5}`)
}

func TestEncodeColumnsIncludeAndDictionary(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dictType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	db := array.NewDictionaryBuilder(mem, dictType).(*array.BinaryDictionaryBuilder)
	defer db.Release()
	for _, s := range []string{"red", "green", "red"} {
		if err := db.AppendString(s); err != nil {
			t.Fatal(err)
		}
	}
	dict := db.NewArray()
	defer dict.Release()
	ib := array.NewInt64Builder(mem)
	defer ib.Release()
	ib.AppendValues([]int64{3, 2, 1}, []bool{true, false, true})
	ints := ib.NewArray()
	defer ints.Release()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "z", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "colour", Type: dictType, Nullable: true},
	}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{ints, dict}, 3)
	defer rec.Release()

	// Keys follow column order, not name order.
	wantRows(t, encodeStrings(t, rec, nil), `{"z":3,"colour":"red"}`, `{"colour":"green"}`, `{"z":1,"colour":"red"}`)
	// include selects columns, keeps schema order, ignores unknown names.
	wantRows(t, encodeStrings(t, rec, []string{"colour", "nope"}), `{"colour":"red"}`, `{"colour":"green"}`, `{"colour":"red"}`)
	// A slice starts at its own first row.
	sl := rec.NewSlice(1, 3)
	defer sl.Release()
	wantRows(t, encodeStrings(t, sl, nil), `{"colour":"green"}`, `{"z":1,"colour":"red"}`)
	// No rows, no lines.
	empty := rec.NewSlice(0, 0)
	defer empty.Release()
	wantRows(t, encodeStrings(t, empty, nil))
}

func TestEncodeSlicedStruct(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	typ := arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	rec := oneColumn(t, mem, typ, `[{"a": 1}, {"a": null}, {"a": 3}]`)
	defer rec.Release()
	sl := rec.NewSlice(1, 3)
	defer sl.Release()
	wantRows(t, encodeStrings(t, sl, nil), `{"c":{}}`, `{"c":{"a":3}}`)
}

func TestEncodeErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cases := []struct {
		typ    arrow.DataType
		values string
		want   string
	}{
		{arrow.FixedWidthTypes.Duration_s, `[1]`, `column "c": type duration[s] cannot be written as JSON`},
		{arrow.MapOf(arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int64), `[[{"key": 1, "value": 2}]]`, `column "c": map keys of type int64`},
		{arrow.FixedWidthTypes.Time32s, `[86400]`, `row 0: column "c" time of day 86400s outside one day`},
	}
	for _, c := range cases {
		rec := oneColumn(t, mem, c.typ, c.values)
		rows, err := Encode(rec, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || rows != nil {
			t.Errorf("%s: got rows %q, error %v; want error containing %q", c.typ, rows, err, c.want)
		}
		rec.Release()
	}
	// Strings that are not UTF-8 (arrow-go, unlike arrow-rs, can hold them).
	sb := array.NewStringBuilder(mem)
	sb.Append("ok")
	sb.Append("bad\xff")
	bad := sb.NewArray()
	sb.Release()
	badRec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil), []arrow.Array{bad}, 2)
	bad.Release()
	if rows, err := Encode(badRec, nil); err == nil || err.Error() != `row 1: column "s" string "bad\xff" is not valid UTF-8` || rows != nil {
		t.Errorf("invalid UTF-8: got %q, %v", rows, err)
	}
	badRec.Release()

	// A time zone arrow-rs could not parse either.
	typ := &arrow.TimestampType{Unit: arrow.Second, TimeZone: "Mars/Olympus"}
	b := array.NewTimestampBuilder(mem, typ)
	b.Append(0)
	arr := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "c", Type: typ}}, nil), []arrow.Array{arr}, 1)
	arr.Release()
	defer rec.Release()
	if _, err := Encode(rec, nil); err == nil || !strings.Contains(err.Error(), `column "c": time zone "Mars/Olympus"`) {
		t.Errorf("unknown zone: got %v", err)
	}
}

func TestAppendValue(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	in := oneColumn(t, mem, arrow.PrimitiveTypes.Int64, `[1, null]`)
	defer in.Release()
	out, err := appendValueColumn(mem, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	want := arrow.NewSchema([]arrow.Field{
		{Name: "c", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "__value__", Type: arrow.BinaryTypes.Binary},
	}, nil)
	if !out.Schema().Equal(want) {
		t.Fatalf("schema %s, want %s", out.Schema(), want)
	}
	v := out.Column(1).(*array.Binary)
	if got := []string{v.ValueString(0), v.ValueString(1)}; got[0] != `{"c":1}` || got[1] != `{}` {
		t.Fatalf("values %q", got)
	}

	// Applied again: the old __value__ is encoded (hex, as binary) and then
	// replaced, so there is one __value__, last.
	again, err := appendValueColumn(mem, out, []string{"__value__"})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if again.NumCols() != 2 || again.Schema().Field(1).Name != "__value__" || again.Schema().Field(0).Name != "c" {
		t.Fatalf("schema %s", again.Schema())
	}
	if got := again.Column(1).(*array.Binary).ValueString(1); got != `{"__value__":"7b7d"}` {
		t.Fatalf("value %s", got)
	}
}
