package expr

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// funcDef describes a built-in function.
type funcDef struct {
	minArgs, maxArgs int // maxArgs < 0: variadic
	// check type-checks the arguments and builds the call's node.
	check func(c *checker, a *ast, name string, args []node) (node, error)
}

func (f *funcDef) arity() string {
	plural := func(n int) string {
		if n == 1 {
			return "1 argument"
		}
		return fmt.Sprintf("%d arguments", n)
	}
	switch {
	case f.maxArgs < 0:
		return "at least " + plural(f.minArgs)
	case f.minArgs == f.maxArgs:
		return plural(f.minArgs)
	}
	return fmt.Sprintf("%d to %s", f.minArgs, plural(f.maxArgs))
}

var functions map[string]*funcDef

func init() {
	functions = map[string]*funcDef{
		"lower":       {1, 1, checkStringMap(strings.ToLower)},
		"upper":       {1, 1, checkStringMap(strings.ToUpper)},
		"length":      {1, 1, checkLength},
		"concat":      {1, -1, checkConcat},
		"starts_with": {2, 2, checkStringPredicate(strings.HasPrefix)},
		"ends_with":   {2, 2, checkStringPredicate(strings.HasSuffix)},
		"contains":    {2, 2, checkStringPredicate(strings.Contains)},
		"abs":         {1, 1, checkNumeric(math.Abs)},
		"floor":       {1, 1, checkNumeric(math.Floor)},
		"ceil":        {1, 1, checkNumeric(math.Ceil)},
		"round":       {1, 1, checkNumeric(math.Round)},
		"coalesce":    {1, -1, checkCoalesce},
		"if":          {3, 3, checkIf},
		"to_string":   {1, 1, checkToString},
		"to_int":      {1, 1, checkToInt},
		"to_float":    {1, 1, checkToFloat},
		"to_millis":   {1, 1, checkToMillis},
	}
}

// callNode is a call of a function that evaluates all its arguments.
type callNode struct {
	nodeBase
	name string
	args []node
	// strict: a null scalar argument makes the result null without
	// calling fn.
	strict bool
	fn     func(c *evalCtx, n *callNode, act []bool, args []*vec) (*vec, error)
}

func (n *callNode) eval(c *evalCtx, act []bool) (*vec, error) {
	vs := make([]*vec, len(n.args))
	for i, a := range n.args {
		v, err := a.eval(c, act)
		if err != nil {
			return nil, err
		}
		if n.strict && v.isNullScalar() {
			return nullScalar(n.t.k), nil
		}
		vs[i] = v
	}
	return n.fn(c, n, act, vs)
}

func newCall(a *ast, name string, t vtype, args []node, fn func(*evalCtx, *callNode, []bool, []*vec) (*vec, error)) *callNode {
	return &callNode{nodeBase: span(a, t, args...), name: name, args: args, strict: true, fn: fn}
}

// wantArg checks that argument i has one of the kinds (or is null).
func (c *checker) wantArg(a *ast, name string, i int, arg node, kinds ...kind) error {
	k := arg.base().t.k
	if k == kNull {
		return nil
	}
	var names []string
	for _, want := range kinds {
		if k == want {
			return nil
		}
		names = append(names, want.String())
	}
	return c.errAt(a.args[i].pos, "%s: argument %d must be %s, found %s", name, i+1, strings.Join(names, " or "), k)
}

func checkStringMap(f func(string) string) func(*checker, *ast, string, []node) (node, error) {
	return func(c *checker, a *ast, name string, args []node) (node, error) {
		if err := c.wantArg(a, name, 0, args[0], kString); err != nil {
			return nil, err
		}
		return newCall(a, name, tString, args, func(c *evalCtx, n *callNode, _ []bool, vs []*vec) (*vec, error) {
			x := vs[0]
			out := &vec{k: kString, scalar: x.scalar, valid: x.valid, s: make([]string, len(x.strs()))}
			for i, s := range x.strs() {
				out.s[i] = f(s)
			}
			return out, nil
		}), nil
	}
}

