package push_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// timedClick is an event of the embedding benchmarks.
type timedClick struct {
	User   string
	Amount int64
	TS     time.Time
}

// windowTotal is a window result of the embedding benchmarks.
type windowTotal struct {
	User   string
	Start  time.Time `arkflow:"window_start"`
	Clicks int64
	Total  int64
}

const (
	embedRows   = 1 << 20
	embedBatch  = 1024
	embedWindow = 10 * time.Second
)

// embedEvents returns n events over keys users, event time growing by
// 100 µs a row (about 100 s in all: ten 10 s windows).
func embedEvents(n, keys int) []timedClick {
	r := rand.New(rand.NewPCG(1, 2))
	users := make([]string, keys)
	for i := range users {
		users[i] = fmt.Sprintf("user-%06d", i)
	}
	base := time.UnixMilli(1_700_000_000_000).UTC()
	out := make([]timedClick, n)
	for i := range out {
		out[i] = timedClick{User: users[r.IntN(keys)], Amount: int64(r.IntN(1000)), TS: base.Add(time.Duration(i) * 100 * time.Microsecond)}
	}
	return out
}

// handWindows is the baseline: a producer goroutine sends the same
// batches of structs over a bounded channel to a consumer that keeps a map
// per open window and emits a window's totals when event time passes its
// end, as a service would write it by hand.
func handWindows(events []timedClick, emit func([]windowTotal)) {
	ch := make(chan []timedClick, 16)
	go func() {
		for i := 0; i < len(events); i += embedBatch {
			ch <- events[i:min(i+embedBatch, len(events))]
		}
		close(ch)
	}()
	type acc struct{ n, sum int64 }
	open := map[int64]map[string]*acc{}
	fire := func(upTo int64) {
		for start, m := range open {
			if start+embedWindow.Milliseconds() > upTo {
				continue
			}
			out := make([]windowTotal, 0, len(m))
			for u, a := range m {
				out = append(out, windowTotal{User: u, Start: time.UnixMilli(start).UTC(), Clicks: a.n, Total: a.sum})
			}
			emit(out)
			delete(open, start)
		}
	}
	for b := range ch {
		maxTS := int64(-1 << 63)
		for _, e := range b {
			ts := e.TS.UnixMilli()
			start := ts - ts%embedWindow.Milliseconds()
			m := open[start]
			if m == nil {
				m = map[string]*acc{}
				open[start] = m
			}
			a := m[e.User]
			if a == nil {
				a = &acc{}
				m[e.User] = a
			}
			a.n++
			a.sum += e.Amount
			maxTS = max(maxTS, ts)
		}
		fire(maxTS)
	}
	fire(1<<63 - 1)
}

