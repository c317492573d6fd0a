//go:build cgo

package duckdb

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
)

// row is one random input row; a nil pointer is a null.
type row struct {
	id int64
	g  string
	v  *float64
	ok bool
	ts *int64 // ms
}

var rowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "g", Type: arrow.BinaryTypes.String},
	{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
}, nil)

func randomRows(seed uint64, n int) []row {
	r := rand.New(rand.NewPCG(seed, 1))
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{id: r.Int64N(1000) - 500, g: fmt.Sprintf("g%d", r.IntN(5)), ok: r.IntN(2) == 0}
		if r.IntN(10) > 0 {
			v := math.Round(r.Float64()*1000) / 8 // exact in binary: sums do not depend on order
			rows[i].v = &v
		}
		if r.IntN(10) > 0 {
			ts := 1_700_000_000_000 + r.Int64N(1_000_000)
			rows[i].ts = &ts
		}
	}
	return rows
}

func toBatch(rows []row) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, rowSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.g)
		if r.v == nil {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(*r.v)
		}
		b.Field(3).(*array.BooleanBuilder).Append(r.ok)
		if r.ts == nil {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(*r.ts))
		}
	}
	return b.NewRecordBatch()
}

// values renders every result row as text, column by column, "null"
// for a null.
func values(t *testing.T, recs []arrow.RecordBatch) []string {
	t.Helper()
	var out []string
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			cells := make([]string, rec.NumCols())
			for c, col := range rec.Columns() {
				cells[c] = cell(t, col, i)
			}
			out = append(out, strings.Join(cells, " "))
		}
		rec.Release()
	}
	return out
}

func cell(t *testing.T, col arrow.Array, i int) string {
	if col.IsNull(i) {
		return "null"
	}
	switch a := col.(type) {
	case *array.Int64:
		return fmt.Sprint(a.Value(i))
	case *array.Float64:
		return fmt.Sprint(a.Value(i))
	case *array.String:
		return a.Value(i)
	case *array.Boolean:
		return fmt.Sprint(a.Value(i))
	case *array.Timestamp:
		return fmt.Sprintf("ts%d", a.Value(i))
	}
	t.Fatalf("unexpected result type %s", col.DataType())
	return ""
}

