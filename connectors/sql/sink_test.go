package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgtype"
)

// record builds a batch of schema from rows of Go values (nil: null).
func record(t testing.TB, schema *arrow.Schema, rows ...[]any) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range rows {
		for j, v := range r {
			fb := b.Field(j)
			if v == nil {
				fb.AppendNull()
				continue
			}
			switch x := fb.(type) {
			case *array.Int64Builder:
				x.Append(v.(int64))
			case *array.Int32Builder:
				x.Append(v.(int32))
			case *array.Float64Builder:
				x.Append(v.(float64))
			case *array.StringBuilder:
				x.Append(v.(string))
			case *array.BinaryBuilder:
				x.Append(v.([]byte))
			case *array.BooleanBuilder:
				x.Append(v.(bool))
			case *array.TimestampBuilder:
				x.Append(arrow.Timestamp(v.(time.Time).UnixMilli()))
			default:
				t.Fatalf("record: no case for %T", fb)
			}
		}
	}
	rec := b.NewRecordBatch()
	t.Cleanup(rec.Release)
	return rec
}

func write(t testing.TB, s *Sink, rec arrow.RecordBatch) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Write(ctx, rec)
}

var ms = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}

// A window's results, upserted on (user, window_start) in batches that
// repeat and update rows, leave the table equal to a model that applies
// the same rows in order to a map; on both databases. Each batch repeats
// earlier rows (a restart's replay) and changes some (late updates), and
// a batch may hold one key twice (the later wins).
func TestUpsertMatchesModel(t *testing.T) {
	schema := schemaOf("user", arrow.BinaryTypes.String, "window_start", ms, "n", arrow.PrimitiveTypes.Int64,
		"avg", arrow.PrimitiveTypes.Float64, "__arkflow_window_update", arrow.FixedWidthTypes.Boolean,
		"__meta_offset", arrow.PrimitiveTypes.Int64)
	cfg := func(db DB, table string) SinkConfig {
		return SinkConfig{Database: db, TableName: table, Mode: ModeUpsert, Keys: []string{"user", "window_start"},
			Columns: []string{"user", "window_start", "n", "avg"}}
	}
	t.Run("postgres", func(t *testing.T) {
		dsn := pgDSN(t)
		table := pgTable(t, dsn, `"user" text, window_start timestamptz, n bigint, avg double precision, PRIMARY KEY ("user", window_start)`)
		s := connectSink(t, must[*Output](t)(NewOutput(cfg(DB{Type: Postgres, URI: dsn}, table), schema)))
		upsertModel(t, s, schema, func() [][]any {
			return pgQuery(t, dsn, `SELECT "user", window_start, n, avg FROM `+table)
		})
	})
	t.Run("sqlite", func(t *testing.T) {
		path := sqliteDB(t, `CREATE TABLE w (user TEXT, window_start INTEGER, n INTEGER, avg REAL, PRIMARY KEY (user, window_start))`)
		s := connectSink(t, must[*Output](t)(NewOutput(cfg(DB{Type: SQLite, Path: path}, "w"), schema)))
		upsertModel(t, s, schema, func() [][]any {
			rows := sqliteQuery(t, path, `SELECT user, window_start, n, avg FROM w`)
			for _, r := range rows {
				r[1] = time.UnixMilli(r[1].(int64)) // INTEGER: Unix milliseconds, the column's unit
			}
			return rows
		})
	})
}

func upsertModel(t *testing.T, s *Sink, schema *arrow.Schema, table func() [][]any) {
	type key struct {
		user  string
		start int64
	}
	type val struct {
		n   int64
		avg float64
	}
	model := map[key]val{}
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	var history [][]any
	for batch := 0; batch < 12; batch++ {
		var rows [][]any
		for i := 0; i < 30; i++ {
			var r []any
			if len(history) > 0 && rng.IntN(3) == 0 {
				r = append([]any(nil), history[rng.IntN(len(history))]...) // replayed
				if rng.IntN(2) == 0 {
					r[2] = r[2].(int64) + 1 // updated
				}
			} else {
				r = []any{fmt.Sprintf("u%d", rng.IntN(7)), base.Add(time.Duration(rng.IntN(20)) * time.Minute), int64(rng.IntN(100)), rng.Float64(), rng.IntN(2) == 0, int64(i)}
			}
			rows = append(rows, r)
			history = append(history, r)
			model[key{r[0].(string), r[1].(time.Time).UnixMilli()}] = val{r[2].(int64), r[3].(float64)}
		}
		if err := write(t, s, record(t, schema, rows...)); err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
	}
	got := map[key]val{}
	for _, r := range table() {
		k := key{r[0].(string), r[1].(time.Time).UnixMilli()}
		if _, dup := got[k]; dup {
			t.Errorf("key %v twice in the table", k)
		}
		got[k] = val{r[2].(int64), r[3].(float64)}
	}
	if len(got) != len(model) {
		t.Errorf("%d rows in the table, the model has %d", len(got), len(model))
	}
	for k, v := range model {
		if got[k] != v {
			t.Errorf("%v: table %v, model %v", k, got[k], v)
		}
	}
}

