package expr

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
)

// logicNode is a chain of operands joined by "and" (or "or"), with SQL's
// three-valued logic.
type logicNode struct {
	nodeBase
	or bool
	xs []node
}

func (n *logicNode) eval(c *evalCtx, act []bool) (*vec, error) {
	// d is the value that decides the result on its own: false for "and",
	// true for "or".
	d := n.or
	acc, err := n.xs[0].eval(c, act)
	if err != nil {
		return nil, err
	}
	for _, x := range n.xs[1:] {
		if acc.scalar && acc.validAt(0) && acc.b[0] == d {
			return boolScalar(d), nil
		}
		// Rows already decided do not need x: x must not fail for them,
		// and costly kernels may skip them.
		sub := act
		switch {
		case acc.scalar:
		case act == nil && acc.valid == nil && !d:
			sub = acc.b // "and": the rows still true
		default:
			sub = narrow(c.n, act, func(i int) bool { return !acc.validAt(i) || acc.b[i] != d })
		}
		v, err := x.eval(c, sub)
		if err != nil {
			return nil, err
		}
		acc = logic3(c.n, d, acc, v)
	}
	return acc, nil
}

// logic3 combines a and b with "and" (d == false) or "or" (d == true).
func logic3(n int, d bool, a, b *vec) *vec {
	if b.scalar && !a.scalar {
		a, b = b, a
	}
	if a.scalar {
		switch {
		case !a.validAt(0): // null: b's decisive rows decide, others stay null
			if b.scalar {
				if b.validAt(0) && b.b[0] == d {
					return boolScalar(d)
				}
				return nullScalar(kBool)
			}
			out := &vec{k: kBool, b: b.b, valid: make([]bool, n)}
			for i := range out.valid {
				out.valid[i] = b.validAt(i) && b.b[i] == d
			}
			return out
		case a.b[0] == d:
			return boolScalar(d)
		}
		return b // a is the identity element
	}
	out := &vec{k: kBool, b: make([]bool, n)}
	ab, bb := a.b[:n], b.b[:n]
	if a.valid == nil && b.valid == nil {
		combineBools(out.b, ab, bb, d)
		return out
	}
	out.valid = make([]bool, n)
	for i := range out.b {
		va, vb := a.validAt(i), b.validAt(i)
		decided := (va && ab[i] == d) || (vb && bb[i] == d)
		out.b[i] = decided == d
		out.valid[i] = decided || (va && vb)
	}
	return out
}

// combineBools sets out = a OR b (or) or a AND b (!or), elementwise. It
// works on eight bools per step: a Go bool is one byte holding 0 or 1, so
// bitwise operations on words of them are exact, and there are no
// branches to mispredict.
func combineBools(out, a, b []bool, or bool) {
	n := len(out)
	a, b = a[:n], b[:n]
	words := n / 8
	if !aligned8(out) || !aligned8(a) || !aligned8(b) {
		words = 0 // never for slices from make; keep word access aligned anyway
	}
	if words > 0 {
		ow := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(out))), words)
		aw := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(a))), words)
		bw := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), words)
		if or {
			for i, x := range aw {
				ow[i] = x | bw[i]
			}
		} else {
			for i, x := range aw {
				ow[i] = x & bw[i]
			}
		}
	}
	for i := words * 8; i < n; i++ {
		if or {
			out[i] = a[i] || b[i]
		} else {
			out[i] = a[i] && b[i]
		}
	}
}

func aligned8(s []bool) bool { return uintptr(unsafe.Pointer(unsafe.SliceData(s)))%8 == 0 }

// notNode is logical negation; not null is null.
type notNode struct {
	nodeBase
	x node
}

func (n *notNode) eval(c *evalCtx, act []bool) (*vec, error) {
	x, err := n.x.eval(c, act)
	if err != nil || x.isNullScalar() {
		return nullScalar(kBool), err
	}
	out := &vec{k: kBool, scalar: x.scalar, b: make([]bool, len(x.b)), valid: x.valid}
	for i, v := range x.b {
		out.b[i] = !v
	}
	return out, nil
}

// isNullNode is "x is null" or, with negate, "x is not null".
type isNullNode struct {
	nodeBase
	x      node
	negate bool
}

func (n *isNullNode) eval(c *evalCtx, act []bool) (*vec, error) {
	x, err := n.x.eval(c, act)
	if err != nil {
		return nil, err
	}
	if !x.hasNulls() {
		return boolScalar(n.negate), nil
	}
	if x.scalar {
		return boolScalar(!n.negate), nil
	}
	if n.negate {
		return &vec{k: kBool, b: x.valid}, nil
	}
	out := &vec{k: kBool, b: make([]bool, len(x.valid))}
	for i, v := range x.valid {
		out.b[i] = !v
	}
	return out, nil
}