func checkLength(c *checker, a *ast, name string, args []node) (node, error) {
	if err := c.wantArg(a, name, 0, args[0], kString); err != nil {
		return nil, err
	}
	return newCall(a, name, tInt, args, func(c *evalCtx, n *callNode, _ []bool, vs []*vec) (*vec, error) {
		x := vs[0]
		out := &vec{k: kInt, scalar: x.scalar, valid: x.valid, i: make([]int64, len(x.strs()))}
		for i, s := range x.strs() {
			out.i[i] = int64(utf8.RuneCountInString(s))
		}
		return out, nil
	}), nil
}

func checkConcat(c *checker, a *ast, name string, args []node) (node, error) {
	for i, arg := range args {
		if err := c.wantArg(a, name, i, arg, kString); err != nil {
			return nil, err
		}
	}
	n := newCall(a, name, tString, args, func(c *evalCtx, n *callNode, _ []bool, vs []*vec) (*vec, error) {
		m, scalar := shape(c.n, scalars(vs)...)
		out := &vec{k: kString, scalar: scalar, s: make([]string, m)}
		strs := make([][]string, len(vs))
		for j, v := range vs {
			strs[j] = v.strs()
		}
		parts := make([]string, len(vs))
		var arena strArena
		for i := range out.s {
			for j, v := range vs {
				parts[j] = ""
				if v.validAt(i) && v.k == kString {
					parts[j] = strs[j][v.idx(i)]
				}
			}
			out.s[i] = arena.concat(parts...)
		}
		return out, nil
	})
	n.strict = false // null arguments count as empty strings
	return n, nil
}

func scalars(vs []*vec) []bool {
	out := make([]bool, len(vs))
	for i, v := range vs {
		out[i] = v.scalar
	}
	return out
}

func checkStringPredicate(f func(s, p string) bool) func(*checker, *ast, string, []node) (node, error) {
	return func(c *checker, a *ast, name string, args []node) (node, error) {
		for i, arg := range args {
			if err := c.wantArg(a, name, i, arg, kString); err != nil {
				return nil, err
			}
		}
		return newCall(a, name, tBool, args, func(c *evalCtx, n *callNode, _ []bool, vs []*vec) (*vec, error) {
			x, p := vs[0], vs[1]
			m, scalar := shape(c.n, x.scalar, p.scalar)
			out := &vec{k: kBool, scalar: scalar, b: make([]bool, m), valid: mergeValid(m, x, p)}
			xs, ps := x.strs(), p.strs()
			if p.scalar {
				pat := ps[0]
				for i, s := range xs {
					out.b[i] = f(s, pat)
				}
				return out, nil
			}
			for i := range out.b {
				out.b[i] = f(xs[x.idx(i)], ps[i])
			}
			return out, nil
		}), nil
	}
}

// checkNumeric builds abs, floor, ceil and round: f applies to float64;
// int64 arguments are returned unchanged, except by abs.
func checkNumeric(f func(float64) float64) func(*checker, *ast, string, []node) (node, error) {
	return func(c *checker, a *ast, name string, args []node) (node, error) {
		if err := c.wantArg(a, name, 0, args[0], kInt, kFloat); err != nil {
			return nil, err
		}
		t := args[0].base().t
		n := newCall(a, name, t, args, func(c *evalCtx, n *callNode, act []bool, vs []*vec) (*vec, error) {
			x := vs[0]
			if x.k == kFloat {
				out := &vec{k: kFloat, scalar: x.scalar, valid: x.valid, f: make([]float64, len(x.f))}
				for i, v := range x.f {
					out.f[i] = f(v)
				}
				return out, nil
			}
			if n.name != "abs" {
				return x, nil
			}
			out := &vec{k: kInt, scalar: x.scalar, valid: x.valid, i: make([]int64, len(x.i))}
			over := false
			for i, v := range x.i {
				if v < 0 {
					v = -v
					over = over || v < 0
				}
				out.i[i] = v
			}
			if over {
				if row := c.badRow(x.scalar, act, func(i int) bool { return x.i[x.idx(i)] == math.MinInt64 }, x); row >= 0 {
					return nil, c.overflowErr(n, row, fmt.Sprintf("abs(%d)", x.i[x.idx(row)]))
				}
			}
			return out, nil
		})
		n.fails = n.fails || (name == "abs" && t.k == kInt)
		return n, nil
	}
}

