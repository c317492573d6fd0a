package expr

import (
	"github.com/apache/arrow-go/v18/arrow"
)

// kind is the value type of an expression.
type kind uint8

const (
	kNull kind = iota // the type of the null literal
	kInt
	kFloat
	kString
	kBool
	kTime
)

func (k kind) String() string {
	switch k {
	case kNull:
		return "null"
	case kInt:
		return "int64"
	case kFloat:
		return "float64"
	case kString:
		return "string"
	case kBool:
		return "bool"
	case kTime:
		return "timestamp"
	}
	return "invalid"
}

func (k kind) numeric() bool { return k == kInt || k == kFloat }

// vtype is the static type of an expression: a kind plus, for timestamps,
// the Arrow type carrying unit and time zone.
type vtype struct {
	k  kind
	ts *arrow.TimestampType // only for kTime
}

func (t vtype) String() string { return t.k.String() }

// unit is the timestamp unit of a kTime type.
func (t vtype) unit() arrow.TimeUnit { return t.ts.Unit }

// arrowType is the Arrow type of arrays produced for t.
func (t vtype) arrowType() arrow.DataType {
	switch t.k {
	case kInt:
		return arrow.PrimitiveTypes.Int64
	case kFloat:
		return arrow.PrimitiveTypes.Float64
	case kString:
		return arrow.BinaryTypes.String
	case kBool:
		return arrow.FixedWidthTypes.Boolean
	case kTime:
		return t.ts
	}
	return arrow.Null
}

var (
	tNull   = vtype{k: kNull}
	tInt    = vtype{k: kInt}
	tFloat  = vtype{k: kFloat}
	tString = vtype{k: kString}
	tBool   = vtype{k: kBool}
)

func timeType(unit arrow.TimeUnit, tz string) vtype {
	return vtype{k: kTime, ts: &arrow.TimestampType{Unit: unit, TimeZone: tz}}
}

// columnType maps the Arrow type of a column to its value type.
func columnType(dt arrow.DataType) (vtype, bool) {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return tInt, true
	case arrow.FLOAT32, arrow.FLOAT64:
		return tFloat, true
	case arrow.STRING, arrow.LARGE_STRING:
		return tString, true
	case arrow.BOOL:
		return tBool, true
	case arrow.TIMESTAMP:
		if ts, ok := dt.(*arrow.TimestampType); ok && ts.Unit <= arrow.Nanosecond {
			return vtype{k: kTime, ts: ts}, true
		}
	}
	return vtype{}, false
}

// perSecond is the number of ticks of unit u in one second.
func perSecond(u arrow.TimeUnit) int64 {
	switch u {
	case arrow.Second:
		return 1
	case arrow.Millisecond:
		return 1e3
	case arrow.Microsecond:
		return 1e6
	}
	return 1e9
}

// unitFactor returns how many ticks of the finer unit make one tick of the
// coarser one, given fine >= coarse.
func unitFactor(coarse, fine arrow.TimeUnit) int64 {
	return perSecond(fine) / perSecond(coarse)
}

// floorDiv divides rounding toward negative infinity; d > 0.
func floorDiv(x, d int64) int64 {
	q := x / d
	if x%d < 0 {
		q--
	}
	return q
}
