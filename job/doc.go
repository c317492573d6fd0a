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
// once, each as a ValidationError naming the field path. The spec they
// return along with such problems can still be validated with
// arkflow.Validate, which reports them together with every other mistake
// of the spec. arkflow.Job.Plan returns the plan of a built job; the plan
// is the one ArkFlow v1 computes for the same spec.
package job
