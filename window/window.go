// Package window gives jobs event time: converting time columns to
// milliseconds, per-partition watermarks with idle partitions, tumbling,
// sliding and session windows with aggregates, and the late-event policies
// drop, route and update (R-TIME-1…10).
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
// at multiples of their size or slide (Euclidean division, so negative
// times work); a session window spans [first event, last event + gap) and
// merges with any session an event bridges. Sessions are half-open: an
// event at exactly last + gap starts a new session (Flink merges touching
// windows; we follow the half-open convention of R-TIME-10). A window fires once the
// operator's watermark (the minimum over its inputs) reaches its end. An
// event is late for a window when the watermark has already reached that
// window's end, whether or not the window held data; it is past the
// deadline once the watermark reaches end + allowed_lateness_ms.
//
// Late events follow the source's late_event_policy: drop (counted in the
// metrics and warned about in the log: see "Seeing late data"), route (the
// row, with its original columns, goes to the sink named by
// late_event_route) or update (within the deadline the window's
// aggregate changes and the full corrected row is emitted again with
// __arkflow_window_update = true; past the deadline the event is dropped).
// A row with a null event time is never held: it is routed under route and
// dropped (and counted) otherwise (R-TIME-3).
//
// Output rows have the key column, window_start and window_end (timestamp
// ms, UTC), one column per aggregate and __arkflow_window_update, the same
// schema in every batch. A window's state is freed once the watermark passes
// its deadline. Given the same input in the same order, a window operator
// produces the same output, byte for byte.
//
// # When the watermark moves
//
// By default (watermark.advance "batch", the seeds' rule R-TIME-4) the
// watermark advances with a whole batch first and its rows are classified
// after: in a batch [2100, 100] with 1 s windows, 100 is late at once. So
// is an in-order row that shares a batch with a later row across a window
// boundary: with out_of_orderness_ms 0, the batch [900, 1100] makes 900
// late. Either keep out_of_orderness_ms above the event-time span of a
// batch, or set watermark.advance "per_row" (arkflow.PerRowWatermark;
// beyond the seeds, R-EMBED-5): each row then meets the watermark in force
// before it, the one the rows before it gave (in its batch, and its
// partition's before), exactly as if it came in a batch of its own.
// In-order input is never late however it is batched; a row behind the newest
// by more than out_of_orderness_ms still is. The source splits a batch
// (without copying) before each row behind that watermark and moves the
// watermark between the parts, so in-order batches pass whole; after the
// batch the watermark is the same under both rules.
//
// A source's watermark is the minimum over its partitions that are not
// idle, and a partition that has had no row yet counts: it holds every
// window back until its first row, or until idle_timeout_ms of silence
// makes it idle. The source warns, once a run, when such a partition has
// held the watermark back for 10 s while others have rows and no idle
// timeout is set (Tracker.Starved).
//
// While every partition of a source is idle, its watermark holds
// (watermark.all_idle "hold", the default): open windows wait for new data
// or the end of the input. With all_idle "advance" and all_idle_delay_ms
// (arkflow.AdvanceWhenIdle; needs idle_timeout_ms; R-EMBED-5) it follows
// the clock: it becomes max(watermark, now − all_idle_delay_ms −
// out_of_orderness_ms), so a quiet source closes its last windows. This
// assumes event times are wall-clock Unix milliseconds and
// all_idle_delay_ms bounds how long an event takes to reach the source; it
// is wrong for replays of old data (see Tracker).
//
// An input that ends sends a watermark of +∞: every open window fires.
// arkflow.Job.Drain (arkflow run --drain-on-stop) ends an unbounded input
// the same way. The floor such an end persists is the furthest deadline
// of the windows it closed, not +∞, so a restart resumes after them: a row
// that would have joined one of them is late.
//
// # Seeing late data
//
// Late data never disappears unseen (R-EMBED-5). Every window operator
// counts what it drops (late_dropped, null_timestamp_dropped; see the
// Metric constants and arkflow.Job.Metrics) and logs a warning on the
// job's logger naming the window operator, its sources and the fix: the
// first drop at once, then at most one every 10 s of the runtime's clock
// per operator, with the count since the previous warning, and what is
// left when the operator closes.
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
