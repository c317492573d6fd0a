package sql

// This file converts values between Arrow and the database drivers: the
// output's Arrow columns into statement parameters, and the values the
// input's query returns into the declared Arrow columns.

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5/pgtype"
)

// unsupported says why the output cannot write a column of type dt, or
// "" when it can.
func unsupported(dt arrow.DataType) string {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY,
		arrow.BOOL, arrow.TIMESTAMP:
		return ""
	}
	return "it writes integers, floats, strings, binary, booleans and timestamps"
}

// kind is what a table column holds, as far as the output's type check
// goes.
type kind uint8

const (
	kindAny kind = iota // no declared type (SQLite): anything
	kindNumber
	kindText
	kindBinary
	kindBool
	kindTime
	kindOther // a type the output writes nothing into
)

var kindNames = map[kind]string{kindNumber: "numeric", kindText: "text", kindBinary: "binary", kindBool: "boolean", kindTime: "date/time", kindOther: "of another type"}

// accepts reports whether a table column of kind k takes values of an
// Arrow column of type dt.
func (k kind) accepts(dt arrow.DataType) bool {
	switch k {
	case kindAny:
		return true
	case kindNumber:
		switch dt.ID() {
		case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
			return false
		}
		// Booleans go in as 0/1 and timestamps as integers (SQLite);
		// PostgreSQL's numeric kinds are narrowed to numbers below.
		return true
	case kindText:
		switch dt.ID() {
		case arrow.STRING, arrow.LARGE_STRING, arrow.TIMESTAMP:
			return true
		}
	case kindBinary:
		switch dt.ID() {
		case arrow.BINARY, arrow.LARGE_BINARY, arrow.STRING, arrow.LARGE_STRING:
			return true
		}
	case kindBool:
		return dt.ID() == arrow.BOOL
	case kindTime:
		return dt.ID() == arrow.TIMESTAMP
	}
	return false
}

// column is a table column as the database describes it.
type column struct {
	name string
	// typ is the declared type as the database prints it.
	typ  string
	kind kind
}

// timeText is how timestamps are written into SQLite's text columns: UTC,
// with as many fraction digits as the Arrow unit has, so that text order
// is time order and SQLite's date functions read it.
var timeText = map[arrow.TimeUnit]string{
	arrow.Second:      "2006-01-02T15:04:05Z",
	arrow.Millisecond: "2006-01-02T15:04:05.000Z",
	arrow.Microsecond: "2006-01-02T15:04:05.000000Z",
	arrow.Nanosecond:  "2006-01-02T15:04:05.000000000Z",
}

// encoder returns row i of a column as a statement parameter (nil for
// null).
type encoder func(i int) any

