package job

// The configs of the operators the builder writes (package arkflow's Map,
// Filter, Aggregate): typed blocks that the spec decoder reads too, so
// that a builder's job and its spec file say the same thing.

// Emit modes of an aggregate operator (Aggregation.Emit).
const (
	// EmitUpdates emits, after each input batch, the new values of the
	// keys it touched (the default).
	EmitUpdates = "updates"
	// EmitFinal emits every key once, when the input ends.
	EmitFinal = "final"
)

// Aggregation is an aggregate operator's config: a keyed running
// aggregate (no window), per key over every row seen so far.
type Aggregation struct {
	Aggregates []Aggregate `json:"aggregates"`
	// Emit is EmitUpdates (the default) or EmitFinal.
	Emit string `json:"emit,omitempty"`
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

// First is the first non-null value of a field.
func First(field, as string) Aggregate { return Aggregate{Function: "first", Field: field, As: as} }

// Last is the last non-null value of a field.
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
