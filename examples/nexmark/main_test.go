package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Each query runs on generated events and its output must equal, as a
// multiset, the query's result worked out here from the same events with
// loops and maps, never by the engine. The events are a minute of event
// time (6 windows of 10 s), delivered out of order by up to the
// generator's MaxDisorderMS, which the tests check is within the
// sources' out_of_orderness_ms: no row is late, and the runs check that
// none was dropped as such.

const windowMS = 10_000 // the queries' tumbling windows

// testEvents are 6000 events: 120 persons, 360 auctions, 5520 bids.
func testEvents(t *testing.T, cfg Config) *Events {
	t.Helper()
	cfg.Events = 6000
	return Generate(cfg)
}

// runTest runs a query on ev with the given parallelism (and as many
// source partitions), checks that nothing was late, and returns the run.
func runTest(t *testing.T, query string, ev *Events, par, batch int) *Run {
	t.Helper()
	spec, err := LoadQuery(query, par)
	if err != nil {
		t.Fatal(err)
	}
	// The generator's disorder must be within every source's bound, or
	// rows would be late and the comparison below would fail for it.
	for _, s := range spec.Sources {
		if ooo := s.Time.Watermark.OutOfOrdernessMS; ooo < int64(defaultMaxDisorderMS) {
			t.Fatalf("source %s allows %d ms of disorder, less than the generator's", s.OperatorID, ooo)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := RunQuery(ctx, spec, ev, Layout{Partitions: par, BatchSize: batch}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if n := run.Late(); n != 0 {
		t.Fatalf("%d rows dropped as late", n)
	}
	return run
}

// sameRows fails unless got and want hold the same rows the same number
// of times, showing a few of the differences.
func sameRows[T comparable](t *testing.T, got, want []T) {
	t.Helper()
	count := map[T]int{}
	for _, r := range got {
		count[r]++
	}
	for _, r := range want {
		count[r]--
	}
	var diff []string
	for r, n := range count {
		switch {
		case n > 0:
			diff = append(diff, fmt.Sprintf("%d extra %+v", n, r))
		case n < 0:
			diff = append(diff, fmt.Sprintf("%d missing %+v", -n, r))
		}
	}
	if len(diff) > 0 {
		slices.Sort(diff)
		t.Fatalf("%d rows, want %d; %d differ, e.g.:\n%v", len(got), len(want), len(diff), diff[:min(10, len(diff))])
	}
}

func windowStart(ms int64) int64 { return ms - ms%windowMS } // event times are positive

func TestQ8(t *testing.T) {
	ev := testEvents(t, Config{Seed: 8})
	// Nexmark Q8 by its definition: a person and an auction of theirs
	// whose event times fall in the same window.
	var want []Q8Row
	for _, p := range ev.Persons {
		for _, a := range ev.Auctions {
			if a.Seller == p.ID && windowStart(a.DateTime) == windowStart(p.DateTime) {
				want = append(want, Q8Row{p.ID, p.Name, windowStart(p.DateTime), a.ID})
			}
		}
	}
	// Not every auction's seller is new in its window, nor every person
	// a seller in theirs: the join must leave out both.
	if len(want) == 0 || len(want) == len(ev.Auctions) {
		t.Fatalf("the reference has %d rows of %d auctions: the data does not test the join", len(want), len(ev.Auctions))
	}
	for _, c := range []struct{ par, batch int }{{1, 64}, {2, 7}} {
		t.Run(fmt.Sprintf("parallelism=%d", c.par), func(t *testing.T) {
			got, err := Q8Rows(runTest(t, "q8", ev, c.par, c.batch).Output)
			if err != nil {
				t.Fatal(err)
			}
			sameRows(t, got, want)
		})
	}
}

func TestQ3(t *testing.T) {
	ev := testEvents(t, Config{Seed: 3})
	// Nexmark Q3 as the regular join it is: every auction of category 10
	// with every person who is its seller and lives in OR, ID or CA.
	var want []Q3Row
	for _, a := range ev.Auctions {
		if a.Category != 10 {
			continue
		}
		for _, p := range ev.Persons {
			if p.ID == a.Seller && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
				want = append(want, Q3Row{p.Name, p.City, p.State, a.ID})
			}
		}
	}
	// The temporal join gives the same rows only if every seller's row is
	// in before their auction's time (and persons never change).
	born := map[int64]int64{}
	for _, p := range ev.Persons {
		born[p.ID] = p.DateTime
	}
	for _, a := range ev.Auctions {
		if ts, ok := born[a.Seller]; !ok || ts >= a.DateTime {
			t.Fatalf("auction %d at %d: its seller %d is not a person before it", a.ID, a.DateTime, a.Seller)
		}
	}
	categories := 0
	for _, a := range ev.Auctions {
		if a.Category == 10 {
			categories++
		}
	}
	if len(want) == 0 || len(want) == categories {
		t.Fatalf("the reference has %d rows of %d auctions in category 10: the data does not test the state filter", len(want), categories)
	}
	for _, c := range []struct{ par, batch int }{{1, 64}, {2, 5}} {
		t.Run(fmt.Sprintf("parallelism=%d", c.par), func(t *testing.T) {
			got, err := Q3Rows(runTest(t, "q3", ev, c.par, c.batch).Output)
			if err != nil {
				t.Fatal(err)
			}
			sameRows(t, got, want)
		})
	}
}

func TestQ7(t *testing.T) {
	for _, c := range []struct {
		name   string
		levels int
	}{
		{"nexmark-prices", 0},
		// Prices from 50 values: about 18 bids a window share the
		// highest, and the join must pair the maximum with each of them.
		{"tied-prices", 50},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := testEvents(t, Config{Seed: 7, PriceLevels: c.levels})
			// Nexmark Q7: the highest price of each window, then every
			// bid of the window at that price.
			highest := map[int64]int64{}
			for _, b := range ev.Bids {
				w := windowStart(b.DateTime)
				if p, ok := highest[w]; !ok || b.Price > p {
					highest[w] = b.Price
				}
			}
			var want []Q7Row
			for _, b := range ev.Bids {
				if b.Price == highest[windowStart(b.DateTime)] {
					want = append(want, Q7Row{b.Auction, b.Price, b.Bidder, b.DateTime})
				}
			}
			if len(highest) < 6 {
				t.Fatalf("the bids span %d windows, want at least 6", len(highest))
			}
			if c.levels > 0 && len(want) < 5*len(highest) {
				t.Fatalf("%d highest bids in %d windows: too few ties to test them", len(want), len(highest))
			}
			for _, p := range []struct{ par, batch int }{{1, 64}, {2, 9}} {
				t.Run(fmt.Sprintf("parallelism=%d", p.par), func(t *testing.T) {
					got, err := Q7Rows(runTest(t, "q7", ev, p.par, p.batch).Output)
					if err != nil {
						t.Fatal(err)
					}
					sameRows(t, got, want)
				})
			}
		})
	}
}

