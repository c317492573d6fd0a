package queries

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// Q8Row is Q8's output row: a new person and an auction they created in
// the tumbling window they registered in.
type Q8Row struct {
	ID          int64  `arkflow:"id"`
	Name        string `arkflow:"name"`
	WindowStart int64  `arkflow:"window_start"` // Unix ms
	Auction     int64  `arkflow:"right_id"`     // the auction's id, prefixed in the join's output
}

// SortQ8Rows sorts rows by window, person, then auction.
func SortQ8Rows(rows []Q8Row) {
	slices.SortFunc(rows, func(a, b Q8Row) int {
		return cmp.Or(cmp.Compare(a.WindowStart, b.WindowStart), cmp.Compare(a.ID, b.ID),
			cmp.Compare(a.Auction, b.Auction), cmp.Compare(a.Name, b.Name))
	})
}

// Q8 is Nexmark's monitor new users: the persons who created an auction
// in the tumbling window of TumbleMS they registered in, a window join of
// the persons (by id) and the auctions (by seller).
//
//	persons  ─┐
//	auctions ─┴→ window join on id = seller, tumbling → sink
//
// Nexmark groups each side by window first, so it has one row per person
// and window; this job has one per auction of theirs in it (Nexmark's
// rows are its distinct (id, name, window_start)).
func Q8(ctx context.Context, ev *nexmark.Events, emit func([]Q8Row)) error {
	persons := push.New(push.Config[nexmark.Person]{})
	auctions := push.New(push.Config[nexmark.Auction]{})
	b := arkflow.NewJob("nexmark-q8").
		Source("persons", persons, eventTime...).
		Source("auctions", auctions, eventTime...).
		Join("sellers", job.Join{Type: job.JoinWindow, Left: "persons", LeftKey: "id",
			Right: "auctions", RightKey: "seller", Size: TumbleMS * time.Millisecond})
	return runPushed(ctx, b.Sink("out", sinkTo(emit)), pusher(persons, ev.Persons), pusher(auctions, ev.Auctions))
}

// newUsers is an open window of Q8's hand loop: the names of the persons
// who registered in it, by ID, and its auctions.
type newUsers struct {
	names    map[int64]string
	auctions []nexmark.Auction
}

// Q8Hand is Q8 as a hand-written loop: one producer per stream, and a
// consumer that keeps per open window its new persons and its auctions,
// and pairs them when both streams have passed the window's end.
func Q8Hand(ev *nexmark.Events, emit func([]Q8Row)) {
	open := map[int64]*newUsers{}
	win := func(ts int64) *newUsers {
		w := open[windowOf(ts)]
		if w == nil {
			w = &newUsers{names: map[int64]string{}}
			open[windowOf(ts)] = w
		}
		return w
	}
	merge2(feed(ev.Persons), feed(ev.Auctions), personTime, auctionTime,
		func(ps []nexmark.Person) {
			for _, p := range ps {
				win(p.DateTime).names[p.ID] = p.Name
			}
		},
		func(as []nexmark.Auction) {
			for _, a := range as {
				w := win(a.DateTime)
				w.auctions = append(w.auctions, a)
			}
		},
		func(watermark int64) {
			for start, w := range open {
				if start+TumbleMS > watermark {
					continue
				}
				var out []Q8Row
				for _, a := range w.auctions {
					if name, ok := w.names[a.Seller]; ok {
						out = append(out, Q8Row{ID: a.Seller, Name: name, WindowStart: start, Auction: a.ID})
					}
				}
				if len(out) > 0 {
					emit(out)
				}
				delete(open, start)
			}
		})
}
