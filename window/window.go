// Package window defines the windows of a window operator: tumbling,
// sliding and session windows with their aggregates, for
// arkflow.Builder.Window. The aggregates are job.Aggregate values
// (job.Count, job.Sum, job.Min, job.Max, job.Avg, job.First, job.Last),
// the same a running aggregate (arkflow.Builder.Aggregate) takes.
//
//	arkflow.NewJob("clicks").
//		Source("in", src, arkflow.EventTime{Field: "ts", OutOfOrderness: 2*time.Second}).
//		KeyBy("user").
//		Window("per-minute", window.Tumbling(time.Minute, job.Count("n"), job.Sum("amount", "total"))).
//		Sink("out", sink)
//
// In a spec the same operator is {"kind": "window", "key_field": "user",
// "config": {"window": {"type": "tumbling", "size_ms": 60000},
// "aggregates": [{"function": "count", "as": "n"}, {"function": "sum",
// "field": "amount", "as": "total"}]}}.
//
// Windows are half-open, [start, end). Tumbling and sliding windows start
// at multiples of their size or slide; a session spans [first event, last
// event + gap) and merges with any session an event bridges. A window fires
// once the watermark of its sources' event time (or the clock, for
// processing time) reaches its end. Late events are dropped, routed to a
// sink or update a fired window, as the source's time options say.
//
// Output rows have the key column, ColumnStart and ColumnEnd (timestamp ms,
// UTC), one column per aggregate and ColumnUpdate. A window operator
// reports the counters windows_fired, late_dropped, late_routed,
// late_updated, null_timestamp_dropped, null_timestamp_routed and
// replayed_skipped (rows a restart read again whose windows had fired
// before it: skipped, not late), and the gauge open_windows, in
// Job.Metrics. ARCHITECTURE.md ("Event time") has the rules in full.
package window

import (
	"encoding/json"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Output column names of a window operator.
const (
	// ColumnStart is the window's start (inclusive).
	ColumnStart = windowop.ColumnStart
	// ColumnEnd is the window's end (exclusive).
	ColumnEnd = windowop.ColumnEnd
	// ColumnUpdate is true on a row that re-emits a fired window changed
	// by a late event (late policy update).
	ColumnUpdate = windowop.ColumnUpdate
)

// Window types, the spec's config.window.type.
const (
	TypeTumbling = windowop.TypeTumbling
	TypeSliding  = windowop.TypeSliding
	TypeSession  = windowop.TypeSession
)

// Definition is a window and its aggregates, the same job.Aggregate
// values a running aggregate (arkflow.Builder.Aggregate) takes:
// window.Tumbling(time.Minute, job.Count("n"), job.Sum("amount", "total")).
// The zero value has no window.
type Definition struct{ cfg windowop.Config }

// Tumbling returns fixed windows of the given size, each computing aggs
// (job.Count, job.Sum, …) over its rows.
func Tumbling(size time.Duration, aggs ...job.Aggregate) Definition {
	return define(windowop.Spec{Type: TypeTumbling, SizeMS: size.Milliseconds()}, aggs)
}

// Sliding returns windows of the given size starting every slide, each
// computing aggs over its rows.
func Sliding(size, slide time.Duration, aggs ...job.Aggregate) Definition {
	return define(windowop.Spec{Type: TypeSliding, SizeMS: size.Milliseconds(), SlideMS: slide.Milliseconds()}, aggs)
}

// Session returns per-key sessions that close after gap without events,
// each computing aggs over its rows. When an event bridges two sessions
// they merge, and so do their aggregates: job.First keeps the value of
// the session that started first, job.Last the value of the one that
// started last.
func Session(gap time.Duration, aggs ...job.Aggregate) Definition {
	return define(windowop.Spec{Type: TypeSession, GapMS: gap.Milliseconds()}, aggs)
}

// define copies aggs, so that a caller's slice changed later does not
// change the definition.
func define(w windowop.Spec, aggs []job.Aggregate) Definition {
	return Definition{windowop.Config{Window: w, Aggregates: append([]job.Aggregate(nil), aggs...)}}
}

// MarshalJSON writes the definition as its spec config.
func (d Definition) MarshalJSON() ([]byte, error) { return json.Marshal(d.cfg) }
