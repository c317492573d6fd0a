package queries

import (
	"context"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// Digest sums up a query's output: the rows, and a checksum that does not
// depend on their order. Two runs agree when their digests are equal; the
// tests compare the rows themselves.
type Digest struct {
	Rows int64
	Sum  uint64
}

// Query is one query (Nexmark's, or the window query), runnable on both
// sides.
type Query struct {
	Name string
	// Engine runs the arkflow job over the events it reads.
	Engine func(ctx context.Context, ev *nexmark.Events) (Digest, error)
	// Hand runs the hand-written loop over the events it reads.
	Hand func(ev *nexmark.Events) Digest
	// Beam runs the query as an Apache Beam pipeline on Prism, in this
	// process; nil for the queries without one, and for all of them
	// unless built with the tag beam (beamSides).
	Beam func(ctx context.Context, ev *nexmark.Events) (Digest, error)
	// Prepare, where not nil, makes what the sides read beyond the events
	// (the window queries' clicks), so that it is not timed.
	Prepare func(ev *nexmark.Events)
}

// All are the queries, by name.
var All = []Query{
	query("q0", Q0, Q0Hand, bidSum),
	query("q1", Q1, Q1Hand, bidSum),
	query("q2", Q2, Q2Hand, pairSum),
	query("q5", Q5, Q5Hand, hotSum),
	query("q5sink", Q5Sink, Q5Hand, hotSum),
	query("q3", Q3, Q3Hand, func(r Q3Row) uint64 { return mix(r.Auction, strSum(r.Name, r.City, r.State)) }),
	query("q7", Q7, Q7Hand, func(r Q7Row) uint64 { return mix(r.Auction, r.Price, r.Bidder, r.DateTime) }),
	query("q8", Q8, Q8Hand, func(r Q8Row) uint64 { return mix(r.ID, strSum(r.Name), r.WindowStart, r.Auction) }),
	windowQuery("window1k", 1_000),
	windowQuery("window100k", 100_000),
}

// query wraps a query's two sides into digests, the digest computed in
// the emit function on both sides, so both pay for it, and adds its Beam
// side, if beamSides has one.
func query[T any](name string, engine func(context.Context, *nexmark.Events, func([]T)) error,
	hand func(*nexmark.Events, func([]T)), sum func(T) uint64) Query {
	digest := func(d *Digest) func([]T) {
		return func(rows []T) {
			d.Rows += int64(len(rows))
			for _, r := range rows {
				d.Sum += sum(r)
			}
		}
	}
	return Query{
		Name: name,
		Beam: beamSides[name],
		Engine: func(ctx context.Context, ev *nexmark.Events) (Digest, error) {
			var d Digest
			err := engine(ctx, ev, digest(&d))
			return d, err
		},
		Hand: func(ev *nexmark.Events) Digest {
			var d Digest
			hand(ev, digest(&d))
			return d
		},
	}
}

func pairSum(r AuctionPrice) uint64 { return mix(r.Auction, r.Price) }

func hotSum(r HotItem) uint64 { return mix(r.WindowStart, r.Auction, r.Bids) }

func bidSum(b nexmark.Bid) uint64 {
	return mix(b.Auction, b.Bidder, b.Price, b.DateTime, int64(len(b.Channel)+len(b.URL)+len(b.Extra)))
}

// strSum folds strings into one value for mix (FNV-1a over their bytes,
// each string ended by a 0).
func strSum(ss ...string) int64 {
	h := uint64(14695981039346656037)
	for _, s := range ss {
		for i := 0; i <= len(s); i++ {
			c := byte(0)
			if i < len(s) {
				c = s[i]
			}
			h = (h ^ uint64(c)) * 1099511628211
		}
	}
	return int64(h)
}

// mix hashes the values of a row into one word (a multiply-xorshift per
// value), so that equal sums of rows mean equal rows with high
// probability.
func mix(vs ...int64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, v := range vs {
		h ^= uint64(v)
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
	}
	return h
}
