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

// benchQuery runs a query's engine and hand loop as sub-benchmarks of one
// run, on the same events, and fails when their outputs differ. It
// reports bids/s (as the earlier runs did) and events/s, all the events
// generated: Q3 and Q8 read the persons and auctions only.
func benchQuery(b *testing.B, name string) {
	var q Query
	for _, x := range All {
		if x.Name == name {
			q = x
		}
	}
	ev := nexmark.Generate(nexmark.Config{Seed: 1, Events: benchEvents})
	digests := map[string]Digest{}
	for _, side := range []string{"engine", "hand"} {
		b.Run(side, func(b *testing.B) {
			var d Digest
			b.ReportAllocs()
			for b.Loop() {
				if side == "hand" {
					d = q.Hand(ev)
					continue
				}
				var err error
				if d, err = q.Engine(context.Background(), ev); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(ev.Bids))*float64(b.N)/b.Elapsed().Seconds(), "bids/s")
			b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(heapAfter(), "heap-MB")
			digests[side] = d
		})
	}
	if e, h := digests["engine"], digests["hand"]; len(digests) == 2 && e != h {
		b.Fatalf("engine %+v, hand loop %+v", e, h)
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
