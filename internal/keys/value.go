package keys

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// TypeError is a key value that a key column of type Want cannot hold
// (or, given as text, that does not parse as one).
type TypeError struct {
	Want   arrow.DataType
	Value  any
	Reason string
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("key %#v is not a %s key: %s", e.Value, e.Want, e.Reason)
}

// Encode returns the key bytes (see Table.Bytes) of v as a key of type t:
// a Go value of a matching kind (a string or []byte for string and binary
// keys; any integer for integer, timestamp, date and duration keys, also
// a time.Time for timestamps and dates and a time.Duration for durations;
// a float; a bool), or text that parses as one (a decimal integer, a
// float, true/false, an RFC 3339 time), as a key arrives from a URL.
func Encode(t arrow.DataType, v any) ([]byte, error) {
	if !Supported(t) {
		return nil, fmt.Errorf("type %s cannot be a key", t)
	}
	if isStringLike(t) {
		switch x := v.(type) {
		case string:
			return []byte(x), nil
		case []byte:
			return append([]byte(nil), x...), nil
		}
		return nil, &TypeError{Want: t, Value: v, Reason: "want a string or []byte"}
	}
	if s, ok := v.(string); ok {
		parsed, err := parseText(t, s)
		if err != nil {
			return nil, &TypeError{Want: t, Value: v, Reason: err.Error()}
		}
		v = parsed
	}
	bits, err := numberBits(t, v)
	if err != nil {
		return nil, &TypeError{Want: t, Value: v, Reason: err.Error()}
	}
	if t.ID() == arrow.BOOL {
		return []byte{byte(bits)}, nil
	}
	return binary.BigEndian.AppendUint64(nil, bits), nil
}

// parseText parses a key given as text into a Go value numberBits takes.
func parseText(t arrow.DataType, s string) (any, error) {
	switch t.ID() {
	case arrow.BOOL:
		return strconv.ParseBool(s)
	case arrow.FLOAT32, arrow.FLOAT64:
		return strconv.ParseFloat(s, 64)
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return strconv.ParseUint(s, 10, 64)
	case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64:
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, fmt.Errorf("want an integer or an RFC 3339 time")
		}
		return tm, nil
	case arrow.DURATION:
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
		return time.ParseDuration(s)
	}
	return strconv.ParseInt(s, 10, 64)
}

// numberBits is the uint64 a numeric, time or bool key column holds for v
// (see numbers), checked against the range of t.
func numberBits(t arrow.DataType, v any) (uint64, error) {
	switch x := v.(type) {
	case bool:
		if t.ID() != arrow.BOOL {
			return 0, fmt.Errorf("a bool")
		}
		if x {
			return 1, nil
		}
		return 0, nil
	case time.Time:
		return timeBits(t, x)
	case time.Duration:
		if t.ID() != arrow.DURATION {
			return 0, fmt.Errorf("a time.Duration")
		}
		return durationBits(t.(*arrow.DurationType).Unit, x), nil
	case float32:
		return floatBits(t, float64(x))
	case float64:
		return floatBits(t, x)
	}
	rv := reflect.ValueOf(v)
	switch {
	case rv.CanInt():
		return intBits(t, rv.Int())
	case rv.CanUint():
		u := rv.Uint()
		if u > math.MaxInt64 && t.ID() != arrow.UINT64 {
			return 0, fmt.Errorf("out of range")
		}
		if t.ID() == arrow.UINT64 {
			return u, nil
		}
		return intBits(t, int64(u))
	}
	return 0, fmt.Errorf("a %T", v)
}

// intBits checks n against the range of t.
func intBits(t arrow.DataType, n int64) (uint64, error) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	switch t.ID() {
	case arrow.BOOL, arrow.FLOAT32, arrow.FLOAT64:
		return 0, fmt.Errorf("an integer")
	case arrow.INT8:
		lo, hi = math.MinInt8, math.MaxInt8
	case arrow.INT16:
		lo, hi = math.MinInt16, math.MaxInt16
	case arrow.INT32, arrow.DATE32:
		lo, hi = math.MinInt32, math.MaxInt32
	case arrow.UINT8:
		lo, hi = 0, math.MaxUint8
	case arrow.UINT16:
		lo, hi = 0, math.MaxUint16
	case arrow.UINT32:
		lo, hi = 0, math.MaxUint32
	case arrow.UINT64:
		lo = 0
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("out of range [%d, %d]", lo, hi)
	}
	return uint64(n), nil
}

func floatBits(t arrow.DataType, f float64) (uint64, error) {
	switch t.ID() {
	case arrow.FLOAT64:
		return math.Float64bits(f), nil
	case arrow.FLOAT32:
		return math.Float64bits(float64(float32(f))), nil
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("a float")
	}
	return intBits(t, int64(f))
}

// timeBits is the value a timestamp or date column holds for tm.
func timeBits(t arrow.DataType, tm time.Time) (uint64, error) {
	switch t.ID() {
	case arrow.TIMESTAMP:
		switch t.(*arrow.TimestampType).Unit {
		case arrow.Second:
			return uint64(tm.Unix()), nil
		case arrow.Millisecond:
			return uint64(tm.UnixMilli()), nil
		case arrow.Microsecond:
			return uint64(tm.UnixMicro()), nil
		}
		return uint64(tm.UnixNano()), nil
	case arrow.DATE32:
		return uint64(tm.Unix() / 86400), nil
	case arrow.DATE64:
		return uint64(tm.Unix() / 86400 * 86400000), nil
	}
	return 0, fmt.Errorf("a time.Time")
}

func durationBits(u arrow.TimeUnit, d time.Duration) uint64 {
	switch u {
	case arrow.Second:
		return uint64(d / time.Second)
	case arrow.Millisecond:
		return uint64(d / time.Millisecond)
	case arrow.Microsecond:
		return uint64(d / time.Microsecond)
	}
	return uint64(d)
}

// Find returns the ID of the key whose Bytes are b, without adding it.
func (t *Table) Find(b []byte) (int32, bool) {
	if b == nil {
		return t.nullID, t.nullID >= 0
	}
	if t.isStr {
		h, k := t.strKey(string(b))
		id, _, ok := t.findStr(string(b), h, k)
		return id, ok
	}
	var v uint64
	switch {
	case t.typ.ID() == arrow.BOOL && len(b) == 1:
		v = uint64(b[0])
	case len(b) == 8:
		v = binary.BigEndian.Uint64(b)
	default:
		return 0, false
	}
	id, _, ok := t.findNum(v, t.numHash(v))
	return id, ok
}

// Compare orders the key bytes of two keys of type t by their values: byte
// order for strings and binary, numeric order for numbers, times and
// bools.
func Compare(t arrow.DataType, a, b []byte) int {
	if isStringLike(t) || t.ID() == arrow.BOOL || len(a) != 8 || len(b) != 8 {
		return bytes.Compare(a, b)
	}
	x, y := binary.BigEndian.Uint64(a), binary.BigEndian.Uint64(b)
	switch t.ID() {
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return cmp.Compare(x, y)
	case arrow.FLOAT32, arrow.FLOAT64:
		return cmp.Compare(math.Float64frombits(x), math.Float64frombits(y))
	}
	return cmp.Compare(int64(x), int64(y))
}
