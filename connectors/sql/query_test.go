package sql

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

func TestBindQuery(t *testing.T) {
	cases := []struct {
		in, db, want string
		order        []string
	}{
		{"SELECT a FROM t WHERE id > :last ORDER BY id LIMIT :limit", Postgres,
			"SELECT a FROM t WHERE id > $1 ORDER BY id LIMIT $2", []string{phLast, phLimit}},
		// Numbered by first use, reused, SQLite's ?N.
		{"SELECT a FROM t WHERE p = :partition AND id > :last AND id2 > :last LIMIT :limit", SQLite,
			"SELECT a FROM t WHERE p = ?1 AND id > ?2 AND id2 > ?2 LIMIT ?3", []string{phPartition, phLast, phLimit}},
		// Casts, quotes, comments and dollar quotes are left alone.
		{"SELECT ':last', \":last\", x::last, $q$ :last $q$, $$:limit$$ -- :last\n/* :limit */ FROM t WHERE id > :last::bigint LIMIT :limit", Postgres,
			"SELECT ':last', \":last\", x::last, $q$ :last $q$, $$:limit$$ -- :last\n/* :limit */ FROM t WHERE id > $1::bigint LIMIT $2", []string{phLast, phLimit}},
		// '' inside a quote; :lastname and :other are not placeholders;
		// $1 is not a dollar quote.
		{"SELECT 'it''s :last', :lastname, :other, $1 FROM t WHERE id>:last LIMIT :limit", Postgres,
			"SELECT 'it''s :last', :lastname, :other, $1 FROM t WHERE id>$1 LIMIT $2", []string{phLast, phLimit}},
	}
	for _, c := range cases {
		got, order, err := bindQuery(c.in, c.db)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got != c.want || fmt.Sprint(order) != fmt.Sprint(c.order) {
			t.Errorf("bindQuery(%q)\n got %q %v\nwant %q %v", c.in, got, order, c.want, c.order)
		}
	}
	for _, bad := range []string{"SELECT 'x", `SELECT "x`, "SELECT /* x", "SELECT $a$ x"} {
		if _, _, err := bindQuery(bad, Postgres); err == nil {
			t.Errorf("bindQuery(%q): no error", bad)
		}
	}
}

// bindQuery never panics, and binds consistently: the result has a
// parameter for each placeholder it reports and no placeholder left
// outside literals (binding SQLite's again finds none), and SQLite's and
// PostgreSQL's bindings differ only in the parameter syntax.
func FuzzBindQuery(f *testing.F) {
	f.Add("SELECT a FROM t WHERE id > :last ORDER BY id LIMIT :limit")
	f.Add("SELECT ':last', x::last, $q$ :last $q$ -- :limit\n FROM t WHERE p = :partition")
	f.Add("/* :last */ $$ $1 $$ 'it''s' \"a\"\"b\" :limit")
	f.Fuzz(func(t *testing.T, q string) {
		pg, order, err := bindQuery(q, Postgres)
		lite, order2, err2 := bindQuery(q, SQLite)
		if (err == nil) != (err2 == nil) || fmt.Sprint(order) != fmt.Sprint(order2) {
			t.Fatalf("the dialects disagree: %v %v / %v %v", order, err, order2, err2)
		}
		if err != nil {
			return
		}
		if len(order) > 3 {
			t.Fatalf("%d placeholders: %v", len(order), order)
		}
		// (SQLite's ?N: PostgreSQL's $N after a '$' would start a
		// dollar quote, which no real query has.)
		if _, again, err := bindQuery(lite, SQLite); err != nil || len(again) != 0 {
			t.Fatalf("binding %q again: %v, %v", lite, again, err)
		}
		for i := range order {
			if !strings.Contains(pg, fmt.Sprintf("$%d", i+1)) || !strings.Contains(lite, fmt.Sprintf("?%d", i+1)) {
				t.Fatalf("parameter %d missing: %q / %q", i+1, pg, lite)
			}
		}
		if strings.ReplaceAll(lite, "?", "$") != pg && !strings.Contains(q, "?") {
			t.Fatalf("the dialects differ beyond the parameter syntax: %q / %q", pg, lite)
		}
	})
}

func TestInsertSQL(t *testing.T) {
	cases := []struct {
		db, table string
		cols      []string
		keys      []string
		want      string
	}{
		{Postgres, "t", []string{"a", "b"}, nil, `INSERT INTO "t" ("a", "b") VALUES ($1, $2)`},
		{SQLite, "s.T", []string{"a", `we"ird`}, nil, `INSERT INTO "s"."T" ("a", "we""ird") VALUES (?1, ?2)`},
		{Postgres, "t", []string{"user", "window_start", "n"}, []string{"user", "window_start"},
			`INSERT INTO "t" ("user", "window_start", "n") VALUES ($1, $2, $3) ON CONFLICT ("user", "window_start") DO UPDATE SET "n" = EXCLUDED."n"`},
		{SQLite, "t", []string{"id"}, []string{"id"}, `INSERT INTO "t" ("id") VALUES (?1) ON CONFLICT ("id") DO NOTHING`},
	}
	for _, c := range cases {
		if got := insertSQL(c.db, c.table, c.cols, c.keys); got != c.want {
			t.Errorf("insertSQL\n got %s\nwant %s", got, c.want)
		}
	}
}