func compile(t *testing.T, sql string) sqlengine.Query {
	t.Helper()
	q, err := engine{}.Compile(sql, "flow", rowSchema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func run(t *testing.T, q sqlengine.Query, rows []row) []string {
	t.Helper()
	rec := toBatch(rows)
	defer rec.Release()
	recs, err := q.Run(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if !arrow.TypeEqual(arrow.StructOf(r.Schema().Fields()...), arrow.StructOf(q.Schema().Fields()...)) {
			t.Fatalf("batch schema %s, compiled %s", r.Schema(), q.Schema())
		}
	}
	return values(t, recs)
}

func num(f *float64) string {
	if f == nil {
		return "null"
	}
	return fmt.Sprint(*f)
}

// Projections, expressions, filters and per-batch aggregates over
// random rows give what a Go loop over the same rows computes.
func TestDuckQueriesMatchAGoLoop(t *testing.T) {
	rows := randomRows(7, 5000)
	cases := []struct {
		sql  string
		want func() []string
		cols string
	}{{
		sql:  "SELECT id, v * 2 AS v2, g || '!' AS g2, NOT ok AS nok, ts FROM flow",
		cols: "id:int64 v2:float64 g2:utf8 nok:bool ts:timestamp[ms]",
		want: func() (out []string) {
			for _, r := range rows {
				v2 := "null"
				if r.v != nil {
					v2 = fmt.Sprint(*r.v * 2)
				}
				ts := "null"
				if r.ts != nil {
					ts = fmt.Sprintf("ts%d", *r.ts)
				}
				out = append(out, fmt.Sprintf("%d %s %s! %v %s", r.id, v2, r.g, !r.ok, ts))
			}
			return out
		},
	}, {
		sql:  "SELECT id, g FROM flow WHERE ok AND v > 60 AND id % 3 = 0",
		cols: "id:int64 g:utf8",
		want: func() (out []string) {
			for _, r := range rows {
				if r.ok && r.v != nil && *r.v > 60 && r.id%3 == 0 {
					out = append(out, fmt.Sprintf("%d %s", r.id, r.g))
				}
			}
			return out
		},
	}, {
		// Later columns alone, out of order, filtered on another.
		sql:  "SELECT ts, ok, v FROM flow WHERE ts > TIMESTAMP '2023-11-14 22:20:00' AND NOT ok",
		cols: "ts:timestamp[ms] ok:bool v:float64",
		want: func() (out []string) {
			for _, r := range rows {
				if r.ts != nil && *r.ts > 1_700_000_400_000 && !r.ok {
					out = append(out, fmt.Sprintf("ts%d %v %s", *r.ts, r.ok, num(r.v)))
				}
			}
			return out
		},
	}, {
		sql:  "SELECT ok, id FROM flow WHERE v IS NULL",
		cols: "ok:bool id:int64",
		want: func() (out []string) {
			for _, r := range rows {
				if r.v == nil {
					out = append(out, fmt.Sprintf("%v %d", r.ok, r.id))
				}
			}
			return out
		},
	}, {
		sql:  "SELECT id, ts FROM flow WHERE ts IS NOT NULL ORDER BY ts DESC, id LIMIT 5",
		cols: "id:int64 ts:timestamp[ms]",
		want: func() (out []string) {
			var keep []row
			for _, r := range rows {
				if r.ts != nil {
					keep = append(keep, r)
				}
			}
			slices.SortFunc(keep, func(a, b row) int {
				if *a.ts != *b.ts {
					return int(*b.ts - *a.ts)
				}
				return int(a.id - b.id)
			})
			for _, r := range keep[:5] {
				out = append(out, fmt.Sprintf("%d ts%d", r.id, *r.ts))
			}
			return out
		},
	}, {
		sql:  "SELECT g, count(*) FILTER (WHERE ok) AS n FROM flow GROUP BY ALL ORDER BY g",
		cols: "g:utf8 n:int64",
		want: func() (out []string) {
			n := map[string]int{}
			for _, r := range rows {
				if r.ok {
					n[r.g]++
				} else {
					n[r.g] += 0
				}
			}
			for _, g := range slices.Sorted(maps.Keys(n)) {
				out = append(out, fmt.Sprintf("%s %d", g, n[g]))
			}
			return out
		},
	}, {
		sql: "SELECT g, count(*) AS n, count(v) AS nv, sum(id)::BIGINT AS s, sum(v) AS sv, min(v) AS lo, max(id) AS hi, avg(id) AS a " +
			"FROM flow GROUP BY g ORDER BY g",
		cols: "g:utf8 n:int64 nv:int64 s:int64 sv:float64 lo:float64 hi:int64 a:float64",
		want: func() (out []string) { return groupReference(rows) },
	}}
	for _, c := range cases {
		t.Run(c.sql, func(t *testing.T) {
			q := compile(t, c.sql)
			if got := columns(q.Schema()); got != c.cols {
				t.Fatalf("schema %s, want %s", got, c.cols)
			}
			got, want := run(t, q, rows), c.want()
			if !slices.Equal(got, want) {
				t.Fatalf("%d rows, want %d; first difference %s", len(got), len(want), firstDiff(got, want))
			}
			// A second batch through the same query.
			if got := run(t, q, rows); !slices.Equal(got, want) {
				t.Fatalf("second batch: %s", firstDiff(got, want))
			}
		})
	}
}

func groupReference(rows []row) []string {
	type agg struct {
		n, nv, s, hi int64
		sv, lo       float64
	}
	groups := map[string]*agg{}
	for _, r := range rows {
		a := groups[r.g]
		if a == nil {
			a = &agg{hi: math.MinInt64, lo: math.Inf(1)}
			groups[r.g] = a
		}
		a.n++
		a.s += r.id
		a.hi = max(a.hi, r.id)
		if r.v != nil {
			a.nv++
			a.sv += *r.v
			a.lo = min(a.lo, *r.v)
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		a := groups[k]
		out = append(out, fmt.Sprintf("%s %d %d %d %v %v %d %v", k, a.n, a.nv, a.s, a.sv, a.lo, a.hi, float64(a.s)/float64(a.n)))
	}
	return out
}

func columns(s *arrow.Schema) string {
	parts := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		parts[i] = f.Name + ":" + f.Type.String()
	}
	return strings.Join(parts, " ")
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("row %d: got %q, want %q", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(got), len(want))
}

// A query that reads its table twice (a subquery over it) sees every
// row both times.
func TestDuckSubqueryReadsTheBatchTwice(t *testing.T) {
	rows := randomRows(11, 3000)
	q := compile(t, "SELECT id FROM flow WHERE v > (SELECT avg(v) FROM flow) AND ok")
	var sum float64
	var n int
	for _, r := range rows {
		if r.v != nil {
			sum += *r.v
			n++
		}
	}
	avg := sum / float64(n)
	var want []string
	for _, r := range rows {
		if r.v != nil && *r.v > avg && r.ok {
			want = append(want, fmt.Sprint(r.id))
		}
	}
	for range 2 {
		if got := run(t, q, rows); !slices.Equal(got, want) {
			t.Fatalf("%d rows, want %d: %s", len(got), len(want), firstDiff(got, want))
		}
	}
}

// A batch of no rows: a filter returns nothing, a global aggregate its
// one row.
func TestDuckBatchOfNoRows(t *testing.T) {
	if got := run(t, compile(t, "SELECT id FROM flow WHERE ok"), nil); len(got) != 0 {
		t.Fatalf("got %q", got)
	}
	if got := run(t, compile(t, "SELECT count(*) AS n, sum(v) AS s FROM flow"), nil); !slices.Equal(got, []string{"0 null"}) {
		t.Fatalf("got %q", got)
	}
}

// Compilation fails on what is not a single query, on unknown columns
// and syntax, quoting the query and DuckDB's message; it reads no file
// and writes none, in the working directory or the home directory.
func TestDuckCompileErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	home := t.TempDir()
	t.Setenv("HOME", home)
	cases := map[string]string{
		"CREATE TABLE t (a INT)":               "only a single SELECT",
		"INSERT INTO flow VALUES (1)":          "flow is not an table", // refused before its type is known
		"DROP VIEW flow":                       "only a single SELECT",
		"COPY flow TO 'out.csv'":               "disabled by configuration",
		"SELECT 1; SELECT 2":                   "has 2 statements",
		"SELECT nope FROM flow":                `Referenced column "nope" not found`,
		"SELEC id FROM flow":                   `syntax error at or near "SELEC"`,
		"SELECT * FROM read_csv('/etc/hosts')": "disabled by configuration",
		"SELECT * FROM other":                  "Table with name other does not exist",
	}
	for sql, want := range cases {
		q, err := engine{}.Compile(sql, "flow", rowSchema)
		if err == nil {
			q.Close()
			t.Errorf("%s: compiled", sql)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("%q", sql)) {
			t.Errorf("%s: error %q, want the query and %q", sql, err, want)
		}
	}
	for _, dir := range []string{".", home} {
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			t.Fatalf("compiling left %v in %s", ents, dir)
		}
	}
}

