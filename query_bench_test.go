package arkflow_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/drop"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// BenchmarkQueryUnderLoad runs 2 M generated rows through a keyed
// aggregate and a keyed one-minute window at parallelism 2, alone (the
// baseline) and with 1,000 lookups a second beside it (4 clients at 250/s), alternating
// between the two operators over 1,000 users: it reports the pipeline's
// events/s for both and the lookups' p50 and p99 latency.
func BenchmarkQueryUnderLoad(b *testing.B) {
	const rows = 2_000_000
	users := make([]string, 1000)
	for i := range users {
		users[i] = fmt.Sprintf("u%03d", i)
	}
	step := int64(1)
	cfg := generate.Config{Seed: 1, Count: rows / 2, Partitions: 2, BatchSize: 4096, Fields: []generate.Field{
		{Name: "user", Type: "string", Values: users},
		{Name: "amount", Type: "int64"},
		{Name: "ts", Type: "timestamp", Unit: "ms", StepMs: &step},
	}}
	run := func(b *testing.B, lookups bool) {
		var lat [2][]time.Duration // by operator: the aggregate, the window
		for range b.N {
			bld := arkflow.NewJob("load").Parallelism(2).
				Source("in", cfg, arkflow.EventTime{Field: "ts"}).
				KeyBy("user").Aggregate("totals", job.Running(job.Count("n"), job.Sum("amount", "total"))).Sink("t", drop.Config{})
			j, err := bld.From("in").KeyBy("user").Window("minute", window.Tumbling(time.Minute, job.Count("n"))).Sink("w", drop.Config{}).Build()
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			for w := range 4 * btoi(lookups) { // 4 clients at 250/s each
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := lookupLoop(j, users[w*250:(w+1)*250], done)
					mu.Lock()
					lat[0], lat[1] = append(lat[0], l[0]...), append(lat[1], l[1]...)
					mu.Unlock()
				}()
			}
			err = j.Run(context.Background())
			close(done)
			wg.Wait()
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(rows*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		if all := append(slices.Clone(lat[0]), lat[1]...); len(all) > 0 {
			p := func(l []time.Duration, q int) float64 { slices.Sort(l); return float64(l[len(l)*q/100].Microseconds()) }
			b.ReportMetric(p(all, 50), "p50-µs/lookup")
			b.ReportMetric(p(all, 99), "p99-µs/lookup")
			b.ReportMetric(p(lat[0], 99), "p99-µs/aggregate")
			b.ReportMetric(p(lat[1], 99), "p99-µs/window")
			b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "lookups/s")
		}
	}
	b.Run("alone", func(b *testing.B) { run(b, false) })
	b.Run("1000-lookups-per-s", func(b *testing.B) { run(b, true) })
	// The same lookups beside a pipeline held to 400 k rows/s, which
	// leaves the CPUs room: the latency of a lookup itself, without
	// waiting for a CPU.
	cfg.RatePerSec = 200_000 // per subtask
	b.Run("1000-lookups-per-s-at-400k-rows-per-s", func(b *testing.B) { run(b, true) })
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lookupLoop looks a user up every 4 ms, alternating between the
// aggregate and the window, until done; it returns each lookup's latency.
func lookupLoop(j *arkflow.Job, users []string, done chan struct{}) (lat [2][]time.Duration) {
	tick := time.NewTicker(4 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-done:
			return lat
		case <-tick.C:
		}
		op := [2]string{"totals", "minute"}[i%2]
		start := time.Now()
		rec, err := j.Query(context.Background(), op, users[i%len(users)])
		if err != nil {
			continue // not running yet, or ended
		}
		lat[i%2] = append(lat[i%2], time.Since(start))
		rec.Release()
	}
}
