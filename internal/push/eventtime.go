package push

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
)

// EventTime is the event-time column of the job reading a push source.
//
// A row without an event time cannot be placed in any window: the job
// drops it, or routes it to a side output. A push source's caller can be
// told instead, so a Push call holding such a row is refused whole
// (Refusal), before anything of it is queued: the caller's "accepted"
// never covers a row the job drops. Go has two ways of writing "no
// time": a nil *time.Time (a null) and the zero time.Time, which a plain
// time.Time field encodes as 0001-01-01T00:00:00Z; both count. Under the
// route policy such rows are taken instead, and the reader makes them
// null in the column (never 0001-01-01), so that the job routes them.
type EventTime struct {
	Col    int    // the column's index in the pushed schema
	Field  string // the Go field, for messages: "Click.TS"
	Column string // the column's name
	// Route is set when the job routes rows without an event time to a
	// side output (late_event_policy route).
	Route bool
}

// Refusal is the error of a Push call whose row first (of count rows)
// has no event time; null says it is null rather than the zero time.
func (et *EventTime) Refusal(first, count int, null bool) error {
	what := "the zero time.Time"
	if null {
		what = "null"
	}
	more := ""
	if count > 1 {
		more = fmt.Sprintf(" (and %d more rows of the call)", count-1)
	}
	return fmt.Errorf("row %d: %s (column %q) is %s%s: the job reads it as the event time, and a row without one cannot be placed in a window; "+
		"nothing of this call was taken. Give every row its event time, or have the job route rows without one to a sink "+
		"(arkflow.EventTime{RouteLate: …}; late_event_policy: route)", first, et.Field, et.Column, what, more)
}

// nullify returns rec with the zero times of the column made null, and
// owns rec from then on. Only a routing job needs it: for the others
// Push refused such rows.
func (et *EventTime) nullify(rec arrow.RecordBatch) arrow.RecordBatch {
	if et == nil || !et.Route {
		return rec
	}
	return eventtime.ZeroTimeAsNull(rec, et.Col)
}
