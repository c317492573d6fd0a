package connectors

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/job"
)

func boolp(b bool) *bool { return &b }

func errPaths(err error) []string {
	var out []string
	for _, fe := range FlattenFieldErrors(err) {
		out = append(out, fe.Path)
	}
	return out
}

func TestSchemaArrow(t *testing.T) {
	s := Schema{
		{Name: "id", Type: "int64", Nullable: boolp(false)},
		{Name: "f", Type: "float32"},
		{Name: "g", Type: "float64", Nullable: boolp(true)},
		{Name: "s", Type: "string"},
		{Name: "b", Type: "bool"},
		{Name: "t", Type: "timestamp"},
		{Name: "ts", Type: "timestamp", Unit: "s"},
		{Name: "tus", Type: "timestamp", Unit: "us"},
		{Name: "tns", Type: "timestamp", Unit: "ns"},
	}
	got, err := s.Arrow("schema")
	if err != nil {
		t.Fatal(err)
	}
	ts := func(u arrow.TimeUnit) arrow.DataType { return &arrow.TimestampType{Unit: u, TimeZone: "UTC"} }
	want := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "g", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "t", Type: ts(arrow.Millisecond), Nullable: true},
		{Name: "ts", Type: ts(arrow.Second), Nullable: true},
		{Name: "tus", Type: ts(arrow.Microsecond), Nullable: true},
		{Name: "tns", Type: ts(arrow.Nanosecond), Nullable: true},
	}, nil)
	if !got.Equal(want) {
		t.Fatalf("Arrow = %s\nwant %s", got, want)
	}
}

func TestSchemaArrowErrors(t *testing.T) {
	cases := []struct {
		name  string
		s     Schema
		path  string
		paths []string
		want  []string
	}{
		{"empty", nil, "schema", []string{"schema"}, []string{"at least one field"}},
		{"empty at root", Schema{}, "", []string{""}, []string{"at least one field"}},
		{
			"everything at once",
			Schema{
				{Name: "", Type: "int64"},
				{Name: "a", Type: "int"},
				{Name: "__meta_x", Type: "string"},
				{Name: "a", Type: "string"},
				{Name: "b", Type: "string", Unit: "ms"},
				{Name: "c", Type: "timestamp", Unit: "minutes"},
				{Name: "", Type: "decimal"},
			},
			"config.schema",
			[]string{
				"config.schema[0].name", "config.schema[1].type", "config.schema[2].name", "config.schema[3].name",
				"config.schema[4].unit", "config.schema[5].unit", "config.schema[6].name", "config.schema[6].type",
			},
			[]string{
				"is required", `must be one of int64, float32, float64, string, bool, timestamp (got "int")`,
				`reserved for source metadata (got "__meta_x")`, `duplicate field "a" (also config.schema[1])`,
				`only timestamp fields have a unit (type is "string")`, `must be one of s, ms, us, ns (got "minutes")`,
				"is required", `(got "decimal")`,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.Arrow(tc.path)
			if err == nil {
				t.Fatalf("no error; schema %s", got)
			}
			if got != nil {
				t.Fatal("schema returned with an error")
			}
			fes := FlattenFieldErrors(err)
			if ps := errPaths(err); !reflect.DeepEqual(ps, tc.paths) {
				t.Fatalf("paths %q, want %q (%v)", ps, tc.paths, err)
			}
			for i, w := range tc.want {
				if !strings.Contains(fes[i].Reason, w) {
					t.Errorf("%s: reason %q does not contain %q", fes[i].Path, fes[i].Reason, w)
				}
			}
		})
	}
}

