// Package job is the job specification: the graph of operators, edges,
// sources and sinks that a Builder writes, a JSON or YAML file holds, and a
// Hub stores (ArkFlow v1's JobSpec, wire-compatible, with optional
// extensions).
//
// It holds what a user writes or reads: Spec and its blocks, the operator
// configs (Aggregation, Columns, the aggregate functions Count, Sum, …),
// the values a spec author writes (kinds, late policies, sync modes, …),
// the errors validation returns (ValidationError, FieldError), and Plan, a
// read-only view of how a job runs: tasks with their key-group ranges,
// chains and placement units.
//
// Parse and ParseFile read a spec strictly and report every problem at
// once, each as a ValidationError naming the field path (an unknown field
// with the known field it probably misspells). The spec they return along
// with such problems, as far as it decoded (a value of the wrong type is
// left zero, or gets its default), remembers them: arkflow.Validate and
// arkflow.FromSpec report them again together with every other mistake of
// the spec, and never build it. So a validator that wants every mistake at
// once validates the returned spec instead of stopping at Parse's error,
// as arkflow.Load and "arkflow validate" do. arkflow.Job.Plan returns the plan of a built job; the plan
// is the one ArkFlow v1 computes for the same spec.
//
// # Joins
//
// An operator of kind join has two input edges, each partitioned by its
// own side's key, and a config that names the sides:
//
//	type          window, interval or temporal
//	left, right   the operators whose rows are the two sides
//	left_key      the key column of each side; the keys must have one
//	right_key     type, and a null key matches nothing
//	how           inner (the default) or left: left rows without a
//	              match are emitted once with null right columns
//	window        a window join's window: {type: tumbling|sliding,
//	              size_ms, slide_ms}; pairs fire when the watermark
//	              passes the window's end
//	lower_ms      an interval join's bounds: a pair when left.ts is in
//	upper_ms      [right.ts + lower_ms, right.ts + upper_ms]
//	deleted_field a temporal join's table (right) column whose true
//	              deletes the key; each left row joins the table's row
//	              current at its event time
//	retention_ms  how far behind the watermark a temporal join keeps the
//	              table's history (default 0): a left row up to that
//	              late joins at once instead of being dropped
//	left_prefix   put before a column name both sides have (default
//	right_prefix  "left_" and "right_")
//
// The output is the key, a window join's window_start and window_end,
// then the other columns of the left side and of the right side.
// testdata/joins.yaml in the repository is a runnable example.
//
// In Go, arkflow.Builder.Join writes the same operator and edges from a
// Join, whose fields are these keys with Go names and durations (Outer
// for how left; Size and Slide for the window, tumbling when Slide is 0;
// Lower and Upper for the bounds):
//
//	Join("sellers", job.Join{Type: job.JoinWindow, Left: "persons", LeftKey: "id",
//		Right: "auctions", RightKey: "seller", Outer: true, Size: time.Second})
package job