func checkToString(c *checker, a *ast, name string, args []node) (node, error) {
	t := args[0].base().t
	return newCall(a, name, tString, args, func(c *evalCtx, n *callNode, _ []bool, vs []*vec) (*vec, error) {
		x := vs[0]
		if x.k == kString {
			return x, nil
		}
		m, _ := shape(c.n, x.scalar)
		out := &vec{k: kString, scalar: x.scalar, valid: x.valid, s: make([]string, m)}
		var arena strArena
		for i := range out.s {
			if !x.validAt(i) {
				continue
			}
			switch x.k {
			case kInt:
				out.s[i] = arena.end(strconv.AppendInt(arena.begin(20), x.i[i], 10))
			case kFloat:
				out.s[i] = arena.end(appendFloat(arena.begin(24), x.f[i]))
			case kBool:
				out.s[i] = strconv.FormatBool(x.b[i])
			case kTime:
				out.s[i] = arena.end(appendTime(arena.begin(35), x.i[i], t.unit()))
			}
		}
		return out, nil
	}), nil
}

// appendFloat formats f in the shortest form that parses back to f, in
// plain notation for magnitudes in [1e-6, 1e21) and exponent notation
// otherwise (as JavaScript and encoding/json do).
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// Shorten e-07 to e-7.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendTime formats ticks of unit u as RFC 3339 in UTC, with as many
// fractional digits as needed.
func appendTime(b []byte, ticks int64, u arrow.TimeUnit) []byte {
	per := perSecond(u)
	sec := floorDiv(ticks, per)
	nsec := (ticks - sec*per) * (1e9 / per)
	return time.Unix(sec, nsec).UTC().AppendFormat(b, time.RFC3339Nano)
}

func checkToInt(c *checker, a *ast, name string, args []node) (node, error) {
	if err := c.wantArg(a, name, 0, args[0], kInt, kFloat, kString, kBool); err != nil {
		return nil, err
	}
	return newCall(a, name, tInt, args, func(c *evalCtx, n *callNode, _ []bool, vs []*vec) (*vec, error) {
		x := vs[0]
		if x.k == kInt {
			return x, nil
		}
		m, _ := shape(c.n, x.scalar)
		out := &vec{k: kInt, scalar: x.scalar, valid: x.valid, i: make([]int64, m)}
		var valid []bool // rows that have no int64 value become null
		bad := func(i int) {
			if valid == nil {
				valid = make([]bool, m)
				for j := range valid {
					valid[j] = x.validAt(j)
				}
			}
			valid[i] = false
		}
		switch x.k {
		case kFloat:
			for i, f := range x.f {
				if f >= -(1<<63) && f < 1<<63 { // false for NaN
					out.i[i] = int64(f) // truncates toward zero
				} else {
					bad(i)
				}
			}
		case kString:
			for i, s := range x.strs() {
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					bad(i)
				}
				out.i[i] = v
			}
		case kBool:
			for i, v := range x.b {
				out.i[i] = int64(b2i(v))
			}
		}
		if valid != nil {
			out.valid = valid
		}
		return out, nil
	}), nil
}

func checkToFloat(c *checker, a *ast, name string, args []node) (node, error) {
	if err := c.wantArg(a, name, 0, args[0], kInt, kFloat, kString, kBool); err != nil {
		return nil, err
	}
	return newCall(a, name, tFloat, args, func(c *evalCtx, n *callNode, _ []bool, vs []*vec) (*vec, error) {
		x := vs[0]
		switch x.k {
		case kInt, kFloat:
			return toFloat(x), nil
		}
		m, _ := shape(c.n, x.scalar)
		out := &vec{k: kFloat, scalar: x.scalar, valid: x.valid, f: make([]float64, m)}
		if x.k == kBool {
			for i, v := range x.b {
				out.f[i] = float64(b2i(v))
			}
			return out, nil
		}
		var valid []bool
		for i, s := range x.strs() {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				if valid == nil {
					valid = make([]bool, m)
					for j := range valid {
						valid[j] = x.validAt(j)
					}
				}
				valid[i] = false
			}
			out.f[i] = v
		}
		if valid != nil {
			out.valid = valid
		}
		return out, nil
	}), nil
}

