package expr

import (
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/suggest"
)

// checker turns a syntax tree into a typed node tree, folding literal-only
// subexpressions into constants.
type checker struct {
	src    string
	schema *arrow.Schema
	used   map[string]bool
	noFold bool // for tests: keep literal-only subexpressions unfolded
}

// opName is how an operator is named in messages.
func opName(k tokKind) string {
	switch k {
	case tokAnd:
		return "and"
	case tokOr:
		return "or"
	case tokNot:
		return "not"
	case tokEq:
		return "=="
	case tokNe:
		return "!="
	case tokLt:
		return "<"
	case tokLe:
		return "<="
	case tokGt:
		return ">"
	case tokGe:
		return ">="
	case tokPlus:
		return "+"
	case tokMinus:
		return "-"
	case tokStar:
		return "*"
	case tokSlash:
		return "/"
	case tokPercent:
		return "%"
	}
	return "?"
}

func (c *checker) errAt(off int, format string, args ...any) error {
	return errorAt(c.src, off, format, args...)
}

func (c *checker) cannotApply(a *ast, l, r vtype) error {
	return c.errAt(a.opPos, "cannot apply %q to %s and %s", opName(a.op), l, r)
}

func (c *checker) check(a *ast) (node, error) {
	switch a.kind {
	case astLit:
		return c.literal(a), nil
	case astColumn:
		return c.column(a)
	case astUnary:
		return c.unary(a)
	case astBinary:
		if isCmpOp(a.op) {
			return c.compare(a)
		}
		return c.arith(a)
	case astLogic:
		return c.logic(a)
	case astIsNull:
		return c.isNull(a)
	case astIn:
		return c.in(a)
	case astCall:
		return c.call(a)
	}
	return nil, c.errAt(a.pos, "internal error: unknown syntax node")
}