// inNode is "x [not] in (literals)", with SQL semantics: null if x is null,
// or if x matches no literal and the list contains null.
type inNode struct {
	nodeBase
	x       node
	negate  bool
	hasNull bool
	ints    valueSet[int64]   // kInt; kTime (in x's unit)
	floats  valueSet[float64] // kFloat; float literals for kInt, compared as float64
	strs    valueSet[string]
	bools   [2]bool // kBool: whether false, true are listed
}

// add adds the literal a to the list of n, whose operand has type xt.
func (n *inNode) add(c *checker, xt vtype, a *ast) error {
	l := a.lit
	if l.k == kNull {
		n.hasNull = true
		return nil
	}
	ok := true
	switch xt.k {
	case kNull:
	case kInt:
		switch l.k {
		case kInt:
			n.ints.add(l.i)
		case kFloat:
			n.floats.add(l.f)
		default:
			ok = false
		}
	case kFloat:
		switch l.k {
		case kInt:
			n.floats.add(float64(l.i))
		case kFloat:
			n.floats.add(l.f)
		default:
			ok = false
		}
	case kString:
		if ok = l.k == kString; ok {
			n.strs.add(l.s)
		}
	case kBool:
		if ok = l.k == kBool; ok {
			n.bools[b2i(l.b)] = true
		}
	case kTime:
		var lu arrow.TimeUnit
		var ticks int64
		switch l.k {
		case kInt:
			lu, ticks = arrow.Millisecond, l.i
		case kString:
			var err error
			if lu, ticks, err = parseInstant(l.s); err != nil {
				return c.errAt(a.pos, "invalid timestamp literal %q in IN list: want RFC 3339, like 2024-01-02T15:04:05Z", l.s)
			}
		default:
			ok = false
		}
		// A literal not representable in x's unit can never be equal.
		if ok {
			if t, exact := convertExact(ticks, lu, xt.unit()); exact {
				n.ints.add(t)
			}
		}
	}
	if !ok {
		return c.errAt(a.pos, "IN list value %s (%s) cannot be compared with %s", c.src[a.pos:a.end], l.k, xt)
	}
	return nil
}

// convertExact converts ticks of unit from to unit to, reporting false if
// the instant is not exactly representable there.
func convertExact(t int64, from, to arrow.TimeUnit) (int64, bool) {
	switch {
	case from == to:
		return t, true
	case from < to:
		p, over := mul64(t, unitFactor(from, to))
		return p, !over
	}
	f := unitFactor(to, from)
	if t%f != 0 {
		return 0, false
	}
	return t / f, true
}

func (n *inNode) finish() {
	n.ints.finish()
	n.floats.finish()
	n.strs.finish()
}

func (n *inNode) eval(c *evalCtx, act []bool) (*vec, error) {
	x, err := n.x.eval(c, act)
	if err != nil || x.isNullScalar() {
		return nullScalar(kBool), err
	}
	m, _ := shape(c.n, x.scalar)
	found := make([]bool, m)
	switch x.k {
	case kInt, kTime:
		for i, v := range x.i {
			found[i] = n.ints.has(v) || (len(n.floats.list) > 0 && n.floats.has(float64(v)))
		}
	case kFloat:
		for i, v := range x.f {
			found[i] = n.floats.has(v)
		}
	case kString:
		if x.s == nil && x.sa != nil {
			col := newStrCol(x.sa)
			for i := range found {
				if isActive(act, i) {
					found[i] = n.strs.has(col.at(i))
				}
			}
			break
		}
		for i, v := range x.strs() {
			found[i] = n.strs.has(v)
		}
	case kBool:
		for i, v := range x.b {
			found[i] = n.bools[b2i(v)]
		}
	}
	out := &vec{k: kBool, scalar: x.scalar, b: found, valid: x.valid}
	if n.hasNull {
		valid := make([]bool, m)
		for i, f := range found {
			valid[i] = f && x.validAt(i)
		}
		out.valid = valid
	}
	if n.negate {
		for i, f := range found {
			found[i] = !f
		}
	}
	return out, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// valueSet is a set of literals: a list scanned linearly while short, a
// map when longer.
type valueSet[T comparable] struct {
	list []T
	m    map[T]struct{}
}

func (s *valueSet[T]) add(x T) { s.list = append(s.list, x) }

func (s *valueSet[T]) finish() {
	if len(s.list) > 8 {
		s.m = make(map[T]struct{}, len(s.list))
		for _, x := range s.list {
			s.m[x] = struct{}{}
		}
	}
}

func (s *valueSet[T]) has(x T) bool {
	if s.m != nil {
		_, ok := s.m[x]
		return ok
	}
	for _, y := range s.list {
		if x == y {
			return true
		}
	}
	return false
}
