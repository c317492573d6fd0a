package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Dur is a config type with its own UnmarshalJSON.
type Dur struct{ D time.Duration }

func (d *Dur) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("must be a duration string")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.D = v
	return nil
}

type Field struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable *bool  `json:"nullable,omitempty"`
}

type Inner struct {
	Path  string   `json:"path"`
	Tags  []string `json:"tags,omitempty"`
	Level int8     `json:"level"`
}

type Config struct {
	Name     string            `json:"name"`
	Count    int               `json:"count"`
	Small    int8              `json:"small"`
	Big      int64             `json:"big"`
	Port     uint16            `json:"port"`
	Ratio    float64           `json:"ratio"`
	Ratio32  float32           `json:"ratio32"`
	Enabled  bool              `json:"enabled"`
	Schema   []Field           `json:"schema"`
	Labels   map[string]string `json:"labels"`
	Limits   map[string]int32  `json:"limits"`
	Inner    *Inner            `json:"inner"`
	Value    Inner             `json:"value"`
	Nested   [][]int           `json:"nested"`
	Byname   map[string]Inner  `json:"byname"`
	Raw      json.RawMessage   `json:"raw"`
	Any      any               `json:"any"`
	Timeout  Dur               `json:"timeout"`
	PTimeout *Dur              `json:"ptimeout"`
	Untagged string
	Ignored  string `json:"-"`
	hidden   string //nolint:unused
}

func paths(es Problems) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Path)
	}
	return out
}