func TestDataType(t *testing.T) {
	cases := []struct {
		typ, unit string
		want      arrow.DataType
		errPath   string
	}{
		{"int64", "", arrow.PrimitiveTypes.Int64, ""},
		{"float32", "", arrow.PrimitiveTypes.Float32, ""},
		{"float64", "", arrow.PrimitiveTypes.Float64, ""},
		{"string", "", arrow.BinaryTypes.String, ""},
		{"bool", "", arrow.FixedWidthTypes.Boolean, ""},
		{"timestamp", "", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, ""},
		{"timestamp", "ns", &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, ""},
		{"timestamp", "MS", nil, "unit"},
		{"int64", "s", nil, "unit"},
		{"Int64", "", nil, "type"},
		{"", "", nil, "type"},
		{"int32", "", nil, "type"},
	}
	for _, tc := range cases {
		got, err := DataType(tc.typ, tc.unit)
		if tc.errPath != "" {
			if ps := errPaths(err); !reflect.DeepEqual(ps, []string{tc.errPath}) {
				t.Errorf("DataType(%q, %q): error paths %q, want [%s]", tc.typ, tc.unit, ps, tc.errPath)
			}
			continue
		}
		if err != nil || !arrow.TypeEqual(got, tc.want) {
			t.Errorf("DataType(%q, %q) = %v, %v; want %s", tc.typ, tc.unit, got, err, tc.want)
		}
	}
}

func TestFromArrowRoundTrip(t *testing.T) {
	decl := Schema{
		{Name: "id", Type: "int64", Nullable: boolp(false)},
		{Name: "f", Type: "float32"},
		{Name: "g", Type: "float64"},
		{Name: "s", Type: "string", Nullable: boolp(false)},
		{Name: "b", Type: "bool"},
		{Name: "t", Type: "timestamp", Unit: "ms"},
		{Name: "ts", Type: "timestamp", Unit: "s"},
		{Name: "tus", Type: "timestamp", Unit: "us"},
		{Name: "tns", Type: "timestamp", Unit: "ns"},
	}
	s, err := decl.Arrow("schema")
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromArrow(WithMeta(s)) // metadata columns are not declared
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, decl) {
		t.Fatalf("FromArrow = %s\nwant %s", js(back), js(decl))
	}
	again, err := back.Arrow("schema")
	if err != nil || !again.Equal(s) {
		t.Fatalf("round trip = %v, %v", again, err)
	}
	// The declaration survives JSON.
	var decoded Schema
	if err := json.Unmarshal([]byte(js(back)), &decoded); err != nil || !reflect.DeepEqual(decoded, decl) {
		t.Fatalf("JSON round trip = %s, %v", js(decoded), err)
	}
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestFromArrowErrors(t *testing.T) {
	for _, dt := range []arrow.DataType{arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.Binary, arrow.ListOf(arrow.PrimitiveTypes.Int64), arrow.BinaryTypes.LargeString} {
		s := arrow.NewSchema([]arrow.Field{{Name: "ok", Type: arrow.PrimitiveTypes.Int64}, {Name: "bad col", Type: dt}}, nil)
		_, err := FromArrow(s)
		if err == nil || !strings.Contains(err.Error(), `column "bad col"`) {
			t.Errorf("FromArrow(%s) error %v does not name the column", dt, err)
		}
	}
	// The time zone is not part of a declaration: a zone-less or non-UTC
	// timestamp is declared as a UTC one.
	s := arrow.NewSchema([]arrow.Field{{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "Europe/Berlin"}}}, nil)
	d, err := FromArrow(s)
	if err != nil || !reflect.DeepEqual(d, Schema{{Name: "t", Type: "timestamp", Unit: "s", Nullable: boolp(false)}}) {
		t.Fatalf("FromArrow = %s, %v", js(d), err)
	}
}

func record(t testing.TB, names ...string) arrow.RecordBatch {
	t.Helper()
	fields := make([]arrow.Field, len(names))
	cols := make([]arrow.Array, len(names))
	for i, n := range names {
		fields[i] = arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Int64}
		b := array.NewInt64Builder(memory.DefaultAllocator)
		b.AppendValues([]int64{int64(i), int64(10 * i)}, nil)
		cols[i] = b.NewArray()
		b.Release()
	}
	md := arrow.NewMetadata([]string{"origin"}, []string{"test"})
	rec := array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, 2)
	for _, c := range cols {
		c.Release()
	}
	return rec
}

