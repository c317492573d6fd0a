package expr

import (
	"github.com/apache/arrow-go/v18/arrow"
)

// node is a type-checked expression tree node.
type node interface {
	base() *nodeBase
	// eval computes the node's value for the rows of c. act tells which
	// rows are active, that is, whose value can affect the final result
	// (nil: all rows). Errors such as integer overflow are reported only
	// for active rows, so that x < 10 and x * 1000000 > y or
	// if(x < 10, x * 1000000, 0) fail only when a failing value is used.
	// The values (and validity) of inactive rows are unspecified: kernels
	// may skip them. The returned vec must not be modified.
	eval(c *evalCtx, act []bool) (*vec, error)
}

// nodeBase holds what every node has.
type nodeBase struct {
	t        vtype
	pos, end int  // byte span in the source
	fails    bool // eval may return an error (for some input)
}

func (b *nodeBase) base() *nodeBase { return b }

// text returns the source of the node, for error messages.
func (c *evalCtx) text(n node) string {
	b := n.base()
	return c.src[b.pos:b.end]
}

// evalCtx is the state of one evaluation.
type evalCtx struct {
	src  string
	rec  arrow.RecordBatch
	n    int
	cols []*colValue // cached column reads, by field index
	// owned holds arrays made during the evaluation (slices of columns
	// longer than the record), released by release.
	owned []arrow.Array
}

func (c *evalCtx) release() {
	for _, a := range c.owned {
		a.Release()
	}
	c.owned = nil
}

// overflowErr reports an int64 overflow of node n at row.
func (c *evalCtx) overflowErr(n node, row int, detail string) error {
	return errorAt(c.src, n.base().pos, "integer overflow in %q at row %d (%s)", c.text(n), row, detail)
}

// constNode is a literal or a folded literal-only subexpression.
type constNode struct {
	nodeBase
	v *vec // scalar
}

func (n *constNode) eval(*evalCtx, []bool) (*vec, error) { return n.v, nil }

func isConst(n node) bool {
	_, ok := n.(*constNode)
	return ok
}
