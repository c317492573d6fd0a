package arkflow_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
)

// benchIn is a row of benchGenerate's batches; benchOut what the
// benchmarked map makes of it.
type benchIn struct {
	User   string    `arkflow:"user"`
	Amount float64   `arkflow:"amount"`
	TS     time.Time `arkflow:"ts"`
}

type benchOut struct {
	User  string    `arkflow:"user"`
	Cents int64     `arkflow:"cents"`
	Big   bool      `arkflow:"big"`
	TS    time.Time `arkflow:"ts"`
}

func benchEnrich(_ context.Context, in benchIn) (benchOut, error) {
	return benchOut{User: in.User, Cents: int64(in.Amount * 100), Big: in.Amount > 500, TS: in.TS}, nil
}

// handEnrich is benchEnrich written over Arrow by hand, as a careful user
// writes a MapFunc: type-asserted input columns, a RecordBuilder reserved
// for the batch (string bytes too), one Append per field per row.
func handEnrich(schema *arrow.Schema) arkflow.MapFunc {
	return func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		s := rec.Schema()
		users := rec.Column(s.FieldIndices("user")[0]).(*array.String)
		amounts := rec.Column(s.FieldIndices("amount")[0]).(*array.Float64)
		ts := rec.Column(s.FieldIndices("ts")[0]).(*array.Timestamp)
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		n := int(rec.NumRows())
		b.Reserve(n)
		ub := b.Field(0).(*array.StringBuilder)
		cb := b.Field(1).(*array.Int64Builder)
		bb := b.Field(2).(*array.BooleanBuilder)
		tb := b.Field(3).(*array.TimestampBuilder)
		ub.ReserveData(len(users.ValueBytes()))
		for i := 0; i < n; i++ {
			a := amounts.Value(i)
			ub.Append(users.Value(i))
			cb.Append(int64(a * 100))
			bb.Append(a > 500)
			tb.Append(ts.Value(i))
		}
		return b.NewRecordBatch(), nil
	}
}

// BenchmarkMapRows measures MapRows against the same transformation
// written as a MapFunc over Arrow (handEnrich), in the same job shape:
// BenchmarkPipeline's 1 M pregenerated rows (256 batches of 4,096: a
// string of 100 k distinct users, a float64, a timestamp) from a memory
// source through the map into a memory sink. Each iteration runs one job
// of each, alternating which goes first, so that both see the same load
// on a shared machine; it reports the events/s of each and their ratio
// (maprows/mapfunc; target ≥ 0.7). Both jobs' outputs are checked to
// decode to the same rows before timing.
func BenchmarkMapRows(b *testing.B) {
	events := int64(benchBatch * benchBatches)
	var plain []arrow.RecordBatch
	for _, r := range readAll(b, benchGenerate()) {
		plain = append(plain, connectors.StripMeta(r))
		r.Release()
	}
	src, err := mem.NewSourceFrom(plain)
	if err != nil {
		b.Fatal(err)
	}
	outSchema, err := arkflow.SchemaOf[benchOut]()
	if err != nil {
		b.Fatal(err)
	}
	jobs := map[string]func(sink *mem.Sink) *arkflow.Builder{
		"maprows": func(sink *mem.Sink) *arkflow.Builder {
			return arkflow.MapRows(arkflow.NewJob("bench").Source("in", src), "enrich", benchEnrich).Sink("out", sink)
		},
		"mapfunc": func(sink *mem.Sink) *arkflow.Builder {
			return arkflow.NewJob("bench").Source("in", src).
				Map("enrich", handEnrich(outSchema), arkflow.WithSchema(outSchema)).Sink("out", sink)
		},
	}
	run := func(b *testing.B, name string, sink *mem.Sink) time.Duration {
		sink.Reset()
		start := time.Now()
		j, err := jobs[name](sink).Build()
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		if sink.NumRows() != events {
			b.Fatalf("%s: the sink got %d rows, want %d", name, sink.NumRows(), events)
		}
		return took
	}
	// The two give the same rows.
	outputs := map[string][]benchOut{}
	for name := range jobs {
		sink := mem.NewSink()
		run(b, name, sink)
		for _, rec := range sink.Records() {
			rows, err := arkflow.Decode[benchOut](rec)
			if err != nil {
				b.Fatal(err)
			}
			outputs[name] = append(outputs[name], rows...)
		}
	}
	if !reflect.DeepEqual(outputs["maprows"], outputs["mapfunc"]) {
		b.Fatal("MapRows and the MapFunc give different rows")
	}
	outputs = nil

	sinks := map[string]*mem.Sink{"maprows": mem.NewSink(), "mapfunc": mem.NewSink()}
	var took = map[string]time.Duration{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		order := []string{"maprows", "mapfunc"}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, name := range order {
			took[name] += run(b, name, sinks[name])
		}
	}
	b.StopTimer()
	rate := func(name string) float64 { return float64(events) * float64(b.N) / took[name].Seconds() }
	b.ReportMetric(rate("maprows"), "maprows-events/s")
	b.ReportMetric(rate("mapfunc"), "mapfunc-events/s")
	b.ReportMetric(rate("maprows")/rate("mapfunc"), "ratio")
}
