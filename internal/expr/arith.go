package expr

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
)

type arithMode uint8

const (
	arithNull     arithMode = iota // null op null
	arithInt                       // int64 op int64
	arithFloat                     // numeric op numeric, at least one float64
	arithConcat                    // string + string
	arithTimeInt                   // timestamp ± int64 milliseconds
	arithIntTime                   // int64 milliseconds + timestamp
	arithTimeDiff                  // timestamp - timestamp
)

// arithNode is a binary arithmetic operation.
type arithNode struct {
	nodeBase
	op     tokKind
	mode   arithMode
	l, r   node
	unit   arrow.TimeUnit // result unit of arithTimeInt, arithIntTime
	lu, ru arrow.TimeUnit // operand units of arithTimeDiff
}

func (n *arithNode) eval(c *evalCtx, act []bool) (*vec, error) {
	l, err := n.l.eval(c, act)
	if err != nil {
		return nil, err
	}
	r, err := n.r.eval(c, act)
	if err != nil {
		return nil, err
	}
	if l.isNullScalar() || r.isNullScalar() {
		return nullScalar(n.t.k), nil
	}
	switch n.mode {
	case arithInt:
		return n.intOp(c, act, n.op, l, r)
	case arithFloat:
		return floatOp(c.n, n.op, toFloat(l), toFloat(r)), nil
	case arithConcat:
		return concatOp(c.n, l, r), nil
	case arithTimeInt:
		d, err := n.millisToUnit(c, act, r, n.unit)
		if err != nil {
			return nil, err
		}
		return n.intOp(c, act, n.op, l, d)
	case arithIntTime:
		d, err := n.millisToUnit(c, act, l, n.unit)
		if err != nil {
			return nil, err
		}
		return n.intOp(c, act, tokPlus, d, r)
	case arithTimeDiff:
		return n.timeDiff(c, act, l, r)
	}
	return nullScalar(n.t.k), nil
}

// millisToUnit converts an int64 vector of milliseconds to ticks of unit u,
// truncating toward zero for seconds.
func (n *arithNode) millisToUnit(c *evalCtx, act []bool, v *vec, u arrow.TimeUnit) (*vec, error) {
	switch u {
	case arrow.Millisecond:
		return v, nil
	case arrow.Second:
		out := &vec{k: kInt, scalar: v.scalar, valid: v.valid, i: make([]int64, len(v.i))}
		for i, x := range v.i {
			out.i[i] = x / 1000
		}
		return out, nil
	}
	return scaleInts(c, act, n, v, unitFactor(arrow.Millisecond, u), "milliseconds")
}

// scaleInts multiplies an int64 vector by f, failing on overflow in an
// active row.
func scaleInts(c *evalCtx, act []bool, n node, v *vec, f int64, what string) (*vec, error) {
	out := &vec{k: v.k, scalar: v.scalar, valid: v.valid, i: make([]int64, len(v.i))}
	var flags int64
	for i, x := range v.i {
		p, bad := mulFlag(x, f)
		out.i[i] = p
		flags |= bad
	}
	if flags != 0 {
		if row := c.badRow(v.scalar, act, func(i int) bool { _, o := mul64(v.i[v.idx(i)], f); return o }, v); row >= 0 {
			return nil, c.overflowErr(n, row, fmt.Sprintf("%d %s", v.i[v.idx(row)], what))
		}
	}
	return out, nil
}

// timeDiff computes a - b as int64 milliseconds, truncated toward zero, so
// that a - b == -(b - a).
func (n *arithNode) timeDiff(c *evalCtx, act []bool, a, b *vec) (*vec, error) {
	u := max(n.lu, n.ru)
	var err error
	if n.lu < u {
		if a, err = scaleInts(c, act, n, a, unitFactor(n.lu, u), "timestamp ticks"); err != nil {
			return nil, err
		}
	}
	if n.ru < u {
		if b, err = scaleInts(c, act, n, b, unitFactor(n.ru, u), "timestamp ticks"); err != nil {
			return nil, err
		}
	}
	d, err := n.intOp(c, act, tokMinus, a, b)
	if err != nil {
		return nil, err
	}
	switch u {
	case arrow.Millisecond:
		return d, nil
	case arrow.Second:
		return scaleInts(c, act, n, d, 1000, "seconds")
	}
	f := unitFactor(arrow.Millisecond, u)
	out := &vec{k: kInt, scalar: d.scalar, valid: d.valid, i: make([]int64, len(d.i))}
	for i, x := range d.i {
		out.i[i] = x / f
	}
	return out, nil
}