func TestDecodeValid(t *testing.T) {
	in := `{
		"name": "job", "count": -3, "small": -128, "big": 9223372036854775807, "port": 65535,
		"ratio": 0.25, "ratio32": 1e38, "enabled": true,
		"schema": [{"name": "a", "type": "int64"}, {"name": "b", "type": "string", "nullable": false}],
		"labels": {"x": "1", "y": ""}, "limits": {"max": 2147483647},
		"inner": {"path": "/p", "tags": ["t1", "t2"], "level": 3},
		"value": {"path": "v"},
		"nested": [[1, 2], [], [3]],
		"byname": {"k": {"path": "q", "level": -1}},
		"raw": {"z": [1, "two", null], "a": 1.50},
		"any": {"n": 12, "l": [true]},
		"timeout": "1m30s", "ptimeout": "2s",
		"Untagged": "u"
	}`
	var got Config
	if errs := Decode([]byte(in), &got); errs != nil {
		t.Fatalf("Decode: %v", errs)
	}
	var want Config
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	// Raw keeps the value (re-encoded, so compare as JSON values) and Any
	// holds json.Number where encoding/json has float64.
	if !sameJSON(t, got.Raw, want.Raw) {
		t.Errorf("Raw = %s, want %s", got.Raw, want.Raw)
	}
	if !reflect.DeepEqual(numbersToFloats(got.Any), want.Any) {
		t.Errorf("Any = %#v, want %#v", got.Any, want.Any)
	}
	if n, ok := got.Any.(map[string]any)["n"].(json.Number); !ok || n != "12" {
		t.Errorf("Any.n = %#v, want json.Number 12", got.Any.(map[string]any)["n"])
	}
	got.Raw, want.Raw, got.Any, want.Any = nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decode = %+v\nencoding/json = %+v", got, want)
	}
	if got.Timeout.D != 90*time.Second || got.PTimeout == nil || got.PTimeout.D != 2*time.Second {
		t.Errorf("durations = %v %v", got.Timeout, got.PTimeout)
	}
	if got.Schema[1].Nullable == nil || *got.Schema[1].Nullable {
		t.Errorf("schema[1].nullable = %v", got.Schema[1].Nullable)
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// numbersToFloats converts json.Number (as config stores in interfaces) to
// float64 (as encoding/json does).
func numbersToFloats(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = numbersToFloats(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = numbersToFloats(e)
		}
		return out
	}
	return v
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		paths []string
		want  []string // substrings of the reasons, in order
	}{
		{"unknown field", `{"nmae": "x"}`, []string{"nmae"}, []string{"unknown field (known fields: name, count,"}},
		{"unknown nested field", `{"schema": [{"name": "a"}, {"name": "b", "typ": "x"}]}`, []string{"schema[1].typ"}, []string{"unknown field"}},
		{"ignored field is unknown", `{"-": 1, "Ignored": "x", "hidden": "h"}`, []string{"-", "Ignored", "hidden"}, []string{"unknown", "unknown", "unknown"}},
		{"wrong type", `{"schema": [{"name": "a", "type": "int64"}, {"name": "b", "type": 5}]}`, []string{"schema[1].type"}, []string{"must be a string (got number 5)"}},
		{"string for int", `{"count": "5"}`, []string{"count"}, []string{`must be an integer (got string "5")`}},
		{"bool", `{"enabled": "yes"}`, []string{"enabled"}, []string{`must be true or false (got string "yes")`}},
		{"object for list", `{"schema": {"name": "a"}}`, []string{"schema"}, []string{"must be a list (got an object)"}},
		{"list for object", `{"inner": [1]}`, []string{"inner"}, []string{"must be an object (got a list)"}},
		{"list for map", `{"labels": []}`, []string{"labels"}, []string{"must be an object (got a list)"}},
		{"int8 overflow", `{"small": 128}`, []string{"small"}, []string{"must be an integer in [-128, 127] (got 128)"}},
		{"int8 underflow", `{"small": -129}`, []string{"small"}, []string{"[-128, 127]"}},
		{"int64 overflow", `{"big": 9223372036854775808}`, []string{"big"}, []string{"must be an integer in [-9223372036854775808, 9223372036854775807]"}},
		{"fraction for int", `{"count": 1.5}`, []string{"count"}, []string{"must be an integer in"}},
		{"huge float for int", `{"count": 1e300}`, []string{"count"}, []string{"must be an integer in"}},
		{"uint16 overflow", `{"port": 65536}`, []string{"port"}, []string{"must be an integer in [0, 65535] (got 65536)"}},
		{"negative uint", `{"port": -1}`, []string{"port"}, []string{"must be an integer in [0, 65535] (got -1)"}},
		{"float32 overflow", `{"ratio32": 1e39}`, []string{"ratio32"}, []string{"must be a number (got 1e39)"}},
		{"float64 overflow", `{"ratio": 1e400}`, []string{"ratio"}, []string{"must be a number (got 1e400)"}},
		{"string for float", `{"ratio": "0.5"}`, []string{"ratio"}, []string{"must be a number (got string"}},
		{"nested map value", `{"limits": {"a": 1, "b": 2147483648, "c": "x"}}`, []string{"limits.b", "limits.c"}, []string{"[-2147483648, 2147483647]", "must be an integer"}},
		{"map of structs", `{"byname": {"k": {"level": 200, "extra": 1}}}`, []string{"byname.k.extra", "byname.k.level"}, []string{"unknown field", "[-128, 127]"}},
		{"nested slices", `{"nested": [[1], [2, "x"], 3]}`, []string{"nested[1][1]", "nested[2]"}, []string{"must be an integer", "must be a list (got number 3)"}},
		{"pointer struct", `{"inner": {"tags": ["a", 1], "level": true}}`, []string{"inner.level", "inner.tags[1]"}, []string{"must be an integer (got true)", "must be a string (got number 1)"}},
		{"unmarshaler error", `{"timeout": 5, "ptimeout": "soon"}`, []string{"ptimeout", "timeout"}, []string{"time: invalid duration", "must be a duration string"}},
		{"number out of range in an interface", `{"any": {"x": [1, 1e400]}, "raw": 1e400}`, []string{"any.x[1]"}, []string{"number 1e400 is out of range"}},
		{"long string is cut", `{"count": "` + strings.Repeat("x", 100) + `"}`, []string{"count"}, []string{`(got string "` + strings.Repeat("x", 40) + `…")`}},
		{"not an object", `[1, 2]`, []string{""}, []string{"must be an object (got a list)"}},
		{"scalar", `"x"`, []string{""}, []string{`must be an object (got string "x")`}},
		{"invalid JSON", `{"name": }`, []string{""}, []string{"invalid JSON"}},
		{"truncated", `{"name": "x"`, []string{""}, []string{"invalid JSON"}},
		{"two values", `{} {}`, []string{""}, []string{"data after the top-level value"}},
		{"trailing garbage", `{"name": "x"} x`, []string{""}, []string{"invalid JSON"}},
		{"trailing close brace", `{}}`, []string{""}, []string{"invalid JSON"}},
		{"trailing close bracket", `{"name": "x"}]`, []string{""}, []string{"invalid JSON"}},
		{"form feed is not JSON whitespace", "\f{}", []string{""}, []string{"invalid JSON"}},
		{"vertical tab after", "{}\v", []string{""}, []string{"invalid JSON"}},
		{"NBSP is not JSON whitespace", "\u00a0{}", []string{""}, []string{"invalid JSON"}},
		{
			"every problem at once, sorted",
			`{"zeta": 1, "count": "x", "schema": [{"name": 1}, {"type": [], "what": 0}], "alpha": true, "small": 1000}`,
			[]string{"alpha", "count", "schema[0].name", "schema[1].type", "schema[1].what", "small", "zeta"},
			[]string{"unknown", "must be an integer", "must be a string", "must be a string (got a list)", "unknown", "[-128, 127]", "unknown"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			errs := Decode([]byte(tc.in), &c)
			if got := paths(errs); !reflect.DeepEqual(got, tc.paths) {
				t.Fatalf("paths %q, want %q (errors: %v)", got, tc.paths, errs)
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Reason, w) {
					t.Errorf("error %d reason %q does not contain %q", i, errs[i].Reason, w)
				}
			}
			// encoding/json (with DisallowUnknownFields) rejects each of
			// these inputs too, if only at its first problem.
			dec := json.NewDecoder(strings.NewReader(tc.in))
			dec.DisallowUnknownFields()
			var c2 Config
			err := dec.Decode(&c2)
			if err == nil {
				if _, terr := dec.Token(); terr == io.EOF {
					t.Errorf("encoding/json accepts %s", tc.in)
				}
			}
		})
	}
}

