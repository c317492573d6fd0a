// Command bench runs Nexmark queries, and a keyed tumbling window over
// synthetic clicks, on arkflow and as hand-written Go loops over the same
// generated events, checks that both give the same output, and prints
// their throughput and its ratio. Built with the tag beam, it also runs
// Q0, Q1, Q2, Q5 and the window query on Apache Beam (Prism runner).
//
//	go run . -query q5 [-events 1000000] [-seed 1] [-runs 3]
//	go run . -query all
//	go run -tags beam . -query q1
//	go run -tags beam . -query window100k
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/arkflow-rs/arkflow-go/bench/queries"
	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

func main() {
	query := flag.String("query", "all", "q0, q1, q2, q5, q5sink (Q5 with its maximum in the sink), q3, q7, q8, window1k, window100k (keyed tumbling count and sum over 1 k or 100 k keys), or all")
	events := flag.Int("events", 1_000_000, "events to generate (46 in 50 are bids; the window queries' clicks)")
	seed := flag.Uint64("seed", 1, "generator seed")
	runs := flag.Int("runs", 3, "measured runs of each side, after one warm-up run")
	flag.Parse()
	var qs []queries.Query
	for _, q := range queries.All {
		if *query == "all" || *query == q.Name {
			qs = append(qs, q)
		}
	}
	if len(qs) == 0 {
		log.Fatalf("unknown query %q", *query)
	}
	if slices.ContainsFunc(qs, func(q queries.Query) bool { return q.Beam != nil }) {
		quietSlog()
	}
	if err := run(os.Stdout, qs, nexmark.Config{Seed: *seed, Events: *events}, max(*runs, 1)); err != nil {
		log.Fatal(err)
	}
}

// quietSlog keeps the Beam SDK's and Prism's informational logs (slog's
// default logger, each job's start and end) off the output: warnings and
// errors only, on stderr. The log package keeps writing to stderr.
func quietSlog() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	log.SetOutput(os.Stderr)
}

// sample is one measured run: its wall and CPU time, the bytes it
// allocated, and how much the heap it left (after a collection) exceeds
// the one it found: what it kept.
type sample struct {
	wall, cpu time.Duration
	alloc     uint64
	kept      int64
}

// run generates the events once, outside any timing, and measures each
// query on them.
func run(w io.Writer, qs []queries.Query, cfg nexmark.Config, runs int) error {
	ev := nexmark.Generate(cfg)
	fmt.Fprintf(w, "%d events (%d persons, %d auctions, %d bids; for the window queries %d clicks, %v apart), seed %d, %d measured runs a side\n",
		cfg.Events, len(ev.Persons), len(ev.Auctions), len(ev.Bids), cfg.Events, queries.ClickStep, cfg.Seed, runs)
	for _, q := range qs {
		if err := measure(w, q, ev, cfg.Events, runs); err != nil {
			return fmt.Errorf("%s: %w", q.Name, err)
		}
	}
	return nil
}

// side is one way a query runs: a name for the errors and what it runs.
type side struct {
	name string
	run  func() (queries.Digest, error)
}

// measure runs a query's sides in turn (the engine, the hand loop, and
// Beam where the query has it), a warm-up run of each first, checks every
// run's output against the hand loop's first, and prints the medians.
func measure(w io.Writer, q queries.Query, ev *nexmark.Events, events, runs int) error {
	if q.Prepare != nil {
		q.Prepare(ev)
	}
	want := q.Hand(ev)
	sides := []side{
		{"the engine", func() (queries.Digest, error) { return q.Engine(context.Background(), ev) }},
		{"the hand loop", func() (queries.Digest, error) { return q.Hand(ev), nil }},
	}
	if q.Beam != nil {
		sides = append(sides, side{"Beam", func() (queries.Digest, error) { return q.Beam(context.Background(), ev) }})
	}
	for _, sd := range sides {
		if _, err := sd.run(); err != nil {
			return err
		}
	}
	samples := make([][]sample, len(sides))
	for range runs {
		for i, sd := range sides {
			var got queries.Digest
			s, err := timed(func() (err error) { got, err = sd.run(); return err })
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("the output of %s, %+v, differs from the hand loop's first, %+v", sd.name, got, want)
			}
			samples[i] = append(samples[i], s)
		}
	}
	e, h := medians(samples[0]), medians(samples[1])
	fmt.Fprintf(w, "%s: %d rows out\n", strings.ToUpper(q.Name), want.Rows)
	printRate(w, "engine:", e, events)
	printRate(w, "hand:  ", h, events)
	fmt.Fprintf(w, "  engine ÷ hand loop: %.2f (per CPU second: %.2f)\n",
		h.wall.Seconds()/e.wall.Seconds(), h.cpu.Seconds()/e.cpu.Seconds())
	fmt.Fprintf(w, "  allocated per event: engine %d B, hand %d B; heap kept after a run: engine %+.1f MB, hand %+.1f MB\n",
		e.alloc/uint64(events), h.alloc/uint64(events), float64(e.kept)/(1<<20), float64(h.kept)/(1<<20))
	if q.Beam != nil {
		b := medians(samples[2])
		printRate(w, "beam:  ", b, events)
		fmt.Fprintf(w, "  engine ÷ Beam: %.2f (per CPU second: %.2f)\n",
			b.wall.Seconds()/e.wall.Seconds(), b.cpu.Seconds()/e.cpu.Seconds())
		fmt.Fprintf(w, "  allocated per event: beam %d B; heap kept after a run: beam %+.1f MB\n",
			b.alloc/uint64(events), float64(b.kept)/(1<<20))
	}
	return nil
}

// printRate prints a side's median events/s, wall clock and per CPU
// second, and its times.
func printRate(w io.Writer, label string, s sample, events int) {
	rate := func(d time.Duration) float64 { return float64(events) / d.Seconds() / 1e6 }
	fmt.Fprintf(w, "  %s %6.2f M events/s, %6.2f M events/s per CPU second (%d ms, %d ms CPU)\n",
		label, rate(s.wall), rate(s.cpu), s.wall.Milliseconds(), s.cpu.Milliseconds())
}

// timed runs f and returns its wall time, the process's CPU time (user +
// system) over it, what it allocated and what of the heap it kept. The
// collections that measure the heap are outside the times.
func timed(f func() error) (sample, error) {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	heap0, alloc0 := m.HeapAlloc, m.TotalAlloc
	c0 := cpuTime()
	t0 := time.Now()
	err := f()
	s := sample{wall: time.Since(t0), cpu: cpuTime() - c0}
	runtime.GC()
	runtime.ReadMemStats(&m)
	s.alloc, s.kept = m.TotalAlloc-alloc0, int64(m.HeapAlloc)-int64(heap0)
	return s, err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// medians are the median of each measure, each taken on its own.
func medians(s []sample) sample {
	walls := make([]time.Duration, len(s))
	cpus := make([]time.Duration, len(s))
	allocs := make([]uint64, len(s))
	kept := make([]int64, len(s))
	for i, x := range s {
		walls[i], cpus[i], allocs[i], kept[i] = x.wall, x.cpu, x.alloc, x.kept
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	slices.Sort(allocs)
	slices.Sort(kept)
	return sample{wall: walls[len(s)/2], cpu: cpus[len(s)/2], alloc: allocs[len(s)/2], kept: kept[len(s)/2]}
}