// intOp computes l op r for int64 operands, which must not be null scalars.
// Division and modulo by zero give null; overflow in an active row is an
// error.
func (n *arithNode) intOp(c *evalCtx, act []bool, op tokKind, l, r *vec) (*vec, error) {
	m, scalar := shape(c.n, l.scalar, r.scalar)
	out := &vec{k: n.t.k, scalar: scalar, i: make([]int64, m), valid: mergeValid(m, l, r)}
	a, b, o := l.i, r.i, out.i
	var over bool
	switch op {
	case tokPlus, tokMinus:
		over = addInts(o, l, r, m, op == tokMinus)
	case tokStar:
		over = mulInts(o, l, r, m)
	case tokSlash, tokPercent:
		if r.scalar && b[0] == 0 {
			return nullScalar(n.t.k), nil
		}
		var allNull bool
		if over, allNull = divInts(out, l, r, m, op == tokSlash, scalar); allNull {
			return nullScalar(n.t.k), nil
		}
	}
	if over {
		if row := c.badRow(scalar, act, func(i int) bool {
			_, ov := intOp1(op, a[l.idx(i)], b[r.idx(i)])
			return ov
		}, l, r); row >= 0 {
			return nil, c.overflowErr(n, row, fmt.Sprintf("%d %s %d", a[l.idx(row)], opName(op), b[r.idx(row)]))
		}
	}
	return out, nil
}

// addInts writes l + r (l - r when sub) into o for the m rows, and
// reports whether any row may have overflowed: the sign bits of all rows
// are or-ed into one flag, so the loops do not branch; the caller finds
// the row.
func addInts(o []int64, l, r *vec, m int, sub bool) bool {
	a, b := l.i, r.i
	var flags int64
	switch {
	case l.scalar && !r.scalar:
		x := a[0]
		for i, y := range b[:m] {
			if sub {
				y = -y // overflow of -MinInt64 is caught below via the flag
				flags |= y & b[i]
			}
			s := x + y
			o[i] = s
			flags |= (x ^ s) & (y ^ s)
		}
	case r.scalar:
		y := b[0]
		if sub {
			if y == math.MinInt64 {
				// x - MinInt64 overflows unless x < 0.
				for i, x := range a[:m] {
					o[i] = x - y
					flags |= ^x
				}
				break
			}
			y = -y
		}
		for i, x := range a[:m] {
			s := x + y
			o[i] = s
			flags |= (x ^ s) & (y ^ s)
		}
	default:
		b = b[:m]
		for i, x := range a[:m] {
			y := b[i]
			var s int64
			if sub {
				s = x - y
				flags |= (x ^ y) & (x ^ s)
			} else {
				s = x + y
				flags |= (x ^ s) & (y ^ s)
			}
			o[i] = s
		}
	}
	return flags < 0
}

// mulInts writes l * r into o for the m rows, and reports whether any row
// overflowed.
func mulInts(o []int64, l, r *vec, m int) bool {
	a, b := l.i, r.i
	var flags int64
	switch {
	case l.scalar || r.scalar:
		var vs []int64 // the vector operand, or the second scalar
		var y int64
		if l.scalar {
			vs, y = b, a[0] // multiplication commutes
		} else {
			vs, y = a, b[0]
		}
		for i, x := range vs[:m] {
			p, bad := mulFlag(x, y)
			o[i] = p
			flags |= bad
		}
	default:
		b = b[:m]
		for i, x := range a[:m] {
			p, bad := mulFlag(x, b[i])
			o[i] = p
			flags |= bad
		}
	}
	return flags != 0
}

// divInts writes l / r (l % r unless div) into out for the m rows; a row
// dividing by zero becomes null. It reports whether a row overflowed
// (MinInt64 / -1), and allNull when the result is a scalar made null.
func divInts(out, l, r *vec, m int, div, scalar bool) (over, allNull bool) {
	a, b, o := l.i, r.i, out.i
	var valid []bool
	for i := range o {
		x, y := a[l.idx(i)], b[r.idx(i)]
		switch {
		case y == 0:
			if valid == nil {
				valid = make([]bool, m)
				for j := range valid {
					valid[j] = out.valid == nil || out.valid[j]
				}
			}
			valid[i] = false
		case y == -1:
			// Avoid the hardware trap for MinInt64 / -1.
			if div {
				o[i] = -x
				over = over || x == math.MinInt64
			}
		case div:
			o[i] = x / y
		default:
			o[i] = x % y
		}
	}
	if valid != nil {
		if scalar {
			return over, true
		}
		out.valid = valid
	}
	return over, false
}

// intOp1 computes one int64 operation, reporting overflow. y must not be 0
// for / and %.
func intOp1(op tokKind, x, y int64) (int64, bool) {
	switch op {
	case tokPlus:
		s := x + y
		return s, (x^s)&(y^s) < 0
	case tokMinus:
		s := x - y
		return s, (x^y)&(x^s) < 0
	case tokStar:
		return mul64(x, y)
	case tokSlash:
		if y == 0 {
			return 0, false
		}
		if y == -1 {
			return -x, x == math.MinInt64
		}
		return x / y, false
	case tokPercent:
		if y == 0 || y == -1 {
			return 0, false
		}
		return x % y, false
	}
	return 0, false
}

