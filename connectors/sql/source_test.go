package sql

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// batchRows returns a batch's (offset, id, name) rows.
type readRow struct {
	off  int64
	id   int64
	name string
}

func rowsOf(b connectors.Batch) []readRow {
	rec := b.Record
	col := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
	ids := rec.Column(col("id")).(*array.Int64)
	names := rec.Column(col("name")).(*array.String)
	offs := rec.Column(col(connectors.MetaOffset)).(*array.Int64)
	out := make([]readRow, rec.NumRows())
	for i := range out {
		out[i] = readRow{offs.Value(i), ids.Value(i), names.Value(i)}
	}
	return out
}

var idName = connectors.Schema{{Name: "id", Type: "int64"}, {Name: "name", Type: "string"}}

// Rows sharing a tracking value are never split between batches, so
// none is skipped: a table whose tracking column has runs of equal
// values, read with a batch size that cuts through them, yields every row
// once; a model (the table sorted by value) says which. A full page of
// one value is an error naming the tracking column.
func TestSharedTrackingValues(t *testing.T) {
	path := sqliteDB(t, "CREATE TABLE t (seq INTEGER NOT NULL, id INTEGER PRIMARY KEY, name TEXT)")
	rng := rand.New(rand.NewPCG(3, 4))
	var stmts []string
	var model []readRow
	seq := int64(0)
	for id := int64(0); id < 200; id++ {
		if rng.IntN(3) > 0 {
			seq += int64(1 + rng.IntN(3))
		}
		name := fmt.Sprintf("r%d", id)
		stmts = append(stmts, fmt.Sprintf("INSERT INTO t VALUES (%d, %d, '%s')", seq, id, name))
		model = append(model, readRow{seq, id, name})
	}
	sqliteExec(t, path, stmts...)
	// A batch holds more rows than the longest run, and cuts through
	// runs.
	longest, run := 0, 0
	for i := range model {
		if i > 0 && model[i].off == model[i-1].off {
			run++
		} else {
			run = 1
		}
		longest = max(longest, run)
	}
	size := longest + 1
	in := must[*Input](t)(NewInput(SourceConfig{
		Database: DB{Type: SQLite, Path: path}, TrackingColumn: "seq", BatchSize: size, PollIntervalMS: 10,
		SelectSQL: "SELECT seq, id, name FROM t WHERE seq > :last ORDER BY seq, id LIMIT :limit",
		Schema:    append(connectors.Schema{{Name: "seq", Type: "int64"}}, idName...),
	}))
	src := newSource(t, in, nil)
	var got []readRow
	for len(got) < len(model) {
		b := readBatch(t, src)
		rows := rowsOf(b)
		if len(rows) > size {
			t.Fatalf("a batch of %d rows, batch_size %d", len(rows), size)
		}
		if n := len(got) + len(rows); n < len(model) && model[n].off == rows[len(rows)-1].off {
			t.Fatalf("a batch ends inside the run of %s = %d", "seq", model[n].off)
		}
		got = append(got, rows...)
		b.Ack(nil)
	}
	readNothing(t, src, 100*time.Millisecond)
	if fmt.Sprint(got) != fmt.Sprint(model) {
		t.Fatalf("read\n%v\nwant\n%v", got, model)
	}
	if pos := src.Positions(); len(pos) != 1 || pos[0].Offset != seq+1 {
		t.Errorf("positions %v, want offset %d", pos, seq+1)
	}

	sqliteExec(t, path, fmt.Sprintf("INSERT INTO t SELECT %d, id + 1000, name FROM t LIMIT %d", seq+1, size+1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := src.Read(ctx)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than batch_size (%d) rows share seq = %d: raise batch_size", size, seq+1)) {
		t.Fatalf("Read of a page of one value: %v", err)
	}
}

// PostgreSQL timestamps as the tracking column: positions are Unix
// microseconds, rows that arrive later are polled, and a source sought to
// a position reads exactly the rows from it on.
func TestTimestampTrackingPostgres(t *testing.T) {
	dsn := pgDSN(t)
	for _, typ := range []string{"timestamptz", "timestamp"} {
		t.Run(typ, func(t *testing.T) { timestampTracking(t, dsn, typ) })
	}
}

// timestampTracking is TestTimestampTrackingPostgres on a column of type
// typ (timestamp without time zone is read and compared as UTC).
func timestampTracking(t *testing.T, dsn, typ string) {
	table := pgTable(t, dsn, "at "+typ+" NOT NULL, id bigint, name text")
	base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	insert := func(from, to int) {
		var vals []string
		for i := from; i < to; i++ {
			// 1.5 ms apart: microseconds matter. (A timestamp column
			// ignores the +00.)
			at := base.Add(time.Duration(i) * 1500 * time.Microsecond)
			vals = append(vals, fmt.Sprintf("('%s', %d, 'n%d')", at.Format("2006-01-02 15:04:05.999999+00"), i, i))
		}
		pgExec(t, dsn, "INSERT INTO "+table+" VALUES "+strings.Join(vals, ", "))
	}
	insert(0, 10)
	cfg := SourceConfig{
		Database: DB{Type: Postgres, URI: dsn}, TableName: table, TrackingColumn: "at", BatchSize: 4, PollIntervalMS: 10,
		Schema: append(connectors.Schema{{Name: "at", Type: "timestamp", Unit: "ms"}}, idName...),
	}
	in := must[*Input](t)(NewInput(cfg))
	src := newSource(t, in, nil)
	var got []readRow
	for len(got) < 10 {
		b := readBatch(t, src)
		got = append(got, rowsOf(b)...)
		b.Ack(nil)
	}
	insert(10, 13) // after the source caught up: polled
	for len(got) < 13 {
		b := readBatch(t, src)
		got = append(got, rowsOf(b)...)
		b.Ack(nil)
	}
	for i, r := range got {
		want := readRow{base.Add(time.Duration(i) * 1500 * time.Microsecond).UnixMicro(), int64(i), fmt.Sprintf("n%d", i)}
		if r != want {
			t.Errorf("row %d: %v, want %v", i, r, want)
		}
	}
	last := got[12].off
	if pos := src.Positions(); len(pos) != 1 || pos[0].Offset != last+1 {
		t.Errorf("positions %v, want %d", pos, last+1)
	}
	// Resume at row 7's time: rows 7.. again, nothing before.
	resumed := newSource(t, in, []connectors.Position{{Partition: 0, Offset: got[7].off}})
	var again []readRow
	for len(again) < 6 {
		b := readBatch(t, resumed)
		again = append(again, rowsOf(b)...)
	}
	if fmt.Sprint(again) != fmt.Sprint(got[7:]) {
		t.Errorf("after a seek to %d: %v, want %v", got[7].off, again, got[7:])
	}
	readNothing(t, resumed, 100*time.Millisecond)
}

// A value that does not fit the declared type stops the source with an
// error naming the column and the row, delivers nothing of the batch and
// leaves the position; once the row is fixed the source reads on from
// the same place.
func TestBadValueNamesColumnAndRow(t *testing.T) {
	dsn := pgDSN(t)
	table := pgTable(t, dsn, "id bigint PRIMARY KEY, name text, score text")
	pgExec(t, dsn, "INSERT INTO "+table+" VALUES (1, 'a', '1.5'), (2, 'b', '2'), (3, 'c', 'oops'), (4, 'd', '4')")
	cfg := SourceConfig{
		Database: DB{Type: Postgres, URI: dsn}, TrackingColumn: "id", BatchSize: 2, PollIntervalMS: 10,
		SelectSQL: "SELECT id, name, CASE WHEN score ~ '^[0-9.]+$' THEN score::float8 END AS score, score AS raw FROM " + table + " WHERE id > :last ORDER BY id LIMIT :limit",
		Schema:    append(idName, connectors.Field{Name: "score", Type: "float64", Nullable: new(bool)}, connectors.Field{Name: "raw", Type: "string"}),
	}
	src := newSource(t, must[*Input](t)(NewInput(cfg)), nil)
	b := readBatch(t, src)
	if got := rowsOf(b); len(got) != 2 || got[1].id != 2 {
		t.Fatalf("first batch %v", got)
	}
	b.Ack(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := src.Read(ctx)
	if err == nil || !strings.Contains(err.Error(), `the row with id = 3: column "score": is NULL, and the column is declared not nullable`) {
		t.Fatalf("Read of a bad row: %v", err)
	}
	if pos := src.Positions(); len(pos) != 1 || pos[0].Offset != 3 {
		t.Errorf("positions %v after the bad row, want 3", pos)
	}
	pgExec(t, dsn, "UPDATE "+table+" SET score = '3' WHERE id = 3")
	b = readBatch(t, src)
	if got := rowsOf(b); fmt.Sprint(got) != "[{3 3 c} {4 4 d}]" {
		t.Errorf("after the fix: %v", got)
	}
}

// Connect checks the query's columns against the schema, naming each
// one that differs, and the query itself.
func TestConnectChecksTheQuery(t *testing.T) {
	path := sqliteDB(t, "CREATE TABLE t (id INTEGER, name TEXT, extra TEXT)")
	cases := []struct{ query, want string }{
		{"SELECT id, name, extra FROM t WHERE id > :last ORDER BY id LIMIT :limit", `it returns column "extra", which schema does not declare`},
		{"SELECT id FROM t WHERE id > :last ORDER BY id LIMIT :limit", `schema declares column "name", which it does not return`},
		{"SELECT id, nam FROM t WHERE id > :last ORDER BY id LIMIT :limit", "no such column: nam"},
	}
	for _, c := range cases {
		in := must[*Input](t)(NewInput(SourceConfig{Database: DB{Type: SQLite, Path: path}, SelectSQL: c.query, TrackingColumn: "id", Schema: idName}))
		s, _ := in.NewSource(connectors.TaskInfo{OperatorID: "in", Parallelism: 1})
		err := s.Connect(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "running select_sql") {
			t.Errorf("%s: Connect: %v, want %q", c.query, err, c.want)
		}
		_ = s.Close(context.Background())
	}
	in := must[*Input](t)(NewInput(SourceConfig{Database: DB{Type: SQLite, Path: path + ".missing"}, TableName: "t", TrackingColumn: "id", Schema: idName}))
	s, _ := in.NewSource(connectors.TaskInfo{OperatorID: "in", Parallelism: 1})
	if err := s.Connect(context.Background()); err == nil || !strings.Contains(err.Error(), "creates no database") {
		t.Errorf("Connect to a missing file: %v", err)
	}
}

// A query that returns rows out of tracking order stops the source with
// an error saying so.
func TestQueryOutOfOrder(t *testing.T) {
	path := sqliteDB(t, "CREATE TABLE t (id INTEGER, name TEXT)", "INSERT INTO t VALUES (1, 'a'), (2, 'b')")
	in := must[*Input](t)(NewInput(SourceConfig{Database: DB{Type: SQLite, Path: path}, TrackingColumn: "id", Schema: idName,
		SelectSQL: "SELECT id, name FROM t WHERE id > :last ORDER BY id DESC LIMIT :limit"}))
	src := newSource(t, in, nil)
	_, err := src.Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), `the query returned id = 1 out of order`) || !strings.Contains(err.Error(), `ORDER BY "id"`) {
		t.Fatalf("Read: %v", err)
	}
}

