// Package job is the job specification: the graph of operators, edges,
// sources and sinks that a Builder writes, a JSON or YAML file holds, and a
// Hub stores (ArkFlow v1's JobSpec, wire-compatible, with optional
// extensions).
//
// Parse and ParseFile read a spec strictly and report every problem at
// once, each as a ValidationError naming the field path. The spec they
// return along with such problems can still be validated (CheckStructure,
// arkflow.Validate), which reports them together with every other
// mistake of the spec. NewVersion gives the digest of its canonical form
// (Canonical); NewPlan turns a valid spec into tasks, chains and
// key-group ranges (KeyGroup, RangeFor), the same plan ArkFlow v1
// computes for the same spec.
package job