// The batches carry the events as generated: every column of every row,
// in order, over the partitions.
func TestBatches(t *testing.T) {
	ev := Generate(Config{Seed: 5, Events: 1000})
	parts := auctionBatches(ev, Layout{Partitions: 3, BatchSize: 4})
	var got []Auction
	next := make([]int, 3)
	for range ev.Auctions {
		p := len(got) % 3
		rec := parts[p][next[p]/4]
		i := next[p] % 4
		next[p]++
		var err error
		c := cols{rec: rec, err: &err}
		got = append(got, Auction{ID: c.i64("id", i), ItemName: c.str("item_name", i), Description: c.str("description", i), InitialBid: c.i64("initial_bid", i),
			Reserve: c.i64("reserve", i), DateTime: c.i64("date_time", i), Expires: c.i64("expires", i), Seller: c.i64("seller", i), Category: c.i64("category", i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, ev.Auctions) {
		t.Fatal("the auctions' batches differ from the auctions")
	}
	for p, bs := range parts {
		for _, rec := range bs {
			if rec.NumRows() > 4 || rec.NumRows() == 0 {
				t.Fatalf("partition %d: a batch of %d rows", p, rec.NumRows())
			}
		}
	}
}

// The program itself: it runs the three queries and says so.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out, Config{Seed: 1, Events: 3000}, 2, []string{"q3", "q7", "q8"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"generated 60 persons, 180 auctions and 2760 bids", "Q3: ", "Q7: 3 rows from 2760 events", "Q8: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "(0 late rows dropped)"); n != 3 {
		t.Errorf("%d queries without late rows, want 3:\n%s", n, out.String())
	}
	if err := run(&out, Config{Seed: 1, Events: 100}, 1, []string{"q9"}); err == nil {
		t.Error("an unknown query ran")
	}
}
