package expr

import (
	"errors"
	"math"
	"strconv"
)

// maxDepth bounds the nesting depth of the syntax tree so that deeply
// nested input cannot exhaust the stack in the recursive checker and
// evaluator. Chains of "and"/"or" do not add depth.
const maxDepth = 500

type astKind uint8

const (
	astLit    astKind = iota // literal: lit
	astColumn                // column reference: name
	astUnary                 // op args[0]: op is tokMinus or tokNot
	astBinary                // args[0] op args[1]: arithmetic or comparison
	astLogic                 // args[0] op args[1] op ...: op is tokAnd or tokOr
	astIsNull                // args[0] IS [NOT] NULL
	astIn                    // args[0] [NOT] IN (list...)
	astCall                  // name(args...)
)

// ast is an untyped syntax tree node.
type ast struct {
	kind     astKind
	pos, end int // byte span of the whole node in the source
	opPos    int // byte offset of the operator or function name
	op       tokKind
	name     string // column or function name
	lit      literal
	negate   bool // IS NOT NULL, NOT IN
	args     []*ast
	list     []*ast // IN list literals
	depth    int
}

// literal is the value of a literal token.
type literal struct {
	k kind // kNull, kInt, kFloat, kString, kBool
	i int64
	f float64
	s string
	b bool
}

type parser struct {
	src   string
	toks  []token
	i     int
	depth int // current recursion depth, bounded by maxDepth
}

