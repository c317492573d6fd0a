package job

import "encoding/json"

// The configs of the operators the builder writes (package arkflow's
// Aggregate and Columns), and the aggregates a running aggregate and a
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
