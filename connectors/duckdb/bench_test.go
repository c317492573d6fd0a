//go:build cgo && duckdb_arrow

package duckdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/duckdbtest"
)

// The baseline needs duckdb-go's Arrow interface, which exists only
// under its build tag:
//
//	go test -tags duckdb_arrow -run '^$' -bench BenchmarkSQLBatches -count 5 ./connectors/duckdb/

const (
	benchBatches = 16
	benchRows    = 8192
	benchQuery   = "SELECT a, b * 2 AS c FROM flow WHERE a % 3 = 0"
)

// benchData is benchBatches batches of (a int64, b float64, s string),
// and the row count and sum of c the query returns over them, computed
// by a Go loop.
func benchData() (recs []arrow.RecordBatch, rows int64, sum float64) {
	r := rand.New(rand.NewPCG(1, 2))
	s := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.PrimitiveTypes.Float64},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil)
	for range benchBatches {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, s)
		for range benchRows {
			a, b := r.Int64N(1_000_000), float64(r.IntN(1000))
			bld.Field(0).(*array.Int64Builder).Append(a)
			bld.Field(1).(*array.Float64Builder).Append(b)
			bld.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("user-%d", r.IntN(1000)))
			if a%3 == 0 {
				rows++
				sum += b * 2
			}
		}
		recs = append(recs, bld.NewRecordBatch())
		bld.Release()
	}
	return recs, rows, sum
}

// tally is the row count and sum of column c (the second) of recs,
// which it releases.
func tally(recs []arrow.RecordBatch) (rows int64, sum float64) {
	for _, r := range recs {
		rows += r.NumRows()
		for _, v := range r.Column(1).(*array.Float64).Float64Values() {
			sum += v
		}
		r.Release()
	}
	return rows, sum
}

// BenchmarkSQLBatches runs the query over the same batches through the
// compiled query (engine) and through duckdb-go's Arrow interface called
// directly (RegisterView and QueryContext per batch on one connection),
// both in each iteration, alternating which goes first so that both see
// the same load. It reports each side's rows/s and their ratio (engine
// ÷ direct: above 1 the engine is faster).
func BenchmarkSQLBatches(b *testing.B) {
	recs, wantRows, wantSum := benchData()
	q, err := engine{}.Compile(benchQuery, "flow", recs[0].Schema())
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	ar, done := duckdbtest.Open(b, 0)
	defer done()
	sides := [2]func(arrow.RecordBatch) ([]arrow.RecordBatch, error){
		func(rec arrow.RecordBatch) ([]arrow.RecordBatch, error) { return q.Run(context.Background(), rec) },
		func(rec arrow.RecordBatch) ([]arrow.RecordBatch, error) { return duckdbtest.Query(ar, rec, benchQuery) },
	}
	var took [2]time.Duration
	var rows [2]int64
	var sums [2]float64
	i := 0
	for b.Loop() {
		for k := range 2 {
			side := (i + k) % 2
			for _, rec := range recs {
				start := time.Now()
				out, err := sides[side](rec)
				took[side] += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				n, s := tally(out)
				rows[side], sums[side] = rows[side]+n, sums[side]+s
			}
		}
		i++
	}
	for side, name := range []string{"engine", "direct"} {
		if rows[side] != wantRows*int64(i) || sums[side] != wantSum*float64(i) {
			b.Fatalf("%s: %d rows, sum %v; want %d, %v", name, rows[side], sums[side], wantRows*int64(i), wantSum*float64(i))
		}
		b.ReportMetric(float64(i*benchBatches*benchRows)/took[side].Seconds(), name+"-rows/s")
	}
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "ratio")
}