// Every type the output writes lands as the same value, and nulls as
// NULL, in PostgreSQL's natural column types.
func TestWriteTypesPostgres(t *testing.T) {
	dsn := pgDSN(t)
	table := pgTable(t, dsn, "i bigint, i4 integer, f double precision, s text, j jsonb, b bytea, ok boolean, ts timestamptz, tsl timestamp, d date")
	schema := schemaOf("i", arrow.PrimitiveTypes.Int64, "i4", arrow.PrimitiveTypes.Int32, "f", arrow.PrimitiveTypes.Float64,
		"s", arrow.BinaryTypes.String, "j", arrow.BinaryTypes.String, "b", arrow.BinaryTypes.Binary, "ok", arrow.FixedWidthTypes.Boolean,
		"ts", ms, "tsl", ms, "d", ms)
	s := connectSink(t, must[*Output](t)(NewOutput(SinkConfig{Database: DB{Type: Postgres, URI: dsn}, TableName: table}, schema)))
	ts := time.Date(2026, 12, 7, 10, 30, 5, 123000000, time.UTC)
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	if err := write(t, s, record(t, schema,
		[]any{int64(-1 << 40), int32(7), 2.5, "é \"q\"", `{"a": [1, 2]}`, []byte{0, 1, 255}, true, ts, ts, day},
		[]any{nil, nil, nil, nil, nil, nil, nil, nil, nil, nil})); err != nil {
		t.Fatal(err)
	}
	rows := pgQuery(t, dsn, "SELECT i, i4, f, s, j, b, ok, ts, tsl, d FROM "+table+" ORDER BY i NULLS LAST")
	want := []any{int64(-1 << 40), int32(7), 2.5, "é \"q\"", map[string]any{"a": []any{1.0, 2.0}}, []byte{0, 1, 255}, true, ts, ts, pgtype.Date{}}
	got := rows[0]
	for j := range want {
		switch w := want[j].(type) {
		case time.Time:
			if g, ok := got[j].(time.Time); !ok || !g.Equal(w) {
				t.Errorf("column %d: %v (%T), want %v", j, got[j], got[j], w)
			}
		case pgtype.Date:
			if g, ok := got[j].(time.Time); !ok || !g.Equal(day) {
				t.Errorf("date column: %v (%T), want %v", got[j], got[j], day)
			}
		default:
			if fmt.Sprint(got[j]) != fmt.Sprint(w) {
				t.Errorf("column %d: %v (%T), want %v", j, got[j], got[j], w)
			}
		}
	}
	for j, v := range rows[1] {
		if v != nil {
			t.Errorf("column %d of the null row: %v", j, v)
		}
	}
}

// SQLite: timestamps into INTEGER columns as the integer in their unit,
// into TEXT columns as fixed-width RFC 3339; booleans as 0/1; blobs.
func TestWriteTypesSQLite(t *testing.T) {
	path := sqliteDB(t, "CREATE TABLE t (i INTEGER, f REAL, s TEXT, b BLOB, ok BOOLEAN, tsi INTEGER, tst TEXT, tsd DATETIME, x)")
	schema := schemaOf("i", arrow.PrimitiveTypes.Int64, "f", arrow.PrimitiveTypes.Float64, "s", arrow.BinaryTypes.String,
		"b", arrow.BinaryTypes.Binary, "ok", arrow.FixedWidthTypes.Boolean, "tsi", ms, "tst", ms, "tsd", ms, "x", ms)
	s := connectSink(t, must[*Output](t)(NewOutput(SinkConfig{Database: DB{Type: SQLite, Path: path}, TableName: "t"}, schema)))
	ts := time.Date(2026, 12, 7, 10, 30, 5, 0, time.UTC)
	if err := write(t, s, record(t, schema, []any{int64(42), 0.5, "x'y", []byte{9, 0}, true, ts, ts, ts, ts})); err != nil {
		t.Fatal(err)
	}
	got := sqliteQuery(t, path, "SELECT i, f, s, b, ok, tsi, tst, CAST(tsd AS TEXT), x FROM t")[0]
	want := []any{int64(42), 0.5, "x'y", []byte{9, 0}, int64(1), ts.UnixMilli(), "2026-12-07T10:30:05.000Z", "2026-12-07T10:30:05.000Z", "2026-12-07T10:30:05.000Z"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("row %v, want %v", got, want)
	}
}

