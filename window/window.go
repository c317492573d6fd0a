// Package window defines the windows of a window operator: tumbling,
// sliding and session windows with their aggregates, for
// arkflow.Builder.Window.
//
//	arkflow.NewJob("clicks").
//		Source("in", src, arkflow.EventTime{Field: "ts", OutOfOrderness: 2*time.Second}).
//		KeyBy("user").
//		Window("per-minute", window.Tumbling(time.Minute).Count("n").Sum("amount", "total")).
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

	"github.com/arkflow-rs/arkflow-go/internal/agg"
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

// Definition is a window and its aggregates:
// window.Tumbling(time.Minute).Count("n").Sum("amount", "total"). Each
// method returns a new Definition; the zero value has no window.
type Definition struct{ cfg windowop.Config }

// Tumbling returns fixed windows of the given size.
func Tumbling(size time.Duration) Definition {
	return Definition{windowop.Config{Window: windowop.Spec{Type: TypeTumbling, SizeMS: size.Milliseconds()}}}
}

// Sliding returns windows of the given size starting every slide.
func Sliding(size, slide time.Duration) Definition {
	return Definition{windowop.Config{Window: windowop.Spec{Type: TypeSliding, SizeMS: size.Milliseconds(), SlideMS: slide.Milliseconds()}}}
}

// Session returns per-key sessions that close after gap without events.
func Session(gap time.Duration) Definition {
	return Definition{windowop.Config{Window: windowop.Spec{Type: TypeSession, GapMS: gap.Milliseconds()}}}
}

func (d Definition) with(a job.Aggregate) Definition {
	d.cfg.Aggregates = append(append([]job.Aggregate(nil), d.cfg.Aggregates...), a)
	return d
}

// Count counts the rows of each window as column as.
func (d Definition) Count(as string) Definition {
	return d.with(job.Aggregate{Function: agg.Count, As: as})
}

// Sum sums field as column as.
func (d Definition) Sum(field, as string) Definition {
	return d.with(job.Aggregate{Function: agg.Sum, Field: field, As: as})
}

// Min is the smallest value of field, as column as.
func (d Definition) Min(field, as string) Definition {
	return d.with(job.Aggregate{Function: agg.Min, Field: field, As: as})
}

// Max is the largest value of field, as column as.
func (d Definition) Max(field, as string) Definition {
	return d.with(job.Aggregate{Function: agg.Max, Field: field, As: as})
}

// Avg is the mean of field (Float64), as column as.
func (d Definition) Avg(field, as string) Definition {
	return d.with(job.Aggregate{Function: agg.Avg, Field: field, As: as})
}

// First is the first non-null value of field in arrival order, as column
// as. When sessions merge, the value of the session that started first is
// kept.
func (d Definition) First(field, as string) Definition {
	return d.with(job.Aggregate{Function: agg.First, Field: field, As: as})
}

// Last is the last non-null value of field in arrival order, as column
// as. When sessions merge, the value of the session that started last
// wins.
func (d Definition) Last(field, as string) Definition {
	return d.with(job.Aggregate{Function: agg.Last, Field: field, As: as})
}

// MarshalJSON writes the definition as its spec config.
func (d Definition) MarshalJSON() ([]byte, error) { return json.Marshal(d.cfg) }
