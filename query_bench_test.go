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
		var lat []time.Duration
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
					lat = append(lat, l...)
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
		if len(lat) > 0 {
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs/lookup")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs/lookup")
			b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "lookups/s")
		}
	}
	b.Run("alone", func(b *testing.B) { run(b, false) })
	b.Run("1000-lookups-per-s", func(b *testing.B) { run(b, true) })
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lookupLoop looks a user up every 4 ms, alternating between the
// aggregate and the window, until done; it returns each lookup's latency.
func lookupLoop(j *arkflow.Job, users []string, done chan struct{}) []time.Duration {
	var lat []time.Duration
	tick := time.NewTicker(4 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-done:
			return lat
		case <-tick.C:
		}
		op := "totals"
		if i%2 == 1 {
			op = "minute"
		}
		start := time.Now()
		rec, err := j.Query(context.Background(), op, users[i%len(users)])
		if err != nil {
			continue // not running yet, or ended
		}
		lat = append(lat, time.Since(start))
		rec.Release()
	}
}
