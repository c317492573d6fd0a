package ckptstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/corruption"
)

// EXTERNAL: errors callers branch on.

// ErrCorrupt is the module's one corruption marker: errors.Is(err,
// ErrCorrupt) is true for every error of every store about data that is
// not what was written — a *CorruptError here, a *wal.CorruptError or a
// damaged WAL cursor, statestore.ErrCorrupt and statestore.ErrCorruptSnapshot — and
// false for a store that cannot be reached. wal.ErrCorrupt and
// arkflow.ErrCorrupt are the same value.
var ErrCorrupt = corruption.Err

// ErrNotFound matches the error a Store's Get returns (wrapped, with the
// key) when the object does not exist. Select never returns it: a missing
// manifest or state object makes a candidate skipped, not the call fail.
var ErrNotFound = errors.New("checkpoint: object not found")

// ErrExists matches the error a Store's Create returns (wrapped) when the
// key already holds an object, and the one Commit returns when a savepoint
// of that name (or a checkpoint of that id) was already written with other
// contents: manifests are write-once, so an id or a name is never reused.
var ErrExists = errors.New("checkpoint: object already exists")

// ErrSuperseded matches the error Commit returns for a checkpoint whose id
// is not above the one LATEST names: committing it would move LATEST
// backwards. The caller should discard it (Catalog.Delete) and take a new
// id from NextID.
var ErrSuperseded = errors.New("checkpoint: superseded by a newer committed checkpoint")

// Task-set problems. A *TaskSetError unwraps to one of them, so
// errors.Is(err, ErrMissingTask) tells which rule a manifest broke.
var (
	// ErrMissingTask: a planned task has no entry in task_attempts.
	ErrMissingTask = errors.New("missing task entry")
	// ErrDuplicateTask: a task appears twice in task_attempts (or in
	// state_snapshots, source_positions or planned_tasks).
	ErrDuplicateTask = errors.New("duplicate task entry")
	// ErrExtraTask: an entry names a task that is not in planned_tasks.
	ErrExtraTask = errors.New("extra task entry (not in the plan)")
)

// TaskSetError is one violation of the task-set rule: a manifest must carry exactly
// the planned task set. CheckTasks joins one per violation.
type TaskSetError struct {
	// CheckpointID is the manifest's checkpoint_id.
	CheckpointID string
	// Field is the manifest field at fault: "task_attempts",
	// "state_snapshots", "watermarks_ms", "source_positions" or
	// "planned_tasks".
	Field string
	// TaskID names the task.
	TaskID string
	// Err is ErrMissingTask, ErrDuplicateTask or ErrExtraTask.
	Err error
	// Detail adds specifics, e.g. which source partition is duplicated.
	Detail string
}

// Error names the manifest, the field, the violation and the task.
func (e *TaskSetError) Error() string {
	s := fmt.Sprintf("checkpoint: manifest %q: %s: %v %q", e.CheckpointID, e.Field, e.Err, e.TaskID)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// Unwrap returns Err, so errors.Is finds ErrMissingTask, ErrDuplicateTask
// or ErrExtraTask.
func (e *TaskSetError) Unwrap() error { return e.Err }

// CorruptError reports an artifact whose bytes are not what they should
// be: a manifest that does not decode or whose checksum does not match, a
// state object whose size or SHA-256 differs from its manifest entry. It
// is never returned for an object store that cannot be reached (those are
// plain errors, and Select fails on them instead of falling back).
type CorruptError struct {
	// Key is the object's key in the store (empty if the bytes did not
	// come from a store, as with DecodeManifest).
	Key string
	// Reason says what is wrong.
	Reason string
	// Err is the underlying error, if any (e.g. a JSON syntax error).
	Err error
}

// Error names the key (when there is one), the reason and the underlying
// error.
func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString("checkpoint: ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString("corrupt: ")
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns Err, the underlying error (nil if there is none).
func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes a *CorruptError match ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// IsCorruption reports whether err is or wraps a *CorruptError (or any
// other error marked as corruption): errors.Is(err, ErrCorrupt).
func IsCorruption(err error) bool { return errors.Is(err, ErrCorrupt) }

// Incompatibility says why an intact artifact must not be restored.
type Incompatibility string

const (
	// IncompatibleDowngrade: the artifact was written by a newer job
	// version than the one restoring it.
	IncompatibleDowngrade Incompatibility = "downgrade"
	// IncompatibleFormat: the artifact has another state format version.
	IncompatibleFormat Incompatibility = "format"
	// IncompatiblePlan: the artifact was written by the same job version
	// but with other operators (the job changed without a version bump).
	// Another parallelism is not a plan change: a restore redistributes
	// the key groups (a rescale).
	IncompatiblePlan Incompatibility = "plan"
	// IncompatibleMaxParallelism: the artifact was cut with another
	// max_parallelism, so its state is keyed by another number of key
	// groups.
	IncompatibleMaxParallelism Incompatibility = "max_parallelism"
)

// IncompatibleError is what Select returns when the newest intact
// candidate (checksum-valid, with a complete task set) is bound to another
// job version or state format than the one asking. There is
// something to restore, but it must not be used, and no older candidate is
// tried instead: that would roll the job back silently, and arkflow makes
// rollback an explicit operator action (restore a named savepoint). Nothing
// in the store was changed.
type IncompatibleError struct {
	Kind Kind
	// ID is the checkpoint id, or the savepoint's name.
	ID     string
	Reason Incompatibility
	// JobVersion and FormatVersion are the artifact's.
	JobVersion    uint64
	FormatVersion int
	// WantJobVersion and WantFormatVersion are the caller's (Want).
	WantJobVersion    uint64
	WantFormatVersion int
	// MaxParallelism and WantMaxParallelism are the artifact's and the
	// caller's, for IncompatibleMaxParallelism.
	MaxParallelism, WantMaxParallelism int
	// Detail adds specifics (for IncompatiblePlan: which tasks differ).
	Detail string
}

// Error names the artifact, what it was written with and what this job
// has, and says what to do instead.
func (e *IncompatibleError) Error() string {
	if e.Reason == IncompatibleMaxParallelism {
		return fmt.Sprintf("checkpoint: %s %q was cut with max_parallelism %d, and this job has max_parallelism %d: "+
			"its keyed state is split into %d key groups, which cannot be redistributed into %d "+
			"(set max_parallelism back to %d: parallelism may change, max_parallelism may not while the job has state)",
			e.Kind, e.ID, e.MaxParallelism, e.WantMaxParallelism, e.MaxParallelism, e.WantMaxParallelism, e.MaxParallelism)
	}
	what := fmt.Sprintf("checkpoint: %s %q was written by job version %d with state format %d; this job is version %d with format %d",
		e.Kind, e.ID, e.JobVersion, e.FormatVersion, e.WantJobVersion, e.WantFormatVersion)
	switch e.Reason {
	case IncompatibleDowngrade:
		return what + ": a downgrade has no migration path (to roll back, restore a savepoint taken by this version explicitly)"
	case IncompatibleFormat:
		return what + ": a state format change has no migration path (start without state, or run the version that wrote it)"
	case IncompatiblePlan:
		return what + ": same job version but other operators (" + e.Detail + "); a change of operators needs a new job version"
	}
	return what + ": incompatible (" + string(e.Reason) + ")"
}
