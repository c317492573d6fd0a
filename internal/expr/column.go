package expr

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// colNode is a reference to a column of the record.
type colNode struct {
	nodeBase
	idx  int
	name string
	dt   arrow.DataType
}

// colValue is a column read into a vec, cached for the duration of one
// evaluation so that a column used twice is read once.
type colValue struct {
	v *vec
	// u64 is set for a Uint64 column holding values above MaxInt64; those
	// rows are an error when active.
	u64 *array.Uint64
}

func (n *colNode) eval(c *evalCtx, act []bool) (*vec, error) {
	cv := c.cols[n.idx]
	if cv == nil {
		var err error
		if cv, err = readColumn(c, n); err != nil {
			return nil, err
		}
		c.cols[n.idx] = cv
	}
	if cv.u64 != nil {
		u := cv.u64
		vals := u.Uint64Values()
		if row := firstBad(c.n, act, func(i int) bool { return vals[i] > math.MaxInt64 }, cv.v); row >= 0 {
			return nil, errorAt(c.src, n.pos, "value %d of uint64 column %q at row %d overflows int64", vals[row], n.name, row)
		}
	}
	return cv.v, nil
}

// readColumn converts the column of n into a vec: zero-copy for Int64,
// Float64, Timestamp and String arrays, converted for the other types.
func readColumn(c *evalCtx, n *colNode) (*colValue, error) {
	arr, err := recordColumn(c.rec, n.idx, c.n)
	if err != nil {
		return nil, err
	}
	if arr != c.rec.Column(n.idx) {
		c.owned = append(c.owned, arr)
	}
	if !arrow.TypeEqual(arr.DataType(), n.dt) {
		return nil, errorf("column %q holds %s values, but the schema says %s", n.name, arr.DataType(), n.dt)
	}
	valid, err := validity(arr)
	if err != nil {
		return nil, errorf("column %q: %v", n.name, err)
	}
	cv := &colValue{}
	v := &vec{k: n.t.k, valid: valid}
	switch a := arr.(type) {
	case *array.Int64:
		v.i, v.borrowed = a.Int64Values(), true
	case *array.Int32:
		v.i = widen(a.Int32Values())
	case *array.Int16:
		v.i = widen(a.Int16Values())
	case *array.Int8:
		v.i = widen(a.Int8Values())
	case *array.Uint32:
		v.i = widen(a.Uint32Values())
	case *array.Uint16:
		v.i = widen(a.Uint16Values())
	case *array.Uint8:
		v.i = widen(a.Uint8Values())
	case *array.Uint64:
		vals := a.Uint64Values()
		v.i = make([]int64, len(vals))
		var flags int64 // sign bit set by values above MaxInt64
		for i, x := range vals {
			v.i[i] = int64(x)
			flags |= int64(x)
		}
		if flags < 0 {
			cv.u64 = a
		}
	case *array.Float64:
		v.f, v.borrowed = a.Float64Values(), true
	case *array.Float32:
		vals := a.Float32Values()
		v.f = make([]float64, len(vals))
		for i, x := range vals {
			v.f[i] = float64(x)
		}
	case *array.String:
		v.sa = a
	case *array.LargeString:
		v.s = make([]string, a.Len())
		for i := range v.s {
			v.s[i] = a.Value(i)
		}
	case *array.Boolean:
		v.b = make([]bool, a.Len())
		for i := range v.b {
			v.b[i] = a.Value(i)
		}
	case *array.Timestamp:
		v.i = arrow.Int64Traits.CastFromBytes(arrow.TimestampTraits.CastToBytes(a.TimestampValues()))
		v.borrowed = true
	default:
		return nil, errorf("column %q: unexpected array implementation %T for type %s", n.name, arr, arr.DataType())
	}
	if l := valuesLen(v); l != c.n {
		return nil, errorf("column %q has %d values, want %d", n.name, l, c.n)
	}
	cv.v = v
	return cv, nil
}

func lenOf(a arrow.Array) int {
	if a == nil {
		return 0
	}
	return a.Len()
}

func valuesLen(v *vec) int {
	switch {
	case v.sa != nil:
		return v.sa.Len()
	case v.k == kInt || v.k == kTime:
		return len(v.i)
	case v.k == kFloat:
		return len(v.f)
	case v.k == kString:
		return len(v.s)
	case v.k == kBool:
		return len(v.b)
	}
	return 0
}

func widen[T int8 | int16 | int32 | uint8 | uint16 | uint32](vals []T) []int64 {
	out := make([]int64, len(vals))
	for i, x := range vals {
		out[i] = int64(x)
	}
	return out
}

// validity returns the validity of arr as a []bool, or nil if it has no
// nulls.
func validity(arr arrow.Array) ([]bool, error) {
	if arr.NullN() == 0 {
		return nil, nil
	}
	bm := arr.NullBitmapBytes()
	if len(bm) == 0 {
		return nil, nil // as Array.IsValid: no bitmap means no nulls
	}
	n := arr.Len()
	out := make([]bool, n)
	off := arr.Data().Offset()
	if len(bm)*8 < off+n {
		return nil, errorf("validity bitmap too short: %d bytes for %d rows at offset %d", len(bm), n, off)
	}
	for i := range out {
		out[i] = bitutil.BitIsSet(bm, off+i)
	}
	return out, nil
}
