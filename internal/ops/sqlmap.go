package ops

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
	"github.com/arkflow-rs/arkflow-go/job"
)

// noSQLEngine is the reason a sql map fails when no engine is linked in.
const noSQLEngine = `no SQL engine is linked into this program: import _ "github.com/arkflow-rs/arkflow-go/connectors/duckdb" (it needs cgo); the arkflow command includes it`

// buildSQLMap builds a map that runs a SQL query over each batch, read
// as the table table_name (flow by default) with every column, metadata
// columns included; it emits the query's rows, which keep the batch's
// acknowledgement. The query is compiled here against the input schema,
// which checks it and gives the output schema, and again per subtask,
// each on a connection of its own.
func buildSQLMap(c Context, cfg MapConfig) (Built, error) {
	switch {
	case cfg.Function != "" || len(cfg.Set)+len(cfg.Drop)+len(cfg.Select) > 0:
		return Built{}, Errf("config.sql", "cannot be combined with function, set, drop or select")
	case cfg.SQL == "":
		return Built{}, Errf("config.sql", "is required with table_name (a query, e.g. \"SELECT * FROM flow WHERE amount > 10\")")
	case c.Op.Kind == job.KindUDF:
		return Built{}, Errf("config.sql", "a udf operator runs a Go function; use a map operator for sql")
	}
	eng := sqlengine.Lookup()
	if eng == nil {
		return Built{}, Errf("config.sql", "%s", noSQLEngine)
	}
	if c.Input == nil {
		return Built{}, nil
	}
	table := cfg.TableName
	if table == "" {
		table = sqlengine.DefaultTable
	}
	q, err := eng.Compile(cfg.SQL, table, c.Input)
	if err != nil {
		return Built{}, Errf("config.sql", "%v", err)
	}
	out := q.Schema()
	q.Close()
	if err := checkSQLOutput(out, c.Input); err != nil {
		return Built{}, err
	}
	return Built{Output: out, New: func(Task) (Instance, error) {
		q, err := eng.Compile(cfg.SQL, table, c.Input)
		if err != nil {
			return nil, fmt.Errorf("operator %q: %w", c.Op.ID, err)
		}
		if !batch.SameSchema(q.Schema(), out) {
			q.Close()
			return nil, fmt.Errorf("operator %q: query %q compiled to %s, then to %s", c.Op.ID, cfg.SQL, out, q.Schema())
		}
		return &sqlMap{op: c.Op.ID, q: q}, nil
	}}, nil
}

// checkSQLOutput refuses output columns downstream operators could not
// tell apart, and metadata columns the input did not have as they are.
func checkSQLOutput(out, in *arrow.Schema) error {
	var errs Errors
	seen := map[string]bool{}
	for _, f := range out.Fields() {
		if seen[f.Name] {
			errs = append(errs, Errf("config.sql", "the query returns two columns named %q: give one an alias (AS)", f.Name))
		}
		seen[f.Name] = true
		if !connectors.IsMeta(f.Name) {
			continue
		}
		idx := in.FieldIndices(f.Name)
		if len(idx) == 0 || !arrow.TypeEqual(in.Field(idx[0]).Type, f.Type) {
			errs = append(errs, Errf("config.sql", "the query returns column %q: names starting with %q are source metadata, which a query may pass on unchanged but not make", f.Name, connectors.MetaPrefix))
		}
	}
	return errs.Err()
}

// sqlMap is one subtask of a sql map.
type sqlMap struct {
	op string
	q  sqlengine.Query
}

func (m *sqlMap) Process(ctx context.Context, b Batch, out Emitter) error {
	recs, err := m.q.Run(ctx, b.Rec)
	b.Rec.Release()
	if err != nil {
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", m.op, err)
	}
	if len(recs) == 0 {
		b.Ack.Release(nil)
		return nil
	}
	b.Ack.Retain(len(recs) - 1)
	for i, r := range recs {
		if err := out.Emit(ctx, Batch{Rec: r, Ack: b.Ack}); err != nil {
			for _, rest := range recs[i+1:] {
				rest.Release()
				b.Ack.Release(err)
			}
			return err
		}
	}
	return nil
}

func (m *sqlMap) Watermark(context.Context, int64, Emitter) error { return nil }
func (m *sqlMap) Close() error                                    { return m.q.Close() }
