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
		if ooo := s.Time.Watermark.OutOfOrdernessMS; ooo < (Config{}).withDefaults().MaxDisorderMS {
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

// The generator's promises, on which the references above rely: the
// relations between entities, Nexmark's proportions, bounded disorder in
// every partition, and determinism.
func TestGenerate(t *testing.T) {
	cfg := Config{Seed: 42, Events: 5000}
	ev := Generate(cfg)
	if len(ev.Persons) != 100 || len(ev.Auctions) != 300 || len(ev.Bids) != 4600 {
		t.Fatalf("%d persons, %d auctions, %d bids; want 100, 300, 4600 (1:3:46)", len(ev.Persons), len(ev.Auctions), len(ev.Bids))
	}
	persons := map[int64]Person{}
	for _, p := range ev.Persons {
		persons[p.ID] = p
		if !slices.Contains(usStates, p.State) || !slices.Contains(usCities, p.City) || p.Name == "" {
			t.Fatalf("person %+v", p)
		}
	}
	auctions := map[int64]Auction{}
	for _, a := range ev.Auctions {
		auctions[a.ID] = a
		s, ok := persons[a.Seller]
		switch {
		case !ok || s.DateTime >= a.DateTime:
			t.Fatalf("auction %+v: its seller is not a person before it", a)
		case a.Category < 10 || a.Category > 14:
			t.Fatalf("auction %+v: category outside 10–14", a)
		case a.Reserve <= a.InitialBid || a.InitialBid < 100 || a.Expires <= a.DateTime:
			t.Fatalf("auction %+v: prices or expiry out of order", a)
		}
	}
	for _, b := range ev.Bids {
		a, ok := auctions[b.Auction]
		if p, ok2 := persons[b.Bidder]; !ok || !ok2 || a.DateTime >= b.DateTime || p.DateTime >= b.DateTime {
			t.Fatalf("bid %+v: its auction or bidder is not there before it", b)
		}
	}
	if n := len(persons) + len(auctions); n != 400 {
		t.Fatalf("%d distinct person and auction IDs, want 400", n)
	}
	// Every event time is distinct and on the grid.
	times := map[int64]bool{}
	for _, ts := range eventTimes(ev) {
		times[ts] = true
	}
	c := cfg.withDefaults()
	for n := range int64(cfg.Events) {
		if !times[c.StartMS+n*c.InterEventMS] {
			t.Fatalf("no event at %d", c.StartMS+n*c.InterEventMS)
		}
	}
	// Disorder: in every partition of every entity, no row is more than
	// MaxDisorderMS behind a row before it, and some rows are behind
	// (bids and auctions: two persons of a partition are a second apart).
	behind := 0
	for _, parts := range [][][]int64{
		split(ev.Persons, 2, func(p Person) int64 { return p.DateTime }),
		split(ev.Auctions, 2, func(a Auction) int64 { return a.DateTime }),
		split(ev.Bids, 2, func(b Bid) int64 { return b.DateTime }),
	} {
		for _, ts := range parts {
			newest := ts[0]
			for _, x := range ts {
				if newest-x > c.MaxDisorderMS {
					t.Fatalf("a row %d ms behind the newest before it, more than %d", newest-x, c.MaxDisorderMS)
				}
				if x < newest {
					behind++
				}
				newest = max(newest, x)
			}
		}
	}
	if behind < len(ev.Bids)/10 {
		t.Fatalf("%d rows behind one before them: the data hardly tests disorder", behind)
	}
	// One seed, one stream; another seed, another.
	again := Generate(cfg)
	if !slices.Equal(ev.Persons, again.Persons) || !slices.Equal(ev.Auctions, again.Auctions) || !slices.Equal(ev.Bids, again.Bids) {
		t.Fatal("the same seed made different events")
	}
	if other := Generate(Config{Seed: 43, Events: 5000}); slices.Equal(ev.Bids, other.Bids) {
		t.Fatal("another seed made the same bids")
	}
}

func eventTimes(ev *Events) []int64 {
	var ts []int64
	for _, p := range ev.Persons {
		ts = append(ts, p.DateTime)
	}
	for _, a := range ev.Auctions {
		ts = append(ts, a.DateTime)
	}
	for _, b := range ev.Bids {
		ts = append(ts, b.DateTime)
	}
	return ts
}

// split deals rows to partitions as Layout does (row i to partition i mod
// n) and returns each partition's event times in order.
func split[T any](rows []T, n int, ts func(T) int64) [][]int64 {
	out := make([][]int64, n)
	for i, r := range rows {
		out[i%n] = append(out[i%n], ts(r))
	}
	return out
}

// The batches carry the events as generated: every column of every row,
// in order, over the partitions.
func TestBatches(t *testing.T) {
	ev := Generate(Config{Seed: 5, Events: 1000})
	parts := ev.AuctionBatches(Layout{Partitions: 3, BatchSize: 4})
	var got []Auction
	next := make([]int, 3)
	for range ev.Auctions {
		p := len(got) % 3
		rec := parts[p][next[p]/4]
		i := next[p] % 4
		next[p]++
		var err error
		c := cols{rec: rec, err: &err}
		got = append(got, Auction{c.i64("id", i), c.str("item_name", i), c.str("description", i), c.i64("initial_bid", i),
			c.i64("reserve", i), c.i64("date_time", i), c.i64("expires", i), c.i64("seller", i), c.i64("category", i)})
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
