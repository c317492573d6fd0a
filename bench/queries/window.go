package queries

import (
	"context"
	"sync"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// The window query is not Nexmark's: a keyed tumbling count and sum over
// synthetic clicks, the typed path's own measure (Push → KeyBy → 10 s
// tumbling window → funcsink), at 1 k and 100 k keys.

// Click is the window query's event.
type Click struct {
	Key    int64
	Amount int64
	TS     time.Time
}

// WindowTotal is the window query's output row: one key's clicks and
// their amounts' sum in one tumbling window.
type WindowTotal struct {
	Key    int64
	Start  time.Time `arkflow:"window_start"`
	Clicks int64
	Total  int64
}

// WindowSize is the window query's tumbling window.
const WindowSize = 10 * time.Second

// ClickStep is how far apart in event time the measured clicks are: 10
// µs, so a million clicks span one window.
const ClickStep = 10 * time.Microsecond

// clickBase is the first click's time, a multiple of WindowSize.
var clickBase = time.UnixMilli(1_700_000_000_000).UTC()

// Clicks returns n clicks: click i at clickBase + offset + i·step, with
// key i % keys and amount i·7 % 1000.
func Clicks(n, keys int, offset, step time.Duration) []Click {
	out := make([]Click, n)
	for i := range out {
		out[i] = Click{Key: int64(i % keys), Amount: int64(i * 7 % 1000), TS: clickBase.Add(offset + time.Duration(i)*step)}
	}
	return out
}

// clickCache keeps the clicks of the run last asked for, by key count, so
// that they are generated once, outside the measured runs.
var clickCache struct {
	mu     sync.Mutex
	n      int
	clicks map[int][]Click
}

// clicksFor returns the measured clicks of a run of ev's size (as many
// clicks as ev has events, ClickStep apart) over keys keys.
func clicksFor(ev *nexmark.Events, keys int) []Click {
	n := len(ev.Persons) + len(ev.Auctions) + len(ev.Bids)
	clickCache.mu.Lock()
	defer clickCache.mu.Unlock()
	if clickCache.n != n {
		clickCache.n, clickCache.clicks = n, map[int][]Click{}
	}
	c, ok := clickCache.clicks[keys]
	if !ok {
		c = Clicks(n, keys, 0, ClickStep)
		clickCache.clicks[keys] = c
	}
	return c
}

// Window runs the window query as a job: the clicks pushed in calls of
// BatchSize, per-row event time from TS, KeyBy the key, a 10 s tumbling
// window with a count and a sum, and a funcsink of WindowTotal.
func Window(ctx context.Context, clicks []Click, emit func([]WindowTotal)) error {
	in := push.New(push.Config[Click]{})
	b := arkflow.NewJob("window").
		Source("clicks", in, arkflow.EventTime{Field: "TS", PerRow: true}).
		KeyBy("Key").
		Window("w", window.Tumbling(WindowSize, job.Count("Clicks"), job.Sum("Amount", "Total")))
	return runPushed(ctx, b.Sink("out", sinkTo(emit)), pusher(in, clicks))
}

// WindowHand is the window query as a hand-written loop: the producer
// goroutine of feed, and a consumer that keeps a map per open window and
// emits a window's totals once event time has passed its end.
func WindowHand(clicks []Click, emit func([]WindowTotal)) {
	type acc struct{ n, sum int64 }
	size := WindowSize.Milliseconds()
	open := map[int64]map[int64]*acc{}
	fire := func(upTo int64) {
		for start, m := range open {
			if start+size > upTo {
				continue
			}
			out := make([]WindowTotal, 0, len(m))
			for k, a := range m {
				out = append(out, WindowTotal{Key: k, Start: time.UnixMilli(start).UTC(), Clicks: a.n, Total: a.sum})
			}
			emit(out)
			delete(open, start)
		}
	}
	for batch := range feed(clicks) {
		maxTS := int64(-1 << 63)
		for _, c := range batch {
			ts := c.TS.UnixMilli()
			start := ts - ts%size
			m := open[start]
			if m == nil {
				m = map[int64]*acc{}
				open[start] = m
			}
			a := m[c.Key]
			if a == nil {
				a = &acc{}
				m[c.Key] = a
			}
			a.n++
			a.sum += c.Amount
			maxTS = max(maxTS, ts)
		}
		fire(maxTS)
	}
	fire(endOfTime)
}

// windowQuery is the window query over keys keys, on the clicks of a
// run's size (clicksFor).
func windowQuery(name string, keys int) Query {
	q := query(name,
		func(ctx context.Context, ev *nexmark.Events, emit func([]WindowTotal)) error {
			return Window(ctx, clicksFor(ev, keys), emit)
		},
		func(ev *nexmark.Events, emit func([]WindowTotal)) { WindowHand(clicksFor(ev, keys), emit) },
		windowSum)
	q.Prepare = func(ev *nexmark.Events) { clicksFor(ev, keys) }
	return q
}

func windowSum(r WindowTotal) uint64 { return mix(r.Key, r.Start.UnixMilli(), r.Clicks, r.Total) }
