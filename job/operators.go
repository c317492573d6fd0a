package job

import (
	"encoding/json"
	"time"
)

// The configs of the operators the builder writes (package arkflow's
// Aggregate, Columns and Join), and the aggregates a running aggregate and a
// window (package window) share: each encodes to its spec config, so
// that a builder's job and its spec file say the same thing.

// emitFinal is the spec config's "emit" of Final ("updates", Running's,
// is the default and not written).
const emitFinal = "final"

// Aggregation is an aggregate operator's config: a keyed running
// aggregate (no window), per key over every row seen so far, for
// arkflow.Builder.Aggregate. Running and Final make one from the same
// Aggregate values a window takes (window.Tumbling(size, aggs...)). The
// zero value has no aggregates, which Build reports.
type Aggregation struct {
	aggs []Aggregate
	emit string
}

// Running aggregates aggs per key and emits, after each input batch, the
// new values of the keys the batch touched (spec: emit "updates", the
// default, so its config has no "emit"):
//
//	Aggregate("per-user", job.Running(job.Count("n"), job.Sum("amount", "total")))
func Running(aggs ...Aggregate) Aggregation {
	return Aggregation{aggs: append([]Aggregate(nil), aggs...)}
}

// Final aggregates aggs per key and emits every key once, when the input
// ends (spec: emit "final"): at the end of a bounded input, or when
// arkflow.Job.Drain ends it.
func Final(aggs ...Aggregate) Aggregation {
	return Aggregation{aggs: append([]Aggregate(nil), aggs...), emit: emitFinal}
}

// MarshalJSON writes the aggregation as its spec config:
// {"aggregates": [...]} for Running, {"aggregates": [...], "emit": "final"}
// for Final.
func (a Aggregation) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Aggregates []Aggregate `json:"aggregates"`
		Emit       string      `json:"emit,omitempty"`
	}{a.aggs, a.emit})
}

// Count counts rows, into column as.
func Count(as string) Aggregate { return Aggregate{Function: "count", As: as} }

// Sum sums a numeric field, into column as.
func Sum(field, as string) Aggregate { return Aggregate{Function: "sum", Field: field, As: as} }

// Min is the smallest value of a numeric or timestamp field.
func Min(field, as string) Aggregate { return Aggregate{Function: "min", Field: field, As: as} }

// Max is the largest value of a numeric or timestamp field.
func Max(field, as string) Aggregate { return Aggregate{Function: "max", Field: field, As: as} }

// Avg is the mean of a numeric field (Float64).
func Avg(field, as string) Aggregate { return Aggregate{Function: "avg", Field: field, As: as} }

// First is the first non-null value of a field, in arrival order. When
// session windows merge, the value of the session that started first is
// kept.
func First(field, as string) Aggregate { return Aggregate{Function: "first", Field: field, As: as} }

// Last is the last non-null value of a field, in arrival order. When
// session windows merge, the value of the session that started last wins.
func Last(field, as string) Aggregate { return Aggregate{Function: "last", Field: field, As: as} }

// Columns is a map operator's declarative config: Set adds or replaces
// columns (in order, each expression seeing the columns set before it),
// then Drop removes columns, then Select keeps only the listed ones, in
// that order (__meta_* columns are always kept). See package arkflow for
// the expression language.
type Columns struct {
	Set    []Column `json:"set,omitempty"`
	Drop   []string `json:"drop,omitempty"`
	Select []string `json:"select,omitempty"`
}

// Column is a computed column: Name = Expr.
type Column struct {
	Name string `json:"name"`
	Expr string `json:"expr"`
}

// The types of join (Join.Type; the spec config's "type").
const (
	// JoinWindow pairs rows of equal keys in the same tumbling or
	// sliding window, when the watermark passes the window's end.
	JoinWindow = "window"
	// JoinInterval pairs rows of equal keys whose event times are within
	// Lower and Upper of each other, as soon as both are in.
	JoinInterval = "interval"
	// JoinTemporal joins each left row with the right side's row of its
	// key current at the left row's event time (the right side is a
	// changelog table).
	JoinTemporal = "temporal"
)

// Join is a join operator for arkflow.Builder.Join: the spec's join
// config (see "Joins" in the package doc) with Go names and durations.
// Type, Left, Right, LeftKey and RightKey are required; the other fields
// belong to one type of join each, and a field of another type than
// Type's is a mistake Build reports. Durations are whole milliseconds.
//
//	job.Join{Type: job.JoinWindow, Left: "persons", LeftKey: "id",
//		Right: "auctions", RightKey: "seller", Size: 10 * time.Second}
type Join struct {
	// Type is JoinWindow, JoinInterval or JoinTemporal.
	Type string
	// Left and Right name the operators whose rows are the two sides; a
	// temporal join's Right is the table.
	Left, Right string
	// LeftKey and RightKey are the key columns of each side (of one type).
	LeftKey, RightKey string
	// Outer makes a left outer join (how: left): a left row without a
	// match is emitted once, with null right columns.
	Outer bool
	// Size and Slide are a window join's window: tumbling when Slide is
	// 0, sliding by Slide otherwise.
	Size, Slide time.Duration
	// Lower and Upper bound an interval join: a pair when left.ts is in
	// [right.ts + Lower, right.ts + Upper] (either may be negative or 0).
	Lower, Upper time.Duration
	// DeletedField is a bool column of a temporal join's table whose true
	// deletes the key.
	DeletedField string
	// Retention is how far behind the watermark a temporal join keeps the
	// table's history: a stream row up to that late still joins the
	// version current at its time (at once), instead of being dropped.
	Retention time.Duration
	// LeftPrefix and RightPrefix go before a column name both sides have
	// (default "left_" and "right_").
	LeftPrefix, RightPrefix string
}
