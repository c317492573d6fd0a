package arrowjson

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func f(name string, typ arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: typ, Nullable: true}
}

var (
	i64   = arrow.PrimitiveTypes.Int64
	f64   = arrow.PrimitiveTypes.Float64
	utf8T = arrow.BinaryTypes.String
	boo   = arrow.FixedWidthTypes.Boolean
)

func values(rows ...string) [][]byte {
	out := make([][]byte, len(rows))
	for i, r := range rows {
		out[i] = []byte(r)
	}
	return out
}

// checkRecord compares got with the record arrow-go's own JSON reader
// builds from want (a JSON array of row objects) under schema fields.
func checkRecord(t *testing.T, mem memory.Allocator, got arrow.RecordBatch, fields []arrow.Field, want string) {
	t.Helper()
	schema := arrow.NewSchema(fields, nil)
	if !got.Schema().Equal(schema) {
		t.Fatalf("schema:\n got %s\nwant %s", got.Schema(), schema)
	}
	exp, _, err := array.RecordFromJSON(mem, schema, strings.NewReader(want))
	if err != nil {
		t.Fatalf("building the expected record: %v", err)
	}
	defer exp.Release()
	if !array.RecordEqual(got, exp) {
		t.Fatalf("record:\n got %v\nwant %v", got, exp)
	}
}

// decodeCases: payloads, the expected schema and the expected values in
// arrow-go's JSON form of a record.
var decodeCases = []struct {
	name    string
	rows    []string
	include []string
	fields  []arrow.Field
	want    string
}{
	{
		// The shape of ArkFlow's own json_to_arrow test: one row, every
		// JSON type. u64::MAX is not an i64, so arrow-json infers Float64.
		name: "every JSON type",
		rows: []string{`{"null_field":null,"bool_field":true,"int_field":42,"uint_field":18446744073709551615,"float_field":3.141592653589793,"string_field":"hello","array_field":[1,2,3],"object_field":{"key":"value"}}`},
		fields: []arrow.Field{f("null_field", arrow.Null), f("bool_field", boo), f("int_field", i64),
			f("uint_field", f64), f("float_field", f64), f("string_field", utf8T),
			f("array_field", arrow.ListOf(i64)), f("object_field", arrow.StructOf(f("key", utf8T)))},
		want: `[{"null_field":null,"bool_field":true,"int_field":42,"uint_field":18446744073709551615,"float_field":3.141592653589793,"string_field":"hello","array_field":[1,2,3],"object_field":{"key":"value"}}]`,
	},
	{
		name:   "same shape in every row, keys in first-appearance order",
		rows:   []string{`{"name":"Alice","age":30}`, `{"name":"Bob","age":25}`},
		fields: []arrow.Field{f("name", utf8T), f("age", i64)},
		want:   `[{"name":"Alice","age":30},{"name":"Bob","age":25}]`,
	},
	{
		name:   "int and float widen to float, null takes the other rows' type",
		rows:   []string{`{"a":1,"b":null}`, `{"a":2.5,"b":"x"}`, `{"a":-3}`},
		fields: []arrow.Field{f("a", f64), f("b", utf8T)},
		want:   `[{"a":1,"b":null},{"a":2.5,"b":"x"},{"a":-3,"b":null}]`,
	},
	{
		name:   "keys first seen in later rows become columns; missing keys are null",
		rows:   []string{`{"a":1}`, `{"b":true,"a":2}`, `{"c":"z"}`},
		fields: []arrow.Field{f("a", i64), f("b", boo), f("c", utf8T)},
		want:   `[{"a":1},{"a":2,"b":true},{"c":"z"}]`,
	},
	{
		name:   "number forms: exponent and fraction are float, -0 is float, int64 bounds stay int",
		rows:   []string{`{"e":1e2,"z":-0,"lo":-9223372036854775808,"hi":9223372036854775807,"o":9223372036854775808}`},
		fields: []arrow.Field{f("e", f64), f("z", f64), f("lo", i64), f("hi", i64), f("o", f64)},
		want:   `[{"e":100,"z":-0.0,"lo":-9223372036854775808,"hi":9223372036854775807,"o":9223372036854775808}]`,
	},
	{
		name:   "nested objects union their fields over rows",
		rows:   []string{`{"o":{"x":1}}`, `{"o":null}`, `{"o":{"y":"s","x":2.5}}`},
		fields: []arrow.Field{f("o", arrow.StructOf(f("x", f64), f("y", utf8T)))},
		want:   `[{"o":{"x":1}},{"o":null},{"o":{"x":2.5,"y":"s"}}]`,
	},
	{
		name: "array element types over all rows; empty arrays alone give Null, nulls alone Utf8",
		rows: []string{`{"l":[],"e":[],"n":[null],"m":[]}`, `{"l":[1,null],"e":[],"n":[],"m":[[]]}`, `{"l":[2.5]}`},
		fields: []arrow.Field{f("l", arrow.ListOf(f64)), f("e", arrow.ListOf(arrow.Null)),
			f("n", arrow.ListOf(utf8T)), f("m", arrow.ListOf(arrow.ListOf(arrow.Null)))},
		want: `[{"l":[],"e":[],"n":[null],"m":[]},{"l":[1,null],"e":[],"n":[],"m":[[]]},{"l":[2.5]}]`,
	},
	{
		name:   "arrays of objects",
		rows:   []string{`{"l":[{"a":1},null,{"b":"x"}]}`},
		fields: []arrow.Field{f("l", arrow.ListOf(arrow.StructOf(f("a", i64), f("b", utf8T))))},
		want:   `[{"l":[{"a":1},null,{"b":"x"}]}]`,
	},
	{
		name:   "strings: escapes, surrogate pairs, raw unicode",
		rows:   []string{`{"s":"q\"b\\s\/n\n\u00e9\ud83d\ude00 é"}`},
		fields: []arrow.Field{f("s", utf8T)},
		want:   `[{"s":"q\"b\\s/n\né😀 é"}]`,
	},
	{
		name:   "duplicate key: last value, first position",
		rows:   []string{`{"a":1,"b":2,"a":3}`},
		fields: []arrow.Field{f("a", i64), f("b", i64)},
		want:   `[{"a":3,"b":2}]`,
	},
	{
		name:   "whitespace and newlines inside a value",
		rows:   []string{"\n{\n  \"a\" : [ 1 ,\r\n 2 ]\t}\n"},
		fields: []arrow.Field{f("a", arrow.ListOf(i64))},
		want:   `[{"a":[1,2]}]`,
	},
	{
		name:    "include keeps first-appearance order and skips other fields, even conflicting ones",
		rows:    []string{`{"x":1,"b":"s","a":true}`, `{"x":"now a string","a":false}`},
		include: []string{"a", "b", "absent"},
		fields:  []arrow.Field{f("b", utf8T), f("a", boo)},
		want:    `[{"b":"s","a":true},{"a":false}]`,
	},
	{
		name:   "empty object rows",
		rows:   []string{`{}`, `{}`},
		fields: []arrow.Field{},
		want:   `[{},{}]`,
	},
}

