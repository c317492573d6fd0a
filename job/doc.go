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
package job
