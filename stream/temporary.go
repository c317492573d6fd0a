package stream

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors/redis"
	"github.com/arkflow-rs/arkflow-go/internal/arrowjson"
	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
)

// tempRef is one entry of a sql processor's temporary_list: the rows the
// temporary name holds for key become the table table_name.
type tempRef struct {
	Name      string `json:"name"`
	TableName string `json:"table_name"`
	Key       struct {
		Type  string `json:"type"`
		Value string `json:"value"`
		Expr  string `json:"expr"`
	} `json:"key"`
}

// lookups are a stream's temporaries by name, connected.
type lookups map[string]*redis.Lookup

// buildLookups builds (without connecting) the stream's temporaries.
func buildLookups(s *Stream) (lookups, error) {
	out := lookups{}
	for i, t := range s.Temporary {
		l, err := redis.DecodeLookupConfig(t.Config)
		if err != nil {
			return nil, fmt.Errorf("temporary[%d]: %w", i, err)
		}
		out[t.Name] = l
	}
	return out, nil
}

// withTemporaries runs a query over the batch (as table) and the tables
// its temporary_list fetches for it.
type withTemporaries struct {
	query, table string
	refs         []tempRef
	lookups      lookups
	joiner       sqlengine.Joiner
	engine       sqlengine.Engine
}

// run fetches every temporary's rows for rec and runs the query.
func (w *withTemporaries) run(ctx context.Context, rec arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	tables := map[string]arrow.RecordBatch{w.table: rec}
	schemas := map[string]*arrow.Schema{w.table: rec.Schema()}
	defer func() {
		for name, t := range tables {
			if name != w.table {
				t.Release()
			}
		}
	}()
	for _, ref := range w.refs {
		keys, err := w.keys(ctx, ref, rec)
		if err != nil {
			return nil, err
		}
		vals, err := w.lookups[ref.Name].Get(ctx, keys)
		if err != nil {
			return nil, fmt.Errorf("temporary %s: %w", ref.Name, err)
		}
		if len(vals) == 0 {
			return nil, fmt.Errorf("temporary %s holds nothing for the keys %q: table %s would have no columns", ref.Name, keys, ref.TableName)
		}
		t, err := arrowjson.DecodeValues(vals, nil)
		if err != nil {
			return nil, fmt.Errorf("temporary %s: codec json: %w", ref.Name, err)
		}
		tables[ref.TableName], schemas[ref.TableName] = t, t.Schema()
	}
	q, err := w.joiner.CompileTables(w.query, schemas)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	return q.Run(ctx, tables)
}

// keys are a reference's keys for rec: its value, or the distinct
// non-null values of its expression over rec.
func (w *withTemporaries) keys(ctx context.Context, ref tempRef, rec arrow.RecordBatch) ([]string, error) {
	if ref.Key.Type != "expr" {
		return []string{ref.Key.Value}, nil
	}
	q, err := w.engine.Compile(fmt.Sprintf("SELECT DISTINCT CAST((%s) AS VARCHAR) AS k FROM %s", ref.Key.Expr, quoteIdent(w.table)), w.table, rec.Schema())
	if err != nil {
		return nil, fmt.Errorf("temporary_list key expr %q: %w", ref.Key.Expr, err)
	}
	defer q.Close()
	res, err := q.Run(ctx, rec)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, r := range res {
		col := r.Column(0).(*array.String)
		for i := range col.Len() {
			if col.IsValid(i) {
				keys = append(keys, strings.Clone(col.Value(i))) // the batch is released below
			}
		}
		r.Release()
	}
	return keys, nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
