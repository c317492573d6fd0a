package queries

import (
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// tumble is the start of the 10 s window holding ts, written out again
// for the references (not windowOf).
func tumble(ts int64) int64 { return ts / 10_000 * 10_000 }

func TestQ3(t *testing.T) {
	ev := testRun()
	// Q3 by its definition, as the regular join it is: every auction of
	// category 10 with every person who is its seller and lives in OR, ID
	// or CA.
	var want []Q3Row
	category10 := 0
	for _, a := range ev.Auctions {
		if a.Category != 10 {
			continue
		}
		category10++
		for _, p := range ev.Persons {
			if p.ID == a.Seller && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
				want = append(want, Q3Row{Name: p.Name, City: p.City, State: p.State, Auction: a.ID})
			}
		}
	}
	// The temporal join gives these rows only if every seller is a person
	// before their auction (and persons never change).
	born := map[int64]int64{}
	for _, p := range ev.Persons {
		born[p.ID] = p.DateTime
	}
	for _, a := range ev.Auctions {
		if ts, ok := born[a.Seller]; !ok || ts >= a.DateTime {
			t.Fatalf("auction %d at %d: its seller %d is not a person before it", a.ID, a.DateTime, a.Seller)
		}
	}
	if len(want) == 0 || len(want) == category10 {
		t.Fatalf("%d rows of %d auctions in category 10: the data does not test the state filter", len(want), category10)
	}
	t.Logf("%d rows of %d auctions in category 10, %d auctions", len(want), category10, len(ev.Auctions))
	SortQ3Rows(want)
	check(t, ev, want, Q3, Q3Hand, SortQ3Rows)
}

// q7Reference is Q7 by its definition: for every window from the first
// bid's to the last's, its highest price over all the bids, then every
// bid of the window at that price.
func q7Reference(bids []nexmark.Bid) (want []Q7Row, windows int) {
	for start := tumble(bids[0].DateTime); start <= bids[len(bids)-1].DateTime; start += 10_000 {
		in := func(b nexmark.Bid) bool { return b.DateTime >= start && b.DateTime < start+10_000 }
		top, seen := int64(0), false
		for _, b := range bids {
			if in(b) && (!seen || b.Price > top) {
				top, seen = b.Price, true
			}
		}
		if !seen {
			continue
		}
		windows++
		for _, b := range bids {
			if in(b) && b.Price == top {
				want = append(want, Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime})
			}
		}
	}
	return want, windows
}

func TestQ7(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   *nexmark.Events
	}{
		{"nexmark-prices", testRun()},
		// Prices from 50 values: about 18 bids a window share the highest,
		// and the join must pair the maximum with each of them.
		{"tied-prices", nexmark.Generate(nexmark.Config{Seed: 7, Events: testEvents, PriceLevels: 50})},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, windows := q7Reference(c.ev.Bids)
			if windows < 20 {
				t.Fatalf("the bids span %d windows, want at least 20", windows)
			}
			if c.name == "tied-prices" && len(want) < 5*windows {
				t.Fatalf("%d highest bids in %d windows: too few ties to test them", len(want), windows)
			}
			t.Logf("%d rows in %d windows", len(want), windows)
			SortQ7Rows(want)
			check(t, c.ev, want, Q7, Q7Hand, SortQ7Rows)
		})
	}
}

func TestQ8(t *testing.T) {
	ev := testRun()
	// Q8 by its definition: a person and an auction of theirs whose event
	// times fall in the same window.
	var want []Q8Row
	for _, p := range ev.Persons {
		for _, a := range ev.Auctions {
			if a.Seller == p.ID && tumble(a.DateTime) == tumble(p.DateTime) {
				want = append(want, Q8Row{ID: p.ID, Name: p.Name, WindowStart: tumble(p.DateTime), Auction: a.ID})
			}
		}
	}
	// Not every auction's seller is new in its window: the join must
	// leave some out.
	if len(want) == 0 || len(want) == len(ev.Auctions) {
		t.Fatalf("%d rows of %d auctions: the data does not test the join", len(want), len(ev.Auctions))
	}
	t.Logf("%d rows of %d auctions", len(want), len(ev.Auctions))
	SortQ8Rows(want)
	check(t, ev, want, Q8, Q8Hand, SortQ8Rows)
}