func checkToMillis(c *checker, a *ast, name string, args []node) (node, error) {
	if err := c.wantArg(a, name, 0, args[0], kTime); err != nil {
		return nil, err
	}
	t := args[0].base().t
	n := newCall(a, name, tInt, args, func(c *evalCtx, n *callNode, act []bool, vs []*vec) (*vec, error) {
		x := vs[0]
		out := &vec{k: kInt, scalar: x.scalar, valid: x.valid, i: x.i, borrowed: x.borrowed}
		switch u := t.unit(); u {
		case arrow.Second:
			return scaleInts(c, act, n, out, 1000, "seconds")
		case arrow.Microsecond, arrow.Nanosecond:
			f := unitFactor(arrow.Millisecond, u)
			out.i, out.borrowed = make([]int64, len(x.i)), false
			for i, v := range x.i {
				out.i[i] = floorDiv(v, f)
			}
		}
		return out, nil
	})
	n.fails = n.fails || (t.k == kTime && t.unit() == arrow.Second)
	return n, nil
}

// unify returns the common type of values of types ts, for coalesce and
// if: null fits anything; int64 and float64 give float64; timestamps give
// the finest unit among them, with the time zone of the first.
func unify(ts []vtype) (vtype, int) {
	out := tNull
	for i, t := range ts {
		switch {
		case t.k == kNull:
		case out.k == kNull:
			out = t
		case out.k.numeric() && t.k.numeric():
			if t.k == kFloat {
				out = tFloat
			}
		case out.k == kTime && t.k == kTime:
			if t.unit() > out.unit() {
				out = timeType(t.unit(), out.ts.TimeZone)
			}
		case out.k != t.k:
			return out, i
		}
	}
	return out, -1
}

// convert turns v, of type from, into type to as chosen by unify.
func convert(c *evalCtx, act []bool, n node, v *vec, from, to vtype) (*vec, error) {
	switch {
	case v.isNullScalar():
		return nullScalar(to.k), nil
	case to.k == kFloat:
		return toFloat(v), nil
	case to.k == kTime && from.unit() != to.unit():
		return scaleInts(c, act, n, v, unitFactor(from.unit(), to.unit()), "timestamp ticks")
	}
	return v, nil
}

func needsConversion(from, to vtype) bool {
	return from.k == kTime && from.unit() != to.unit()
}

func checkCoalesce(c *checker, a *ast, name string, args []node) (node, error) {
	ts := make([]vtype, len(args))
	for i, arg := range args {
		ts[i] = arg.base().t
	}
	t, bad := unify(ts)
	if bad >= 0 {
		return nil, c.errAt(a.args[bad].pos, "%s: argument %d has type %s, which does not mix with %s", name, bad+1, ts[bad], t)
	}
	n := &coalesceNode{nodeBase: span(a, t, args...), args: args, types: ts}
	for _, at := range ts {
		n.fails = n.fails || needsConversion(at, t)
	}
	return n, nil
}

// coalesceNode is coalesce(a, b, ...): per row, the first non-null
// argument. Later arguments are only needed, and only evaluated, while
// rows remain null.
type coalesceNode struct {
	nodeBase
	args  []node
	types []vtype
}

func (n *coalesceNode) eval(c *evalCtx, act []bool) (*vec, error) {
	if n.t.k == kNull {
		return nullScalar(kNull), nil
	}
	var out *vec
	for i, arg := range n.args {
		sub := act
		if out != nil && arg.base().fails && !out.scalar {
			sub = narrow(c.n, act, func(r int) bool { return !out.validAt(r) })
		}
		v, err := arg.eval(c, sub)
		if err != nil {
			return nil, err
		}
		if v, err = convert(c, sub, n, v, n.types[i], n.t); err != nil {
			return nil, err
		}
		if out == nil || out.isNullScalar() {
			out = v
		} else if !v.isNullScalar() {
			out = choose(c.n, n.t.k, out.validAt, out, v)
		}
		if !out.hasNulls() {
			break
		}
	}
	return out, nil
}

