// Package harness links package arkflowtest to the engine behind package
// arkflow's facade: the runtime of a built Job, the Go values
// bound to a Builder, and runtime options such as a fake clock, none of
// which the public API exposes. Package arkflow fills in the functions when
// it is initialised; only arkflowtest calls them.
//
// The functions take and return arkflow's types as any, because this
// package cannot import arkflow (arkflow imports it).
package harness

import (
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

var (
	// RuntimeOf returns the runtime of an *arkflow.Job.
	RuntimeOf func(job any) *runtime.Runtime
	// Bindings returns the Go values bound to the operators of an
	// *arkflow.Builder (sources, sinks, functions), by operator ID. The
	// map is the builder's own: read it, do not change it.
	Bindings func(builder any) map[string]any
	// Option returns an arkflow.Option that lets f change the runtime
	// options the job is created with.
	Option func(f func(*runtime.Options)) any
	// NewJob builds an *arkflow.Job from spec with Go values bound to
	// operator IDs (as a Builder binds them) and arkflow.Options (opts
	// holds arkflow.Option values). hubclient runs Hub-shipped specs
	// through it.
	NewJob func(spec *job.Spec, bindings map[string]any, opts []any) (any, error)
	// Build builds an *arkflow.Builder as Builder.Build does (opts holds
	// arkflow.Option values), with edit applied first to a copy of its
	// spec: the harness's own directories in place of the builder's. The
	// builder itself is not changed.
	Build func(builder any, edit func(*job.Spec), opts []any) (any, error)
	// CheckpointStatus returns the arkflow.CheckpointStatus of an
	// *arkflow.Job: Metrics().Checkpoints without measuring the state
	// (which walks every key), cheap enough for cmd/arkflow's readiness
	// probe and /status.
	CheckpointStatus func(job any) any
)
