package rowjson

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// CheckSchema reports whether every column of s can be encoded, with an
// error naming the first column that cannot.
func CheckSchema(s *arrow.Schema) error {
	for _, f := range s.Fields() {
		if !encodable(f.Type) {
			return fmt.Errorf("column %q: type %s cannot be written as JSON", f.Name, f.Type)
		}
	}
	return nil
}

func encodable(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.BOOL,
		arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY,
		arrow.TIMESTAMP, arrow.DATE32:
		return true
	}
	return false
}

type appendFunc func(dst []byte, row int) []byte

// AppendRecord appends one JSON object per row of rec to dst, each followed
// by '\n', and returns the extended buffer. Keys follow the schema order and
// every column is written (null values as null). Formats:
//
//   - integers (int8…int64, uint8…uint64) as JSON integers;
//   - float32 and float64 as JSON numbers in the shortest form that reads
//     back to the same value (strconv 'g', -1); NaN, +Inf and -Inf, which
//     JSON numbers cannot express, as the strings "NaN", "+Inf" and "-Inf"
//     (the decoder accepts them back);
//   - strings JSON-escaped (invalid UTF-8 becomes U+FFFD);
//   - bool as true or false;
//   - binary as a base64 (standard, padded) string;
//   - timestamps as RFC 3339 UTC strings with exactly the digits of the
//     column's unit: s "2024-01-02T03:04:05Z", ms "…05.123Z", us 6 and ns
//     9 fraction digits. Instants before year 0000 or after 9999, which
//     RFC 3339 cannot write, are written as integers in the unit (the
//     decoder accepts those too);
//   - date32 as "YYYY-MM-DD" (an integer day count outside years
//     0000–9999).
//
// Other column types are an error naming the column; nothing is appended
// then.
func AppendRecord(dst []byte, rec arrow.RecordBatch) ([]byte, error) {
	schema := rec.Schema()
	ncols := int(rec.NumCols())
	keys := make([][]byte, ncols)
	fns := make([]appendFunc, ncols)
	cols := rec.Columns()
	for i := 0; i < ncols; i++ {
		f := schema.Field(i)
		fn, err := encoderFor(cols[i])
		if err != nil {
			return dst, fmt.Errorf("column %q: %w", f.Name, err)
		}
		fns[i] = fn
		k := make([]byte, 0, len(f.Name)+4)
		if i > 0 {
			k = append(k, ',')
		}
		k = AppendString(k, f.Name)
		keys[i] = append(k, ':')
	}
	rows := int(rec.NumRows())
	for r := 0; r < rows; r++ {
		dst = append(dst, '{')
		for c, fn := range fns {
			dst = append(dst, keys[c]...)
			if cols[c].IsNull(r) {
				dst = append(dst, "null"...)
				continue
			}
			dst = fn(dst, r)
		}
		dst = append(dst, '}', '\n')
	}
	return dst, nil
}

func encoderFor(col arrow.Array) (appendFunc, error) {
	switch a := col.(type) {
	case *array.Int8:
		return func(dst []byte, i int) []byte { return strconv.AppendInt(dst, int64(a.Value(i)), 10) }, nil
	case *array.Int16:
		return func(dst []byte, i int) []byte { return strconv.AppendInt(dst, int64(a.Value(i)), 10) }, nil
	case *array.Int32:
		return func(dst []byte, i int) []byte { return strconv.AppendInt(dst, int64(a.Value(i)), 10) }, nil
	case *array.Int64:
		return func(dst []byte, i int) []byte { return strconv.AppendInt(dst, a.Value(i), 10) }, nil
	case *array.Uint8:
		return func(dst []byte, i int) []byte { return strconv.AppendUint(dst, uint64(a.Value(i)), 10) }, nil
	case *array.Uint16:
		return func(dst []byte, i int) []byte { return strconv.AppendUint(dst, uint64(a.Value(i)), 10) }, nil
	case *array.Uint32:
		return func(dst []byte, i int) []byte { return strconv.AppendUint(dst, uint64(a.Value(i)), 10) }, nil
	case *array.Uint64:
		return func(dst []byte, i int) []byte { return strconv.AppendUint(dst, a.Value(i), 10) }, nil
	case *array.Float32:
		return func(dst []byte, i int) []byte { return AppendFloat(dst, float64(a.Value(i)), 32) }, nil
	case *array.Float64:
		return func(dst []byte, i int) []byte { return AppendFloat(dst, a.Value(i), 64) }, nil
	case *array.Boolean:
		return func(dst []byte, i int) []byte {
			if a.Value(i) {
				return append(dst, "true"...)
			}
			return append(dst, "false"...)
		}, nil
	case *array.String:
		return func(dst []byte, i int) []byte { return AppendString(dst, a.Value(i)) }, nil
	case *array.LargeString:
		return func(dst []byte, i int) []byte { return AppendString(dst, a.Value(i)) }, nil
	case *array.Binary:
		return func(dst []byte, i int) []byte { return appendBase64(dst, a.Value(i)) }, nil
	case *array.LargeBinary:
		return func(dst []byte, i int) []byte { return appendBase64(dst, a.Value(i)) }, nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return func(dst []byte, i int) []byte { return AppendTimestamp(dst, int64(a.Value(i)), unit) }, nil
	case *array.Date32:
		return func(dst []byte, i int) []byte { return appendDate32(dst, int64(a.Value(i))) }, nil
	}
	return nil, fmt.Errorf("type %s cannot be written as JSON", col.DataType())
}

