package queries

import (
	"context"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// stampedCount is a count of Q5's window given the event time it
// happens at, the window's last millisecond, so that operators after the
// window can place it: date_time, the column the source's event time is
// read from.
type stampedCount struct {
	Auction  int64 `arkflow:"auction"`
	WStart   int64 `arkflow:"wstart"`
	Num      int64 `arkflow:"num"`
	DateTime int64 `arkflow:"date_time"`
}

// stampedMax is a window's highest count, stamped as its counts are so
// that the join finds both in the same window.
type stampedMax struct {
	WStart   int64 `arkflow:"wstart"`
	MaxNum   int64 `arkflow:"max_num"`
	DateTime int64 `arkflow:"date_time"`
}

// windowMax is a row of the maximum's window; its window_start is the
// tumbling window's, so the sliding window's start travels as the key.
type windowMax struct {
	WStart int64 `arkflow:"wstart"`
	MaxNum int64 `arkflow:"max_num"`
}

// joined is a row of the join: both sides have wstart, the left's
// (the counts') comes out prefixed.
type joined struct {
	Auction int64 `arkflow:"auction"`
	WStart  int64 `arkflow:"left_wstart"`
	Num     int64 `arkflow:"num"`
}

// Q5 is Nexmark's hot items, entirely in the job: per sliding window of
// Q5SizeMS every Q5SlideMS, the auctions with the most bids (every one of
// them on a tie).
//
//	bids → KeyBy(auction) → sliding window, count → "counts" (stamped) ─┬──────────────→ window join on num = max_num → sink
//	                                                                    └→ KeyBy(wstart) → tumbling window, max → "maxima" ─┘
//
// The counts are stamped with the last millisecond of their window as
// date_time (the column event time is read from), as Flink stamps a
// window's result with its rowtime: a window emits its rows before it
// passes on the watermark that fired it, so the operators after it get
// them while the windows they fall in are still open. A tumbling window
// of one slide then holds the counts of exactly one sliding window: the
// maximum is taken over it, and the join pairs each window's counts with
// its maximum in it.
func Q5(ctx context.Context, ev *nexmark.Events, emit func([]HotItem)) error {
	return runJob(ctx, "nexmark-q5j", ev.Bids, eventTime,
		func(b *arkflow.Builder) *arkflow.Builder {
			b = b.KeyBy("auction").
				Window("bids-per-auction", window.Sliding(Q5SizeMS*time.Millisecond, Q5SlideMS*time.Millisecond, job.Count("num")))
			b = arkflow.MapRows(b, "counts", func(_ context.Context, c auctionCount) (stampedCount, error) {
				s := c.Start.UnixMilli()
				return stampedCount{Auction: c.Auction, WStart: s, Num: c.Num, DateTime: s + Q5SizeMS - 1}, nil
			})
			b = b.KeyBy("wstart").Window("max-per-window", window.Tumbling(Q5SlideMS*time.Millisecond, job.Max("num", "max_num")))
			b = arkflow.MapRows(b, "maxima", func(_ context.Context, m windowMax) (stampedMax, error) {
				return stampedMax{WStart: m.WStart, MaxNum: m.MaxNum, DateTime: m.WStart + Q5SizeMS - 1}, nil
			})
			return b.Join("hot", job.Join{Type: job.JoinWindow, Left: "counts", LeftKey: "num", Right: "maxima", RightKey: "max_num", Size: Q5SlideMS * time.Millisecond})
		},
		func(rows []joined) {
			out := make([]HotItem, len(rows))
			for i, r := range rows {
				out[i] = HotItem{WindowStart: r.WStart, Auction: r.Auction, Bids: r.Num}
			}
			emit(out)
		})
}
