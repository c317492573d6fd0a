package queries

import (
	"context"
	"runtime"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// benchEvents is the benchmarks' run: about 920 k bids, 10 000 s of event
// time.
const benchEvents = 1_000_000

// benchQuery runs a query's engine and hand loop, and its Beam side where
// it has one (built with the tag beam), as sub-benchmarks of one run, on
// the same events, and fails when their outputs differ. It reports bids/s
// (as the earlier runs did) and events/s, all the events generated: Q3
// and Q8 read the persons and auctions only.
func benchQuery(b *testing.B, name string) {
	var q Query
	for _, x := range All {
		if x.Name == name {
			q = x
		}
	}
	ev := nexmark.Generate(nexmark.Config{Seed: 1, Events: benchEvents})
	if q.Prepare != nil {
		q.Prepare(ev)
	}
	sides := map[string]func(context.Context, *nexmark.Events) (Digest, error){
		"engine": q.Engine,
		"hand":   func(_ context.Context, ev *nexmark.Events) (Digest, error) { return q.Hand(ev), nil },
	}
	names := []string{"engine", "hand"}
	if q.Beam != nil {
		sides["beam"] = q.Beam
		names = append(names, "beam")
	}
	digests := map[string]Digest{}
	for _, side := range names {
		b.Run(side, func(b *testing.B) {
			var d Digest
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if d, err = sides[side](context.Background(), ev); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(ev.Bids))*float64(b.N)/b.Elapsed().Seconds(), "bids/s")
			b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(heapAfter(), "heap-MB")
			digests[side] = d
		})
	}
	for _, side := range names[1:] {
		if e, o := digests["engine"], digests[side]; len(digests) == len(names) && e != o {
			b.Fatalf("engine %+v, %s %+v", e, side, o)
		}
	}
}

// heapAfter is the live heap after a collection, in MB: with the bids
// (about 100 MB) and nothing a run should keep.
func heapAfter() float64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

func BenchmarkQ0(b *testing.B)     { benchQuery(b, "q0") }
func BenchmarkQ1(b *testing.B)     { benchQuery(b, "q1") }
func BenchmarkQ2(b *testing.B)     { benchQuery(b, "q2") }
func BenchmarkQ5(b *testing.B)     { benchQuery(b, "q5") }
func BenchmarkQ5Sink(b *testing.B) { benchQuery(b, "q5sink") }
func BenchmarkQ3(b *testing.B)     { benchQuery(b, "q3") }
func BenchmarkQ7(b *testing.B)     { benchQuery(b, "q7") }
func BenchmarkQ8(b *testing.B)     { benchQuery(b, "q8") }

func BenchmarkWindow1k(b *testing.B)   { benchQuery(b, "window1k") }
func BenchmarkWindow100k(b *testing.B) { benchQuery(b, "window100k") }