func TestDecodeValues(t *testing.T) {
	for _, c := range decodeCases {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			rows := make([]int, len(c.rows))
			for i := range rows {
				rows[i] = i
			}
			got, err := decodeRows(mem, values(c.rows...), rows, c.include)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if got.NumRows() != int64(len(c.rows)) {
				t.Fatalf("%d rows, want %d", got.NumRows(), len(c.rows))
			}
			if len(c.fields) > 0 {
				checkRecord(t, mem, got, c.fields, c.want)
			} else if got.NumCols() != 0 {
				t.Fatalf("schema %s, want no columns", got.Schema())
			}
		})
	}
}

func TestDecodeEmptyBatch(t *testing.T) {
	rec, err := DecodeValues(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumRows() != 0 || rec.NumCols() != 0 {
		t.Fatalf("got %d rows, %d columns", rec.NumRows(), rec.NumCols())
	}
}

// Decode reads the value column of a record: binary or string, null values
// skipped (ArkFlow's to_binary skips them), errors numbered by record row.
func TestDecodeRecordColumn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	bb := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	bb.AppendValues([][]byte{[]byte(`{"a":1}`), nil, []byte(`{"a":2}`)}, []bool{true, false, true})
	bin := bb.NewArray()
	bb.Release()
	defer bin.Release()
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{`{"b":"x"}`, `{"b":"y"}`, `[1]`}, nil)
	str := sb.NewArray()
	sb.Release()
	defer str.Release()
	ib := array.NewInt64Builder(mem)
	ib.AppendValues([]int64{1, 2, 3}, nil)
	ints := ib.NewArray()
	ib.Release()
	defer ints.Release()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "__value__", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "text", Type: arrow.BinaryTypes.String},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{bin, str, ints}, 3)
	defer rec.Release()

	got, err := decode(mem, rec, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, mem, got, []arrow.Field{f("a", i64)}, `[{"a":1},{"a":2}]`)
	got.Release()

	sliced := rec.NewSlice(0, 2)
	defer sliced.Release()
	got, err = decode(mem, sliced, "text", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, mem, got, []arrow.Field{f("b", utf8T)}, `[{"b":"x"},{"b":"y"}]`)
	got.Release()

	for _, c := range []struct{ field, want string }{
		{"text", `row 2: expected a JSON object, found an array`},
		{"n", `column "n": type int64 is not binary or string`},
		{"missing", `column "missing" not found`},
	} {
		got, err := decode(mem, rec, c.field, nil)
		if err == nil || err.Error() != c.want || got != nil {
			t.Errorf("field %s: got %v, %v; want error %q", c.field, got, err, c.want)
		}
	}
}

