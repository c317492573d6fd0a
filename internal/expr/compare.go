package expr

import (
	"cmp"
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
)

func cmpOpOf(k tokKind) cmpOp {
	switch k {
	case tokNe:
		return opNe
	case tokLt:
		return opLt
	case tokLe:
		return opLe
	case tokGt:
		return opGt
	case tokGe:
		return opGe
	}
	return opEq
}

// flip returns the operator with swapped operands: x < y == y > x.
func (op cmpOp) flip() cmpOp {
	switch op {
	case opLt:
		return opGt
	case opLe:
		return opGe
	case opGt:
		return opLt
	case opGe:
		return opLe
	}
	return op
}

// holds tells whether op holds for an ordering result c (-1, 0, +1).
func (op cmpOp) holds(c int) bool {
	switch op {
	case opEq:
		return c == 0
	case opNe:
		return c != 0
	case opLt:
		return c < 0
	case opLe:
		return c <= 0
	case opGt:
		return c > 0
	}
	return c >= 0
}

type cmpMode uint8

const (
	cmpNull   cmpMode = iota // a null literal operand: always null
	cmpInt                   // int64
	cmpFloat                 // numeric, compared as float64
	cmpString                // byte order
	cmpBool                  // == and != only
	cmpTime                  // instants; int64 operands are milliseconds
)

// cmpNode is a comparison.
type cmpNode struct {
	nodeBase
	op     cmpOp
	mode   cmpMode
	l, r   node
	lu, ru arrow.TimeUnit // cmpTime: units of the operands
}

func (n *cmpNode) eval(c *evalCtx, act []bool) (*vec, error) {
	l, err := n.l.eval(c, act)
	if err != nil {
		return nil, err
	}
	r, err := n.r.eval(c, act)
	if err != nil {
		return nil, err
	}
	if n.mode == cmpNull || l.isNullScalar() || r.isNullScalar() {
		return nullScalar(kBool), nil
	}
	switch n.mode {
	case cmpInt:
		return compareOrdered(c.n, n.op, l, r, l.i, r.i), nil
	case cmpFloat:
		l, r = toFloat(l), toFloat(r)
		return compareOrdered(c.n, n.op, l, r, l.f, r.f), nil
	case cmpString:
		return compareStrings(c.n, n.op, l, r, act), nil
	case cmpBool:
		return compareBools(c.n, n.op, l, r), nil
	case cmpTime:
		return compareTimes(c.n, n.op, l, n.lu, r, n.ru), nil
	}
	return nullScalar(kBool), nil
}

// compareOrdered compares the values a of l with the values b of r.
func compareOrdered[T cmp.Ordered](n int, op cmpOp, l, r *vec, a, b []T) *vec {
	m, scalar := shape(n, l.scalar, r.scalar)
	out := &vec{k: kBool, scalar: scalar, b: make([]bool, m), valid: mergeValid(m, l, r)}
	switch {
	case l.scalar && !r.scalar:
		cmpScalar(op.flip(), b[:m], a[0], out.b)
	case r.scalar:
		cmpScalar(op, a[:m], b[0], out.b)
	default:
		cmpVectors(op, a[:m], b[:m], out.b)
	}
	return out
}

// cmpScalar sets out[i] = a[i] op y. len(a) == len(out).
func cmpScalar[T cmp.Ordered](op cmpOp, a []T, y T, out []bool) {
	out = out[:len(a)]
	switch op {
	case opEq:
		for i, x := range a {
			out[i] = x == y
		}
	case opNe:
		for i, x := range a {
			out[i] = x != y
		}
	case opLt:
		for i, x := range a {
			out[i] = x < y
		}
	case opLe:
		for i, x := range a {
			out[i] = x <= y
		}
	case opGt:
		for i, x := range a {
			out[i] = x > y
		}
	case opGe:
		for i, x := range a {
			out[i] = x >= y
		}
	}
}

// cmpVectors sets out[i] = a[i] op b[i]. len(a) == len(b) == len(out).
func cmpVectors[T cmp.Ordered](op cmpOp, a, b []T, out []bool) {
	b, out = b[:len(a)], out[:len(a)]
	switch op {
	case opEq:
		for i, x := range a {
			out[i] = x == b[i]
		}
	case opNe:
		for i, x := range a {
			out[i] = x != b[i]
		}
	case opLt:
		for i, x := range a {
			out[i] = x < b[i]
		}
	case opLe:
		for i, x := range a {
			out[i] = x <= b[i]
		}
	case opGt:
		for i, x := range a {
			out[i] = x > b[i]
		}
	case opGe:
		for i, x := range a {
			out[i] = x >= b[i]
		}
	}
}

// compareStrings compares strings in byte order, reading a string column
// directly when it is compared with a scalar.
func compareStrings(n int, op cmpOp, l, r *vec, act []bool) *vec {
	if l.scalar && !r.scalar {
		l, r, op = r, l, op.flip()
	}
	if r.scalar && !l.scalar && l.s == nil && l.sa != nil {
		out := &vec{k: kBool, b: make([]bool, n), valid: l.valid}
		cmpStringArray(op, l.sa, r.s[0], out.b, act)
		return out
	}
	return compareOrdered(n, op, l, r, l.strs(), r.strs())
}