// newEncoder returns the encoder of column arr, bound for a table column
// of kind k in a database of type dbType.
func newEncoder(arr arrow.Array, k kind, dbType string) encoder {
	nulls := func(get encoder) encoder {
		if arr.NullN() == 0 {
			return get
		}
		return func(i int) any {
			if arr.IsNull(i) {
				return nil
			}
			return get(i)
		}
	}
	switch a := arr.(type) {
	case *array.Int8:
		return nulls(func(i int) any { return int64(a.Value(i)) })
	case *array.Int16:
		return nulls(func(i int) any { return int64(a.Value(i)) })
	case *array.Int32:
		return nulls(func(i int) any { return int64(a.Value(i)) })
	case *array.Int64:
		return nulls(func(i int) any { return a.Value(i) })
	case *array.Uint8:
		return nulls(func(i int) any { return int64(a.Value(i)) })
	case *array.Uint16:
		return nulls(func(i int) any { return int64(a.Value(i)) })
	case *array.Uint32:
		return nulls(func(i int) any { return int64(a.Value(i)) })
	case *array.Uint64:
		return nulls(func(i int) any { return a.Value(i) })
	case *array.Float32:
		return nulls(func(i int) any { return a.Value(i) })
	case *array.Float64:
		return nulls(func(i int) any { return a.Value(i) })
	case *array.String:
		return nulls(func(i int) any { return a.Value(i) })
	case *array.LargeString:
		return nulls(func(i int) any { return a.Value(i) })
	case *array.Binary:
		return nulls(func(i int) any { return a.Value(i) })
	case *array.LargeBinary:
		return nulls(func(i int) any { return a.Value(i) })
	case *array.Boolean:
		if dbType == SQLite {
			return nulls(func(i int) any { return boolInt(a.Value(i)) })
		}
		return nulls(func(i int) any { return a.Value(i) })
	case *array.Timestamp:
		return nulls(timestampEncoder(a, k, dbType))
	}
	// unsupported() keeps other types out at validation.
	panic(fmt.Sprintf("sql: no encoder for %s", arr.DataType()))
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// timestampEncoder writes a timestamp as a time.Time (PostgreSQL), as the
// integer in its unit (SQLite numeric columns) or as text (other SQLite
// columns).
func timestampEncoder(a *array.Timestamp, k kind, dbType string) encoder {
	unit := a.DataType().(*arrow.TimestampType).Unit
	switch {
	case dbType != SQLite:
		return func(i int) any { return a.Value(i).ToTime(unit).UTC() }
	case k == kindNumber:
		return func(i int) any { return int64(a.Value(i)) }
	default:
		layout := timeText[unit]
		return func(i int) any { return a.Value(i).ToTime(unit).UTC().Format(layout) }
	}
}

// appender appends a value the database returned to a builder of the
// declared type, or says why it cannot.
type appender func(b array.Builder, v any) error

// newAppender returns the appender of a declared field.
func newAppender(f arrow.Field) appender {
	nullable := f.Nullable
	typed := typedAppender(f.Type)
	return func(b array.Builder, v any) error {
		if v == nil {
			if !nullable {
				return fmt.Errorf("is NULL, and the column is declared not nullable")
			}
			b.AppendNull()
			return nil
		}
		return typed(b, v)
	}
}

func typedAppender(dt arrow.DataType) appender {
	switch dt.ID() {
	case arrow.INT64:
		return func(b array.Builder, v any) error {
			n, err := toInt64(v)
			if err == nil {
				b.(*array.Int64Builder).Append(n)
			}
			return err
		}
	case arrow.FLOAT32, arrow.FLOAT64:
		return func(b array.Builder, v any) error {
			x, err := toFloat64(v)
			if err != nil {
				return err
			}
			if fb, ok := b.(*array.Float32Builder); ok {
				fb.Append(float32(x))
			} else {
				b.(*array.Float64Builder).Append(x)
			}
			return nil
		}
	case arrow.STRING:
		return func(b array.Builder, v any) error {
			s, err := toString(v)
			if err == nil {
				b.(*array.StringBuilder).Append(s)
			}
			return err
		}
	case arrow.BOOL:
		return func(b array.Builder, v any) error {
			x, err := toBool(v)
			if err == nil {
				b.(*array.BooleanBuilder).Append(x)
			}
			return err
		}
	case arrow.TIMESTAMP:
		unit := dt.(*arrow.TimestampType).Unit
		return func(b array.Builder, v any) error {
			t, err := toTime(v, unit)
			if err != nil {
				return err
			}
			ts, err := arrow.TimestampFromTime(t, unit)
			if err != nil {
				return fmt.Errorf("%s does not fit a timestamp in %s", t.Format(time.RFC3339Nano), unit)
			}
			b.(*array.TimestampBuilder).Append(ts)
			return nil
		}
	}
	// connectors.Schema declares only the types above.
	panic(fmt.Sprintf("sql: no appender for %s", dt))
}

func describe(v any) string {
	s := fmt.Sprintf("%v", v)
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return fmt.Sprintf("%T %q", v, s)
}

func toInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int:
		return int64(x), nil
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), nil
		}
	case uint32:
		return int64(x), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return int64(x), nil
		}
	case pgtype.Numeric:
		if i, err := x.Int64Value(); err == nil && i.Valid {
			return i.Int64, nil
		}
	}
	return 0, fmt.Errorf("holds %s, which is not an int64", describe(v))
}

func toFloat64(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case pgtype.Numeric:
		if f, err := x.Float64Value(); err == nil && f.Valid {
			return f.Float64, nil
		}
	default:
		if n, err := toInt64(v); err == nil {
			return float64(n), nil
		}
	}
	return 0, fmt.Errorf("holds %s, which is not a number", describe(v))
}

func toString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		if utf8.Valid(x) {
			return string(x), nil
		}
		return "", fmt.Errorf("holds %d bytes that are not UTF-8 text", len(x))
	}
	return "", fmt.Errorf("holds %s, which is not text (cast it to text in the query)", describe(v))
}

func toBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case int64:
		if x == 0 || x == 1 {
			return x == 1, nil
		}
	}
	return false, fmt.Errorf("holds %s, which is not a boolean", describe(v))
}

// toTime reads a timestamp: a time.Time, an integer in the declared unit
// (SQLite), or text in RFC 3339 or SQLite's formats (SQLite; without a
// zone it is UTC).
func toTime(v any, unit arrow.TimeUnit) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x, nil
	case int64:
		return arrow.Timestamp(x).ToTime(unit), nil
	case string:
		t, err := parseTime(x)
		if err != nil {
			return time.Time{}, fmt.Errorf("holds %q: %v", short(x), err)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("holds %s, which is not a timestamp", describe(v))
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// textTimeLayouts are the text forms of time toTime reads: RFC 3339 (what
// the output writes) and SQLite's own date and time formats.
var textTimeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04",
	"2006-01-02 15:04",
	"2006-01-02",
}

// parseTime reads a timestamp stored as text.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range textTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not a timestamp (RFC 3339, or YYYY-MM-DD[ HH:MM[:SS[.fraction]]])")
}
