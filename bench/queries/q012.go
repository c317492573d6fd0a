package queries

import (
	"context"

	"github.com/arkflow-rs/arkflow-go"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// Q0 is Nexmark's pass-through: every bid, unchanged. The engine's job is
// the push source straight into the sink, so it measures the cost of
// moving typed rows through a job (encode, channels, decode).
func Q0(ctx context.Context, ev *nexmark.Events, emit func([]nexmark.Bid)) error {
	return runJob(ctx, "nexmark-q0", ev.Bids, nil, func(b *arkflow.Builder) *arkflow.Builder { return b }, emit)
}

// Q0Hand is Q0 as a hand-written loop.
func Q0Hand(ev *nexmark.Events, emit func([]nexmark.Bid)) {
	for batch := range feed(ev.Bids) {
		out := make([]nexmark.Bid, len(batch))
		copy(out, batch)
		emit(out)
	}
}

// ToEuro is Q1's currency conversion, in integer cents: price·908/1000,
// truncated toward zero (Nexmark's 0.908 as a rational, so that the
// engine, the hand loop and the reference agree to the cent).
func ToEuro(price int64) int64 { return price * 908 / 1000 }

// Q1 is Nexmark's currency conversion: every bid with its price in euros
// (ToEuro), a MapRows.
func Q1(ctx context.Context, ev *nexmark.Events, emit func([]nexmark.Bid)) error {
	return runJob(ctx, "nexmark-q1", ev.Bids, nil, func(b *arkflow.Builder) *arkflow.Builder {
		return arkflow.MapRows(b, "to-euro", func(_ context.Context, in nexmark.Bid) (nexmark.Bid, error) {
			in.Price = ToEuro(in.Price)
			return in, nil
		})
	}, emit)
}

// Q1Hand is Q1 as a hand-written loop.
func Q1Hand(ev *nexmark.Events, emit func([]nexmark.Bid)) {
	for batch := range feed(ev.Bids) {
		out := make([]nexmark.Bid, len(batch))
		for i, b := range batch {
			b.Price = ToEuro(b.Price)
			out[i] = b
		}
		emit(out)
	}
}

// AuctionPrice is Q2's output row.
type AuctionPrice struct {
	Auction int64 `arkflow:"auction"`
	Price   int64 `arkflow:"price"`
}

// Q2Modulus selects Q2's auctions: those whose ID it divides (Nexmark's
// 123, so that a few auctions of a short run are selected).
const Q2Modulus = 123

// Q2 is Nexmark's selection: the auction and price of the bids on
// auctions whose ID Q2Modulus divides, a FilterRows then a MapRows that
// projects.
func Q2(ctx context.Context, ev *nexmark.Events, emit func([]AuctionPrice)) error {
	return runJob(ctx, "nexmark-q2", ev.Bids, nil, func(b *arkflow.Builder) *arkflow.Builder {
		b = arkflow.FilterRows(b, "selected", func(_ context.Context, r nexmark.Bid) (bool, error) {
			return r.Auction%Q2Modulus == 0, nil
		})
		return arkflow.MapRows(b, "project", func(_ context.Context, r AuctionPrice) (AuctionPrice, error) {
			return r, nil
		})
	}, emit)
}

// Q2Hand is Q2 as a hand-written loop.
func Q2Hand(ev *nexmark.Events, emit func([]AuctionPrice)) {
	for batch := range feed(ev.Bids) {
		var out []AuctionPrice
		for _, b := range batch {
			if b.Auction%Q2Modulus == 0 {
				out = append(out, AuctionPrice{Auction: b.Auction, Price: b.Price})
			}
		}
		if len(out) > 0 {
			emit(out)
		}
	}
}