// Connect finds every mismatch between the rows and the table, naming
// the column (or the keys), before writing anything.
func TestConnectChecksTheTable(t *testing.T) {
	dsn := pgDSN(t)
	schema := schemaOf("id", arrow.PrimitiveTypes.Int64, "name", arrow.BinaryTypes.String, "score", arrow.PrimitiveTypes.Float64)
	cases := []struct {
		name, ddl string
		cfg       func(table string) SinkConfig
		want      []string
	}{
		{"missing column", "id bigint PRIMARY KEY, name text", nil,
			[]string{`column "score" of the rows does not exist in table`, "(its columns: id, name)", "list the columns to write in columns"}},
		{"wrong types", "id text, name integer, score double precision", nil,
			[]string{`column "id" of table`, "is text (text), which does not take the rows' int64 values", `column "name" of table`, "is integer (numeric), which does not take the rows' utf8 values"}},
		{"keys without an index", "id bigint, name text, score real", func(table string) SinkConfig {
			return SinkConfig{TableName: table, Mode: ModeUpsert, Keys: []string{"id", "name"}}
		}, []string{"keys (id, name) are not the primary key or a unique index of table", `CREATE UNIQUE INDEX ON`}},
		{"no table", "", func(string) SinkConfig { return SinkConfig{TableName: "no_such_table"} },
			[]string{`table "no_such_table" does not exist (table_name is case-sensitive`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			table := "unused"
			if c.ddl != "" {
				table = pgTable(t, dsn, c.ddl)
			}
			cfg := SinkConfig{TableName: table}
			if c.cfg != nil {
				cfg = c.cfg(table)
			}
			cfg.Database = DB{Type: Postgres, URI: dsn}
			s, _ := must[*Output](t)(NewOutput(cfg, schema)).NewSink(connectorsInfo())
			defer s.Close(context.Background())
			err := s.Connect(context.Background())
			if err == nil {
				t.Fatal("Connect: no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
			if c.ddl != "" {
				if n := pgQuery(t, dsn, "SELECT count(*) FROM "+table)[0][0].(int64); n != 0 {
					t.Errorf("%d rows written", n)
				}
			}
		})
	}
}

// The same check on SQLite (no server needed).
func TestConnectChecksTheTableSQLite(t *testing.T) {
	schema := schemaOf("id", arrow.PrimitiveTypes.Int64, "name", arrow.BinaryTypes.String, "score", arrow.PrimitiveTypes.Float64)
	t.Run("sqlite keys without an index", func(t *testing.T) {
		path := sqliteDB(t, "CREATE TABLE t (id INTEGER, name TEXT, score REAL)")
		s, _ := must[*Output](t)(NewOutput(SinkConfig{Database: DB{Type: SQLite, Path: path}, TableName: "t", Mode: ModeUpsert, Keys: []string{"id"}}, schema)).NewSink(connectorsInfo())
		defer s.Close(context.Background())
		if err := s.Connect(context.Background()); err == nil || !strings.Contains(err.Error(), "keys (id) are not the primary key or a unique index") {
			t.Errorf("Connect: %v", err)
		}
	})
	t.Run("sqlite wrong types", func(t *testing.T) {
		path := sqliteDB(t, "CREATE TABLE t (id TEXT, name INTEGER, score)")
		s, _ := must[*Output](t)(NewOutput(SinkConfig{Database: DB{Type: SQLite, Path: path}, TableName: "t"}, schema)).NewSink(connectorsInfo())
		defer s.Close(context.Background())
		err := s.Connect(context.Background())
		for _, w := range []string{`column "id" of table "t" is TEXT (text), which does not take the rows' int64 values`,
			`column "name" of table "t" is INTEGER (numeric), which does not take the rows' utf8 values`} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Connect: %v\nwant %q", err, w)
			}
		}
	})
}