// mul64 multiplies two int64s, reporting overflow.
func mul64(x, y int64) (int64, bool) {
	p, bad := mulFlag(x, y)
	return p, bad != 0
}

// mulFlag multiplies two int64s without branches; bad is non-zero if the
// product overflows, so that a loop can OR the flags of many rows.
func mulFlag(x, y int64) (p, bad int64) {
	hi, lo := bits.Mul64(uint64(x), uint64(y))
	// Turn the unsigned high word into the signed one: subtract y if x is
	// negative and x if y is.
	hi -= uint64(y) & uint64(x>>63)
	hi -= uint64(x) & uint64(y>>63)
	// The product fits iff the high word is the sign extension of lo.
	return int64(lo), int64(hi) ^ (int64(lo) >> 63)
}

// toFloat converts an int64 vec to float64; float64 vecs are returned as is.
func toFloat(v *vec) *vec {
	if v.k != kInt {
		return v
	}
	out := &vec{k: kFloat, scalar: v.scalar, valid: v.valid, f: make([]float64, len(v.i))}
	for i, x := range v.i {
		out.f[i] = float64(x)
	}
	return out
}

// floatOp computes l op r for float64 operands (IEEE 754: x/0 is ±Inf or
// NaN; % is math.Mod).
func floatOp(n int, op tokKind, l, r *vec) *vec {
	m, scalar := shape(n, l.scalar, r.scalar)
	out := &vec{k: kFloat, scalar: scalar, f: make([]float64, m), valid: mergeValid(m, l, r)}
	a, b, o := l.f, r.f, out.f
	switch {
	case l.scalar && !r.scalar:
		x := a[0]
		b = b[:m]
		switch op {
		case tokPlus:
			for i, y := range b {
				o[i] = x + y
			}
		case tokMinus:
			for i, y := range b {
				o[i] = x - y
			}
		case tokStar:
			for i, y := range b {
				o[i] = x * y
			}
		case tokSlash:
			for i, y := range b {
				o[i] = x / y
			}
		default:
			for i, y := range b {
				o[i] = math.Mod(x, y)
			}
		}
	case r.scalar:
		y := b[0]
		a = a[:m]
		switch op {
		case tokPlus:
			for i, x := range a {
				o[i] = x + y
			}
		case tokMinus:
			for i, x := range a {
				o[i] = x - y
			}
		case tokStar:
			for i, x := range a {
				o[i] = x * y
			}
		case tokSlash:
			for i, x := range a {
				o[i] = x / y
			}
		default:
			for i, x := range a {
				o[i] = math.Mod(x, y)
			}
		}
	default:
		a, b = a[:m], b[:m]
		switch op {
		case tokPlus:
			for i, x := range a {
				o[i] = x + b[i]
			}
		case tokMinus:
			for i, x := range a {
				o[i] = x - b[i]
			}
		case tokStar:
			for i, x := range a {
				o[i] = x * b[i]
			}
		case tokSlash:
			for i, x := range a {
				o[i] = x / b[i]
			}
		default:
			for i, x := range a {
				o[i] = math.Mod(x, b[i])
			}
		}
	}
	return out
}

// concatOp concatenates two string vecs.
func concatOp(n int, l, r *vec) *vec {
	m, scalar := shape(n, l.scalar, r.scalar)
	out := &vec{k: kString, scalar: scalar, s: make([]string, m), valid: mergeValid(m, l, r)}
	a, b := l.strs(), r.strs()
	var arena strArena
	for i := range out.s {
		if out.valid == nil || out.valid[i] {
			out.s[i] = arena.concat(a[l.idx(i)], b[r.idx(i)])
		}
	}
	return out
}

// negNode is unary minus.
type negNode struct {
	nodeBase
	x node
}

func (n *negNode) eval(c *evalCtx, act []bool) (*vec, error) {
	x, err := n.x.eval(c, act)
	if err != nil || x.isNullScalar() {
		return nullScalar(n.t.k), err
	}
	out := &vec{k: x.k, scalar: x.scalar, valid: x.valid}
	if x.k == kFloat {
		out.f = make([]float64, len(x.f))
		for i, v := range x.f {
			out.f[i] = -v
		}
		return out, nil
	}
	out.i = make([]int64, len(x.i))
	over := false
	for i, v := range x.i {
		out.i[i] = -v
		over = over || v == math.MinInt64
	}
	if over {
		if row := c.badRow(x.scalar, act, func(i int) bool { return x.i[x.idx(i)] == math.MinInt64 }, x); row >= 0 {
			return nil, c.overflowErr(n, row, fmt.Sprintf("-(%d)", int64(math.MinInt64)))
		}
	}
	return out, nil
}
