package eventtime

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// FloorDiv is a/b rounded toward −∞ (b > 0): Euclidean division, so −1 ms
// with b = 1000 gives −1 and belongs to the window starting at −1000
// Go's / truncates toward zero and would put it in [0, 1000).
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// TimeError is an event-time value that cannot be converted to
// milliseconds, or whose window would leave the int64 range.
type TimeError struct {
	Field string
	Row   int
	Value int64
	Unit  string
	// Span is the window size or gap whose bounds around Value would
	// overflow; 0 when the value itself does not fit in milliseconds.
	Span int64
}

// Error names the field, the row and the value, and says which range it
// leaves.
func (e *TimeError) Error() string {
	if e.Span > 0 {
		return fmt.Sprintf("event-time field %q: value %d ms in row %d is too close to the end of the int64 range for windows of %d ms", e.Field, e.Value, e.Row, e.Span)
	}
	return fmt.Sprintf("event-time field %q: value %d %s in row %d is outside the range of int64 milliseconds", e.Field, e.Value, e.Unit, e.Row)
}

// Supported reports whether a column type can hold event time: Int64
// (milliseconds) or a Timestamp in any unit.
func Supported(t arrow.DataType) bool {
	return t.ID() == arrow.INT64 || t.ID() == arrow.TIMESTAMP
}

// Millis converts an event-time column to Unix milliseconds into dst, and
// marks null rows false in valid (both need col.Len() entries). Int64 is
// taken as milliseconds; Timestamp(s) is multiplied by 1000 with an overflow
// check (an overflow is a *TimeError naming the field, never a
// wrap-around); µs and ns are floor-divided, so negative instants round
// toward the past consistently with window boundaries. It reports whether
// any row was null.
func Millis(col arrow.Array, field string, dst []int64, valid []bool) (nulls bool, err error) {
	n := col.Len()
	switch a := col.(type) {
	case *array.Int64:
		copy(dst, a.Int64Values()[:n])
	case *array.Timestamp:
		vals := a.TimestampValues()[:n]
		switch unit := a.DataType().(*arrow.TimestampType).Unit; unit {
		case arrow.Second:
			for i, v := range vals {
				if (v > math.MaxInt64/1000 || v < math.MinInt64/1000) && a.IsValid(i) {
					return false, &TimeError{Field: field, Row: i, Value: int64(v), Unit: "s"}
				}
				dst[i] = int64(v) * 1000
			}
		case arrow.Millisecond:
			for i, v := range vals {
				dst[i] = int64(v)
			}
		case arrow.Microsecond:
			for i, v := range vals {
				dst[i] = FloorDiv(int64(v), 1000)
			}
		case arrow.Nanosecond:
			for i, v := range vals {
				dst[i] = FloorDiv(int64(v), 1_000_000)
			}
		}
	default:
		return false, fmt.Errorf("event-time field %q has type %s; it must be int64 (milliseconds) or a timestamp", field, col.DataType())
	}
	if col.NullN() == 0 {
		for i := range valid[:n] {
			valid[i] = true
		}
		return false, nil
	}
	for i := 0; i < n; i++ {
		valid[i] = col.IsValid(i)
	}
	return true, nil
}