// A batch with a row the database refuses fails whole: its error names
// the row (and the column where the database or the encoder tells), the
// table holds nothing of it, and the next good batch goes in.
func TestBadRowLosesNothingElse(t *testing.T) {
	dsn := pgDSN(t)
	table := pgTable(t, dsn, "id bigint PRIMARY KEY, small integer, name text NOT NULL CHECK (name <> 'bad')")
	schema := schemaOf("id", arrow.PrimitiveTypes.Int64, "small", arrow.PrimitiveTypes.Int64, "name", arrow.BinaryTypes.String)
	s := connectSink(t, must[*Output](t)(NewOutput(SinkConfig{Database: DB{Type: Postgres, URI: dsn}, TableName: table, Mode: ModeUpsert, Keys: []string{"id"}}, schema)))
	good := func(ids ...int64) [][]any {
		var out [][]any
		for _, id := range ids {
			out = append(out, []any{id, id, fmt.Sprintf("n%d", id)})
		}
		return out
	}
	cases := []struct {
		name string
		bad  []any
		want []string
	}{
		{"check constraint", []any{int64(3), int64(1), "bad"}, []string{"row 2 of the batch's 5", "violates check constraint", "23514"}},
		{"not null", []any{int64(3), int64(1), nil}, []string{"row 2 of the batch's 5", `"name"`, "23502"}},
		{"out of range", []any{int64(3), int64(1 << 40), "x"}, []string{`column "small" (int64)`, "greater than maximum value for int4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows := append(append(good(1, 2), c.bad), good(4, 5)...)
			err := write(t, s, record(t, schema, rows...))
			if err == nil {
				t.Fatal("Write: no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
			if n := pgQuery(t, dsn, "SELECT count(*) FROM "+table)[0][0].(int64); n != 0 {
				t.Errorf("%d rows of the failed batch are in the table", n)
			}
			if s.r.retries.Load() != 0 {
				t.Errorf("a refused row was retried %d times", s.r.retries.Load())
			}
		})
	}
	if err := write(t, s, record(t, schema, good(1, 2, 3)...)); err != nil {
		t.Fatalf("a good batch after the bad ones: %v", err)
	}
	if got := pgQuery(t, dsn, "SELECT id FROM "+table+" ORDER BY id"); fmt.Sprint(got) != "[[1] [2] [3]]" {
		t.Errorf("table %v", got)
	}
}

// Serialization failures are retried (a trigger raises SQLSTATE 40001 on
// the first two attempts: a sequence counts them, as the failed
// transactions roll back everything else), and the batch then goes in
// once; with too few retries the write fails after max_retries + 1
// attempts and nothing stays.
func TestRetriesSerializationFailures(t *testing.T) {
	dsn := pgDSN(t)
	table := pgTable(t, dsn, "id bigint PRIMARY KEY")
	seq, fn := table+"_attempts", table+"_fail"
	pgExec(t, dsn, "CREATE SEQUENCE "+seq,
		"CREATE FUNCTION "+fn+"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF nextval('"+seq+"') <= 2 THEN RAISE EXCEPTION 'injected' USING ERRCODE = 'serialization_failure'; END IF; RETURN NEW; END $$",
		"CREATE TRIGGER fail BEFORE INSERT ON "+table+" FOR EACH ROW EXECUTE FUNCTION "+fn+"()")
	t.Cleanup(func() {
		pgExec(t, dsn, "DROP TABLE IF EXISTS "+table, "DROP FUNCTION IF EXISTS "+fn, "DROP SEQUENCE IF EXISTS "+seq)
	})
	schema := schemaOf("id", arrow.PrimitiveTypes.Int64)
	cfg := SinkConfig{Database: DB{Type: Postgres, URI: dsn}, TableName: table}
	s := connectSink(t, must[*Output](t)(NewOutput(cfg, schema)))
	if err := write(t, s, record(t, schema, []any{int64(1)}, []any{int64(2)})); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if got := pgQuery(t, dsn, "SELECT id FROM "+table+" ORDER BY id"); fmt.Sprint(got) != "[[1] [2]]" {
		t.Errorf("table %v", got)
	}
	if n := s.Metrics()[0].Value; n != 2 {
		t.Errorf("%s = %v, want 2", MetricRetries, n)
	}

	pgExec(t, dsn, "SELECT setval('"+seq+"', 1, false)") // fail twice again
	one := 1
	cfg.MaxRetries = &one
	s = connectSink(t, must[*Output](t)(NewOutput(cfg, schema)))
	err := write(t, s, record(t, schema, []any{int64(3)}))
	if err == nil || !strings.Contains(err.Error(), "after 2 attempts") || !strings.Contains(err.Error(), "40001") {
		t.Fatalf("Write with max_retries 1: %v", err)
	}
	if got := pgQuery(t, dsn, "SELECT id FROM "+table+" ORDER BY id"); fmt.Sprint(got) != "[[1] [2]]" {
		t.Errorf("table %v after the failed write", got)
	}
}

// A connection the server ends between writes is dialled again and the
// write goes through.
func TestReconnectsAfterLostConnection(t *testing.T) {
	dsn := pgDSN(t)
	table := pgTable(t, dsn, "id bigint PRIMARY KEY")
	schema := schemaOf("id", arrow.PrimitiveTypes.Int64)
	s := connectSink(t, must[*Output](t)(NewOutput(SinkConfig{Database: DB{Type: Postgres, URI: dsn}, TableName: table, Mode: ModeUpsert, Keys: []string{"id"}}, schema)))
	for i := int64(0); i < 3; i++ {
		if err := write(t, s, record(t, schema, []any{i})); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		pid := s.r.c.(*pgConn).c.PgConn().PID()
		pgExec(t, dsn, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid))
	}
	if got := pgQuery(t, dsn, "SELECT id FROM "+table+" ORDER BY id"); fmt.Sprint(got) != "[[0] [1] [2]]" {
		t.Errorf("table %v", got)
	}
	if n := s.r.retries.Load(); n != 2 {
		t.Errorf("%d retries, want 2 (one after each of the two kills before a write)", n)
	}
}

// A real SQLITE_BUSY (another connection holds the write lock and this
// one does not wait) counts as an error that may pass.
func TestSQLiteBusyIsRetryable(t *testing.T) {
	path := sqliteDB(t, "CREATE TABLE t (id INTEGER)")
	hold, err := dbsql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	hold.SetMaxOpenConns(1)
	if _, err := hold.Exec("BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	defer hold.Exec("ROLLBACK")
	other, err := dbsql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.Exec("INSERT INTO t VALUES (1)")
	if err == nil || !sqliteRetryable(err) {
		t.Fatalf("a write to a locked file: %v, retryable %v", err, sqliteRetryable(err))
	}
	if sqliteRetryable(errors.New("database is locked")) || pgRetryable(errors.New("x")) {
		t.Error("an error of another kind counted as retryable")
	}
}

// Write and Connect after Close return ErrClosed, Write before Connect
// an error; a sink of an unknown schema binds at its first write.
func TestSinkLifecycle(t *testing.T) {
	path := sqliteDB(t, "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
	out := must[*Output](t)(NewOutput(SinkConfig{Database: DB{Type: SQLite, Path: path}, TableName: "t"}, nil))
	s, _ := out.NewSink(connectorsInfo())
	schema := schemaOf("id", arrow.PrimitiveTypes.Int64, "name", arrow.BinaryTypes.String)
	if err := s.Write(context.Background(), record(t, schema, []any{int64(1), "a"})); !errors.Is(err, errNotConnected) {
		t.Errorf("Write before Connect: %v", err)
	}
	if err := s.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), record(t, schema, []any{int64(1), "a"})); err != nil {
		t.Fatal(err)
	}
	other := schemaOf("id", arrow.PrimitiveTypes.Int64, "nope", arrow.BinaryTypes.String)
	if err := s.Write(context.Background(), record(t, other, []any{int64(2), "b"})); err == nil || !strings.Contains(err.Error(), `column "nope" of the rows does not exist`) {
		t.Errorf("Write of rows with another column: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), record(t, schema, []any{int64(3), "c"})); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if got := sqliteQuery(t, path, "SELECT id, name FROM t"); fmt.Sprint(got) != "[[1 a]]" {
		t.Errorf("table %v", got)
	}
}