// Queries compiled separately run at the same time, each on its own
// connection.
func TestDuckConcurrentQueries(t *testing.T) {
	rows := randomRows(3, 4000)
	want := groupReference(rows)
	sql := "SELECT g, count(*) AS n, count(v) AS nv, sum(id)::BIGINT AS s, sum(v) AS sv, min(v) AS lo, max(id) AS hi, avg(id) AS a FROM flow GROUP BY g ORDER BY g"
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for range 4 {
		q := compile(t, sql)
		wg.Go(func() {
			rec := toBatch(rows)
			defer rec.Release()
			for range 5 {
				recs, err := q.Run(context.Background(), rec)
				if err != nil {
					errs <- err.Error()
					return
				}
				if got := values(t, recs); !slices.Equal(got, want) {
					errs <- firstDiff(got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// The table can have another name, one that needs quoting too, also
// when the query reads it twice and each batch is copied.
func TestDuckTableName(t *testing.T) {
	rows := randomRows(5, 1000)
	var n, pos int
	for _, r := range rows {
		if r.id > 0 {
			pos++
		}
		n++
	}
	for table, sql := range map[string]string{
		"events":    "SELECT count(*) AS n, count(*) FILTER (WHERE id > 0) AS pos FROM events",
		`my "rows"`: `SELECT (SELECT count(*) FROM "my ""rows""") AS n, count(*) AS pos FROM "my ""rows""" WHERE id > 0`,
	} {
		q, err := engine{}.Compile(sql, table, rowSchema)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		for range 2 {
			if got := run(t, q, rows); !slices.Equal(got, []string{fmt.Sprintf("%d %d", n, pos)}) {
				t.Fatalf("%s: got %q, want %d %d", sql, got, n, pos)
			}
		}
	}
}

// A cancelled context ends Run with its error, and the query runs again
// afterwards.
func TestDuckRunCancelled(t *testing.T) {
	rows := randomRows(9, 2000)
	q := compile(t, "SELECT count(*) AS n FROM flow a, flow b WHERE a.id = b.id")
	rec := toBatch(rows)
	defer rec.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if recs, err := q.Run(ctx, rec); err == nil {
		// DuckDB may finish before it sees the interrupt.
		values(t, recs)
	} else if err != context.Canceled {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	ids := map[int64]int{}
	for _, r := range rows {
		ids[r.id]++
	}
	want := 0
	for _, c := range ids {
		want += c * c
	}
	if got := run(t, q, rows); !slices.Equal(got, []string{fmt.Sprint(want)}) {
		t.Fatalf("after the cancelled run: got %q, want %d", got, want)
	}
}