func TestStripMeta(t *testing.T) {
	cases := []struct {
		cols []string
		keep []string
	}{
		{[]string{"a", "b"}, []string{"a", "b"}},
		{[]string{"a", MetaSource, "b", MetaPartition, MetaOffset}, []string{"a", "b"}},
		{[]string{MetaKey, "x", MetaTimestamp, MetaTopic}, []string{"x"}},
		{[]string{MetaSource}, nil},
		{[]string{"__meta", "_meta_x", "meta_y"}, []string{"__meta", "_meta_x", "meta_y"}},
	}
	for _, tc := range cases {
		rec := record(t, tc.cols...)
		out := StripMeta(rec)
		var names []string
		for i, f := range out.Schema().Fields() {
			names = append(names, f.Name)
			// Column data follows its name.
			src := rec.Schema().FieldIndices(f.Name)[0]
			if out.Column(i) != rec.Column(src) {
				t.Errorf("%v: column %q is not the input's column", tc.cols, f.Name)
			}
		}
		if !reflect.DeepEqual(names, tc.keep) {
			t.Errorf("StripMeta(%v) = %v, want %v", tc.cols, names, tc.keep)
		}
		if out.NumRows() != rec.NumRows() {
			t.Errorf("rows %d, want %d", out.NumRows(), rec.NumRows())
		}
		if len(tc.keep) == len(tc.cols) && out != rec {
			t.Errorf("%v: no metadata columns but a new record", tc.cols)
		}
		if v, ok := out.Schema().Metadata().GetValue("origin"); !ok || v != "test" {
			t.Errorf("%v: schema metadata lost", tc.cols)
		}
		got := StripMetaSchema(rec.Schema())
		var snames []string
		for _, f := range got.Fields() {
			snames = append(snames, f.Name)
		}
		if !reflect.DeepEqual(snames, tc.keep) {
			t.Errorf("StripMetaSchema(%v) = %v", tc.cols, snames)
		}
		out.Release()
		rec.Release()
	}
}

func TestStripMetaRefCounts(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	mk := func() arrow.Array {
		b := array.NewInt64Builder(mem)
		b.Append(1)
		a := b.NewArray()
		b.Release()
		return a
	}
	for _, names := range [][]string{{"a", "b"}, {"a", MetaOffset}} {
		cols := []arrow.Array{mk(), mk()}
		rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: names[0], Type: arrow.PrimitiveTypes.Int64}, {Name: names[1], Type: arrow.PrimitiveTypes.Int64}}, nil), cols, 1)
		cols[0].Release()
		cols[1].Release()
		out := StripMeta(rec)
		rec.Release()
		if out.Column(0).(*array.Int64).Value(0) != 1 {
			t.Fatal("column released too early")
		}
		out.Release()
	}
}

func TestWithMetaAndIsMeta(t *testing.T) {
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	s := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, &md)
	w := WithMeta(s)
	want := []arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: MetaSource, Type: arrow.BinaryTypes.String},
		{Name: MetaPartition, Type: arrow.PrimitiveTypes.Int32},
		{Name: MetaOffset, Type: arrow.PrimitiveTypes.Int64},
	}
	if !reflect.DeepEqual(w.Fields(), want) {
		t.Fatalf("WithMeta = %s", w)
	}
	if s.NumFields() != 1 {
		t.Fatal("WithMeta changed its input")
	}
	if !StripMetaSchema(w).Equal(arrow.NewSchema(s.Fields(), nil)) {
		t.Fatal("StripMetaSchema(WithMeta(s)) != s")
	}
	for _, n := range []string{MetaSource, MetaTopic, MetaPartition, MetaOffset, MetaKey, MetaTimestamp, "__meta_", "__meta_custom"} {
		if !IsMeta(n) {
			t.Errorf("IsMeta(%q) = false", n)
		}
	}
	for _, n := range []string{"", "meta", "__Meta_x", "_meta_x", "x__meta_"} {
		if IsMeta(n) {
			t.Errorf("IsMeta(%q) = true", n)
		}
	}
}

