package arkflow

import (
	"github.com/arkflow-rs/arkflow-go/internal/corruption"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
)

var (
	// ErrAlreadyRunning is returned by Run on a job that was already run:
	// a Job runs once; build another from the same builder or spec.
	ErrAlreadyRunning = runtime.ErrAlreadyRunning
	// ErrNotRunning is returned by Stop and Drain before Run.
	ErrNotRunning = runtime.ErrNotRunning
	// ErrCorrupt matches, under errors.Is, every error about stored data
	// that is not what was written: a checkpoint manifest or state object
	// (the message names its key), a state snapshot or state directory, a
	// WAL segment or cursor (the message names the segment and offset). A
	// store that cannot be reached is not corruption. It is the module's
	// one corruption marker: checkpoint.ErrCorrupt and wal.ErrCorrupt are
	// this value, declared there too so that a program using only those
	// packages can test for it.
	ErrCorrupt = corruption.Err
)