func checkIf(c *checker, a *ast, name string, args []node) (node, error) {
	if k := args[0].base().t.k; k != kBool && k != kNull {
		return nil, c.errAt(a.args[0].pos, "%s: argument 1 (the condition) must be bool, found %s", name, k)
	}
	ts := []vtype{args[1].base().t, args[2].base().t}
	t, bad := unify(ts)
	if bad >= 0 {
		return nil, c.errAt(a.args[2].pos, "%s: the branches have types %s and %s, which do not mix", name, ts[0], ts[1])
	}
	n := &ifNode{nodeBase: span(a, t, args...), cond: args[0], a: args[1], b: args[2], at: ts[0], bt: ts[1]}
	n.fails = n.fails || needsConversion(ts[0], t) || needsConversion(ts[1], t)
	return n, nil
}

// ifNode is if(cond, a, b): a where cond is true, b where it is false or
// null. Each branch is evaluated only if some row takes it, and fails only
// for rows that take it.
type ifNode struct {
	nodeBase
	cond, a, b node
	at, bt     vtype
}

func (n *ifNode) eval(c *evalCtx, act []bool) (*vec, error) {
	cond, err := n.cond.eval(c, act)
	if err != nil || n.t.k == kNull {
		return nullScalar(kNull), err
	}
	branch := func(x node, t vtype, sub []bool) (*vec, error) {
		v, err := x.eval(c, sub)
		if err != nil {
			return nil, err
		}
		return convert(c, sub, n, v, t, n.t)
	}
	if cond.scalar {
		if cond.validAt(0) && cond.b[0] {
			return branch(n.a, n.at, act)
		}
		return branch(n.b, n.bt, act)
	}
	take := cond.b
	if cond.valid != nil {
		take = make([]bool, c.n)
		for i := range take {
			take[i] = cond.b[i] && cond.valid[i]
		}
	}
	var trues int
	for _, t := range take {
		if t {
			trues++
		}
	}
	switch trues {
	case 0:
		return branch(n.b, n.bt, act)
	case c.n:
		return branch(n.a, n.at, act)
	}
	subA, subB := act, act
	if n.a.base().fails || needsConversion(n.at, n.t) {
		subA = narrow(c.n, act, func(i int) bool { return take[i] })
	}
	if n.b.base().fails || needsConversion(n.bt, n.t) {
		subB = narrow(c.n, act, func(i int) bool { return !take[i] })
	}
	a, err := branch(n.a, n.at, subA)
	if err != nil {
		return nil, err
	}
	b, err := branch(n.b, n.bt, subB)
	if err != nil {
		return nil, err
	}
	return choose(c.n, n.t.k, func(i int) bool { return take[i] }, a, b), nil
}

// choose returns, per row, a's value where takeA(i) and b's otherwise.
func choose(n int, k kind, takeA func(i int) bool, a, b *vec) *vec {
	if k == kNull {
		return nullScalar(kNull)
	}
	out := newVec(k, n, false)
	if a.hasNulls() || b.hasNulls() {
		out.valid = make([]bool, n)
	}
	var as, bs []string
	if k == kString {
		as, bs = a.strs(), b.strs()
	}
	for i := 0; i < n; i++ {
		src, j, fromA := b, b.idx(i), takeA(i)
		if fromA {
			src, j = a, a.idx(i)
		}
		if out.valid != nil {
			out.valid[i] = src.validAt(i)
		}
		switch k {
		case kInt, kTime:
			out.i[i] = src.i[j]
		case kFloat:
			out.f[i] = src.f[j]
		case kBool:
			out.b[i] = src.b[j]
		case kString:
			if fromA {
				out.s[i] = as[j]
			} else {
				out.s[i] = bs[j]
			}
		}
	}
	return out
}