// Every error names the 0-based row and, where the error is inside one, the
// field; nothing is returned with it.
func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		rows []string
		want string
	}{
		{[]string{`{"a":1}`, `[1,2]`}, `row 1: expected a JSON object, found an array`},
		{[]string{`"x"`}, `row 0: expected a JSON object, found a string`},
		{[]string{`{}`, `{}`, `5`}, `row 2: expected a JSON object, found a number`},
		{[]string{`{}`, `null`}, `row 1: expected a JSON object, found null`},
		{[]string{`{"a":1}`, `not a json object`}, `row 1: invalid JSON at offset 0: unexpected character 'n'`},
		{[]string{`{"a":1,}`}, `row 0: invalid JSON at offset 7: expected a string key`},
		{[]string{`{"a":1} 2`}, `row 0: expected a JSON object, found a number (value 2 of the payload's 2)`},
		{[]string{"{\"a\":1}\n{\"a\":"}, `row 0: field "a": invalid JSON at offset 13: unexpected end of input`},
		{[]string{`{"a":"\ud800"}`}, `row 0: field "a": invalid JSON at offset 6: lone surrogate in a \u escape`},
		{[]string{"{\"a\":\"\xff\"}"}, `row 0: invalid JSON: not valid UTF-8`},
		{[]string{`{"a":"\udc00\ud800"}`}, `row 0: field "a": invalid JSON at offset 6: lone surrogate in a \u escape`},
		{[]string{`{"a":"\ud800\u0041"}`}, `row 0: field "a": invalid JSON at offset 6: lone surrogate in a \u escape`},
		{[]string{`{"a":"\u12"}`}, `row 0: field "a": invalid JSON at offset 6: invalid \u escape`},
		{[]string{`{"a":1e400}`}, `row 0: field "a": invalid JSON at offset 5: number 1e400 out of range`},
		{[]string{`{"a":01}`}, `row 0: invalid JSON at offset 6: expected ',' or '}' in an object`},
		{[]string{`{"a":1}`, `{"a":"1"}`}, `row 1: field "a": found a string, incompatible with the number seen before`},
		{[]string{`{"a":"x"}`, `{"a":2}`}, `row 1: field "a": found a number, incompatible with the string seen before`},
		{[]string{`{"a":[1]}`, `{"a":1}`}, `row 1: field "a": found a number, incompatible with the array seen before`},
		{[]string{`{"o":{"p":{"q":true}}}`, `{"o":{"p":{"q":{}}}}`}, `row 1: field "o.p.q": found an object, incompatible with the boolean seen before`},
		{[]string{`{"l":[1,"a"]}`}, `row 0: field "l[]": found a string, incompatible with the number seen before`},
		{[]string{`{"d":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`}, `row 0: field "d` + strings.Repeat("[]", 127) + `": invalid JSON at offset 132: nesting deeper than 128 levels`},
		{[]string{`{"o":{"p":[1,tru]}}`}, `row 0: field "o.p[]": invalid JSON at offset 13: unexpected character 't'`},
	}
	for _, c := range cases {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		rows := make([]int, len(c.rows))
		for i := range rows {
			rows[i] = i
		}
		got, err := decodeRows(mem, values(c.rows...), rows, nil)
		if err == nil || err.Error() != c.want || got != nil {
			t.Errorf("%q:\n got %v, %v\nwant error %s", c.rows, got, err, c.want)
		}
		mem.AssertSize(t, 0)
	}
}

// A payload may hold several objects, one a line (newline-delimited
// JSON), as ArkFlow joins a batch's payloads with newlines and reads them
// so: each is a row. A blank payload gives none.
func TestDecodeNDJSONPayloads(t *testing.T) {
	got, err := DecodeValues([][]byte{[]byte("{\"a\":1}\n{\"a\":2}\n"), []byte("  \n"), []byte(`{"a":3}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	col, ok := got.Column(0).(*array.Int64)
	if !ok || got.NumRows() != 3 || col.Value(0) != 1 || col.Value(1) != 2 || col.Value(2) != 3 {
		t.Fatalf("got %v", got)
	}
}