// enter guards the recursion for one level of nesting opened by token t
// (a parenthesis, function call, unary minus or not) against unbounded
// input such as thousands of "("; every enter is paired with a leave.
func (p *parser) enter(t token) error {
	p.depth++
	if p.depth > maxDepth {
		return errorAt(p.src, t.pos, "expression is nested too deeply (limit %d)", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// parse parses src into a syntax tree.
func parse(src string) (*ast, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	if p.peek().kind == tokEOF {
		return nil, errorAt(src, 0, "empty expression")
	}
	root, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		if t.kind == tokRParen {
			return nil, errorAt(src, t.pos, "unexpected \")\" without matching \"(\"")
		}
		return nil, errorAt(src, t.pos, "unexpected %s after end of expression", t.describe(src))
	}
	return root, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) peekAt(k int) token {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) expect(k tokKind, what string) (token, error) {
	t := p.peek()
	if t.kind != k {
		return t, errorAt(p.src, t.pos, "expected %s, found %s", what, t.describe(p.src))
	}
	return p.next(), nil
}

// node finishes a node whose children are args, computing its depth.
func (p *parser) node(n *ast) (*ast, error) {
	for _, a := range n.args {
		n.depth = max(n.depth, a.depth)
	}
	n.depth++
	if n.depth > maxDepth {
		return nil, errorAt(p.src, n.opPos, "expression is nested too deeply (limit %d)", maxDepth)
	}
	return n, nil
}

// parseLogic parses a chain of "or" (or "and") operands as one n-ary node.
func (p *parser) parseLogic(op tokKind, operand func() (*ast, error)) (*ast, error) {
	first, err := operand()
	if err != nil {
		return nil, err
	}
	if p.peek().kind != op {
		return first, nil
	}
	n := &ast{kind: astLogic, op: op, pos: first.pos, opPos: p.peek().pos, args: []*ast{first}}
	for p.peek().kind == op {
		p.next()
		x, err := operand()
		if err != nil {
			return nil, err
		}
		n.args = append(n.args, x)
		n.end = x.end
	}
	return p.node(n)
}

func (p *parser) parseOr() (*ast, error) { return p.parseLogic(tokOr, p.parseAnd) }

func (p *parser) parseAnd() (*ast, error) { return p.parseLogic(tokAnd, p.parseNot) }

func (p *parser) parseNot() (*ast, error) {
	if t := p.peek(); t.kind == tokNot {
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer p.leave()
		p.next()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return p.node(&ast{kind: astUnary, op: tokNot, pos: t.pos, end: x.end, opPos: t.pos, args: []*ast{x}})
	}
	return p.parseCmp()
}

func isCmpOp(k tokKind) bool { return k >= tokEq && k <= tokGe }

func (p *parser) parseCmp() (*ast, error) {
	l, err := p.parseAdd()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	var n *ast
	switch {
	case isCmpOp(t.kind):
		p.next()
		r, err := p.parseAdd()
		if err != nil {
			return nil, err
		}
		n = &ast{kind: astBinary, op: t.kind, pos: l.pos, end: r.end, opPos: t.pos, args: []*ast{l, r}}
	case t.kind == tokIs:
		p.next()
		n = &ast{kind: astIsNull, pos: l.pos, opPos: t.pos, args: []*ast{l}}
		if p.peek().kind == tokNot {
			p.next()
			n.negate = true
		}
		end, err := p.expect(tokNull, "NULL after IS")
		if err != nil {
			return nil, err
		}
		n.end = end.end
	case t.kind == tokIn || (t.kind == tokNot && p.peekAt(1).kind == tokIn):
		n = &ast{kind: astIn, pos: l.pos, opPos: t.pos, args: []*ast{l}, negate: t.kind == tokNot}
		if n.negate {
			p.next()
		}
		p.next()
		if err := p.parseInList(n); err != nil {
			return nil, err
		}
	case t.kind == tokNot:
		return nil, errorAt(p.src, p.peekAt(1).pos, "expected IN after NOT, found %s", p.peekAt(1).describe(p.src))
	default:
		return l, nil
	}
	if k := p.peek().kind; isCmpOp(k) || k == tokIs || k == tokIn || (k == tokNot && p.peekAt(1).kind == tokIn) {
		return nil, errorAt(p.src, p.peek().pos, "comparisons cannot be chained; use parentheses or AND")
	}
	return p.node(n)
}

func (p *parser) parseInList(n *ast) error {
	if _, err := p.expect(tokLParen, "\"(\" after IN"); err != nil {
		return err
	}
	for {
		lit, err := p.parseInLiteral()
		if err != nil {
			return err
		}
		n.list = append(n.list, lit)
		t := p.next()
		switch t.kind {
		case tokComma:
			continue
		case tokRParen:
			n.end = t.end
			return nil
		}
		return errorAt(p.src, t.pos, "expected \",\" or \")\" in IN list, found %s", t.describe(p.src))
	}
}

// parseInLiteral parses one element of an IN list: a literal, where numbers
// may carry a minus sign.
func (p *parser) parseInLiteral() (*ast, error) {
	t := p.peek()
	switch t.kind {
	case tokMinus:
		if k := p.peekAt(1).kind; k == tokInt || k == tokFloat {
			p.next()
			return p.parseNumber(p.next(), t.pos, true)
		}
	case tokInt, tokFloat:
		return p.parseNumber(p.next(), t.pos, false)
	case tokString, tokTrue, tokFalse, tokNull:
		return p.parsePrimary()
	}
	return nil, errorAt(p.src, t.pos, "expected a literal in IN list, found %s", t.describe(p.src))
}

func (p *parser) parseBinaryChain(ops func(tokKind) bool, operand func() (*ast, error)) (*ast, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for ops(p.peek().kind) {
		t := p.next()
		r, err := operand()
		if err != nil {
			return nil, err
		}
		l, err = p.node(&ast{kind: astBinary, op: t.kind, pos: l.pos, end: r.end, opPos: t.pos, args: []*ast{l, r}})
		if err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (p *parser) parseAdd() (*ast, error) {
	return p.parseBinaryChain(func(k tokKind) bool { return k == tokPlus || k == tokMinus }, p.parseMul)
}

func (p *parser) parseMul() (*ast, error) {
	return p.parseBinaryChain(func(k tokKind) bool { return k == tokStar || k == tokSlash || k == tokPercent }, p.parseUnary)
}

func (p *parser) parseUnary() (*ast, error) {
	t := p.peek()
	if t.kind != tokMinus {
		return p.parsePrimary()
	}
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer p.leave()
	p.next()
	// A minus directly applied to a number literal is part of the literal,
	// so that -9223372036854775808 is a valid int64.
	if k := p.peek().kind; k == tokInt || k == tokFloat {
		return p.parseNumber(p.next(), t.pos, true)
	}
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	return p.node(&ast{kind: astUnary, op: tokMinus, pos: t.pos, end: x.end, opPos: t.pos, args: []*ast{x}})
}

// parseNumber turns a number token into a literal node starting at pos.
func (p *parser) parseNumber(t token, pos int, neg bool) (*ast, error) {
	text := t.val
	if neg {
		text = "-" + text
	}
	n := &ast{kind: astLit, pos: pos, end: t.end, opPos: pos}
	if t.kind == tokInt {
		v, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, errorAt(p.src, pos, "integer literal %s is out of range for int64", text)
		}
		n.lit = literal{k: kInt, i: v}
		return p.node(n)
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil && (!errors.Is(err, strconv.ErrRange) || math.IsInf(v, 0)) {
		return nil, errorAt(p.src, pos, "float literal %s is out of range for float64", text)
	}
	n.lit = literal{k: kFloat, f: v}
	return p.node(n)
}

func (p *parser) parsePrimary() (*ast, error) {
	t := p.next()
	lit := func(l literal) (*ast, error) {
		return p.node(&ast{kind: astLit, pos: t.pos, end: t.end, opPos: t.pos, lit: l})
	}
	switch t.kind {
	case tokInt, tokFloat:
		return p.parseNumber(t, t.pos, false)
	case tokString:
		return lit(literal{k: kString, s: t.val})
	case tokTrue:
		return lit(literal{k: kBool, b: true})
	case tokFalse:
		return lit(literal{k: kBool, b: false})
	case tokNull:
		return lit(literal{k: kNull})
	case tokQuotedIdent:
		return p.node(&ast{kind: astColumn, pos: t.pos, end: t.end, opPos: t.pos, name: t.val})
	case tokIdent:
		if p.peek().kind == tokLParen {
			return p.parseCall(t)
		}
		return p.node(&ast{kind: astColumn, pos: t.pos, end: t.end, opPos: t.pos, name: t.val})
	case tokLParen:
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		rp, err := p.expect(tokRParen, "\")\"")
		if err != nil {
			return nil, err
		}
		// The parentheses belong to the subexpression's text. Errors about
		// a column or literal itself use opPos, which stays unchanged.
		x.pos, x.end = t.pos, rp.end
		return x, nil
	}
	if t.kind == tokEOF {
		return nil, errorAt(p.src, t.pos, "unexpected end of expression")
	}
	return nil, errorAt(p.src, t.pos, "unexpected %s", t.describe(p.src))
}

func (p *parser) parseCall(name token) (*ast, error) {
	if err := p.enter(p.next()); err != nil { // "("
		return nil, err
	}
	defer p.leave()
	n := &ast{kind: astCall, pos: name.pos, opPos: name.pos, name: name.val}
	if t := p.peek(); t.kind == tokRParen {
		n.end = p.next().end
		return p.node(n)
	}
	for {
		x, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		n.args = append(n.args, x)
		t := p.next()
		switch t.kind {
		case tokComma:
			continue
		case tokRParen:
			n.end = t.end
			return p.node(n)
		}
		return nil, errorAt(p.src, t.pos, "expected \",\" or \")\" in arguments of %s, found %s", name.val, t.describe(p.src))
	}
}
