package sql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
)

// The PostgreSQL UPSERT sink against the bare client doing the same: one
// pgx batch of INSERT … ON CONFLICT DO UPDATE statements per batch, one
// implicit transaction, on one connection. Both write the same window
// results (user, window_start, n, total: 10 batches of 1,000 rows an
// iteration, new windows each iteration, so every row goes through the
// conflict check and is inserted), each into a table of its own; the sink
// from Arrow records built once, the baseline from a slice of Go structs
// built once. Every iteration runs both, the first one alternating, and
// times each: on a shared machine the load changes within seconds, and
// the pair sees the same load. It reports both throughputs over the same
// iterations and their ratio (sink ÷ bare), and checks, outside the
// timer, that each table holds every row with its values.
//
//	ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh go test -run '^$' -bench BenchmarkUpsert -benchtime 10x -count 5 ./connectors/sql/
func BenchmarkUpsert(b *testing.B) {
	dsn := pgDSN(b)
	schema := schemaOf("user", arrow.BinaryTypes.String, "window_start", ms, "n", arrow.PrimitiveTypes.Int64, "total", arrow.PrimitiveTypes.Int64)
	ddl := `"user" text, window_start timestamptz, n bigint, total bigint, PRIMARY KEY ("user", window_start)`
	engineTable, bareTable := pgTable(b, dsn, ddl), pgTable(b, dsn, ddl)
	pgExec(b, dsn, "TRUNCATE "+engineTable, "TRUNCATE "+bareTable)
	recs := benchRecords(schema, b.N)
	defer func() {
		for _, rs := range recs {
			for _, r := range rs {
				r.Release()
			}
		}
	}()
	data := benchStructs(b.N)
	ctx := context.Background()
	s := connectSink(b, must[*Output](b)(NewOutput(SinkConfig{Database: DB{Type: Postgres, URI: dsn}, TableName: engineTable,
		Mode: ModeUpsert, Keys: []string{"user", "window_start"}}, schema)))
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	stmt := `INSERT INTO ` + bareTable + ` ("user", window_start, n, total) VALUES ($1, $2, $3, $4)
		ON CONFLICT ("user", window_start) DO UPDATE SET n = EXCLUDED.n, total = EXCLUDED.total`

	engine := func(it int) time.Duration {
		start := time.Now()
		for _, rec := range recs[it] {
			if err := s.Write(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	bare := func(it int) time.Duration {
		start := time.Now()
		for _, batch := range data[it] {
			pb := &pgx.Batch{}
			for _, r := range batch {
				pb.Queue(stmt, r.user, r.start, r.n, r.total)
			}
			br := c.SendBatch(ctx, pb)
			for range batch {
				if _, err := br.Exec(); err != nil {
					b.Fatal(err)
				}
			}
			if err := br.Close(); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var tEngine, tBare time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		if it%2 == 0 {
			tBare += bare(it)
			tEngine += engine(it)
		} else {
			tEngine += engine(it)
			tBare += bare(it)
		}
	}
	b.StopTimer()
	n := float64(b.N * benchBatches * benchRows)
	b.ReportMetric(n/tEngine.Seconds(), "sink-rows/s")
	b.ReportMetric(n/tBare.Seconds(), "pgx-rows/s")
	b.ReportMetric(tBare.Seconds()/tEngine.Seconds(), "ratio")
	benchVerify(b, dsn, b.N, engineTable, bareTable)
}

// Every iteration writes benchBatches batches of benchRows rows.
const benchBatches, benchRows = 10, 1000

// benchRow is one window result.
type benchRow struct {
	user  string
	start time.Time
	n     int64
	total int64
}

// benchValue is row i of iteration it: window starts 1 s apart, all
// different.
func benchValue(it, i int) benchRow {
	k := it*benchBatches*benchRows + i
	return benchRow{fmt.Sprintf("user-%d", k%997), time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC).Add(time.Duration(k) * time.Second),
		int64(k % 50), int64(k * 7)}
}

// benchRecords is the sink's input: per iteration, its batches as Arrow
// records.
func benchRecords(schema *arrow.Schema, iterations int) [][]arrow.RecordBatch {
	recs := make([][]arrow.RecordBatch, iterations)
	for it := range recs {
		for k := 0; k < benchBatches; k++ {
			rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			for i := k * benchRows; i < (k+1)*benchRows; i++ {
				r := benchValue(it, i)
				rb.Field(0).(*array.StringBuilder).Append(r.user)
				rb.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(r.start.UnixMilli()))
				rb.Field(2).(*array.Int64Builder).Append(r.n)
				rb.Field(3).(*array.Int64Builder).Append(r.total)
			}
			recs[it] = append(recs[it], rb.NewRecordBatch())
			rb.Release()
		}
	}
	return recs
}

// benchStructs is the baseline's input: the same rows as Go structs.
func benchStructs(iterations int) [][][]benchRow {
	data := make([][][]benchRow, iterations)
	for it := range data {
		for k := 0; k < benchBatches; k++ {
			var batch []benchRow
			for i := k * benchRows; i < (k+1)*benchRows; i++ {
				batch = append(batch, benchValue(it, i))
			}
			data[it] = append(data[it], batch)
		}
	}
	return data
}

// benchVerify checks that each table holds every row of the iterations:
// their count and the sums of n and total.
func benchVerify(b *testing.B, dsn string, iterations int, tables ...string) {
	var n, total int64
	for it := 0; it < iterations; it++ {
		for i := 0; i < benchBatches*benchRows; i++ {
			r := benchValue(it, i)
			n, total = n+r.n, total+r.total
		}
	}
	want := fmt.Sprint(int64(iterations*benchBatches*benchRows), " ", n, " ", total)
	for _, table := range tables {
		got := pgQuery(b, dsn, `SELECT count(*), sum(n)::bigint, sum(total)::bigint FROM `+table)[0]
		if fmt.Sprint(got[0], " ", got[1], " ", got[2]) != want {
			b.Fatalf("%s holds count, sum(n), sum(total) = %v, want %s", table, got, want)
		}
	}
}
