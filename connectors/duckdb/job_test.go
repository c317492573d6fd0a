//go:build cgo

package duckdb

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/memory"
)

// sqlOut is a row the job's query returns.
type sqlOut struct {
	ID        int64     `arkflow:"id"`
	G         string    `arkflow:"g"`
	V2        *float64  `arkflow:"v2"`
	TS        time.Time `arkflow:"ts"`
	Partition int32     `arkflow:"__meta_partition"`
	Offset    int64     `arkflow:"__meta_offset"`
}

// A job runs a SQL map at parallelism 2 between a memory source of two
// partitions and a sink of typed rows; a filter after it reads a column
// the query made. Every row the Go loop keeps arrives once, with the
// source's partition and offset it had.
func TestDuckSQLJobEndToEnd(t *testing.T) {
	parts := [][]row{randomRows(21, 3000), randomRows(22, 2500)}
	var batches [][]arrow.RecordBatch
	for _, p := range parts {
		var bs []arrow.RecordBatch
		for i := 0; i < len(p); i += 1000 {
			bs = append(bs, toBatch(p[i:min(i+1000, len(p))]))
		}
		batches = append(batches, bs)
	}
	src, err := memory.NewSourceFrom(batches...)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	j, err := arkflow.NewJob("sql-e2e").
		Source("in", src).
		SQL("q", "SELECT id, g, v * 2 AS v2, ts, __meta_partition, __meta_offset FROM flow WHERE ok AND ts IS NOT NULL", arkflow.WithParallelism(2)).
		Where("some", "v2 > 20 or v2 is null").
		Sink("out", funcsink.Func[sqlOut](func(_ context.Context, rows []sqlOut) error {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rows {
				got = append(got, fmt.Sprintf("%d/%d %d %s %s %d", r.Partition, r.Offset, r.ID, r.G, num(r.V2), r.TS.UnixMilli()))
			}
			return nil
		})).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var want []string
	for p, rows := range parts {
		for off, r := range rows {
			if !r.ok || r.ts == nil {
				continue
			}
			var v2 *float64
			if r.v != nil {
				x := *r.v * 2
				if x <= 20 {
					continue
				}
				v2 = &x
			}
			want = append(want, fmt.Sprintf("%d/%d %d %s %s %d", p, off, r.id, r.g, num(v2), *r.ts))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%d rows, want %d: %s", len(got), len(want), firstDiff(got, want))
	}
}

// Validation fails on a query DuckDB refuses, naming the operator, the
// builder call and its sql, and DuckDB's message, and on a later operator's reference to
// a column the query does not return; it creates nothing on disk.
func TestDuckSQLValidationErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	src := memory.NewSource(rowSchema, 1)
	src.Close()
	cases := []struct {
		build func(b *arkflow.Builder) *arkflow.Builder
		want  []string
	}{{
		build: func(b *arkflow.Builder) *arkflow.Builder { return b.SQL("bad", "SELECT idd FROM flow") },
		want:  []string{`"bad"`, `.SQL("bad", ...): sql:`, `Referenced column "idd" not found`, "SELECT idd FROM flow"},
	}, {
		build: func(b *arkflow.Builder) *arkflow.Builder { return b.SQL("ddl", "DROP VIEW flow") },
		want:  []string{`"ddl"`, "sql:", "only a single SELECT"},
	}, {
		build: func(b *arkflow.Builder) *arkflow.Builder {
			return b.SQL("q", "SELECT id AS key FROM flow").Where("w", "g == 'g1'")
		},
		want: []string{`"w"`, "expr:", `"g"`, "key"},
	}, {
		build: func(b *arkflow.Builder) *arkflow.Builder {
			return b.SQL("meta", "SELECT id, __meta_partition::BIGINT AS __meta_partition FROM flow")
		},
		want: []string{`"meta"`, "sql:", `column "__meta_partition"`, "source metadata"},
	}, {
		build: func(b *arkflow.Builder) *arkflow.Builder { return b.SQL("twice", "SELECT id, id FROM flow") },
		want:  []string{`"twice"`, "sql:", `two columns named "id"`},
	}}
	for _, c := range cases {
		b := c.build(arkflow.NewJob("v").Source("in", src))
		_, err := b.Sink("out", funcsink.Func[sqlOut](func(context.Context, []sqlOut) error { return nil })).Build()
		if err == nil {
			t.Fatalf("built; want an error with %q", c.want)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not mention %q", err, w)
			}
		}
	}
	if ents, _ := os.ReadDir("."); len(ents) > 0 {
		t.Fatalf("validation left %v in the working directory", ents)
	}
}

// An input batch whose result spans several of DuckDB's chunks is emitted
// as several batches sharing its acknowledgement; every row arrives.
func TestDuckSQLJobSplitsLargeResults(t *testing.T) {
	rows := randomRows(31, 10_000)
	rec := toBatch(rows)
	src, err := memory.NewSourceFrom([]arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	var batches, got int
	var sum int64
	j, err := arkflow.NewJob("sql-split").
		Source("in", src).
		SQL("q", "SELECT id FROM flow WHERE id <> 7").
		Sink("out", funcsink.RecordFunc(func(_ context.Context, rec arrow.RecordBatch) error {
			batches++
			got += int(rec.NumRows())
			for _, v := range rec.Column(0).(*array.Int64).Int64Values() {
				sum += v
			}
			return nil
		})).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want, wantSum := 0, int64(0)
	for _, r := range rows {
		if r.id != 7 {
			want++
			wantSum += r.id
		}
	}
	if got != want || sum != wantSum || batches < 2 {
		t.Fatalf("%d rows (sum %d) in %d batches; want %d rows (sum %d) in several", got, sum, batches, want, wantSum)
	}
}
