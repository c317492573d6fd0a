//go:build cgo

package duckdb

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
)

var (
	userSchema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String},
	}, nil)
	orderSchema = arrow.NewSchema([]arrow.Field{
		{Name: "user_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
)

// pairs is a batch of two columns: an int64 and, by schema, a string or
// an int64, from alternating values.
func pairs(t *testing.T, mem memory.Allocator, s *arrow.Schema, vals ...any) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	for i := 0; i < len(vals); i += 2 {
		b.Field(0).(*array.Int64Builder).Append(int64(vals[i].(int)))
		switch f := b.Field(1).(type) {
		case *array.StringBuilder:
			f.Append(vals[i+1].(string))
		case *array.Int64Builder:
			f.Append(int64(vals[i+1].(int)))
		}
	}
	return b.NewRecordBatch()
}

func compileJoin(t *testing.T, sql string, tables map[string]*arrow.Schema) sqlengine.MultiQuery {
	t.Helper()
	j, ok := sqlengine.Lookup().(sqlengine.Joiner)
	if !ok {
		t.Fatal("the registered engine is not a Joiner")
	}
	q, err := j.CompileTables(sql, tables)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// A query joins two tables, each read by its name, run after run with
// new batches; a table read twice (a self join) is served by a copy.
func TestCompileTablesJoins(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, tc := range []struct {
		name, sql string
		copied    bool
	}{
		{"join", `SELECT u.name, o.amount FROM orders o JOIN "my users" u ON o.user_id = u.id ORDER BY o.amount`, false},
		{"self join", `SELECT u.name, o.amount FROM orders o JOIN "my users" u ON o.user_id = u.id
			JOIN "my users" u2 ON u2.id = u.id ORDER BY o.amount`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := compileJoin(t, tc.sql, map[string]*arrow.Schema{"my users": userSchema, "orders": orderSchema})
			if got := fieldList(q.Schema()); got != "(name utf8, amount int64)" {
				t.Fatalf("schema %s", got)
			}
			if got := q.(multi).copyIn; got != tc.copied {
				t.Errorf("copies the batches: %v, want %v", got, tc.copied)
			}
			for round := range 3 {
				users := pairs(t, mem, userSchema, 1, "ann", 2, "bob")
				orders := pairs(t, mem, orderSchema, 2, 10+round, 1, 20+round, 3, 30)
				res, err := q.Run(context.Background(), map[string]arrow.RecordBatch{"my users": users, "orders": orders})
				users.Release()
				orders.Release()
				if err != nil {
					t.Fatal(err)
				}
				got := values(t, res)
				want := []string{"bob " + itoa(10+round), "ann " + itoa(20+round)}
				if !slices.Equal(got, want) {
					t.Fatalf("round %d: got %q, want %q", round, got, want)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// CompileTables fails on what Compile fails on, and Run refuses batches
// that do not match what was compiled.
func TestCompileTablesErrors(t *testing.T) {
	j := sqlengine.Lookup().(sqlengine.Joiner)
	tables := map[string]*arrow.Schema{"a": userSchema, "b": orderSchema}
	for _, tc := range []struct{ sql, want string }{
		{"SELECT * FROM c", "c"},
		{"SELECT nope FROM a", "nope"},
		{"DELETE FROM a", "delete"},
		{"SELECT 1; SELECT 2", "2 statements"},
	} {
		if q, err := j.CompileTables(tc.sql, tables); err == nil {
			q.Close()
			t.Errorf("%s: compiled", tc.sql)
		} else if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.sql) {
			t.Errorf("%s: error %q does not say %q and quote the query", tc.sql, err, tc.want)
		}
	}
	if q, err := j.CompileTables("SELECT 1", map[string]*arrow.Schema{staging: userSchema}); err == nil {
		q.Close()
		t.Errorf("the staging table's name was accepted")
	}
	q := compileJoin(t, "SELECT * FROM a, b", tables)
	users := pairs(t, memory.DefaultAllocator, userSchema, 1, "ann")
	defer users.Release()
	orders := pairs(t, memory.DefaultAllocator, orderSchema, 1, 5)
	defer orders.Release()
	for name, in := range map[string]map[string]arrow.RecordBatch{
		"missing table": {"a": users},
		"other schema":  {"a": orders, "b": orders},
		"extra table":   {"a": users, "b": orders, "c": orders},
	} {
		if res, err := q.Run(context.Background(), in); err == nil {
			values(t, res)
			t.Errorf("%s: ran", name)
		}
	}
	res, err := q.Run(context.Background(), map[string]arrow.RecordBatch{"a": users, "b": orders})
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, res); !slices.Equal(got, []string{"1 ann 1 5"}) {
		t.Errorf("got %q", got)
	}
}
