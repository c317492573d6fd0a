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

// Q5's sliding window: 10 s long, a new one every 2 s.
const (
	Q5SizeMS  = 10_000
	Q5SlideMS = 2_000
)

// HotItem is Q5's output row: an auction with the most bids of its
// window (all of them when several tie).
type HotItem struct {
	WindowStart int64 // Unix ms
	Auction     int64
	Bids        int64
}

// auctionCount is a row of Q5's window: the bids of one auction in one
// window.
type auctionCount struct {
	Auction int64     `arkflow:"auction"`
	Start   time.Time `arkflow:"window_start"`
	Num     int64     `arkflow:"num"`
}

// Q5Sink is Q5 with its second step outside the job: the job counts the
// bids per auction per window (KeyBy, Window over event time), and the
// sink function keeps, per window, the auctions at the highest count.
// It is the shorter job, kept beside Q5 to show what the in-job maximum
// costs. It calls emit once, after the job ended, with the rows sorted by
// window and auction: the sink cannot tell when a window's counts are
// all in.
func Q5Sink(ctx context.Context, ev *nexmark.Events, emit func([]HotItem)) error {
	var best maxPerWindow
	err := runJob(ctx, "nexmark-q5", ev.Bids, eventTime,
		func(b *arkflow.Builder) *arkflow.Builder {
			return b.KeyBy("auction").
				Window("bids-per-auction", window.Sliding(Q5SizeMS*time.Millisecond, Q5SlideMS*time.Millisecond, job.Count("num")))
		},
		func(rows []auctionCount) {
			for _, r := range rows {
				best.add(r.Start.UnixMilli(), r.Auction, r.Num)
			}
		})
	if err != nil {
		return err
	}
	emit(best.rows())
	return nil
}

// maxPerWindow keeps, per window start, the highest count seen and the
// auctions that have it.
type maxPerWindow map[int64]*top

type top struct {
	n        int64
	auctions []int64
}

func (m *maxPerWindow) add(start, auction, n int64) {
	if *m == nil {
		*m = maxPerWindow{}
	}
	t := (*m)[start]
	switch {
	case t == nil:
		(*m)[start] = &top{n: n, auctions: []int64{auction}}
	case n > t.n:
		t.n, t.auctions = n, append(t.auctions[:0], auction)
	case n == t.n:
		t.auctions = append(t.auctions, auction)
	}
}

// rows are the kept auctions, sorted by window start and auction.
func (m maxPerWindow) rows() []HotItem {
	var out []HotItem
	for start, t := range m {
		for _, a := range t.auctions {
			out = append(out, HotItem{WindowStart: start, Auction: a, Bids: t.n})
		}
	}
	SortHotItems(out)
	return out
}

// SortHotItems sorts rows by window start, then auction.
func SortHotItems(rows []HotItem) {
	slices.SortFunc(rows, func(a, b HotItem) int {
		return cmp.Or(cmp.Compare(a.WindowStart, b.WindowStart), cmp.Compare(a.Auction, b.Auction))
	})
}

// Q5Hand is Q5 as a hand-written loop: a count per auction per open
// window, a window's maximum taken when event time passes its end (the
// bids come in event-time order, so no bid is late). It calls emit with
// each closed window's rows, sorted by auction.
func Q5Hand(ev *nexmark.Events, emit func([]HotItem)) {
	open := map[int64]map[int64]int64{}
	closeUpTo := func(watermark int64) {
		var done []int64
		for start := range open {
			if start+Q5SizeMS <= watermark {
				done = append(done, start)
			}
		}
		slices.Sort(done)
		for _, start := range done {
			var best maxPerWindow
			for a, n := range open[start] {
				best.add(start, a, n)
			}
			emit(best.rows())
			delete(open, start)
		}
	}
	for batch := range feed(ev.Bids) {
		for _, b := range batch {
			// The windows holding b: starts at multiples of the slide in
			// (ts - size, ts].
			for s := b.DateTime - b.DateTime%Q5SlideMS; s > b.DateTime-Q5SizeMS; s -= Q5SlideMS {
				m := open[s]
				if m == nil {
					m = map[int64]int64{}
					open[s] = m
				}
				m[b.Auction]++
			}
		}
		if len(batch) > 0 {
			closeUpTo(batch[len(batch)-1].DateTime)
		}
	}
	closeUpTo(1<<63 - 1)
}
