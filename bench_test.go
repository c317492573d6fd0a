package arkflow_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/job"
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

// BenchmarkPipelineMetrics measures what Prometheus scrapes cost a
// running job, for two jobs over the same 1 M events: pass,
// BenchmarkPipeline's generate → keyBy(user) → memory sink with 1 sink
// subtask (about 40 ms a job), and state, generate → keyBy(user) → a
// running count per user (100 k keys) in the memory state backend
// (seconds a job). Each runs with its Collector in a registry that a
// goroutine gathers every 100 ms (a fast scrape interval) or every 10 ms
// (a stress case), against the same job without a collector (the
// baseline).
//
// The machine is shared and its load moves within seconds, so the two
// are paired: each iteration runs one job without and one with the
// collector (alternating which goes first) and times each, so that both
// see the same load. It reports events/s of each (off, on), their ratio
// (target ≥ 0.95) and the scrapes that fell inside the jobs with the
// collector (scrapes/op). The scraper runs for the whole benchmark and
// gathers an empty registry while a job without the collector runs.
// control pairs two jobs without a collector: its ratio is the noise.
func BenchmarkPipelineMetrics(b *testing.B) {
	events := int64(benchBatch * benchBatches)
	runJob := func(b *testing.B, stateful bool, sink *mem.Sink, cur *atomic.Pointer[prometheus.Collector]) time.Duration {
		jb := arkflow.NewJob("bench")
		last := "out"
		if stateful {
			jb = jb.State(job.State{Backend: job.BackendMemory}).
				Source("in", benchGenerate()).
				KeyBy("user").
				Aggregate("n", job.Final(job.Count("n")))
			last = "n"
		} else {
			jb = jb.Source("in", benchGenerate()).KeyBy("user")
		}
		j, err := jb.Sink("out", sink).Build()
		if err != nil {
			b.Fatal(err)
		}
		if cur != nil {
			c := j.Collector()
			cur.Store(&c)
			defer cur.Store(nil)
		}
		start := time.Now()
		if err := j.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		if !stateful && sink.NumRows() != events {
			b.Fatalf("sink got %d rows, want %d", sink.NumRows(), events)
		}
		if got := j.Metrics().Operator(last).RowsIn; got != events {
			b.Fatalf("%s's metrics count %d rows, want %d", last, got, events)
		}
		sink.Reset()
		return d
	}
	// every 0 is the control: both jobs of a pair run without the
	// collector (and nothing is scraped), so its ratio shows how far two
	// identical jobs differ on this machine now.
	for _, stateful := range []bool{false, true} {
		for _, every := range []time.Duration{0, 100 * time.Millisecond, 10 * time.Millisecond} {
			name := fmt.Sprintf("scrape=%v", every)
			if every == 0 {
				name = "control"
			}
			if stateful {
				name = "state/" + name
			} else {
				name = "pass/" + name
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				sink := mem.NewSink()
				var cur atomic.Pointer[prometheus.Collector]
				var scrapes atomic.Int64
				reg := prometheus.NewRegistry()
				reg.MustRegister(current{&cur})
				stop, stopped := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(stopped)
					if every == 0 {
						<-stop
						return
					}
					t := time.NewTicker(every)
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
							on := cur.Load() != nil
							if _, err := reg.Gather(); err != nil {
								panic(err)
							}
							if on {
								scrapes.Add(1)
							}
						}
					}
				}()
				defer func() { close(stop); <-stopped }()
				var off, on time.Duration
				withCollector := &cur
				if every == 0 {
					withCollector = nil
				}
				for i := 0; i < b.N; i++ {
					if i%2 == 0 {
						off += runJob(b, stateful, sink, nil)
						on += runJob(b, stateful, sink, withCollector)
					} else {
						on += runJob(b, stateful, sink, withCollector)
						off += runJob(b, stateful, sink, nil)
					}
				}
				n := float64(events) * float64(b.N)
				b.ReportMetric(n/off.Seconds(), "events/s-off")
				b.ReportMetric(n/on.Seconds(), "events/s-on")
				b.ReportMetric(off.Seconds()/on.Seconds(), "ratio")
				b.ReportMetric(float64(scrapes.Load())/float64(b.N), "scrapes/op")
			})
		}
	}
}

// current collects the collector it points to (none before the first),
// so that one registry scrapes each benchmark iteration's job in turn.
// It describes nothing: an unchecked collector.
type current struct {
	c *atomic.Pointer[prometheus.Collector]
}

func (current) Describe(chan<- *prometheus.Desc) {}

func (c current) Collect(ch chan<- prometheus.Metric) {
	if p := c.c.Load(); p != nil {
		(*p).Collect(ch)
	}
}

// BenchmarkCollectorGather measures one scrape of a finished job of 3
// tasks (BenchmarkPipeline's, with 2 sink subtasks) through a registry:
// what every scrape costs the process, beside gathering an empty
// registry (the baseline).
func BenchmarkCollectorGather(b *testing.B) {
	j, err := arkflow.NewJob("bench").
		Source("in", clicksAt([]any{"ann", 100, "bob", 300})).
		KeyBy("user").
		Sink("out", mem.NewSink(), arkflow.WithParallelism(2)).
		Build()
	if err != nil {
		b.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	gather := func(b *testing.B, reg *prometheus.Registry) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "scrapes/s")
	}
	b.Run("job", func(b *testing.B) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(j.Collector())
		gather(b, reg)
	})
	b.Run("empty", func(b *testing.B) { gather(b, prometheus.NewRegistry()) })
}