func TestTableQuery(t *testing.T) {
	cfg := SourceConfig{TableName: "public.events", TrackingColumn: "id", Partitions: 3, PartitionColumn: "shard"}
	got := tableQuery(&cfg, []string{"id", "user"})
	want := `SELECT "id", "user" FROM "public"."events" WHERE "id" > :last AND (("shard" % 3) + 3) % 3 = :partition ORDER BY "id" LIMIT :limit`
	if got != want {
		t.Errorf("tableQuery\n got %s\nwant %s", got, want)
	}
	cfg.Partitions = 1
	if got := tableQuery(&cfg, []string{"id"}); strings.Contains(got, "shard") {
		t.Errorf("one partition filters on the partition column: %s", got)
	}
}

func TestPGConnString(t *testing.T) {
	ssl := &SSL{SSLMode: "verify-full", RootCert: "/etc/ca dir/ca.pem", ClientCert: "c.pem", ClientKey: "k'ey.pem"}
	cases := []struct {
		db   DB
		want string
	}{
		{DB{URI: "postgres://u@h:5/db?application_name=x"}, "postgres://u@h:5/db?application_name=x"},
		{DB{URI: "postgres://u@h:5/db?application_name=x", SSL: ssl},
			"postgres://u@h:5/db?application_name=x&sslcert=c.pem&sslkey=k%27ey.pem&sslmode=verify-full&sslrootcert=%2Fetc%2Fca+dir%2Fca.pem"},
		{DB{URI: "host=h dbname=db", SSL: ssl},
			`host=h dbname=db sslmode='verify-full' sslrootcert='/etc/ca dir/ca.pem' sslcert='c.pem' sslkey='k\'ey.pem'`},
	}
	for _, c := range cases {
		got, err := pgConnString(c.db)
		if err != nil || got != c.want {
			t.Errorf("pgConnString(%+v)\n got %s (%v)\nwant %s", c.db, got, err, c.want)
		}
		params, err := uriParams(got)
		if err != nil {
			t.Fatal(err)
		}
		if c.db.SSL != nil && (params["sslmode"] != ssl.SSLMode || params["sslrootcert"] != ssl.RootCert || params["sslkey"] != ssl.ClientKey) {
			t.Errorf("%s parses to %v", got, params)
		}
	}
}

// Any value quoted for a key=value connection string parses back to
// itself, also among other pairs; and parsing never panics.
func FuzzKeywords(f *testing.F) {
	f.Add("host=h port=5432", "a b'c\\d")
	f.Add("host='x y' dbname = db", "")
	f.Fuzz(func(t *testing.T, s, v string) {
		_, _ = parseKeywords(s)
		if strings.ContainsRune(v, 0) {
			return
		}
		got, err := parseKeywords("host=h sslrootcert=" + quoteKeyword(v) + " port=1")
		if err != nil || got["sslrootcert"] != v || got["host"] != "h" || got["port"] != "1" {
			t.Fatalf("%q: %v %v", v, got, err)
		}
	})
}

func TestParseTime(t *testing.T) {
	want := time.Date(2026, 12, 7, 10, 30, 5, 123000000, time.UTC)
	for _, s := range []string{"2026-12-07T10:30:05.123Z", "2026-12-07T11:30:05.123+01:00", "2026-12-07 10:30:05.123", "2026-12-07T10:30:05.123"} {
		got, err := parseTime(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%q) = %v, %v", s, got, err)
		}
	}
	if got, err := parseTime("2026-12-07"); err != nil || !got.Equal(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("a date: %v, %v", got, err)
	}
	if _, err := parseTime("yesterday"); err == nil {
		t.Error("parseTime(yesterday): no error")
	}
}

// Text timestamps come from disk (SQLite): parsing never panics, and what
// it accepts is a UTC time that the output's text form gives back
// unchanged.
func FuzzParseTime(f *testing.F) {
	f.Add("2026-12-07T10:30:05.123Z")
	f.Add("2026-12-07 10:30:05.123456789")
	f.Add("0001-01-01")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseTime(s)
		if err != nil {
			return
		}
		if got.Location() != time.UTC {
			t.Fatalf("%q parsed to %v, not UTC", s, got)
		}
		text := got.Format(timeText[arrow.Nanosecond])
		again, err := parseTime(text)
		if err != nil || !again.Equal(got) {
			t.Fatalf("%q → %v → %q → %v, %v", s, got, text, again, err)
		}
	})
}

// The values a query returns come from the network or the disk: an
// appender of any declared type takes each of them into its column or
// refuses it with an error, never panics, and appends exactly one value
// when it takes one.
func FuzzAppend(f *testing.F) {
	f.Add("2026-12-07T10:30:05Z", []byte("x"), int64(1), 1.5, true)
	f.Add("abc", []byte{0xff}, int64(-1<<63), -0.0, false)
	f.Fuzz(func(t *testing.T, s string, b []byte, n int64, x float64, ok bool) {
		types := []string{"int64", "float32", "float64", "string", "bool", "timestamp"}
		for _, typ := range types {
			for _, unit := range []string{"", "s", "us", "ns"} {
				if unit != "" && typ != "timestamp" {
					continue
				}
				schema, err := connectors.Schema{{Name: "c", Type: typ, Unit: unit}}.Arrow("schema")
				if err != nil {
					t.Fatal(err)
				}
				field := schema.Field(0)
				bld := array.NewBuilder(memory.DefaultAllocator, field.Type)
				app := newAppender(field)
				want := 0
				for _, v := range []any{s, b, n, x, ok, nil, time.Unix(0, n).UTC()} {
					if app(bld, v) == nil {
						want++
					}
					if bld.Len() != want {
						t.Fatalf("%s: appending %T %v made %d values, want %d", field.Type, v, v, bld.Len(), want)
					}
				}
				bld.Release()
			}
		}
	})
}
