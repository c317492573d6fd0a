package arkflow

import (
	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

// EXTERNAL: errors callers branch on.

var (
	// ErrAlreadyRunning is returned by Run on a job that was already run:
	// a Job runs once; build another from the same builder or spec.
	ErrAlreadyRunning = runtime.ErrAlreadyRunning
	// ErrNotRunning is returned by Stop and Drain before Run.
	ErrNotRunning = runtime.ErrNotRunning
	// ErrCorrupt matches, under errors.Is, every error about stored data
	// that is not what was written: a checkpoint manifest or state object
	// (checkpoint.CorruptError), a state snapshot or state directory, a
	// WAL segment or cursor (the message names the segment and offset). It is the same
	// value as checkpoint.ErrCorrupt and wal.ErrCorrupt. A store that
	// cannot be reached is not corruption.
	ErrCorrupt = checkpoint.ErrCorrupt
)

// ValidationError is one problem with a job: it names the job, the operator
// and the field path in the spec. Build, Validate and Load return
// ValidationErrors holding all of them.
//
// In a job made by a Builder, Field names the call where the Go code made
// the mistake instead, followed by the rest of the path
// (".State(job.State{...}): path", ".MaxParallelism(n)",
// "WithParallelism(n)"); a mistake in an Option's argument names the
// Option ("WithChannelCapacity(n)"). Paths inside a component's config
// stay spec paths.
type ValidationError = job.ValidationError

// ValidationErrors is every problem found by one validation.
type ValidationErrors = job.ValidationErrors

// FieldError is one problem with one field of a component's config, the
// one field-error type of the module (see job.FieldError). Operators,
// windows and connectors return it with a path relative to their config;
// a ValidationError unwraps to one with the full spec path.
type FieldError = job.FieldError

// AsValidationErrors returns the validation errors inside err, or nil.
func AsValidationErrors(err error) ValidationErrors { return job.AsValidationErrors(err) }