// pushWindows runs the same through the engine: Push → keyed tumbling
// count and sum → funcsink.Func.
func pushWindows(b *testing.B, events []timedClick, emit func([]windowTotal)) {
	in := push.New(push.Config[timedClick]{})
	j, err := arkflow.NewJob("bench").
		Source("clicks", in, arkflow.EventTime{Field: "TS", PerRow: true}).
		// per_row: in-order rows that share a batch with a later window are not late.
		KeyBy("User").
		Window("w", window.Tumbling(embedWindow, job.Count("Clicks"), job.Sum("Amount", "Total"))).
		Sink("out", funcsink.Func[windowTotal](func(_ context.Context, rows []windowTotal) error { emit(rows); return nil })).
		Build()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	ctx := context.Background()
	for i := 0; i < len(events); i += embedBatch {
		if err := in.Push(ctx, events[i:min(i+embedBatch, len(events))]...); err != nil {
			b.Fatal(err)
		}
	}
	in.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPushWindow compares Push → keyed tumbling window → funcsink.Func with
// a hand-written goroutine + channel + map loop over the same structs, at
// 1 k, 100 k and 1 M keys (target ≥ 0.5 at 100 k keys). Both must produce
// the same totals.
func BenchmarkPushWindow(b *testing.B) {
	for _, keys := range []int{1_000, 100_000, 1_000_000} {
		events := embedEvents(embedRows, keys)
		sums := map[string][2]int64{}
		for _, name := range []string{"engine", "handloop"} {
			run := func(emit func([]windowTotal)) { handWindows(events, emit) }
			if name == "engine" {
				run = func(emit func([]windowTotal)) { pushWindows(b, events, emit) }
			}
			b.Run(fmt.Sprintf("%s/keys=%s", name, keyCount(keys)), func(b *testing.B) {
				sums[name] = measureWindows(b, run)
			})
		}
		if e, h := sums["engine"], sums["handloop"]; len(sums) == 2 && e != h {
			b.Fatalf("%d keys: engine emitted %d results summing to %d, the hand loop %d summing to %d", keys, e[0], e[1], h[0], h[1])
		}
	}
}

// keyCount names a key count as 1k, 100k or 1M.
func keyCount(n int) string {
	if n >= 1_000_000 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	return fmt.Sprintf("%dk", n/1_000)
}

// measureWindows runs one side of BenchmarkPushWindow and returns its
// results and total.
func measureWindows(b *testing.B, run func(emit func([]windowTotal))) [2]int64 {
	b.ReportAllocs()
	var results, clicks, total atomic.Int64
	runtime.GC() // neither side pays for the other's garbage
	for b.Loop() {
		results.Store(0)
		clicks.Store(0)
		total.Store(0)
		run(func(rows []windowTotal) {
			results.Add(int64(len(rows)))
			for _, r := range rows {
				clicks.Add(r.Clicks)
				total.Add(r.Total)
			}
		})
	}
	b.ReportMetric(float64(embedRows)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if clicks.Load() != embedRows {
		b.Fatalf("counted %d clicks of %d", clicks.Load(), embedRows)
	}
	return [2]int64{results.Load(), total.Load()}
}

// BenchmarkPushHeap pushes 10 M rows through
// Push → keyed tumbling window → funcsink.Func and reports the largest live heap
// seen after each million (the heap must stay within a constant
// bound, whatever the volume).
func BenchmarkPushHeap(b *testing.B) {
	const keys = 100_000
	rows := 10_000_000 / embedBatch * embedBatch
	events := embedEvents(1<<20, keys)
	for b.Loop() {
		var maxHeap, firstHeap uint64
		var processed atomic.Int64
		in := push.New(push.Config[timedClick]{})
		j, err := arkflow.NewJob("heap").
			Source("clicks", in, arkflow.EventTime{Field: "TS", PerRow: true}).
			// per_row: in-order rows that share a batch with a later window are not late.
			KeyBy("User").
			Window("w", window.Tumbling(embedWindow, job.Count("Clicks"), job.Sum("Amount", "Total"))).
			Sink("out", funcsink.Func[windowTotal](func(_ context.Context, rs []windowTotal) error {
				for _, r := range rs {
					processed.Add(r.Clicks)
				}
				return nil
			})).
			Build()
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- j.Run(context.Background()) }()
		ctx := context.Background()
		span := events[len(events)-1].TS.Sub(events[0].TS) + time.Millisecond
		batch := make([]timedClick, embedBatch)
		for i := 0; i < rows; i += embedBatch {
			// The events again, shifted on in event time each round, so
			// windows keep closing.
			round := i / len(events)
			for k := range batch {
				e := events[(i+k)%len(events)]
				e.TS = e.TS.Add(time.Duration(round) * span)
				batch[k] = e
			}
			if err := in.Push(ctx, batch...); err != nil {
				b.Fatal(err)
			}
			if (i/embedBatch)%1024 == 1023 {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if firstHeap == 0 {
					firstHeap = ms.HeapAlloc
				}
				maxHeap = max(maxHeap, ms.HeapAlloc)
			}
		}
		in.Close()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(firstHeap)/(1<<20), "MiB-heap-at-1M")
		b.ReportMetric(float64(maxHeap)/(1<<20), "MiB-heap-max")
		if processed.Load() != int64(rows) {
			b.Fatalf("processed %d of %d rows", processed.Load(), rows)
		}
	}
}
