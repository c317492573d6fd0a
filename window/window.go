// Package window gives jobs event time: converting time columns to
// milliseconds, per-partition watermarks with idle partitions, tumbling,
// sliding and session windows with aggregates, and the late-event policies
// drop, route and update.
//
// # Usage
//
// Declare event time on the source and add a window operator after a
// keyed edge:
//
//	arkflow.NewJob("clicks").
//		Source("in", src, arkflow.EventTime("ts", arkflow.OutOfOrderness(2*time.Second))).
//		KeyBy("user").
//		Window("per-minute", window.Tumbling(time.Minute).Count("n").Sum("amount", "total")).
//		Sink("out", sink)
//
// or in a spec:
//
//	{"id": "per-minute", "kind": "window", "stateful": true, "key_field": "user",
//	 "config": {"window": {"type": "tumbling", "size_ms": 60000},
//	            "aggregates": [{"function": "count", "as": "n"}, {"function": "sum", "field": "amount", "as": "total"}]}}
//
// # Semantics
//
// Windows are half-open, [start, end); tumbling and sliding windows start
// at multiples of their size or slide; a session window spans [first
// event, last event + gap) and merges with any session an event bridges.
// A window fires once the operator's watermark (the minimum over its
// inputs) reaches its end. An event is late for a window when the
// watermark has already reached that window's end; it is past the deadline
// once the watermark reaches end + allowed_lateness_ms. Late events are
// dropped (counted and warned about), routed to the sink named by
// late_event_route, or, under update, change the window's aggregate and
// re-emit its row with __arkflow_window_update = true until the deadline.
//
// Output rows have the key column, window_start and window_end (timestamp
// ms, UTC), one column per aggregate and __arkflow_window_update. Given the
// same input in the same order, a window operator produces the same output,
// byte for byte.
//
// By default the watermark moves with a whole batch before its rows are
// classified, so with out_of_orderness_ms 0 the batch [900, 1100] with 1 s
// windows makes 900 late. Keep out_of_orderness_ms above the event-time
// span of a batch, or use watermark.advance "per_row"
// (arkflow.PerRowWatermark), under which in-order input is never late. A
// partition that has had no row yet holds the watermark back until it is
// idle (idle_timeout_ms); an input that ends, or arkflow.Job.Drain, fires
// every open window.
//
// The rules in full (sessions, idle partitions, all_idle advance, late-data
// warnings) are described in ARCHITECTURE.md ("Event time").
package window

import (
	"encoding/json"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/agg"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Output column names.
const (
	ColumnStart  = "window_start"
	ColumnEnd    = "window_end"
	ColumnUpdate = "__arkflow_window_update"
)

// Config is a window operator's spec config.
type Config struct {
	Window     Spec        `json:"window"`
	Aggregates []Aggregate `json:"aggregates"`
}

// Aggregate is one aggregate of a window: count, sum, min, max, avg, first
// or last of a field (count needs none), output as column As. It is the
// spec's aggregate, the same as an aggregate operator's.
type Aggregate = job.Aggregate

func (c Config) aggSpecs() []agg.Spec { return c.Aggregates }

// Definition is a window and its aggregates, built in Go:
// window.Tumbling(time.Minute).Count("n").Sum("amount", "total"). Each
// method returns a new Definition; the zero value has no window.
type Definition struct{ cfg Config }

// Tumbling returns fixed windows of the given size.
func Tumbling(size time.Duration) Definition {
	return Definition{Config{Window: Spec{Type: TypeTumbling, SizeMS: size.Milliseconds()}}}
}

// Sliding returns windows of the given size starting every slide.
func Sliding(size, slide time.Duration) Definition {
	return Definition{Config{Window: Spec{Type: TypeSliding, SizeMS: size.Milliseconds(), SlideMS: slide.Milliseconds()}}}
}

// Session returns per-key sessions that close after gap without events.
func Session(gap time.Duration) Definition {
	return Definition{Config{Window: Spec{Type: TypeSession, GapMS: gap.Milliseconds()}}}
}

func (d Definition) with(a Aggregate) Definition {
	d.cfg.Aggregates = append(append([]Aggregate(nil), d.cfg.Aggregates...), a)
	return d
}

// Count counts the rows of each window as column as.
func (d Definition) Count(as string) Definition {
	return d.with(Aggregate{Function: agg.Count, As: as})
}

// Sum sums field as column as.
func (d Definition) Sum(field, as string) Definition {
	return d.with(Aggregate{Function: agg.Sum, Field: field, As: as})
}

// Min is the smallest value of field, as column as.
func (d Definition) Min(field, as string) Definition {
	return d.with(Aggregate{Function: agg.Min, Field: field, As: as})
}

// Max is the largest value of field, as column as.
func (d Definition) Max(field, as string) Definition {
	return d.with(Aggregate{Function: agg.Max, Field: field, As: as})
}

// Avg is the mean of field (Float64), as column as.
func (d Definition) Avg(field, as string) Definition {
	return d.with(Aggregate{Function: agg.Avg, Field: field, As: as})
}

// First is the first non-null value of field in arrival order, as column
// as. When sessions merge, the value of the session that started first is
// kept.
func (d Definition) First(field, as string) Definition {
	return d.with(Aggregate{Function: agg.First, Field: field, As: as})
}

// Last is the last non-null value of field in arrival order, as column
// as. When sessions merge, the value of the session that started last
// wins.
func (d Definition) Last(field, as string) Definition {
	return d.with(Aggregate{Function: agg.Last, Field: field, As: as})
}

// Config returns the spec config of the definition.
func (d Definition) Config() Config { return d.cfg }

// MarshalJSON writes the definition as its spec config.
func (d Definition) MarshalJSON() ([]byte, error) { return json.Marshal(d.cfg) }