// An unknown field is reported with the known fields of its level and,
// when one is close, the field it probably misspells.
func TestUnknownFieldSuggests(t *testing.T) {
	known := "known fields: name, count, small, big, port, ratio, ratio32, enabled, schema, labels, limits, inner, value, nested, byname, raw, any, timeout, ptimeout, Untagged"
	for _, tc := range []struct{ in, path, reason string }{
		{`{"nmae": "x"}`, "nmae", "unknown field (" + known + `); did you mean "name"?`},
		{`{"Count": 1}`, "Count", "unknown field (" + known + `); did you mean "count"?`},
		{`{"schema": [{"nam": "a"}]}`, "schema[0].nam", `unknown field (known fields: name, type, nullable); did you mean "name"?`},
		{`{"inner": {"levle": 1}}`, "inner.levle", `unknown field (known fields: path, tags, level); did you mean "level"?`},
		{`{"colour": "red"}`, "colour", "unknown field (" + known + ")"},
	} {
		var c Config
		errs := Decode([]byte(tc.in), &c)
		if len(errs) != 1 || errs[0].Path != tc.path || errs[0].Reason != tc.reason {
			var got []string
			for _, e := range errs {
				got = append(got, e.Path+": "+e.Reason)
			}
			t.Errorf("Decode(%s) = %q, want one problem at %q:\n%s", tc.in, got, tc.path, tc.reason)
		}
	}
}

func TestIntegralFloatsDecodeAsInts(t *testing.T) {
	// Deliberate leniency (YAML turns 1e6 into the JSON number 1e+06): an
	// integral number below 2^53 decodes into an int field.
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{`1.0`, 1, true},
		{`1e3`, 1000, true},
		{`1e+06`, 1000000, true},
		{`-2.000`, -2, true},
		{`-0.0`, 0, true},
		{`9007199254740991.0`, 1<<53 - 1, true},
		{`9007199254740992.0`, 0, false}, // 2^53: no longer exact
		{`1.5`, 0, false},
		{`1e-1`, 0, false},
	}
	for _, tc := range cases {
		var c Config
		errs := Decode([]byte(`{"big": `+tc.in+`}`), &c)
		if tc.ok && (errs != nil || c.Big != tc.want) {
			t.Errorf("%s: big = %d, errors %v; want %d", tc.in, c.Big, errs, tc.want)
		}
		if !tc.ok && errs == nil {
			t.Errorf("%s: accepted as %d", tc.in, c.Big)
		}
	}
	// Unsigned fields are not lenient.
	var c Config
	if errs := Decode([]byte(`{"port": 1.0}`), &c); errs == nil {
		t.Error("port 1.0 accepted")
	}
}