// A lost connection is dialled again by the next query.
func TestSourceReconnects(t *testing.T) {
	dsn := pgDSN(t)
	table := pgTable(t, dsn, "id bigint, name text")
	pgExec(t, dsn, "INSERT INTO "+table+" VALUES (1, 'a')")
	src := newSource(t, must[*Input](t)(NewInput(SourceConfig{Database: DB{Type: Postgres, URI: dsn}, TableName: table,
		TrackingColumn: "id", Schema: idName, PollIntervalMS: 10})), nil)
	readBatch(t, src)
	pgExec(t, dsn, fmt.Sprintf("SELECT pg_terminate_backend(%d)", src.r.c.(*pgConn).c.PgConn().PID()), "INSERT INTO "+table+" VALUES (2, 'b')")
	if got := rowsOf(readBatch(t, src)); fmt.Sprint(got) != "[{2 2 b}]" {
		t.Errorf("after the connection was lost: %v", got)
	}
	if m := src.Metrics(); m[0].Value < 1 || len(m) != 2 || m[1].Name != MetricTrackingValue || m[1].Value != 2 {
		t.Errorf("metrics %+v", m)
	}
}

// A row whose tracking value is NULL stops the source with an error
// naming the tracking column and the row's place in the result.
func TestNullTrackingValue(t *testing.T) {
	path := sqliteDB(t, "CREATE TABLE t (id INTEGER, name TEXT)", "INSERT INTO t VALUES (NULL, 'a'), (2, 'b')")
	in := must[*Input](t)(NewInput(SourceConfig{Database: DB{Type: SQLite, Path: path}, TrackingColumn: "id", Schema: idName,
		SelectSQL: "SELECT id, name FROM t WHERE id > :last OR id IS NULL ORDER BY id LIMIT :limit"}))
	src := newSource(t, in, nil)
	_, err := src.Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), `row 0 of the query's result: column "id": tracking column is NULL`) {
		t.Fatalf("Read: %v", err)
	}
	if pos := src.Positions(); len(pos) != 0 {
		t.Errorf("positions %v after the bad row, want none", pos)
	}
}
