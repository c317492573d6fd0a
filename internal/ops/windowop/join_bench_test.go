package windowop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	arkflow "github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Benchmarks of the joins beside a hand-written Go hash join over the same
// rows (the same Arrow batches, read column by column), each producing the
// same pairs, which the benchmark checks outside the timer.
//
//	go test -run='^$' -bench='Benchmark(Window|Interval)Join' -benchtime=1x -count=5 ./internal/ops/windowop/

const (
	joinBenchRows = 1_000_000 // per side
	joinBenchKeys = 100_000
	joinBenchOOO  = 2000    // ms
	joinBenchWin  = 1000    // ms, the window join's window
	joinBenchLo   = -500    // ms, the interval join's bounds
	joinBenchHi   = 500     //
	joinBenchT0   = 1 << 40 // a time well inside the range
)

var joinBenchSchema = func(key, val string) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: key, Type: arrow.BinaryTypes.String},
		{Name: val, Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
}

// joinBenchData is one side: n rows, 100 per ms of event time, each up to
// joinBenchOOO ms behind, keys drawn from joinBenchKeys. (The sources'
// watermark allows 100 ms more: a batch spans 41 ms, and its rows must not
// be late, so that both joins see every row.)
func joinBenchData(seed uint64, key, val string) []arrow.RecordBatch {
	names := make([]string, joinBenchKeys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	x := seed * 0x9e3779b97f4a7c15
	next := func() uint64 { // splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	schema := joinBenchSchema(key, val)
	var out []arrow.RecordBatch
	for lo := 0; lo < joinBenchRows; lo += benchBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		ks, vs, ts := b.Field(0).(*array.StringBuilder), b.Field(1).(*array.Int64Builder), b.Field(2).(*array.Int64Builder)
		for i := lo; i < min(lo+benchBatch, joinBenchRows); i++ {
			r := next()
			ks.Append(names[r%joinBenchKeys])
			vs.Append(int64(i))
			ts.Append(joinBenchT0 + int64(i/100) - int64(r>>40)%joinBenchOOO)
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

// joinTotals is what engine and baseline must agree on: the pairs, and
// the sums of their left and right values.
type joinTotals struct{ pairs, left, right int64 }

// runJoinEngine runs a job of two memory sources holding the data joined
// by the given join config into a memory sink, and totals its output.
func runJoinEngine(b *testing.B, left, right []arrow.RecordBatch, cfg map[string]any) joinTotals {
	// The memory connector's factories, given Go values as the builder
	// gives them, under types of their own.
	env := connectors.NewEnvironment()
	memIn, _ := env.LookupInput("memory")
	memOut, _ := env.LookupOutput("memory")
	sink := mem.NewSink()
	for name, data := range map[string][]arrow.RecordBatch{"bench-left": left, "bench-right": right} {
		src, err := mem.NewSourceFrom(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := env.RegisterInput(name, func(bc connectors.BuildContext) (connectors.Input, error) {
			bc.Bound = src
			return memIn(bc)
		}); err != nil {
			b.Fatal(err)
		}
	}
	if err := env.RegisterOutput("bench-sink", func(bc connectors.BuildContext, s *arrow.Schema) (connectors.Output, error) {
		bc.Bound = sink
		return memOut(bc, s)
	}); err != nil {
		b.Fatal(err)
	}
	cfg["left"], cfg["right"], cfg["left_key"], cfg["right_key"] = "persons", "auctions", "id", "seller"
	tm := map[string]any{"mode": "event_time", "timestamp_field": "ts",
		"watermark": map[string]any{"strategy": "bounded_out_of_orderness", "out_of_orderness_ms": joinBenchOOO + 100}}
	spec := map[string]any{
		"id": "joinbench",
		"operators": []map[string]any{{"id": "persons", "kind": "source"}, {"id": "auctions", "kind": "source"},
			{"id": "j", "kind": "join", "config": cfg}, {"id": "out", "kind": "sink"}},
		"edges": []map[string]any{{"id": "p", "from": "persons", "to": "j", "partitioned": true},
			{"id": "a", "from": "auctions", "to": "j", "partitioned": true}, {"id": "o", "from": "j", "to": "out"}},
		"sources": []map[string]any{{"operator_id": "persons", "input_type": "bench-left", "time": tm},
			{"operator_id": "auctions", "input_type": "bench-right", "time": tm}},
		"sinks": []map[string]any{{"operator_id": "out", "output_type": "bench-sink"}},
	}
	data, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	s, err := job.Parse(data)
	if err != nil {
		b.Fatal(err)
	}
	j, err := arkflow.FromSpec(s, arkflow.WithEnvironment(env), arkflow.WithDataDir(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := j.Run(ctx); err != nil {
		b.Fatal(err)
	}
	var t joinTotals
	for _, rec := range sink.Records() {
		pv := rec.Column(rec.Schema().FieldIndices("pv")[0]).(*array.Int64)
		av := rec.Column(rec.Schema().FieldIndices("av")[0]).(*array.Int64)
		t.pairs += rec.NumRows()
		for i := 0; i < pv.Len(); i++ {
			t.left += pv.Value(i)
			t.right += av.Value(i)
		}
	}
	return t
}

// joinRef is one row of a side in the hand-written join.
type joinRef struct{ v, ts int64 }

// handWindowJoin is the baseline window join: rows grouped by window
// start and key in Go maps, then every pair of a window's key written to
// output columns.
func handWindowJoin(left, right []arrow.RecordBatch) joinTotals {
	type wk struct {
		start int64
		key   string
	}
	group := func(data []arrow.RecordBatch) map[wk][]joinRef {
		m := map[wk][]joinRef{}
		for _, rec := range data {
			k, v, ts := rec.Column(0).(*array.String), rec.Column(1).(*array.Int64), rec.Column(2).(*array.Int64)
			for i := 0; i < k.Len(); i++ {
				t := ts.Value(i)
				x := wk{eventtime.TumblingStart(t, joinBenchWin), k.Value(i)}
				m[x] = append(m[x], joinRef{v.Value(i), t})
			}
		}
		return m
	}
	l, r := group(left), group(right)
	var out pairCols
	for x, ls := range l {
		rs := r[x]
		for _, a := range ls {
			for _, c := range rs {
				out.add(x.key, a, c)
			}
		}
	}
	return out.totals()
}

// handIntervalJoin is the baseline interval join: right rows grouped by
// key, each left row paired with its key's right rows within the bounds.
func handIntervalJoin(left, right []arrow.RecordBatch) joinTotals {
	r := map[string][]joinRef{}
	for _, rec := range right {
		k, v, ts := rec.Column(0).(*array.String), rec.Column(1).(*array.Int64), rec.Column(2).(*array.Int64)
		for i := 0; i < k.Len(); i++ {
			r[k.Value(i)] = append(r[k.Value(i)], joinRef{v.Value(i), ts.Value(i)})
		}
	}
	var out pairCols
	for _, rec := range left {
		k, v, ts := rec.Column(0).(*array.String), rec.Column(1).(*array.Int64), rec.Column(2).(*array.Int64)
		for i := 0; i < k.Len(); i++ {
			a := joinRef{v.Value(i), ts.Value(i)}
			for _, c := range r[k.Value(i)] {
				if a.ts >= c.ts+joinBenchLo && a.ts <= c.ts+joinBenchHi {
					out.add(k.Value(i), a, c)
				}
			}
		}
	}
	return out.totals()
}

// pairCols are the output columns of the hand-written joins.
type pairCols struct {
	key              []string
	lv, lts, rv, rts []int64
}

func (p *pairCols) add(key string, l, r joinRef) {
	p.key = append(p.key, key)
	p.lv, p.lts, p.rv, p.rts = append(p.lv, l.v), append(p.lts, l.ts), append(p.rv, r.v), append(p.rts, r.ts)
}

func (p *pairCols) totals() joinTotals {
	t := joinTotals{pairs: int64(len(p.key))}
	for i := range p.lv {
		t.left += p.lv[i]
		t.right += p.rv[i]
	}
	return t
}

func benchJoin(b *testing.B, cfg func() map[string]any, hand func(l, r []arrow.RecordBatch) joinTotals) {
	left, right := joinBenchData(1, "id", "pv"), joinBenchData(2, "seller", "av")
	want := hand(left, right)
	if want.pairs == 0 {
		b.Fatal("the data makes no pairs")
	}
	events := float64(2 * joinBenchRows)
	b.Run(fmt.Sprintf("engine/keys=%dk", joinBenchKeys/1000), func(b *testing.B) {
		b.ReportAllocs()
		var got joinTotals
		runtime.GC() // neither side pays for the garbage of the one before (b.Loop starts the timer)
		for b.Loop() {
			got = runJoinEngine(b, left, right, cfg())
		}
		b.ReportMetric(events*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		if got != want {
			b.Fatalf("engine %+v, hand-written join %+v", got, want)
		}
	})
	b.Run(fmt.Sprintf("handjoin/keys=%dk", joinBenchKeys/1000), func(b *testing.B) {
		b.ReportAllocs()
		runtime.GC()
		for b.Loop() {
			hand(left, right)
		}
		b.ReportMetric(events*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

func BenchmarkWindowJoin(b *testing.B) {
	benchJoin(b, func() map[string]any {
		return map[string]any{"type": "window", "window": map[string]any{"type": "tumbling", "size_ms": joinBenchWin}}
	}, handWindowJoin)
}

func BenchmarkIntervalJoin(b *testing.B) {
	benchJoin(b, func() map[string]any {
		return map[string]any{"type": "interval", "lower_ms": joinBenchLo, "upper_ms": joinBenchHi}
	}, handIntervalJoin)
}

// flatRow is a row of BenchmarkIntervalJoinStateStaysFlat's sides.
type flatRow struct {
	K  string `arkflow:"k"`
	V  int64  `arkflow:"v"`
	TS int64  `arkflow:"ts"`
}

// An interval join's state stays flat under a steady stream: 10 M rows a
// side (100 a millisecond of event time, keys from 100 k), pushed through
// the public API into a job joining them within ±500 ms; every million
// rows it reads the join's kept rows (open_windows) and the bytes its
// state holds (Metrics.StateBytes). After the first sample the state
// neither grows nor shrinks beyond the noise of where batches fall:
// state-max/state-min is reported and must stay under 1.5. Run it with
//
//	go test -run='^$' -bench=BenchmarkIntervalJoinStateStaysFlat -benchtime=1x ./internal/ops/windowop/
func BenchmarkIntervalJoinStateStaysFlat(b *testing.B) {
	const perSide, every, batchRows, keys = 10_000_000, 1_000_000, 2_000, 100_000
	for b.Loop() {
		left, right := push.New(push.Config[flatRow]{}), push.New(push.Config[flatRow]{})
		var pairs atomic.Int64
		tm := arkflow.EventTime{Field: "ts", OutOfOrderness: 100 * time.Millisecond}
		j, err := arkflow.NewJob("flat").
			Source("l", left, tm).
			Source("r", right, tm).
			Join("j", job.Join{Type: job.JoinInterval, Left: "l", Right: "r", LeftKey: "k", RightKey: "k", Lower: -500 * time.Millisecond, Upper: 500 * time.Millisecond}).
			Sink("out", funcsink.RecordFunc(func(_ context.Context, rec arrow.RecordBatch) error {
				pairs.Add(rec.NumRows())
				return nil
			})).
			Build(arkflow.WithDataDir(b.TempDir()))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- j.Run(ctx) }()
		keyNames := make([]string, keys)
		for i := range keyNames {
			keyNames[i] = fmt.Sprintf("k%d", i)
		}
		var kept, bytes []int64
		rows := make([]flatRow, batchRows)
		for i := 0; i < perSide; i += batchRows {
			for side, src := range []*push.Source[flatRow]{left, right} {
				for r := range rows {
					n := int64(i + r)
					rows[r] = flatRow{K: keyNames[(n*7+int64(side))%keys], V: n, TS: 1_700_000_000_000 + n/100}
				}
				if err := src.PushWait(ctx, rows...); err != nil {
					b.Fatal(err)
				}
			}
			if (i+batchRows)%every == 0 {
				m := j.Metrics()
				kept = append(kept, m.Operator("j").Gauges["open_windows"])
				bytes = append(bytes, m.StateBytes["j"])
			}
		}
		left.Close()
		right.Close()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		cancel()
		lo, hi := slices.Min(bytes[1:]), slices.Max(bytes[1:])
		b.Logf("every %d rows a side: kept rows %v; state bytes %v; %d pairs", every, kept, bytes, pairs.Load())
		b.ReportMetric(float64(hi), "state-bytes-max")
		b.ReportMetric(float64(hi)/float64(max(lo, 1)), "state-max/min")
		if lo == 0 || float64(hi)/float64(lo) > 1.5 {
			b.Fatalf("the state did not stay flat: %v bytes every %d rows", bytes, every)
		}
	}
}