func TestNullAndEmpty(t *testing.T) {
	for _, in := range []string{"", "  \n\t", "null", " null ", "{}"} {
		c := Config{Name: "keep"}
		if errs := Decode([]byte(in), &c); errs != nil {
			t.Errorf("%q: %v", in, errs)
		}
		if c.Name != "keep" {
			t.Errorf("%q: an empty object changed Name to %q", in, c.Name)
		}
	}
	// null in a field leaves (sets) the zero value.
	c := Config{
		Name: "n", Count: 5, Inner: &Inner{Path: "p"}, Schema: []Field{{Name: "f"}},
		Labels: map[string]string{"a": "b"}, Raw: json.RawMessage(`1`), Any: 3,
	}
	in := `{"name": null, "count": null, "inner": null, "schema": null, "labels": null, "raw": null, "any": null, "nested": [null, [1]], "byname": {"k": null}}`
	if errs := Decode([]byte(in), &c); errs != nil {
		t.Fatal(errs)
	}
	if c.Name != "" || c.Count != 0 || c.Inner != nil || c.Schema != nil || c.Labels != nil || c.Any != nil {
		t.Errorf("after nulls: %+v", c)
	}
	if string(c.Raw) != "null" {
		t.Errorf("raw = %q, want null (as encoding/json keeps it)", c.Raw)
	}
	if len(c.Nested) != 2 || c.Nested[0] != nil || !reflect.DeepEqual(c.Nested[1], []int{1}) {
		t.Errorf("nested = %#v", c.Nested)
	}
	if v, ok := c.Byname["k"]; !ok || !reflect.DeepEqual(v, Inner{}) {
		t.Errorf("byname = %#v", c.Byname)
	}
	// A null for an Unmarshaler is passed on to it (Dur rejects it).
	var d Config
	errs := Decode([]byte(`{"timeout": null}`), &d)
	if got := paths(errs); !reflect.DeepEqual(got, []string{"timeout"}) {
		t.Errorf("timeout null: %v", errs)
	}
}

func TestPointerReused(t *testing.T) {
	in := &Inner{Path: "old", Level: 4}
	c := Config{Inner: in}
	if errs := Decode([]byte(`{"inner": {"path": "new"}}`), &c); errs != nil {
		t.Fatal(errs)
	}
	if c.Inner != in || in.Path != "new" || in.Level != 4 {
		t.Errorf("inner = %p %+v, want the same pointer updated", c.Inner, c.Inner)
	}
}

func TestRawMessage(t *testing.T) {
	var c Config
	if errs := Decode([]byte(`{"raw": [1, {"b": "x<y", "a": 2.50}, true]}`), &c); errs != nil {
		t.Fatal(errs)
	}
	var v []any
	d := json.NewDecoder(bytes.NewReader(c.Raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("raw %s: %v", c.Raw, err)
	}
	want := []any{json.Number("1"), map[string]any{"a": json.Number("2.50"), "b": "x<y"}, true}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("raw = %s decodes to %#v", c.Raw, v)
	}
}

func TestOtherDestinations(t *testing.T) {
	var m map[string][]int
	errs := Decode([]byte(`{"a": [1], "b": ["x"]}`), &m)
	if got := paths(errs); !reflect.DeepEqual(got, []string{"b[0]"}) {
		t.Fatalf("map: %v", errs)
	}
	var s []Field
	errs = Decode([]byte(`[{"name": "a"}, {"nope": 1}]`), &s)
	if got := paths(errs); !reflect.DeepEqual(got, []string{"[1].nope"}) {
		t.Fatalf("slice: %v", errs)
	}
	if len(s) != 2 || s[0].Name != "a" {
		t.Fatalf("slice = %+v", s)
	}
	type Named string
	var nm map[Named]int
	if errs := Decode([]byte(`{"k": 1}`), &nm); errs != nil || nm["k"] != 1 {
		t.Fatalf("named key map: %v %v", nm, errs)
	}
}

