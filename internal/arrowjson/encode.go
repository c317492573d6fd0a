package arrowjson

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// encFn appends the JSON of the non-null value at index i.
type encFn func(out []byte, i int) ([]byte, error)

// Encode serialises each row of rec as one compact JSON object, the lines
// arrow-json's LineDelimitedWriter writes without their "\n": columns in
// schema order, null values omitted, formatted as the package documentation
// lists. include, when non-empty, keeps only the columns it names (schema
// order is kept; unknown names are ignored). A column of a type that cannot
// be written is an error naming it, before anything is encoded; a string
// that is not valid UTF-8 is an error naming its row and column. Nothing is
// returned with an error.
func Encode(rec arrow.RecordBatch, include []string) ([][]byte, error) {
	var keep map[string]bool
	if len(include) > 0 {
		keep = make(map[string]bool, len(include))
		for _, n := range include {
			keep[n] = true
		}
	}
	type column struct {
		key []byte
		arr arrow.Array
		enc encFn
	}
	var cols []column
	for i, f := range rec.Schema().Fields() {
		if keep != nil && !keep[f.Name] {
			continue
		}
		if !utf8.ValidString(f.Name) {
			return nil, fmt.Errorf("column name %q is not valid UTF-8", f.Name)
		}
		enc, err := makeEncoder(rec.Column(i))
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		key := append(appendString(nil, f.Name), ':')
		cols = append(cols, column{key, rec.Column(i), enc})
	}
	rows := make([][]byte, rec.NumRows())
	var buf []byte
	for r := range rows {
		buf = append(buf[:0], '{')
		first := true
		for _, c := range cols {
			if isNull(c.arr, r) {
				continue
			}
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = append(buf, c.key...)
			var err error
			if buf, err = c.enc(buf, r); err != nil {
				return nil, fmt.Errorf("row %d: column %s %w", r, c.key[:len(c.key)-1], err)
			}
		}
		buf = append(buf, '}')
		rows[r] = append([]byte(nil), buf...)
	}
	return rows, nil
}

// AppendValue returns rec with a non-nullable Binary column
// DefaultValueField appended that holds Encode(rec, include): the output of
// ArkFlow's arrow_to_json processor, which keeps all input columns (include
// only selects what is encoded). An existing DefaultValueField column is
// encoded like any other but then dropped from the result, so the result
// has exactly one; ArkFlow appends a second column of the same name, which
// readers by name never see. The caller releases the result.
func AppendValue(rec arrow.RecordBatch, include []string) (arrow.RecordBatch, error) {
	return appendValueColumn(memory.DefaultAllocator, rec, include)
}

func appendValueColumn(mem memory.Allocator, rec arrow.RecordBatch, include []string) (arrow.RecordBatch, error) {
	rows, err := Encode(rec, include)
	if err != nil {
		return nil, err
	}
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer b.Release()
	b.AppendValues(rows, nil)
	value := b.NewArray()
	defer value.Release()

	var fields []arrow.Field
	var cols []arrow.Array
	for i, f := range rec.Schema().Fields() {
		if f.Name == DefaultValueField {
			continue
		}
		fields = append(fields, f)
		cols = append(cols, rec.Column(i))
	}
	fields = append(fields, arrow.Field{Name: DefaultValueField, Type: arrow.BinaryTypes.Binary})
	cols = append(cols, value)
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows()), nil
}

