// Package config decodes JSON configuration into Go structs strictly, and
// reports every problem at once with the path of the field at fault
// ("schema[1].type: must be one of int64, float32, … (got "int")").
//
// encoding/json stops at the first error and names unknown fields without
// their path, which is not good enough for a validator whose errors must
// name the operator and field. This decoder walks the generic JSON value and
// the destination struct together, using the same `json` struct tags, so a
// config type is written once and decodes the same way here and in
// encoding/json. An unknown field's message lists the known fields of its
// level and, when one of them is close, the one it probably misspells
// (`unknown field (known fields: name, type); did you mean "name"?`).
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/suggest"
)

// Problem is one problem in a configuration value. It is data, not an
// error: the packages that report config errors turn it into the one
// field-error type users see, *job.FieldError (connectors.DecodeConfig),
// or into a *job.ValidationError (job.Parse). This package cannot build
// those itself: job imports it.
type Problem struct {
	// Path is the field path relative to the decoded value, e.g.
	// "schema[1].type". Empty means the value itself.
	Path   string
	Reason string
}

// Problems is the list of problems found while decoding.
type Problems []*Problem

// Add records a problem at path.
func (es *Problems) Add(path, format string, args ...any) {
	*es = append(*es, &Problem{Path: path, Reason: fmt.Sprintf(format, args...)})
}

// Join concatenates two paths: Join("a", "b") = "a.b", Join("a", "[2]") = "a[2]".
func Join(base, rel string) string {
	switch {
	case base == "":
		return rel
	case rel == "":
		return base
	case strings.HasPrefix(rel, "["):
		return base + rel
	default:
		return base + "." + rel
	}
}

// Index returns path[i].
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Decode decodes data into dst (a pointer to a struct, slice or map),
// rejecting unknown fields and values of the wrong type. Empty data and JSON
// null decode as an empty object. It returns nil when there was no problem.
func Decode(data []byte, dst any) Problems {
	var errs Problems
	// Only JSON's own whitespace: bytes.TrimSpace would also drop \f, \v
	// and Unicode spaces, which encoding/json rejects.
	data = bytes.Trim(data, " \t\r\n")
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		errs.Add("", "invalid JSON: %v", err)
		return errs
	}
	// dec.More() would miss a stray '}' or ']' after the value; data has no
	// trailing whitespace, so the value must end exactly at its end.
	if dec.InputOffset() != int64(len(data)) {
		errs.Add("", "invalid JSON: data after the top-level value")
		return errs
	}
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		panic("config: Decode needs a non-nil pointer")
	}
	decodeValue("", v, rv.Elem(), &errs)
	return errs
}

// DecodeValue decodes an already parsed generic JSON value (as produced by a
// json.Decoder with UseNumber) into dst, adding problems under base.
func DecodeValue(base string, v any, dst any, errs *Problems) {
	decodeValue(base, v, reflect.ValueOf(dst).Elem(), errs)
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// decodeValue decodes the generic JSON value v into rv, adding a problem
// under path for each value of the wrong type or out of range and going on
// with the rest. json.RawMessage takes v re-encoded and a json.Unmarshaler
// decodes it itself; null leaves the zero value; otherwise rv's kind says
// what v must be.
func decodeValue(path string, v any, rv reflect.Value, errs *Problems) {
	if decodeCustom(path, v, rv, errs) {
		return
	}
	if v == nil {
		// null leaves the zero value, as in encoding/json.
		rv.SetZero()
		return
	}
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			rv.Set(reflect.New(rv.Type().Elem()))
		}
		decodeValue(path, v, rv.Elem(), errs)
	case reflect.Interface:
		if rv.NumMethod() != 0 {
			errs.Add(path, "cannot decode into %s", rv.Type())
			return
		}
		checkNumbers(path, v, errs)
		rv.Set(reflect.ValueOf(v))
	case reflect.Struct:
		decodeStruct(path, v, rv, errs)
	case reflect.Slice:
		decodeSlice(path, v, rv, errs)
	case reflect.Map:
		decodeMap(path, v, rv, errs)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			errs.Add(path, "must be a string (got %s)", Describe(v))
			return
		}
		rv.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			errs.Add(path, "must be true or false (got %s)", Describe(v))
			return
		}
		rv.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		decodeInt(path, v, rv, errs)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		decodeUint(path, v, rv, errs)
	case reflect.Float32, reflect.Float64:
		decodeFloat(path, v, rv, errs)
	default:
		panic("config: unsupported destination kind " + rv.Kind().String())
	}
}

// decodeCustom decodes v into a json.RawMessage (v re-encoded) or a
// json.Unmarshaler (which decodes v re-encoded itself), and reports
// whether rv was one of them.
func decodeCustom(path string, v any, rv reflect.Value, errs *Problems) bool {
	if rv.Type() == rawMessageType {
		b, err := json.Marshal(v)
		if err != nil {
			errs.Add(path, "cannot re-encode value: %v", err)
			return true
		}
		rv.SetBytes(b)
		return true
	}
	if rv.CanAddr() && rv.Addr().Type().Implements(unmarshalerType) {
		b, err := json.Marshal(v)
		if err != nil {
			errs.Add(path, "cannot re-encode value: %v", err)
			return true
		}
		if err := rv.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(b); err != nil {
			errs.Add(path, "%v", err)
		}
		return true
	}
	return false
}