func (c *checker) checkAll(as []*ast) ([]node, error) {
	out := make([]node, len(as))
	for i, a := range as {
		n, err := c.check(a)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

func span(a *ast, t vtype, children ...node) nodeBase {
	b := nodeBase{t: t, pos: a.pos, end: a.end}
	for _, ch := range children {
		b.fails = b.fails || ch.base().fails
	}
	return b
}

// fold evaluates n once if all its children are constants, returning the
// constant result. If that evaluation fails (integer overflow), n is kept,
// so the error surfaces at Eval just as it would without folding.
func (c *checker) fold(n node, children ...node) node {
	if c.noFold {
		return n
	}
	for _, ch := range children {
		if !isConst(ch) {
			return n
		}
	}
	v, err := n.eval(&evalCtx{src: c.src, n: 1}, nil)
	if err != nil {
		return n
	}
	if !v.scalar {
		// A one-row vector is laid out like a scalar.
		v = &vec{k: v.k, scalar: true, i: v.i, f: v.f, s: v.strs(), b: v.b, valid: v.valid}
	}
	b := *n.base()
	b.fails = false
	return &constNode{nodeBase: b, v: v}
}

func (c *checker) literal(a *ast) node {
	l := a.lit
	var v *vec
	var t vtype
	switch l.k {
	case kInt:
		v, t = intScalar(l.i), tInt
	case kFloat:
		v, t = floatScalar(l.f), tFloat
	case kString:
		v, t = stringScalar(l.s), tString
	case kBool:
		v, t = boolScalar(l.b), tBool
	default:
		v, t = nullScalar(kNull), tNull
	}
	return &constNode{nodeBase: span(a, t), v: v}
}

func (c *checker) column(a *ast) (node, error) {
	idx := c.schema.FieldIndices(a.name)
	switch len(idx) {
	case 0:
		names := make([]string, c.schema.NumFields())
		for i := range names {
			names[i] = c.schema.Field(i).Name
		}
		return nil, c.errAt(a.opPos, "%s", suggest.UnknownColumn(a.name, names))
	case 1:
	default:
		return nil, c.errAt(a.opPos, "ambiguous column %q: the schema has %d fields of that name", a.name, len(idx))
	}
	dt := c.schema.Field(idx[0]).Type
	t, ok := columnType(dt)
	if !ok {
		return nil, c.errAt(a.opPos, "column %q has unsupported type %s", a.name, dt)
	}
	c.used[a.name] = true
	n := &colNode{nodeBase: span(a, t), idx: idx[0], name: a.name, dt: dt}
	n.fails = dt.ID() == arrow.UINT64
	return n, nil
}

func (c *checker) unary(a *ast) (node, error) {
	x, err := c.check(a.args[0])
	if err != nil {
		return nil, err
	}
	xt := x.base().t
	if a.op == tokNot {
		if xt.k != kBool && xt.k != kNull {
			return nil, c.errAt(a.opPos, "cannot apply \"not\" to %s", xt)
		}
		return c.fold(&notNode{nodeBase: span(a, tBool, x), x: x}, x), nil
	}
	if !xt.k.numeric() && xt.k != kNull {
		return nil, c.errAt(a.opPos, "cannot apply \"-\" to %s", xt)
	}
	n := &negNode{nodeBase: span(a, xt, x), x: x}
	n.fails = n.fails || xt.k == kInt
	return c.fold(n, x), nil
}

func (c *checker) logic(a *ast) (node, error) {
	xs, err := c.checkAll(a.args)
	if err != nil {
		return nil, err
	}
	for i, x := range xs {
		if k := x.base().t.k; k != kBool && k != kNull {
			return nil, c.errAt(a.args[i].pos, "operand of %q must be bool, found %s", opName(a.op), x.base().t)
		}
	}
	return c.fold(&logicNode{nodeBase: span(a, tBool, xs...), or: a.op == tokOr, xs: xs}, xs...), nil
}

func (c *checker) isNull(a *ast) (node, error) {
	x, err := c.check(a.args[0])
	if err != nil {
		return nil, err
	}
	return c.fold(&isNullNode{nodeBase: span(a, tBool, x), x: x, negate: a.negate}, x), nil
}

// arith checks + - * / %.
func (c *checker) arith(a *ast) (node, error) {
	l, err := c.check(a.args[0])
	if err != nil {
		return nil, err
	}
	r, err := c.check(a.args[1])
	if err != nil {
		return nil, err
	}
	lt, rt := l.base().t, r.base().t
	// A null literal operand takes the type that makes the operation valid:
	// that of the other operand, or int64 milliseconds beside a timestamp
	// (so ts + null and ts - null are timestamps, null - ts an int64).
	el, er := lt, rt
	switch {
	case lt.k == kNull && rt.k == kNull:
		return c.fold(&arithNode{nodeBase: span(a, tNull, l, r), op: a.op, l: l, r: r, mode: arithNull}, l, r), nil
	case lt.k == kNull:
		el = rt
		if rt.k == kTime && a.op == tokPlus {
			el = tInt
		}
	case rt.k == kNull:
		er = lt
		if lt.k == kTime {
			er = tInt
		}
	}
	n := &arithNode{nodeBase: span(a, tNull, l, r), op: a.op, l: l, r: r}
	switch {
	case el.k == kInt && er.k == kInt:
		n.mode, n.t = arithInt, tInt
		n.fails = n.fails || a.op != tokPercent
	case el.k.numeric() && er.k.numeric():
		n.mode, n.t = arithFloat, tFloat
	case el.k == kString && er.k == kString && a.op == tokPlus:
		n.mode, n.t = arithConcat, tString
	case el.k == kTime && er.k == kInt && (a.op == tokPlus || a.op == tokMinus):
		n.mode, n.t, n.unit = arithTimeInt, el, el.unit()
		n.fails = true
	case el.k == kInt && er.k == kTime && a.op == tokPlus:
		n.mode, n.t, n.unit = arithIntTime, er, er.unit()
		n.fails = true
	case el.k == kTime && er.k == kTime && a.op == tokMinus:
		n.mode, n.t, n.lu, n.ru = arithTimeDiff, tInt, el.unit(), er.unit()
		n.fails = true
	default:
		return nil, c.cannotApply(a, lt, rt)
	}
	return c.fold(n, l, r), nil
}

// compare checks == != < <= > >=.
func (c *checker) compare(a *ast) (node, error) {
	l, err := c.check(a.args[0])
	if err != nil {
		return nil, err
	}
	r, err := c.check(a.args[1])
	if err != nil {
		return nil, err
	}
	lt, rt := l.base().t, r.base().t
	// A string constant compared with a timestamp is an RFC 3339 instant.
	if lt.k == kTime && rt.k == kString {
		if r, err = c.timeLiteral(r); err != nil {
			return nil, err
		}
	} else if lt.k == kString && rt.k == kTime {
		if l, err = c.timeLiteral(l); err != nil {
			return nil, err
		}
	}
	op := cmpOpOf(a.op)
	n := &cmpNode{nodeBase: span(a, tBool, l, r), op: op, l: l, r: r}
	lt, rt = l.base().t, r.base().t
	switch {
	case lt.k == kNull || rt.k == kNull:
		n.mode = cmpNull
	case lt.k == kInt && rt.k == kInt:
		n.mode = cmpInt
	case lt.k.numeric() && rt.k.numeric():
		n.mode = cmpFloat
	case lt.k == kString && rt.k == kString:
		n.mode = cmpString
	case lt.k == kBool && rt.k == kBool && (op == opEq || op == opNe):
		n.mode = cmpBool
	case lt.k == kTime && (rt.k == kTime || rt.k == kInt),
		lt.k == kInt && rt.k == kTime:
		n.mode = cmpTime
		n.lu, n.ru = arrow.Millisecond, arrow.Millisecond
		if lt.k == kTime {
			n.lu = lt.unit()
		}
		if rt.k == kTime {
			n.ru = rt.unit()
		}
	default:
		return nil, c.cannotApply(a, lt, rt)
	}
	return c.fold(n, l, r), nil
}

// timeLiteral converts a constant string operand into a timestamp constant.
func (c *checker) timeLiteral(n node) (node, error) {
	k, ok := n.(*constNode)
	if !ok {
		return nil, c.errAt(n.base().pos, "only a string literal (an RFC 3339 instant) can be compared with a timestamp")
	}
	if k.v.isNullScalar() {
		return &constNode{nodeBase: nodeBase{t: tNull, pos: k.pos, end: k.end}, v: nullScalar(kNull)}, nil
	}
	unit, ticks, err := parseInstant(k.v.s[0])
	if err != nil {
		return nil, c.errAt(k.pos, "invalid timestamp literal %q: want RFC 3339, like 2024-01-02T15:04:05Z", k.v.s[0])
	}
	return &constNode{nodeBase: nodeBase{t: timeType(unit, "UTC"), pos: k.pos, end: k.end}, v: timeScalar(ticks)}, nil
}

// parseInstant parses an RFC 3339 timestamp into nanoseconds since the
// epoch, or microseconds if it is outside the nanosecond range (years
// 1678-2261); sub-microsecond digits are then dropped.
func parseInstant(s string) (arrow.TimeUnit, int64, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, 0, err
	}
	sec, nsec := t.Unix(), int64(t.Nanosecond())
	if ns, ok := mulAdd(sec, 1e9, nsec); ok {
		return arrow.Nanosecond, ns, nil
	}
	us, _ := mulAdd(sec, 1e6, nsec/1e3) // |sec| < 2.6e11 for years 0-9999
	return arrow.Microsecond, us, nil
}

// mulAdd returns x*m + a, reporting whether it fits int64.
func mulAdd(x, m, a int64) (int64, bool) {
	p, over := mul64(x, m)
	if over {
		return 0, false
	}
	s := p + a
	if (p^s)&(a^s) < 0 {
		return 0, false
	}
	return s, true
}

func (c *checker) in(a *ast) (node, error) {
	x, err := c.check(a.args[0])
	if err != nil {
		return nil, err
	}
	n := &inNode{nodeBase: span(a, tBool, x), x: x, negate: a.negate}
	xt := x.base().t
	for _, la := range a.list {
		if err := n.add(c, xt, la); err != nil {
			return nil, err
		}
	}
	n.finish()
	return c.fold(n, x), nil
}

func (c *checker) call(a *ast) (node, error) {
	name := strings.ToLower(a.name)
	f, ok := functions[name]
	if !ok {
		return nil, c.errAt(a.opPos, "unknown function %q (functions: %s)", a.name, strings.Join(functionNames(), ", "))
	}
	if len(a.args) < f.minArgs || (f.maxArgs >= 0 && len(a.args) > f.maxArgs) {
		return nil, c.errAt(a.opPos, "%s expects %s, got %d", name, f.arity(), len(a.args))
	}
	args, err := c.checkAll(a.args)
	if err != nil {
		return nil, err
	}
	n, err := f.check(c, a, name, args)
	if err != nil {
		return nil, err
	}
	return c.fold(n, args...), nil
}

func functionNames() []string {
	names := make([]string, 0, len(functions))
	for name := range functions {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
