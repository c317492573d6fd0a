package queries

import (
	"cmp"
	"context"
	"slices"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// Q3Category is the auction category Q3 selects (Nexmark's 10).
const Q3Category = 10

// Q3State reports whether a seller's state is one Q3 selects: Oregon,
// Idaho or California.
func Q3State(state string) bool { return state == "OR" || state == "ID" || state == "CA" }

// Q3Row is Q3's output row: a seller and one of their auctions.
type Q3Row struct {
	Name    string `arkflow:"name"`
	City    string `arkflow:"city"`
	State   string `arkflow:"state"`
	Auction int64  `arkflow:"id"` // the auction's: the persons' id is the join's key
}

// SortQ3Rows sorts rows by auction, then seller.
func SortQ3Rows(rows []Q3Row) {
	slices.SortFunc(rows, func(a, b Q3Row) int {
		return cmp.Or(cmp.Compare(a.Auction, b.Auction), cmp.Compare(a.Name, b.Name),
			cmp.Compare(a.City, b.City), cmp.Compare(a.State, b.State))
	})
}

// Q3 is Nexmark's local item suggestion: the auctions of category
// Q3Category with their seller's name, city and state, for sellers in a
// state Q3State selects.
//
//	persons  → FilterRows "local-persons" ─┐ (table, by id)
//	auctions → FilterRows "category-10"   ─┴→ temporal join on seller = id, inner → sink
//
// Each auction joins its seller's row as it was at the auction's event
// time. Nexmark's regular join would also join a seller who arrived after
// their auction; the generator creates every seller before their
// auctions, so the two agree here.
func Q3(ctx context.Context, ev *nexmark.Events, emit func([]Q3Row)) error {
	persons := push.New(push.Config[nexmark.Person]{})
	auctions := push.New(push.Config[nexmark.Auction]{})
	b := arkflow.NewJob("nexmark-q3").Source("persons", persons, eventTime...)
	b = arkflow.FilterRows(b, "local-persons", func(_ context.Context, p nexmark.Person) (bool, error) {
		return Q3State(p.State), nil
	})
	b = arkflow.FilterRows(b.Source("auctions", auctions, eventTime...), "category-10",
		func(_ context.Context, a nexmark.Auction) (bool, error) { return a.Category == Q3Category, nil })
	b = b.Join("suggestions", job.Join{Type: job.JoinTemporal, Left: "category-10", LeftKey: "seller",
		Right: "local-persons", RightKey: "id"})
	return runPushed(ctx, b.Sink("out", sinkTo(emit)), pusher(persons, ev.Persons), pusher(auctions, ev.Auctions))
}

// Q3Hand is Q3 as a hand-written loop: one producer per stream, and a
// consumer that keeps the selected persons by ID and holds each selected
// auction until the persons' stream has reached its time, then looks up
// its seller (an inner join: an auction without a selected seller is
// dropped).
func Q3Hand(ev *nexmark.Events, emit func([]Q3Row)) {
	sellers := map[int64]nexmark.Person{}
	var waiting []nexmark.Auction
	merge2(feed(ev.Persons), feed(ev.Auctions), personTime, auctionTime,
		func(ps []nexmark.Person) {
			for _, p := range ps {
				if Q3State(p.State) {
					sellers[p.ID] = p
				}
			}
		},
		func(as []nexmark.Auction) {
			for _, a := range as {
				if a.Category == Q3Category {
					waiting = append(waiting, a)
				}
			}
		},
		func(watermark int64) {
			var out []Q3Row
			n := 0
			for ; n < len(waiting) && waiting[n].DateTime <= watermark; n++ {
				if p, ok := sellers[waiting[n].Seller]; ok {
					out = append(out, Q3Row{Name: p.Name, City: p.City, State: p.State, Auction: waiting[n].ID})
				}
			}
			waiting = waiting[n:]
			if len(out) > 0 {
				emit(out)
			}
		})
}

func personTime(p nexmark.Person) int64   { return p.DateTime }
func auctionTime(a nexmark.Auction) int64 { return a.DateTime }