// decodeSlice decodes a JSON list into a slice, element by element.
func decodeSlice(path string, v any, rv reflect.Value, errs *Problems) {
	arr, ok := v.([]any)
	if !ok {
		errs.Add(path, "must be a list (got %s)", Describe(v))
		return
	}
	s := reflect.MakeSlice(rv.Type(), len(arr), len(arr))
	for i, e := range arr {
		decodeValue(Index(path, i), e, s.Index(i), errs)
	}
	rv.Set(s)
}

// decodeMap decodes a JSON object into a map with string keys, in key
// order (so problems come in a stable order).
func decodeMap(path string, v any, rv reflect.Value, errs *Problems) {
	obj, ok := v.(map[string]any)
	if !ok {
		errs.Add(path, "must be an object (got %s)", Describe(v))
		return
	}
	if rv.Type().Key().Kind() != reflect.String {
		panic("config: map keys must be strings")
	}
	m := reflect.MakeMapWithSize(rv.Type(), len(obj))
	for _, k := range sortedKeys(obj) {
		e := reflect.New(rv.Type().Elem()).Elem()
		decodeValue(Join(path, k), obj[k], e, errs)
		m.SetMapIndex(reflect.ValueOf(k).Convert(rv.Type().Key()), e)
	}
	rv.Set(m)
}

// decodeInt decodes a JSON number into a signed integer of rv's size. A
// number written with a fraction or exponent is taken when it is a whole
// number that a float64 holds exactly.
func decodeInt(path string, v any, rv reflect.Value, errs *Problems) {
	n, ok := v.(json.Number)
	if !ok {
		errs.Add(path, "must be an integer (got %s)", Describe(v))
		return
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		if f, ferr := strconv.ParseFloat(string(n), 64); ferr == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			i, err = int64(f), nil
		}
	}
	if err != nil || rv.OverflowInt(i) {
		errs.Add(path, "must be an integer in [%d, %d] (got %s)", minInt(rv.Type()), maxInt(rv.Type()), n)
		return
	}
	rv.SetInt(i)
}

// decodeUint decodes a JSON number into an unsigned integer of rv's size.
func decodeUint(path string, v any, rv reflect.Value, errs *Problems) {
	n, ok := v.(json.Number)
	if !ok {
		errs.Add(path, "must be a non-negative integer (got %s)", Describe(v))
		return
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil || rv.OverflowUint(u) {
		errs.Add(path, "must be an integer in [0, %d] (got %s)", uint64(1)<<(rv.Type().Bits())-1, n)
		return
	}
	rv.SetUint(u)
}

// decodeFloat decodes a JSON number into a float of rv's size.
func decodeFloat(path string, v any, rv reflect.Value, errs *Problems) {
	n, ok := v.(json.Number)
	if !ok {
		errs.Add(path, "must be a number (got %s)", Describe(v))
		return
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || rv.OverflowFloat(f) {
		errs.Add(path, "must be a number (got %s)", n)
		return
	}
	rv.SetFloat(f)
}

// checkNumbers reports the numbers of a generic value that encoding/json
// could not decode into an interface (as float64) because they are out of
// range.
func checkNumbers(path string, v any, errs *Problems) {
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			errs.Add(path, "number %s is out of range", x)
		}
	case []any:
		for i, e := range x {
			checkNumbers(Index(path, i), e, errs)
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			checkNumbers(Join(path, k), x[k], errs)
		}
	}
}

func decodeStruct(path string, v any, rv reflect.Value, errs *Problems) {
	obj, ok := v.(map[string]any)
	if !ok {
		errs.Add(path, "must be an object (got %s)", Describe(v))
		return
	}
	fields := structFields(rv.Type())
	for _, k := range sortedKeys(obj) {
		idx, ok := fields.byName[k]
		if !ok {
			errs.Add(Join(path, k), "unknown field (known fields: %s)%s", strings.Join(fields.names, ", "), suggest.Hint(k, fields.names))
			continue
		}
		decodeValue(Join(path, k), obj[k], rv.Field(idx), errs)
	}
}

type fieldSet struct {
	byName map[string]int
	names  []string
}

func structFields(t reflect.Type) fieldSet {
	fs := fieldSet{byName: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		fs.byName[name] = i
		fs.names = append(fs.names, name)
	}
	return fs
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Describe names the JSON type of a generic value, with the value when short,
// for "got …" parts of messages.
func Describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return "number " + string(x)
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return "string " + strconv.Quote(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func minInt(t reflect.Type) int64 { return -1 << (t.Bits() - 1) }
func maxInt(t reflect.Type) int64 { return 1<<(t.Bits()-1) - 1 }
