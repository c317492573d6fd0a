package nexmark

import (
	"reflect"
	"testing"
)

// The proportions, the ID rules and the event-time rate are what the
// queries' references assume.
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