// AppendFloat appends f as a JSON number in the shortest form for its
// size (bits 32 or 64), or as the string "NaN", "+Inf" or "-Inf".
func AppendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Inf"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

func appendBase64(dst []byte, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// safe[c] is true for ASCII bytes that need no escaping in a JSON string.
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendString appends s as a JSON string. Control characters, quotes and
// backslashes are escaped, as are U+2028 and U+2029; invalid UTF-8 becomes
// U+FFFD.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Seconds from the Unix epoch to 0000-01-01T00:00:00Z and to
// 9999-12-31T23:59:59Z: the instants RFC 3339 can write.
const (
	minRFC3339Sec = -62167219200
	maxRFC3339Sec = 253402300799
)

func floorDiv(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r < 0 {
		q--
		r += b
	}
	return q, r
}

// AppendTimestamp appends v (a count of unit since the Unix epoch) as an
// RFC 3339 UTC string with the unit's number of fraction digits, or as an
// integer when the year is outside 0000–9999.
func AppendTimestamp(dst []byte, v int64, unit arrow.TimeUnit) []byte {
	per := unitsPerSecond(unit)
	sec, frac := floorDiv(v, per)
	if sec < minRFC3339Sec || sec > maxRFC3339Sec {
		return strconv.AppendInt(dst, v, 10)
	}
	days, sod := floorDiv(sec, 86400)
	dst = append(dst, '"')
	dst = appendCivil(dst, days)
	dst = append(dst, 'T')
	dst = append2(dst, int(sod/3600))
	dst = append(dst, ':')
	dst = append2(dst, int(sod/60%60))
	dst = append(dst, ':')
	dst = append2(dst, int(sod%60))
	digits := 0
	switch unit {
	case arrow.Millisecond:
		digits = 3
	case arrow.Microsecond:
		digits = 6
	case arrow.Nanosecond:
		digits = 9
	}
	if digits > 0 {
		dst = append(dst, '.')
		var buf [9]byte
		for i := digits - 1; i >= 0; i-- {
			buf[i] = byte('0' + frac%10)
			frac /= 10
		}
		dst = append(dst, buf[:digits]...)
	}
	return append(dst, 'Z', '"')
}

func appendDate32(dst []byte, days int64) []byte {
	// Days from the epoch to 0000-01-01 and to 9999-12-31.
	if days < minRFC3339Sec/86400 || days > maxRFC3339Sec/86400 {
		return strconv.AppendInt(dst, days, 10)
	}
	dst = append(dst, '"')
	dst = appendCivil(dst, days)
	return append(dst, '"')
}

// appendCivil appends the proleptic Gregorian date of a day count since
// 1970-01-01 as YYYY-MM-DD (years 0000–9999). The algorithm is Howard
// Hinnant's civil_from_days.
func appendCivil(dst []byte, days int64) []byte {
	z := days + 719468
	era, _ := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if mp >= 10 {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	dst = append2(dst, int(y/100))
	dst = append2(dst, int(y%100))
	dst = append(dst, '-')
	dst = append2(dst, int(m))
	dst = append(dst, '-')
	return append2(dst, int(d))
}

func append2(dst []byte, v int) []byte {
	return append(dst, byte('0'+v/10), byte('0'+v%10))
}