// cmpStringArray sets out[i] = a.Value(i) op y, reading a's offsets and
// data directly: this loop is the core of most string filters.
// Inactive rows may be skipped (left false).
func cmpStringArray(op cmpOp, a *array.String, y string, out []bool, act []bool) {
	col := newStrCol(a)
	out = out[:a.Len()]
	switch op {
	case opEq, opNe:
		if len(y) <= 8 && eqShort(a, y, op == opNe, out) {
			break
		}
		ne := op == opNe
		offs, data, base := col.offs, col.data, col.base
		yl := int32(len(y))
		for i := range out {
			if act != nil && !act[i] {
				continue
			}
			lo, hi := offs[i]-base, offs[i+1]-base
			out[i] = (hi-lo == yl && data[lo:hi] == y) != ne
		}
	case opLt:
		for i := range out {
			out[i] = col.at(i) < y
		}
	case opLe:
		for i := range out {
			out[i] = col.at(i) <= y
		}
	case opGt:
		for i := range out {
			out[i] = col.at(i) > y
		}
	case opGe:
		for i := range out {
			out[i] = col.at(i) >= y
		}
	}
}

// eqShort sets out[i] = (a.Value(i) == y) != ne for a needle of at most 8
// bytes (codes, countries, enum values), comparing each candidate with one
// 8-byte load and mask instead of a call to memequal. It reports false,
// doing nothing, when the data buffer is too short for such loads.
func eqShort(a *array.String, y string, ne bool, out []bool) bool {
	if a.Len() == 0 {
		return true
	}
	offs := a.ValueOffsets()
	buf := a.ValueBytes()
	base := offs[0]
	if len(buf) < 8 {
		return false
	}
	var want [8]byte
	copy(want[:], y)
	y64 := binary.LittleEndian.Uint64(want[:])
	mask := ^uint64(0) >> (64 - 8*uint(len(y)))
	if len(y) == 0 {
		mask = 0
	}
	yl := int32(len(y))
	last := int32(len(buf) - 8) // the last offset an 8-byte load can start at
	for i := range out {
		lo, hi := offs[i]-base, offs[i+1]-base
		eq := false
		if hi-lo == yl {
			if lo > last {
				// Near the end of the buffer: load the final 8 bytes and
				// shift the value down.
				w := binary.LittleEndian.Uint64(buf[last:])
				eq = (w>>(8*uint(lo-last)))&mask == y64
			} else {
				eq = binary.LittleEndian.Uint64(buf[lo:])&mask == y64
			}
		}
		out[i] = eq != ne
	}
	return true
}

// compareBools implements == and != on bools.
func compareBools(n int, op cmpOp, l, r *vec) *vec {
	m, scalar := shape(n, l.scalar, r.scalar)
	out := &vec{k: kBool, scalar: scalar, b: make([]bool, m), valid: mergeValid(m, l, r)}
	ne := op == opNe
	for i := range out.b {
		out.b[i] = (l.b[l.idx(i)] != r.b[r.idx(i)]) == ne
	}
	return out
}

// compareTimes compares instants given as ticks of units lu and ru.
func compareTimes(n int, op cmpOp, l *vec, lu arrow.TimeUnit, r *vec, ru arrow.TimeUnit) *vec {
	if lu == ru {
		return compareOrdered(n, op, l, r, l.i, r.i)
	}
	if l.scalar && !r.scalar {
		l, lu, r, ru, op = r, ru, l, lu, op.flip()
	}
	if !r.scalar || l.scalar {
		m, scalar := shape(n, l.scalar, r.scalar)
		out := &vec{k: kBool, scalar: scalar, b: make([]bool, m), valid: mergeValid(m, l, r)}
		for i := range out.b {
			out.b[i] = op.holds(cmpInstants(l.i[l.idx(i)], lu, r.i[r.idx(i)], ru))
		}
		return out
	}
	// Vector l against scalar r: restate r in l's unit, so that the fast
	// same-unit comparison applies.
	y := r.i[0]
	if lu > ru {
		// l is finer: scale r up; beyond the int64 range it is greater (or
		// smaller) than every value of l.
		if p, over := mul64(y, unitFactor(ru, lu)); !over {
			return compareOrdered(n, op, l, intScalar(p), l.i, []int64{p})
		}
		order := 1 // y*f is below every int64
		if y > 0 {
			order = -1
		}
		return constCompare(n, l, op.holds(order))
	}
	// l is coarser: with q, rem = floor-divmod(y, f), l*f vs y orders like l
	// vs q when rem == 0; otherwise l*f is never equal to y, is smaller for
	// l <= q and greater for l > q.
	f := unitFactor(lu, ru)
	q := floorDiv(y, f)
	if y-q*f == 0 {
		return compareOrdered(n, op, l, intScalar(q), l.i, []int64{q})
	}
	switch op {
	case opEq:
		return constCompare(n, l, false)
	case opNe:
		return constCompare(n, l, true)
	case opLt, opLe:
		return compareOrdered(n, opLe, l, intScalar(q), l.i, []int64{q})
	}
	return compareOrdered(n, opGt, l, intScalar(q), l.i, []int64{q})
}

// constCompare is the result of a comparison that is x for every non-null
// row of v.
func constCompare(n int, v *vec, x bool) *vec {
	if v.valid == nil {
		return boolScalar(x)
	}
	out := &vec{k: kBool, b: make([]bool, n), valid: v.valid}
	if x {
		for i := range out.b {
			out.b[i] = true
		}
	}
	return out
}

// cmpInstants orders a ticks of unit ua against b ticks of unit ub exactly,
// without overflow.
func cmpInstants(a int64, ua arrow.TimeUnit, b int64, ub arrow.TimeUnit) int {
	if ua == ub {
		return cmp.Compare(a, b)
	}
	if ua > ub {
		return -cmpInstants(b, ub, a, ua)
	}
	// a is coarser: compare a*f with b.
	f := unitFactor(ua, ub)
	q := floorDiv(b, f)
	switch {
	case a < q:
		return -1
	case a > q:
		return 1
	case b-q*f == 0:
		return 0
	}
	return -1
}