func TestDecodeValue(t *testing.T) {
	var errs Problems
	var c Config
	v := map[string]any{"count": json.Number("12"), "schema": []any{map[string]any{"name": 3}}}
	DecodeValue("sources[0].config", v, &c, &errs)
	if got := paths(errs); !reflect.DeepEqual(got, []string{"sources[0].config.schema[0].name"}) {
		t.Fatalf("paths %v", got)
	}
	if c.Count != 12 {
		t.Fatalf("count = %d", c.Count)
	}
}

func TestPanicsOnMisuse(t *testing.T) {
	for name, f := range map[string]func(){
		"non-pointer":  func() { Decode([]byte(`{}`), Config{}) },
		"nil pointer":  func() { Decode([]byte(`{}`), (*Config)(nil)) },
		"int map keys": func() { var m map[int]int; Decode([]byte(`{"1": 1}`), &m) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	// An interface with methods cannot be decoded into: an error, not a panic.
	var x struct {
		E error `json:"e"`
	}
	errs := Decode([]byte(`{"e": "x"}`), &x)
	if got := paths(errs); !reflect.DeepEqual(got, []string{"e"}) {
		t.Fatalf("interface with methods: %v", errs)
	}
}

func TestJoinIndexDescribe(t *testing.T) {
	joins := [][3]string{
		{"", "", ""},
		{"", "a", "a"},
		{"a", "", "a"},
		{"a", "b", "a.b"},
		{"a", "[2]", "a[2]"},
		{"a.b", "c.d", "a.b.c.d"},
	}
	for _, j := range joins {
		if got := Join(j[0], j[1]); got != j[2] {
			t.Errorf("Join(%q, %q) = %q, want %q", j[0], j[1], got, j[2])
		}
	}
	if got := Index("schema", 3); got != "schema[3]" {
		t.Errorf("Index = %q", got)
	}
	if got := Index("", 0); got != "[0]" {
		t.Errorf("Index = %q", got)
	}
	descs := []struct {
		v    any
		want string
	}{
		{nil, "null"},
		{true, "true"},
		{json.Number("1.5"), "number 1.5"},
		{"hi", `string "hi"`},
		{[]any{}, "a list"},
		{map[string]any{}, "an object"},
		{3.5, "float64"},
	}
	for _, d := range descs {
		if got := Describe(d.v); got != d.want {
			t.Errorf("Describe(%#v) = %q, want %q", d.v, got, d.want)
		}
	}
	var es Problems
	es.Add("a.b", "bad %d", 1)
	es.Add("", "whole")
	if len(es) != 2 || *es[0] != (Problem{"a.b", "bad 1"}) || *es[1] != (Problem{"", "whole"}) {
		t.Errorf("Problems = %v", es)
	}
}

// FuzzConfig is the fuzz target's destination: nested structs, slices,
// maps, pointers, raw messages and every scalar kind.
type FuzzConfig struct {
	S   string                `json:"s"`
	I   int                   `json:"i"`
	I8  int8                  `json:"i8"`
	I64 int64                 `json:"i64"`
	U8  uint8                 `json:"u8"`
	U   uint                  `json:"u"`
	F32 float32               `json:"f32"`
	F   float64               `json:"f"`
	B   bool                  `json:"b"`
	P   *FuzzInner            `json:"p"`
	V   FuzzInner             `json:"v"`
	L   []FuzzInner           `json:"l"`
	LL  [][]int16             `json:"ll"`
	M   map[string]FuzzInner  `json:"m"`
	MP  map[string]*int32     `json:"mp"`
	R   json.RawMessage       `json:"r"`
	A   any                   `json:"a"`
	PS  *[]string             `json:"ps"`
	MM  map[string][]*float32 `json:"mm"`
}

type FuzzInner struct {
	Name  string     `json:"name"`
	N     *int64     `json:"n"`
	Tags  []string   `json:"tags"`
	Child *FuzzInner `json:"child"`
	Raw   json.RawMessage
}

// normalizeNumbers rewrites number literals that are integral floats below
// 2^53 (1.0, 1e3) as integers: the one documented leniency of Decode over
// encoding/json. data must be valid JSON.
func normalizeNumbers(data []byte) []byte {
	var out []byte
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			out = append(out, c)
			switch c {
			case '\\':
				i++
				out = append(out, data[i])
			case '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
			out = append(out, c)
			continue
		}
		if c == '-' || (c >= '0' && c <= '9') {
			j := i
			for j < len(data) && strings.IndexByte("0123456789+-.eE", data[j]) >= 0 {
				j++
			}
			lit := string(data[i:j])
			if strings.ContainsAny(lit, ".eE") {
				if f, err := strconv.ParseFloat(lit, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
					lit = strconv.FormatInt(int64(f), 10)
				}
			}
			out = append(out, lit...)
			i = j - 1
			continue
		}
		out = append(out, c)
	}
	return out
}

// hasDuplicateKeys reports whether an object in data repeats a key.
func hasDuplicateKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct {
		obj    bool
		keys   map[string]bool
		expect bool // next token in an object is a key
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].expect = true
				}
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return true
			}
			top.keys[k] = true
			top.expect = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{obj: true, keys: map[string]bool{}, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &level{})
			continue
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value completed: the enclosing object expects a key next.
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expect = true
		}
	}
}

