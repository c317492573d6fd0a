//go:build cgo && duckdb_arrow

package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	duckdbgo "github.com/duckdb/duckdb-go/v2"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/duckdbtest"
	"github.com/arkflow-rs/arkflow-go/stream"
)

// The Stream benchmark needs duckdb-go's Arrow interface for its
// baseline, which exists only under its build tag:
//
//	go test -tags duckdb_arrow -run '^$' -bench BenchmarkStreamSQL -count 5 ./stream/

const (
	benchContext = `{ "timestamp": 1625000000000, "value": 10, "sensor": "temp_1" }`
	benchQuery   = "SELECT sensor, value * 2 AS doubled, timestamp FROM flow WHERE value > 5"
	benchBatch   = 8192
	benchBatches = 32
)

// benchRows counts the rows written to the "benchcount" output, which
// otherwise drops them as drop does.
var benchRows atomic.Int64

func init() {
	connectors.RegisterOutput("benchcount", func(connectors.BuildContext, *arrow.Schema) (connectors.Output, error) {
		return benchCount{}, nil
	})
}

type benchCount struct{}

func (benchCount) NewSink(connectors.TaskInfo) (connectors.Sink, error) { return benchCount{}, nil }
func (benchCount) Connect(context.Context) error                        { return nil }
func (benchCount) Close(context.Context) error                          { return nil }
func (benchCount) Write(_ context.Context, rec arrow.RecordBatch) error {
	benchRows.Add(rec.NumRows())
	return nil
}

// BenchmarkStreamSQL runs ArkFlow's pipeline generate → json_to_arrow →
// sql (SELECT … WHERE …) → drop as a Stream config, and the same rows
// through a loop a Go user writes with DuckDB directly (encoding/json into
// a struct, Arrow builders, duckdb-go's RegisterView and QueryContext per
// batch), both in each iteration, alternating which goes first. Both run
// on one thread (thread_num: 1). It reports each side's rows/s and their
// ratio (stream ÷ direct: above 1 the stream is faster).
func BenchmarkStreamSQL(b *testing.B) {
	cfg, err := stream.Parse(fmt.Appendf(nil, `
streams:
  - input: {type: generate, context: '%s', interval: 1us, batch_size: %d, count: %d}
    pipeline:
      thread_num: 1
      processors:
        - {type: json_to_arrow}
        - {type: sql, query: %q}
    output: {type: benchcount}
`, benchContext, benchBatch, benchBatch*benchBatches, benchQuery), ".yaml")
	if err != nil {
		b.Fatal(err)
	}
	ar, done := duckdbtest.Open(b, 1)
	defer done()
	sides := [2]func() int64{
		func() int64 {
			benchRows.Store(0)
			if err := stream.Run(context.Background(), cfg, stream.WithDataDir(b.TempDir())); err != nil {
				b.Fatal(err)
			}
			return benchRows.Load()
		},
		func() int64 { return directLoop(b, ar) },
	}
	var took [2]time.Duration
	i := 0
	for b.Loop() {
		for k := range 2 {
			side := (i + k) % 2
			start := time.Now()
			if n := sides[side](); n != benchBatch*benchBatches {
				b.Fatalf("side %d wrote %d rows, want %d", side, n, benchBatch*benchBatches)
			}
			took[side] += time.Since(start)
		}
		i++
	}
	for side, name := range []string{"stream", "direct"} {
		b.ReportMetric(float64(i*benchBatch*benchBatches)/took[side].Seconds(), name+"-rows/s")
	}
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "ratio")
}

// reading is the generated JSON row.
type reading struct {
	Timestamp int64  `json:"timestamp"`
	Value     int64  `json:"value"`
	Sensor    string `json:"sensor"`
}

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "timestamp", Type: arrow.PrimitiveTypes.Int64},
	{Name: "value", Type: arrow.PrimitiveTypes.Int64},
	{Name: "sensor", Type: arrow.BinaryTypes.String},
}, nil)

// directLoop decodes benchBatches batches of the generated payloads and
// runs the query over each, returning the rows it returned.
func directLoop(b *testing.B, ar *duckdbgo.Arrow) int64 {
	payload := []byte(benchContext)
	var rows int64
	for range benchBatches {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
		for range benchBatch {
			var r reading
			if err := json.Unmarshal(payload, &r); err != nil {
				b.Fatal(err)
			}
			bld.Field(0).(*array.Int64Builder).Append(r.Timestamp)
			bld.Field(1).(*array.Int64Builder).Append(r.Value)
			bld.Field(2).(*array.StringBuilder).Append(r.Sensor)
		}
		rec := bld.NewRecordBatch()
		bld.Release()
		out, err := duckdbtest.Query(ar, rec, benchQuery)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range out {
			rows += r.NumRows()
			r.Release()
		}
	}
	return rows
}
