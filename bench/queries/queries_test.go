package queries

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// testEvents is the small run every test checks: 1 k persons, 3 k
// auctions and about 46 k bids over 500 s of event time (250 windows of
// Q5, 50 of Q7 and Q8).
const testEvents = 50_000

var testRun = sync.OnceValue(func() *nexmark.Events {
	return nexmark.Generate(nexmark.Config{Seed: 42, Events: testEvents})
})

func testBids() []nexmark.Bid { return testRun().Bids }

// collect returns an emit function that appends every row, and the rows.
func collect[T any]() (func([]T), *[]T) {
	var mu sync.Mutex
	var all []T
	return func(rows []T) {
		mu.Lock()
		all = append(all, rows...)
		mu.Unlock()
	}, &all
}

// check runs the engine and the hand loop and compares both with want,
// row for row.
func check[T comparable](t *testing.T, ev *nexmark.Events, want []T,
	engine func(context.Context, *nexmark.Events, func([]T)) error, hand func(*nexmark.Events, func([]T)), sortRows func([]T)) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("the reference is empty: the test would prove nothing")
	}
	emit, got := collect[T]()
	if err := engine(context.Background(), ev, emit); err != nil {
		t.Fatal(err)
	}
	emitH, gotH := collect[T]()
	hand(ev, emitH)
	for name, rows := range map[string][]T{"engine": *got, "hand loop": *gotH} {
		if sortRows != nil {
			sortRows(rows)
		}
		if err := same(rows, want); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func same[T comparable](got, want []T) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d rows, the reference %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("row %d is %+v, the reference's %+v", i, got[i], want[i])
		}
	}
	return nil
}

func TestQ0(t *testing.T) {
	bids := testBids()
	check(t, testRun(), slices.Clone(bids), Q0, Q0Hand, nil)
}

// q1Reference is Q1 by its definition: every bid at 0.908 of its price,
// as a fraction, truncated (written out again, not ToEuro).
func q1Reference(bids []nexmark.Bid) []nexmark.Bid {
	var want []nexmark.Bid
	for _, b := range bids {
		b.Price = b.Price * 908 / 1000
		want = append(want, b)
	}
	return want
}

func TestQ1(t *testing.T) {
	check(t, testRun(), q1Reference(testBids()), Q1, Q1Hand, nil)
}

// q2Reference is Q2 by its definition: the auction and price of the bids
// on auctions 123 divides.
func q2Reference(bids []nexmark.Bid) []AuctionPrice {
	var want []AuctionPrice
	for _, b := range bids {
		if b.Auction%123 == 0 {
			want = append(want, AuctionPrice{b.Auction, b.Price})
		}
	}
	return want
}

func TestQ2(t *testing.T) {
	check(t, testRun(), q2Reference(testBids()), Q2, Q2Hand, nil)
}

// q5Reference is Q5 by its definition, with no streaming: every window
// start a multiple of 2 s, every bid tested against every window, then
// the maximum of each window's counts.
func q5Reference(bids []nexmark.Bid) []HotItem {
	first, last := bids[0].DateTime, bids[len(bids)-1].DateTime
	var want []HotItem
	for start := (first-10_000)/2_000*2_000 + 2_000; start <= last; start += 2_000 {
		counts := map[int64]int64{}
		for _, b := range bids {
			if b.DateTime >= start && b.DateTime < start+10_000 {
				counts[b.Auction]++
			}
		}
		maxN := int64(0)
		for _, n := range counts {
			maxN = max(maxN, n)
		}
		var hot []HotItem
		for a, n := range counts {
			if n == maxN {
				hot = append(hot, HotItem{WindowStart: start, Auction: a, Bids: n})
			}
		}
		SortHotItems(hot)
		want = append(want, hot...)
	}
	return want
}

// q5Checked is q5Reference of bids, after checking that it has rows and
// that some window has tied auctions, so that the ties are tested.
func q5Checked(t *testing.T, bids []nexmark.Bid) []HotItem {
	t.Helper()
	want := q5Reference(bids)
	if len(want) < 20 {
		t.Fatalf("only %d rows in the reference", len(want))
	}
	ties := 0
	for i := 1; i < len(want); i++ {
		if want[i].WindowStart == want[i-1].WindowStart {
			ties++
		}
	}
	if ties == 0 {
		t.Fatal("no window has tied auctions: the ties are untested")
	}
	t.Logf("%d rows, %d of them ties", len(want), ties)
	return want
}

func TestQ5(t *testing.T) {
	want := q5Checked(t, testBids())
	check(t, testRun(), want, Q5, Q5Hand, SortHotItems)
	check(t, testRun(), want, Q5Sink, Q5Hand, SortHotItems)
}

// The digests of the engine and the hand loop agree on every query, as
// the command and the benchmarks check.
func TestDigestsAgree(t *testing.T) {
	for _, q := range All {
		e, err := q.Engine(context.Background(), testRun())
		if err != nil {
			t.Fatal(err)
		}
		if h := q.Hand(testRun()); e != h || e.Rows == 0 {
			t.Errorf("%s: engine %+v, hand loop %+v", q.Name, e, h)
		}
	}
}