// canon makes a decoded FuzzConfig comparable across decoders: raw messages
// become their generic values, json.Number becomes float64.
func canon(t *testing.T, c *FuzzConfig) any {
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return v
}

func FuzzDecode(f *testing.F) {
	seeds := []string{
		``, `null`, `{}`, `[]`, `1`, `"x"`, `{}}`, "\f{}", `{} {}`,
		`{"s": "x", "i": 1, "i8": -128, "i64": 9223372036854775807, "u8": 255, "u": 0, "f32": 3.4e38, "f": -1e308, "b": true}`,
		`{"i": 1.0, "i64": 1e3, "i8": 1.27e2, "u8": 1.0}`,
		`{"i8": 128, "u8": -1, "f32": 1e39, "u": 18446744073709551616}`,
		`{"p": {"name": "a", "n": 5, "tags": ["x"], "child": {"child": {"name": "deep"}}}, "v": {"Raw": [1, 2]}}`,
		`{"l": [{"name": "a"}, {"n": null}, null], "ll": [[1, -32768], [], null], "m": {"k": {"tags": null}}}`,
		`{"mp": {"a": 1, "b": null}, "r": {"x": [1, "\u00e9", {"y": null}]}, "a": [1, 2.5, "s", null, {"k": false}]}`,
		`{"ps": ["a", "b"], "mm": {"k": [1.5, null, -0.0]}}`,
		`{"s": 1, "p": [], "l": {}, "m": [], "nope": 1, "p": {"x": 1}}`,
		`{"s": "a", "s": "b"}`,
		`{"v": {"name": "a"}, "v": {"tags": []}}`,
		`{"s": "\ud800\udc00 \u0000 \"q\" \\ end"}`,
		`{"r": "<&>"}`,
		"{\"s\": \"\xff\xfe\"}",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got FuzzConfig
		errs := Decode(data, &got) // must not panic
		for _, e := range errs {
			if e == nil || e.Reason == "" {
				t.Fatalf("empty error in %v", errs)
			}
		}
		if len(errs) > 0 {
			return
		}
		if len(bytes.Trim(data, " \t\r\n")) == 0 {
			return // documented: empty data decodes as {}; encoding/json rejects it
		}
		if hasDuplicateKeys(data) {
			// Decode sees only the last value of a repeated key (it walks
			// a generic value), while encoding/json decodes every one:
			// check what Decode saw instead, re-encoded without repeats.
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("Decode accepted %q, which does not parse: %v", data, err)
			}
			dedup, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			data = dedup
		}
		norm := normalizeNumbers(data)
		var want FuzzConfig
		if err := json.Unmarshal(norm, &want); err != nil {
			t.Fatalf("Decode accepted %q but encoding/json rejects it (normalized %q): %v", data, norm, err)
		}
		// Without normalization encoding/json may only object to integral
		// floats (1.0, 1e3) in integer fields.
		var plain FuzzConfig
		if err := json.Unmarshal(data, &plain); err != nil {
			var te *json.UnmarshalTypeError
			if !errors.As(err, &te) || !strings.HasPrefix(te.Value, "number ") || !strings.ContainsAny(te.Value, ".eE") {
				t.Fatalf("encoding/json rejects %q with %v, not an integral-float type error", data, err)
			}
		}
		if g, w := canon(t, &got), canon(t, &want); !reflect.DeepEqual(g, w) {
			t.Fatalf("Decode and encoding/json disagree on %q:\n got %#v\nwant %#v", data, g, w)
		}
	})
}
