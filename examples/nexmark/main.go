// Nexmark Q3, Q7 and Q8 on arkflow: the three Nexmark queries with joins,
// run over generated persons, auctions and bids.
//
//   - Q3 (local item suggestion): auctions of category 10 joined with
//     their sellers in OR, ID or CA: two filters and a temporal join.
//   - Q7 (highest bid): the bids at the highest price of their 10 s
//     window: a window aggregate and a window join of the bids with it.
//   - Q8 (monitor new users): persons who created an auction in the 10 s
//     window they joined in: a window join.
//
// The queries are job specs in queries/*.yaml; the events come from a
// seeded generator in the shape of Nexmark's (gen.go) and reach the jobs
// as Arrow batches in memory.
//
//	go run ./examples/nexmark [-events 200000] [-parallelism 2] [-seed 1]
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	events := flag.Int("events", 200_000, "events to generate (2 % persons, 6 % auctions, 92 % bids)")
	seed := flag.Uint64("seed", 1, "generator seed")
	par := flag.Int("parallelism", 2, "subtasks per operator (and partitions per source)")
	queries := flag.String("queries", "q3,q7,q8", "queries to run, comma-separated")
	flag.Parse()
	if err := run(os.Stdout, Config{Seed: *seed, Events: *events}, *par, strings.Split(*queries, ",")); err != nil {
		log.Fatal(err)
	}
}

// run generates the events and runs the queries on them, printing a
// summary of each to w.
func run(w io.Writer, cfg Config, par int, queries []string) error {
	ev := Generate(cfg)
	cfg = cfg.WithDefaults()
	fmt.Fprintf(w, "generated %d persons, %d auctions and %d bids over %v of event time (seed %d)\n\n",
		len(ev.Persons), len(ev.Auctions), len(ev.Bids),
		time.Duration(int64(cfg.Events)*cfg.InterEventMS)*time.Millisecond, cfg.Seed)
	for _, q := range queries {
		if err := runOne(w, q, ev, par); err != nil {
			return err
		}
	}
	return nil
}

// runOne runs one query and prints how long it took, what it produced and
// a sample of its rows.
func runOne(w io.Writer, name string, ev *Events, par int) error {
	spec, err := LoadQuery(name, par)
	if err != nil {
		return err
	}
	// The specs name no state backend, so the joins and the window keep
	// their state in memory: no data directory is needed.
	run, err := RunQuery(context.Background(), spec, ev, Layout{Partitions: par, BatchSize: 1024}, "")
	if err != nil {
		return err
	}
	var lines []string
	var note string
	switch name {
	case "q3":
		rows, err := Q3Rows(run.Output)
		if err != nil {
			return err
		}
		slices.SortFunc(rows, func(a, b Q3Row) int { return cmp.Compare(a.Auction, b.Auction) })
		for _, r := range rows {
			lines = append(lines, fmt.Sprintf("auction %d by %s, %s %s", r.Auction, r.Name, r.City, r.State))
		}
	case "q7":
		rows, err := Q7Rows(run.Output)
		if err != nil {
			return err
		}
		slices.SortFunc(rows, func(a, b Q7Row) int { return cmp.Compare(a.DateTime, b.DateTime) })
		for _, r := range rows {
			lines = append(lines, fmt.Sprintf("%s  bid %.2f on auction %d by %d", stamp(r.DateTime), float64(r.Price)/100, r.Auction, r.Bidder))
		}
	case "q8":
		rows, err := Q8Rows(run.Output)
		if err != nil {
			return err
		}
		slices.SortFunc(rows, func(a, b Q8Row) int {
			return cmp.Or(cmp.Compare(a.WindowStart, b.WindowStart), cmp.Compare(a.Person, b.Person), cmp.Compare(a.Auction, b.Auction))
		})
		sellers := map[[2]int64]bool{}
		for _, r := range rows {
			lines = append(lines, fmt.Sprintf("window %s  person %d (%s) auction %d", stamp(r.WindowStart), r.Person, r.Name, r.Auction))
			sellers[[2]int64{r.Person, r.WindowStart}] = true
		}
		// Nexmark's Q8 has one row per person and window.
		note = fmt.Sprintf("%d distinct persons and windows (Nexmark's rows)", len(sellers))
	}
	in := run.Metrics.Operator("persons").RowsOut + run.Metrics.Operator("auctions").RowsOut + run.Metrics.Operator("bids").RowsOut
	fmt.Fprintf(w, "%s: %d rows from %d events in %v (%d late rows dropped)\n", strings.ToUpper(name), len(lines), in, run.Took.Round(time.Millisecond), run.Late())
	for _, l := range lines[:min(5, len(lines))] {
		fmt.Fprintln(w, "  "+l)
	}
	if len(lines) > 5 {
		fmt.Fprintf(w, "  … %d more\n", len(lines)-5)
	}
	if note != "" {
		fmt.Fprintln(w, "  "+note)
	}
	fmt.Fprintln(w)
	return nil
}

func stamp(ms int64) string { return time.UnixMilli(ms).UTC().Format("15:04:05.000") }