// makeEncoder returns the encoder of a's values, following arrow-json's
// make_encoder (arrow-json/src/writer/encoder.rs).
func makeEncoder(a arrow.Array) (encFn, error) {
	switch a := a.(type) {
	case *array.Null:
		return func(out []byte, _ int) ([]byte, error) { return append(out, "null"...), nil }, nil
	case *array.Boolean:
		return func(out []byte, i int) ([]byte, error) { return strconv.AppendBool(out, a.Value(i)), nil }, nil
	case *array.Int8:
		return intEnc(func(i int) int64 { return int64(a.Value(i)) }), nil
	case *array.Int16:
		return intEnc(func(i int) int64 { return int64(a.Value(i)) }), nil
	case *array.Int32:
		return intEnc(func(i int) int64 { return int64(a.Value(i)) }), nil
	case *array.Int64:
		return intEnc(a.Value), nil
	case *array.Uint8:
		return uintEnc(func(i int) uint64 { return uint64(a.Value(i)) }), nil
	case *array.Uint16:
		return uintEnc(func(i int) uint64 { return uint64(a.Value(i)) }), nil
	case *array.Uint32:
		return uintEnc(func(i int) uint64 { return uint64(a.Value(i)) }), nil
	case *array.Uint64:
		return uintEnc(a.Value), nil
	case *array.Float16:
		return floatEnc(func(i int) float64 { return float64(a.Value(i).Float32()) }, 32), nil
	case *array.Float32:
		return floatEnc(func(i int) float64 { return float64(a.Value(i)) }, 32), nil
	case *array.Float64:
		return floatEnc(a.Value, 64), nil
	case *array.String:
		return strEnc(a.Value), nil
	case *array.LargeString:
		return strEnc(a.Value), nil
	case *array.StringView:
		return strEnc(a.Value), nil
	case *array.Binary:
		return binEnc(a.Value), nil
	case *array.LargeBinary:
		return binEnc(a.Value), nil
	case *array.BinaryView:
		return binEnc(a.Value), nil
	case *array.FixedSizeBinary:
		return binEnc(a.Value), nil
	case *array.Map:
		return mapEnc(a)
	case array.ListLike:
		return listEnc(a)
	case *array.Struct:
		return structEnc(a)
	case *array.Dictionary:
		return dictEnc(a)
	}
	return temporalOrDecimalEnc(a)
}

// isNull reports whether value i of a is null; every value of a Null array
// is (arrow-go's Null array has no validity bitmap to say so).
func isNull(a arrow.Array, i int) bool {
	return a.DataType().ID() == arrow.NULL || a.IsNull(i)
}

func intEnc(v func(int) int64) encFn {
	return func(out []byte, i int) ([]byte, error) { return strconv.AppendInt(out, v(i), 10), nil }
}

func uintEnc(v func(int) uint64) encFn {
	return func(out []byte, i int) ([]byte, error) { return strconv.AppendUint(out, v(i), 10), nil }
}

func floatEnc(v func(int) float64, bits int) encFn {
	return func(out []byte, i int) ([]byte, error) { return appendLexicalFloat(out, v(i), bits), nil }
}

// strEnc writes a string escaped as serde_json does. A string that is not
// valid UTF-8 is an error: arrow-rs cannot hold one, and copying it would
// make invalid JSON.
func strEnc(v func(int) string) encFn {
	return func(out []byte, i int) ([]byte, error) {
		s := v(i)
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("string %q is not valid UTF-8", s)
		}
		return appendString(out, s), nil
	}
}

// binEnc writes bytes as a string of lowercase hex pairs
// (arrow-json/src/writer/encoder.rs, BinaryEncoder).
func binEnc(v func(int) []byte) encFn {
	return func(out []byte, i int) ([]byte, error) {
		out = append(out, '"')
		for _, c := range v(i) {
			out = append(out, hexDigits[c>>4], hexDigits[c&0xf])
		}
		return append(out, '"'), nil
	}
}

// listEnc writes a list as an array; null elements are null
// (ListLikeEncoder).
func listEnc(a array.ListLike) (encFn, error) {
	values := a.ListValues()
	enc, err := makeEncoder(values)
	if err != nil {
		return nil, err
	}
	return func(out []byte, i int) ([]byte, error) {
		start, end := a.ValueOffsets(i)
		out = append(out, '[')
		for j := start; j < end; j++ {
			if j != start {
				out = append(out, ',')
			}
			if isNull(values, int(j)) {
				out = append(out, "null"...)
				continue
			}
			var err error
			if out, err = enc(out, int(j)); err != nil {
				return nil, err
			}
		}
		return append(out, ']'), nil
	}, nil
}

