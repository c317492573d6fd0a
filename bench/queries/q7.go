package queries

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// TumbleMS is Q7's and Q8's tumbling window: 10 s of event time.
const TumbleMS = 10_000

// windowOf is the start of the tumbling window of TumbleMS holding ts.
func windowOf(ts int64) int64 { return ts - ts%TumbleMS }

// Q7Row is Q7's output row: a bid at the highest price of its window.
type Q7Row struct {
	Auction  int64 `arkflow:"auction"`
	Price    int64 `arkflow:"price"`
	Bidder   int64 `arkflow:"bidder"`
	DateTime int64 `arkflow:"date_time"` // the bid's, Unix ms
}

// SortQ7Rows sorts rows by time, auction, bidder and price.
func SortQ7Rows(rows []Q7Row) {
	slices.SortFunc(rows, func(a, b Q7Row) int {
		return cmp.Or(cmp.Compare(a.DateTime, b.DateTime), cmp.Compare(a.Auction, b.Auction),
			cmp.Compare(a.Bidder, b.Bidder), cmp.Compare(a.Price, b.Price))
	})
}

// pricedBid is a bid reduced to what Q7's maximum reads, with one key for
// all of them: a window aggregates per key, and the maximum is over all
// the bids of a window.
type pricedBid struct {
	All      int64 `arkflow:"all"`
	Price    int64 `arkflow:"price"`
	DateTime int64 `arkflow:"date_time"`
}

// windowPrice is a row of Q7's maximum window.
type windowPrice struct {
	Start    time.Time `arkflow:"window_start"`
	MaxPrice int64     `arkflow:"max_price"`
}

// stampedPrice is a window's highest price stamped with the window's
// start as its event time, so that the join places it in that window.
type stampedPrice struct {
	MaxPrice int64 `arkflow:"max_price"`
	DateTime int64 `arkflow:"date_time"`
}

// highBid is a row of Q7's join: the key (price) is named as the left's,
// and the bid's date_time, which the maximum has too, comes out prefixed.
type highBid struct {
	Auction  int64 `arkflow:"auction"`
	Price    int64 `arkflow:"price"`
	Bidder   int64 `arkflow:"bidder"`
	DateTime int64 `arkflow:"left_date_time"`
}

// Q7 is Nexmark's highest bid: per tumbling window of TumbleMS, the bids
// at the window's highest price (every one of them on a tie).
//
//	bids ─┬──────────────────────────────────────────────────────────────────────→ window join on price = max_price → sink
//	      └→ MapRows "one-key" → KeyBy(all) → tumbling window, max → "stamped" ─┘
//
// A window emits its rows before it passes on the watermark that fired
// it, so the join gets a window's maximum while that window is open.
func Q7(ctx context.Context, ev *nexmark.Events, emit func([]Q7Row)) error {
	return runJob(ctx, "nexmark-q7", ev.Bids, eventTime,
		func(b *arkflow.Builder) *arkflow.Builder {
			b = arkflow.MapRows(b, "one-key", func(_ context.Context, r nexmark.Bid) (pricedBid, error) {
				return pricedBid{Price: r.Price, DateTime: r.DateTime}, nil
			})
			b = b.KeyBy("all").Window("maxima", window.Tumbling(TumbleMS*time.Millisecond, job.Max("price", "max_price")))
			b = arkflow.MapRows(b, "stamped", func(_ context.Context, w windowPrice) (stampedPrice, error) {
				return stampedPrice{MaxPrice: w.MaxPrice, DateTime: w.Start.UnixMilli()}, nil
			})
			return b.Join("highest", job.Join{Type: job.JoinWindow, Left: "bids", LeftKey: "price",
				Right: "stamped", RightKey: "max_price", Size: TumbleMS * time.Millisecond})
		},
		func(rows []highBid) {
			out := make([]Q7Row, len(rows))
			for i, r := range rows {
				out[i] = Q7Row(r)
			}
			emit(out)
		})
}

// highest is an open window of Q7's hand loop: its highest price so far
// and the bids at it.
type highest struct {
	price int64
	bids  []Q7Row
}

// Q7Hand is Q7 as a hand-written loop: per open window the highest price
// and its bids, a window emitted when event time passes its end (the bids
// come in event-time order, so no bid is late).
func Q7Hand(ev *nexmark.Events, emit func([]Q7Row)) {
	open := map[int64]*highest{}
	closeUpTo := func(watermark int64) {
		for start, h := range open {
			if start+TumbleMS <= watermark {
				emit(h.bids)
				delete(open, start)
			}
		}
	}
	for batch := range feed(ev.Bids) {
		for _, b := range batch {
			h := open[windowOf(b.DateTime)]
			switch {
			case h == nil:
				open[windowOf(b.DateTime)] = &highest{price: b.Price, bids: []Q7Row{q7Row(b)}}
			case b.Price > h.price:
				h.price, h.bids = b.Price, []Q7Row{q7Row(b)}
			case b.Price == h.price:
				h.bids = append(h.bids, q7Row(b))
			}
		}
		if len(batch) > 0 {
			closeUpTo(batch[len(batch)-1].DateTime)
		}
	}
	closeUpTo(endOfTime)
}

func q7Row(b nexmark.Bid) Q7Row {
	return Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime}
}