func TestProject(t *testing.T) {
	rec := record(t, "a", "b", "c")
	defer rec.Release()
	out := Project(rec, []int{2, 0, 2})
	defer out.Release()
	var names []string
	for _, f := range out.Schema().Fields() {
		names = append(names, f.Name)
	}
	if !reflect.DeepEqual(names, []string{"c", "a", "c"}) || out.Column(0) != rec.Column(2) || out.Column(1) != rec.Column(0) {
		t.Fatalf("Project = %v", names)
	}
}

// pathErr has a path but is not a config error.
type pathErr struct{ path, reason string }

func (e pathErr) Error() string       { return "custom: " + e.reason }
func (e pathErr) FieldPath() string   { return e.path }
func (e pathErr) FieldReason() string { return e.reason }

// pathOnly has FieldPath but no FieldReason.
type pathOnly struct{}

func (pathOnly) Error() string     { return "whole message" }
func (pathOnly) FieldPath() string { return "p" }

func TestFlattenFieldErrors(t *testing.T) {
	ce := errors.Join(FieldError("a", "bad a"), FieldError("b[1]", "bad b"))
	cases := []struct {
		name string
		err  error
		want []job.FieldError
	}{
		{"nil", nil, nil},
		{"plain", errors.New("boom"), []job.FieldError{{Reason: "boom"}}},
		{"field error", FieldError("x.y", "no %d", 5), []job.FieldError{{Path: "x.y", Reason: "no 5"}}},
		{"config errors", ce, []job.FieldError{{Path: "a", Reason: "bad a"}, {Path: "b[1]", Reason: "bad b"}}},
		{"custom with reason", pathErr{"q", "why"}, []job.FieldError{{Path: "q", Reason: "why"}}},
		{"custom without reason", pathOnly{}, []job.FieldError{{Path: "p", Reason: "whole message"}}},
		{
			"joined and nested",
			errors.Join(errors.New("top"), errors.Join(ce, pathErr{"z", "deep"}), FieldError("f", "r")),
			[]job.FieldError{{Reason: "top"}, {Path: "a", Reason: "bad a"}, {Path: "b[1]", Reason: "bad b"}, {Path: "z", Reason: "deep"}, {Path: "f", Reason: "r"}},
		},
		{"wrapped single", fmt.Errorf("ctx: %w", FieldError("w", "r")), []job.FieldError{{Reason: "ctx: w: r"}}},
	}
	for _, tc := range cases {
		got := FlattenFieldErrors(tc.err)
		var flat []job.FieldError
		for _, fe := range got {
			flat = append(flat, *fe)
		}
		if !reflect.DeepEqual(flat, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, flat, tc.want)
		}
	}
}

func TestFields(t *testing.T) {
	var f Fields
	if f.Err() != nil {
		t.Fatal("empty Fields has an error")
	}
	f.Merge("ignored", nil)
	if f.Err() != nil {
		t.Fatal("Merge(nil) added an error")
	}
	f.Add("a", "first %s", "x")
	f.Merge("cfg", errors.Join(FieldError("b", "second"), errors.New("third")))
	f.Merge("", FieldError("[2]", "fourth"))
	f.Merge("arr", FieldError("[2]", "fifth"))
	want := []job.FieldError{{Path: "a", Reason: "first x"}, {Path: "cfg.b", Reason: "second"}, {Path: "cfg", Reason: "third"}, {Path: "[2]", Reason: "fourth"}, {Path: "arr[2]", Reason: "fifth"}}
	var got []job.FieldError
	for _, fe := range FlattenFieldErrors(f.Err()) {
		got = append(got, *fe)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Fields = %+v\nwant %+v", got, want)
	}
}