// structEnc writes a struct as an object of its non-null fields
// (StructArrayEncoder with explicit_nulls false).
func structEnc(a *array.Struct) (encFn, error) {
	st := a.DataType().(*arrow.StructType)
	keys := make([][]byte, a.NumField())
	encs := make([]encFn, a.NumField())
	for f := range encs {
		var err error
		if encs[f], err = makeEncoder(a.Field(f)); err != nil {
			return nil, fmt.Errorf("field %q: %w", st.Field(f).Name, err)
		}
		if !utf8.ValidString(st.Field(f).Name) {
			return nil, fmt.Errorf("field name %q is not valid UTF-8", st.Field(f).Name)
		}
		keys[f] = append(appendString(nil, st.Field(f).Name), ':')
	}
	return func(out []byte, i int) ([]byte, error) {
		out = append(out, '{')
		first := true
		for f, enc := range encs {
			if isNull(a.Field(f), i) {
				continue
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			out = append(out, keys[f]...)
			var err error
			if out, err = enc(out, i); err != nil {
				return nil, err
			}
		}
		return append(out, '}'), nil
	}, nil
}

// mapEnc writes a map with string keys as an object, omitting null values
// (MapEncoder); other key types, null keys and null entries are errors.
func mapEnc(a *array.Map) (encFn, error) {
	keys, items := a.Keys(), a.Items()
	switch keys.DataType().ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
	default:
		return nil, fmt.Errorf("map keys of type %s cannot be written as JSON (only strings)", keys.DataType())
	}
	if keys.NullN() > 0 {
		return nil, fmt.Errorf("map has null keys")
	}
	kenc, err := makeEncoder(keys)
	if err != nil {
		return nil, err
	}
	venc, err := makeEncoder(items)
	if err != nil {
		return nil, err
	}
	return func(out []byte, i int) ([]byte, error) {
		start, end := a.ValueOffsets(i)
		out = append(out, '{')
		first := true
		for j := int(start); j < int(end); j++ {
			if isNull(items, j) {
				continue
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			out, _ = kenc(out, j)
			out = append(out, ':')
			var err error
			if out, err = venc(out, j); err != nil {
				return nil, err
			}
		}
		return append(out, '}'), nil
	}, nil
}

// dictEnc writes the dictionary value a key points at (DictionaryEncoder).
// A null dictionary value is written as null.
func dictEnc(a *array.Dictionary) (encFn, error) {
	dict := a.Dictionary()
	enc, err := makeEncoder(dict)
	if err != nil {
		return nil, err
	}
	return func(out []byte, i int) ([]byte, error) {
		k := a.GetValueIndex(i)
		if isNull(dict, k) {
			return append(out, "null"...), nil
		}
		return enc(out, k)
	}, nil
}

// temporalOrDecimalEnc covers the types arrow-json writes through
// arrow-cast's display (arrow-cast/src/display.rs): decimals unquoted,
// dates, times and timestamps quoted.
func temporalOrDecimalEnc(a arrow.Array) (encFn, error) {
	switch a := a.(type) {
	case *array.Decimal32:
		t := a.DataType().(*arrow.Decimal32Type)
		return decEnc(func(i int) string { return strconv.FormatInt(int64(a.Value(i)), 10) }, t.Precision, t.Scale), nil
	case *array.Decimal64:
		t := a.DataType().(*arrow.Decimal64Type)
		return decEnc(func(i int) string { return strconv.FormatInt(int64(a.Value(i)), 10) }, t.Precision, t.Scale), nil
	case *array.Decimal128:
		t := a.DataType().(*arrow.Decimal128Type)
		return decEnc(func(i int) string { return a.Value(i).BigInt().String() }, t.Precision, t.Scale), nil
	case *array.Decimal256:
		t := a.DataType().(*arrow.Decimal256Type)
		return decEnc(func(i int) string { return a.Value(i).BigInt().String() }, t.Precision, t.Scale), nil
	case *array.Timestamp:
		return timestampEnc(a)
	case *array.Date32:
		return func(out []byte, i int) ([]byte, error) {
			t := time.Unix(int64(a.Value(i))*86400, 0).UTC()
			return append(appendDate(append(out, '"'), t), '"'), nil
		}, nil
	case *array.Date64:
		return func(out []byte, i int) ([]byte, error) {
			t := unixTime(int64(a.Value(i)), arrow.Millisecond).UTC()
			return append(appendDateTime(append(out, '"'), t), '"'), nil
		}, nil
	case *array.Time32:
		unit := a.DataType().(*arrow.Time32Type).Unit
		return timeEnc(func(i int) int64 { return int64(a.Value(i)) }, unit), nil
	case *array.Time64:
		unit := a.DataType().(*arrow.Time64Type).Unit
		return timeEnc(func(i int) int64 { return int64(a.Value(i)) }, unit), nil
	}
	return nil, fmt.Errorf("type %s cannot be written as JSON", a.DataType())
}

func decEnc(digits func(int) string, precision, scale int32) encFn {
	return func(out []byte, i int) ([]byte, error) {
		return appendDecimal(out, digits(i), int(precision), int(scale)), nil
	}
}
