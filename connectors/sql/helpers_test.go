package sql

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

const noPostgres = "no PostgreSQL: bash .ci/test.sh starts one and sets ARKFLOW_TEST_POSTGRES_DSN " +
	"(ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh go test -race ./connectors/sql/ runs these tests with it), " +
	"or set ARKFLOW_TEST_POSTGRES_DSN=postgres://user@127.0.0.1:PORT/db?sslmode=disable"

// pgDSN returns the test server's connection string, or skips.
func pgDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("ARKFLOW_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip(noPostgres)
	}
	return dsn
}

// pgExec runs statements on the test server.
func pgExec(t testing.TB, dsn string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// tableName is a fresh table name for the test (lower case, so that
// PostgreSQL's unquoted DDL and the connector's quoted names agree).
func tableName(t testing.TB) string {
	n := nonIdent.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	return fmt.Sprintf("t_%s_%06d", n, rand.IntN(1_000_000))
}

// pgTable creates a table (ddl is its column list) that is dropped when
// the test ends, and returns its name.
func pgTable(t testing.TB, dsn, ddl string) string {
	t.Helper()
	name := tableName(t)
	pgExec(t, dsn, fmt.Sprintf("CREATE TABLE %s (%s)", name, ddl))
	t.Cleanup(func() { pgExec(t, dsn, "DROP TABLE IF EXISTS "+name) })
	return name
}

// pgQuery returns the rows of a query, each value as pgx decodes it.
func pgQuery(t testing.TB, dsn, q string, args ...any) [][]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sqliteDB creates an SQLite file in a temp dir with the given statements
// run, and returns its path.
func sqliteDB(t testing.TB, stmts ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	sqliteExec(t, path, stmts...)
	return path
}

func sqliteExec(t testing.TB, path string, stmts ...string) {
	t.Helper()
	db, err := dbsql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func sqliteQuery(t testing.TB, path, q string, args ...any) [][]any {
	t.Helper()
	db, err := dbsql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// connectSink makes and connects the sink of an output, closed when the
// test ends. Retries wait 1 ms instead of 100 ms and more.
func connectSink(t testing.TB, out *Output) *Sink {
	t.Helper()
	s, err := out.NewSink(connectors.TaskInfo{JobID: "test", OperatorID: "out", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	snk := s.(*Sink)
	snk.r.backoff = func(int) time.Duration { return time.Millisecond }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := snk.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = snk.Close(context.Background()) })
	return snk
}

// newSource makes, seeks and connects the source of subtask 0 of 1.
func newSource(t testing.TB, in *Input, seek []connectors.Position) *Source {
	t.Helper()
	s, err := in.NewSource(connectors.TaskInfo{JobID: "test", OperatorID: "in", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	src := s.(*Source)
	src.r.backoff = func(int) time.Duration { return time.Millisecond }
	if seek != nil {
		if err := src.Seek(seek); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := src.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	return src
}

// readBatch reads one batch, failing after 30 s.
func readBatch(t testing.TB, src *Source) connectors.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := src.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	t.Cleanup(b.Record.Release)
	return b
}

// readNothing checks that no batch comes within d.
func readNothing(t testing.TB, src *Source, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	b, err := src.Read(ctx)
	if b.Record != nil {
		defer b.Record.Release()
		t.Fatalf("a batch of %d rows, want none", b.Record.NumRows())
	}
	if err != context.DeadlineExceeded {
		t.Fatalf("Read: %v, want the deadline", err)
	}
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// schemaOf is an Arrow schema of (name, type) pairs, all nullable.
func schemaOf(fields ...any) *arrow.Schema {
	var fs []arrow.Field
	for i := 0; i < len(fields); i += 2 {
		fs = append(fs, arrow.Field{Name: fields[i].(string), Type: fields[i+1].(arrow.DataType), Nullable: true})
	}
	return arrow.NewSchema(fs, nil)
}

func connectorsInfo() connectors.TaskInfo {
	return connectors.TaskInfo{JobID: "test", OperatorID: "out", Parallelism: 1}
}