func TestDecodeConfig(t *testing.T) {
	type cfg struct {
		Path   string `json:"path"`
		Schema Schema `json:"schema"`
	}
	var c cfg
	if err := DecodeConfig(json.RawMessage(`{"path": "p", "schema": [{"name": "a", "type": "int64"}]}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Path != "p" || len(c.Schema) != 1 || c.Schema[0].Name != "a" {
		t.Fatalf("decoded %+v", c)
	}
	if err := DecodeConfig(nil, &c); err != nil {
		t.Fatalf("nil config: %v", err)
	}
	err := DecodeConfig(json.RawMessage(`{"path": 1, "schema": [{"name": "a", "type": "int64", "unit": 3}], "x": 0}`), &c)
	if ps := errPaths(err); !reflect.DeepEqual(ps, []string{"path", "schema[0].unit", "x"}) {
		t.Fatalf("paths %q (%v)", ps, err)
	}
	// The documented contract: Unwrap() []error over errors with FieldPath().
	u, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("%T does not implement Unwrap() []error", err)
	}
	for _, e := range u.Unwrap() {
		if _, ok := e.(interface{ FieldPath() string }); !ok {
			t.Fatalf("%T has no FieldPath()", e)
		}
	}
	var fe *job.FieldError
	if !errors.As(err, &fe) || fe.Path != "path" {
		t.Fatalf("errors.As found %v", fe)
	}
	// Error() lists every problem on its own line, with its path.
	want := "path: must be a string (got number 1)\nschema[0].unit: must be a string (got number 3)\nx: unknown field (known fields: path, schema)"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

// registryRuns makes TestRegistry's type names unique across -count runs:
// the registry is global and refuses a name twice.
var registryRuns atomic.Int64

func TestRegistry(t *testing.T) {
	name := fmt.Sprintf("connectors-test-%d", registryRuns.Add(1))
	RegisterInput(name, func(BuildContext) (Input, error) { return nil, errors.New("in") })
	RegisterOutput(name, func(BuildContext, *arrow.Schema) (Output, error) { return nil, errors.New("out") })
	f, ok := LookupInput(name)
	if !ok {
		t.Fatal("input not found")
	}
	if _, err := f(BuildContext{}); err == nil || err.Error() != "in" {
		t.Fatalf("factory = %v", err)
	}
	g, ok := LookupOutput(name)
	if !ok {
		t.Fatal("output not found")
	}
	if _, err := g(BuildContext{}, nil); err == nil || err.Error() != "out" {
		t.Fatalf("factory = %v", err)
	}
	if _, ok := LookupInput("no-such-type"); ok {
		t.Fatal("unknown input found")
	}
	for _, list := range [][]string{InputTypes(), OutputTypes()} {
		found := false
		for i, n := range list {
			found = found || n == name
			if i > 0 && list[i-1] >= n {
				t.Fatalf("types not sorted: %v", list)
			}
		}
		if !found {
			t.Fatalf("%s missing from %v", name, list)
		}
	}
	for what, f := range map[string]func(){
		"input":  func() { RegisterInput(name, nil) },
		"output": func() { RegisterOutput(name, nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registering the %s twice did not panic", what)
				}
			}()
			f()
		}()
	}
}

// A source adds __meta_source, __meta_partition and __meta_offset to the
// rows it reads, with AddMeta.
func ExampleAddMeta() {
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{7, 8}, nil)
	col := b.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 2)
	col.Release()
	b.Release()
	out := AddMeta(WithMeta(schema), rec, "clicks", 3, 100)
	rec.Release()
	defer out.Release()
	for i, f := range out.Schema().Fields() {
		fmt.Println(f.Name, out.Column(i))
	}
	// Output:
	// v [7 8]
	// __meta_source ["clicks" "clicks"]
	// __meta_partition [3 3]
	// __meta_offset [100 101]
}

// webhookSource stands for a source whose rows arrive once and cannot be
// fetched again (a webhook, a push from Go code).
type webhookSource struct{ Source }

// Unrewindable tells the runtime that Seek cannot read rows again.
func (webhookSource) Unrewindable() {}

// A source whose input cannot be read again declares Unrewindable: behind
// a WAL, in a job that takes checkpoints, the runtime then keeps its WAL
// entries until a checkpoint holds their rows, and replays them on restore.
func ExampleUnrewindable() {
	var src Source = webhookSource{}
	_, unrewindable := src.(Unrewindable)
	fmt.Println("unrewindable:", unrewindable)
	// Output:
	// unrewindable: true
}
