package nexmark

import (
	"reflect"
	"slices"
	"testing"
)

// The generator's promises, on which the references above rely: the
// relations between entities, Nexmark's proportions, bounded disorder in
// every partition, and determinism.
func TestGenerate(t *testing.T) {
	cfg := Config{Seed: 42, Events: 5000, MaxDisorderMS: 1000}
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
	c := cfg.WithDefaults()
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
	if other := Generate(Config{Seed: 43, Events: 5000, MaxDisorderMS: 1000}); slices.Equal(ev.Bids, other.Bids) {
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

// Without disorder: the proportions, the ID rules and the event-time
// rate, in event-time order, as the bench module's references assume.
func TestGenerateShape(t *testing.T) {
	const n = 50_000
	ev := Generate(Config{Seed: 7, Events: n})
	if len(ev.Persons) != n/50 || len(ev.Auctions) != 3*n/50 || len(ev.Bids) != 46*n/50 {
		t.Fatalf("got %d persons, %d auctions, %d bids", len(ev.Persons), len(ev.Auctions), len(ev.Bids))
	}
	if ev.Persons[0].ID != FirstID || ev.Auctions[0].ID != FirstID {
		t.Fatalf("first IDs %d, %d", ev.Persons[0].ID, ev.Auctions[0].ID)
	}
	last := int64(0)
	for i, b := range ev.Bids {
		if b.DateTime < last {
			t.Fatalf("bid %d goes back in event time", i)
		}
		last = b.DateTime
		if b.Auction < FirstID || b.Auction >= FirstID+int64(len(ev.Auctions)) || b.Bidder < FirstID || b.Bidder >= FirstID+int64(len(ev.Persons)) || b.Price < 100 {
			t.Fatalf("bid %d: %+v", i, b)
		}
	}
	if span := last - ev.Persons[0].DateTime; span != (n-1)*10 {
		t.Fatalf("event time spans %d ms", span)
	}
	if !reflect.DeepEqual(ev, Generate(Config{Seed: 7, Events: n})) {
		t.Fatal("the same seed made other events")
	}
}
