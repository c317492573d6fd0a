package expr

import (
	"math"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Expr is a compiled expression. It is immutable and safe for concurrent
// use by multiple goroutines.
type Expr struct {
	src    string
	schema *arrow.Schema
	root   node
	typ    arrow.DataType
	cols   []string
	bare   int // field index if the expression is a bare column reference, else -1
}

// Compile parses src and type-checks it against schema. Errors are *Error.
func Compile(src string, schema *arrow.Schema) (*Expr, error) {
	return compile(src, schema, true)
}

func compile(src string, schema *arrow.Schema, fold bool) (*Expr, error) {
	if schema == nil {
		return nil, errorf("nil schema")
	}
	tree, err := parse(src)
	if err != nil {
		return nil, err
	}
	c := &checker{src: src, schema: schema, used: map[string]bool{}, noFold: !fold}
	root, err := c.check(tree)
	if err != nil {
		return nil, err
	}
	e := &Expr{src: src, schema: schema, root: root, bare: -1}
	if col, ok := root.(*colNode); ok {
		e.bare = col.idx
		e.typ = col.dt
	} else {
		e.typ = root.base().t.arrowType()
	}
	for name := range c.used {
		e.cols = append(e.cols, name)
	}
	sort.Strings(e.cols)
	return e, nil
}

// String returns the source text of the expression.
func (e *Expr) String() string { return e.src }

// Type returns the Arrow type of the arrays that Eval returns: the
// column's own type for a bare column reference, and otherwise Int64,
// Float64, String, Boolean, a Timestamp type, or Null (for an expression
// that is always null, like the literal null).
func (e *Expr) Type() arrow.DataType { return e.typ }

// Columns returns the names of the columns the expression references,
// sorted and without duplicates.
func (e *Expr) Columns() []string { return append([]string(nil), e.cols...) }

// Eval evaluates the expression over rec, whose schema must match the
// schema given to Compile (field names and types). The result has
// rec.NumRows() rows and type e.Type(); the caller must Release it.
//
// A bare column reference returns the record's column itself, retained.
//
// Errors are *Error. Those caused by a part of the expression, integer
// overflow or a Uint64 value beyond int64 in a row whose value is used,
// carry that part's position and name the row.
func (e *Expr) Eval(rec arrow.RecordBatch) (arrow.Array, error) {
	if err := e.checkRecord(rec); err != nil {
		return nil, err
	}
	n := int(rec.NumRows())
	if e.bare >= 0 {
		col, err := recordColumn(rec, e.bare, n)
		if err == nil && col == rec.Column(e.bare) {
			col.Retain() // recordColumn returned the column itself
		}
		return col, err
	}
	c := newEvalCtx(e, rec, n)
	defer c.release()
	v, err := e.root.eval(c, nil)
	if err != nil {
		return nil, err
	}
	return buildArray(v, e.root.base().t, n)
}

// EvalMask evaluates a boolean expression over rec and returns, per row,
// whether the value is true; null counts as false, as in a SQL WHERE
// clause. It fails if the expression's type is not Boolean.
func (e *Expr) EvalMask(rec arrow.RecordBatch) ([]bool, error) {
	if k := e.root.base().t.k; k != kBool {
		return nil, errorf("expression %q has type %s; a filter needs bool", e.src, k)
	}
	if err := e.checkRecord(rec); err != nil {
		return nil, err
	}
	n := int(rec.NumRows())
	c := newEvalCtx(e, rec, n)
	defer c.release()
	v, err := e.root.eval(c, nil)
	if err != nil {
		return nil, err
	}
	switch {
	case v.scalar:
		mask := make([]bool, n)
		if v.validAt(0) && v.b[0] {
			fill(mask, true)
		}
		return mask, nil
	case v.valid == nil:
		// Freshly built by the evaluation (never an Arrow buffer), owned
		// by nobody else once eval returns.
		return v.b[:n:n], nil
	}
	mask := make([]bool, n)
	for i := range mask {
		mask[i] = v.b[i] && v.valid[i]
	}
	return mask, nil
}

func newEvalCtx(e *Expr, rec arrow.RecordBatch, n int) *evalCtx {
	return &evalCtx{src: e.src, rec: rec, n: n, cols: make([]*colValue, e.schema.NumFields())}
}

// recordColumn returns column i of rec limited to its first n rows (a
// record's columns may be longer than the record): the column itself, or
// a new slice of it that the caller must release.
func recordColumn(rec arrow.RecordBatch, i, n int) (arrow.Array, error) {
	col := rec.Column(i)
	if col == nil || col.Len() < n {
		return nil, errorf("column %q has %d rows, want %d (the record's row count)", rec.ColumnName(i), lenOf(col), n)
	}
	if col.Len() > n {
		return array.NewSlice(col, 0, int64(n)), nil
	}
	return col, nil
}

// checkRecord verifies that rec matches the compiled schema.
func (e *Expr) checkRecord(rec arrow.RecordBatch) error {
	if rec == nil {
		return errorf("nil record")
	}
	if rows := rec.NumRows(); rows < 0 || rows > math.MaxInt {
		return errorf("record has invalid row count %d", rows)
	}
	got := rec.Schema()
	if got == e.schema {
		return e.checkColumns(rec)
	}
	if got == nil {
		return errorf("record has no schema")
	}
	if got.NumFields() != e.schema.NumFields() {
		return errorf("record schema does not match the expression's: %d fields, want %d (%s)", got.NumFields(), e.schema.NumFields(), e.schema)
	}
	for i := range got.NumFields() {
		g, w := got.Field(i), e.schema.Field(i)
		if g.Name != w.Name || !arrow.TypeEqual(g.Type, w.Type) {
			return errorf("record schema does not match the expression's: field %d is %q (%s), want %q (%s)", i, g.Name, g.Type, w.Name, w.Type)
		}
	}
	return e.checkColumns(rec)
}

func (e *Expr) checkColumns(rec arrow.RecordBatch) error {
	if int(rec.NumCols()) != e.schema.NumFields() {
		return errorf("record has %d columns but its schema has %d fields", rec.NumCols(), e.schema.NumFields())
	}
	return nil
}
