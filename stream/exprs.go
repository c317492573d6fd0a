package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
)

// exprColumn is the column a rewritten {type: expr} key reads.
const exprColumn = "__arkflow_expr_"

var plainColumn = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// outputExprs are an output's {type: expr, expr: …} keys (a kafka topic
// or key, an mqtt topic, a nats subject, a redis key, channel or field),
// which ArkFlow evaluates as DataFusion SQL over the batch. Here the SQL
// engine computes each into a column of its own before the write, and
// the connector's config reads that column.
type outputExprs struct {
	exprs  []string
	q      sqlengine.Query
	schema *arrow.Schema
}

// rewriteExprs replaces every {type: expr, expr: E} object of raw whose E
// is not a plain column name by {type: expr, expr: "__arkflow_expr_N"}
// and returns the new config with the expressions, N being the index.
func rewriteExprs(raw json.RawMessage) (json.RawMessage, *outputExprs, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, nil, err
	}
	x := &outputExprs{}
	v = x.walk(v)
	if len(x.exprs) == 0 {
		return raw, nil, nil
	}
	out, err := json.Marshal(v)
	return out, x, err
}

func (x *outputExprs) walk(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if t["type"] == "expr" {
			if e, ok := t["expr"].(string); ok && !plainColumn.MatchString(strings.TrimSpace(e)) {
				t["expr"] = fmt.Sprintf("%s%d", exprColumn, len(x.exprs))
				x.exprs = append(x.exprs, e)
				return t
			}
		}
		for k, c := range t {
			t[k] = x.walk(c)
		}
	case []any:
		for i, c := range t {
			t[i] = x.walk(c)
		}
	}
	return v
}

// columns computes the expressions over rec: one column each, in order.
// The caller releases them.
func (x *outputExprs) columns(ctx context.Context, rec arrow.RecordBatch) ([]arrow.Field, []arrow.Array, error) {
	if x.q == nil || !x.schema.Equal(rec.Schema()) {
		e := sqlengine.Lookup()
		if e == nil {
			return nil, nil, fmt.Errorf("an expr key needs the SQL engine, which is not linked into this program")
		}
		parts := make([]string, len(x.exprs))
		for i, ex := range x.exprs {
			parts[i] = fmt.Sprintf("CAST((%s) AS VARCHAR) AS %s%d", ex, exprColumn, i)
		}
		q, err := e.Compile("SELECT "+strings.Join(parts, ", ")+" FROM flow", "flow", rec.Schema())
		if err != nil {
			return nil, nil, fmt.Errorf("expr key: %w", err)
		}
		if x.q != nil {
			x.q.Close()
		}
		x.q, x.schema = q, rec.Schema()
	}
	res, err := x.q.Run(ctx, rec)
	if err != nil {
		return nil, nil, err
	}
	if len(res) == 0 {
		return nil, nil, fmt.Errorf("expr key: no rows computed")
	}
	all, err := concat(res)
	releaseAll(res)
	if err != nil {
		return nil, nil, err
	}
	defer all.Release()
	if all.NumRows() != rec.NumRows() {
		return nil, nil, fmt.Errorf("expr key: %d values for %d rows", all.NumRows(), rec.NumRows())
	}
	cols := make([]arrow.Array, all.NumCols())
	for i := range cols {
		cols[i] = all.Column(i)
		cols[i].Retain()
	}
	return all.Schema().Fields(), cols, nil
}

func (x *outputExprs) close() {
	if x != nil && x.q != nil {
		x.q.Close()
	}
}

// withColumns returns rec with fields and cols after its own columns; it
// takes over rec, not cols.
func withColumns(rec arrow.RecordBatch, fields []arrow.Field, cols []arrow.Array) arrow.RecordBatch {
	defer rec.Release()
	fs := append(append([]arrow.Field(nil), rec.Schema().Fields()...), fields...)
	cs := append(append([]arrow.Array(nil), rec.Columns()...), cols...)
	return array.NewRecordBatch(arrow.NewSchema(fs, nil), cs, rec.NumRows())
}
