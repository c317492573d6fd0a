package arkflow_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
)

const (
	benchBatch   = 4096
	benchBatches = 256 // events per iteration: 1,048,576
)

func benchGenerate() generate.Config {
	return generate.Config{
		Seed: 1, Count: benchBatch * benchBatches, BatchSize: benchBatch,
		Fields: []generate.Field{
			{Name: "user", Type: "string", Cardinality: 100_000},
			{Name: "amount", Type: "float64"},
			{Name: "ts", Type: "timestamp", Unit: "ms"},
		},
	}
}

// readAll reads every batch a generate source yields.
func readAll(b *testing.B, cfg generate.Config) []arrow.RecordBatch {
	in, err := generate.NewInput(cfg)
	if err != nil {
		b.Fatal(err)
	}
	src, err := in.NewSource(connectors.TaskInfo{OperatorID: "in", Parallelism: 1})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := src.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	var out []arrow.RecordBatch
	for {
		bt, err := src.Read(ctx)
		if errors.Is(err, connectors.ErrEndOfInput) {
			return out
		}
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, bt.Record)
		if bt.Ack != nil {
			bt.Ack(nil)
		}
	}
}

// channelPipeline is the baseline: a producer goroutine moves batches
// through a bounded channel to a consumer that keeps them, as a sink would;
// next yields the batches (nil when done).
func channelPipeline(next func() arrow.RecordBatch) int64 {
	ch := make(chan arrow.RecordBatch, 16)
	go func() {
		for r := next(); r != nil; r = next() {
			ch <- r
		}
		close(ch)
	}()
	var rows int64
	var kept []arrow.RecordBatch
	for r := range ch {
		rows += r.NumRows()
		kept = append(kept, r)
	}
	for _, r := range kept {
		r.Release()
	}
	return rows
}

// BenchmarkPipeline measures the runtime moving 4,096-row batches from a
// source through a keyed edge into a memory sink, beside a plain Go channel
// pipeline moving the same batches (the baseline), in the same run:
//
//	generate/engine vs generate/channels: rows generated inside the loop by
//	  the same generator; the baseline moves them through one channel.
//	pregenerated/engine-p2 vs pregenerated/handsplit-p2: rows generated
//	  once; a keyed edge into 2 sink subtasks (every batch is split) vs a
//	  hand-written hash-and-split into two channels.
func BenchmarkPipeline(b *testing.B) {
	events := float64(benchBatch * benchBatches)
	run := func(b *testing.B, src arkflow.SourceComponent, sinkPar int) {
		sink := mem.NewSink()
		for i := 0; i < b.N; i++ {
			j, err := arkflow.NewJob("bench").
				Source("in", src).
				KeyBy("user").
				Sink("out", sink, arkflow.WithParallelism(sinkPar)).
				Build()
			if err != nil {
				b.Fatal(err)
			}
			if err := j.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			if sink.NumRows() != int64(events) {
				b.Fatalf("sink got %d rows, want %d", sink.NumRows(), int64(events))
			}
			sink.Reset()
		}
		b.ReportMetric(events*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	}
	b.Run("generate/engine", func(b *testing.B) {
		b.ReportAllocs()
		run(b, benchGenerate(), 1)
	})
	b.Run("generate/engine-p2", func(b *testing.B) {
		b.ReportAllocs()
		run(b, benchGenerate(), 2)
	})
	b.Run("generate/channels", func(b *testing.B) {
		b.ReportAllocs()
		cfg := benchGenerate()
		for i := 0; i < b.N; i++ {
			in, _ := generate.NewInput(cfg)
			src, _ := in.NewSource(connectors.TaskInfo{OperatorID: "in", Parallelism: 1})
			ctx := context.Background()
			_ = src.Connect(ctx)
			rows := channelPipeline(func() arrow.RecordBatch {
				bt, err := src.Read(ctx)
				if err != nil {
					return nil
				}
				bt.Ack(nil)
				return bt.Record
			})
			if rows != int64(events) {
				b.Fatalf("got %d rows", rows)
			}
		}
		b.ReportMetric(events*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})

	batches := readAll(b, benchGenerate())
	// The memory source adds its own metadata columns: give it the
	// generator's batches without theirs, so both sides move the same
	// columns.
	var plain []arrow.RecordBatch
	for _, r := range batches {
		plain = append(plain, connectors.StripMeta(r))
	}
	b.Run("pregenerated/engine-p2", func(b *testing.B) {
		b.ReportAllocs()
		src, _ := mem.NewSourceFrom(plain)
		run(b, src, 2)
	})
	// The keyed baseline: one goroutine hashes the key column and splits
	// each batch column-wise between two consumer goroutines over bounded
	// channels — the engine's keyed edge without the engine.
	b.Run("pregenerated/handsplit-p2", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var rows [2]int64
			var wg sync.WaitGroup
			chans := [2]chan arrow.RecordBatch{make(chan arrow.RecordBatch, 16), make(chan arrow.RecordBatch, 16)}
			for c := range chans {
				wg.Add(1)
				go func(c int) {
					defer wg.Done()
					var kept []arrow.RecordBatch
					for r := range chans[c] {
						rows[c] += r.NumRows()
						kept = append(kept, r)
					}
					for _, r := range kept {
						r.Release()
					}
				}(c)
			}
			router := keys.NewRouter(128, 2)
			dest := make([]int32, benchBatch)
			for _, r := range batches {
				d := dest[:r.NumRows()]
				if err := router.Route(r.Column(0), d); err != nil {
					b.Fatal(err)
				}
				parts, err := batch.Split(r, d, 2)
				if err != nil {
					b.Fatal(err)
				}
				for c, p := range parts {
					if p != nil {
						chans[c] <- p
					}
				}
			}
			close(chans[0])
			close(chans[1])
			wg.Wait()
			if rows[0]+rows[1] != int64(events) {
				b.Fatalf("got %d rows", rows[0]+rows[1])
			}
		}
		b.ReportMetric(events*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}
