// Package ops defines the operators the runtime executes between sources
// and sinks, and builds them from a spec: map, filter, udf and aggregate
// here, window in internal/ops/windowop. Each kind has a Factory;
// internal/build maps kinds to factories.
//
// An operator is built once per job (Factory: config checked, output schema
// derived, no side effects) and instantiated once per subtask (Instance).
// Instances are driven by one goroutine: Process for each input batch,
// Watermark when the input watermark advances, Close once at the end.
//
// # Ownership
//
// Process receives a batch it owns: one reference of the record and one
// reference of its acknowledgement. It either passes both on with Emit (in
// a derived batch), or releases them: Rec.Release() and Ack.Release(nil)
// when the rows are done with (filtered away, folded into state). An
// operator that emits several batches from one input retains the ack once
// per extra batch.
package ops

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/config"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/internal/suggest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Batch is rows in flight with their acknowledgement.
type Batch struct {
	Rec arrow.RecordBatch
	Ack *ack.Node
	// Port is the operator output the batch leaves by: PortMain for
	// results, PortLate for a window's late rows (they travel the implicit
	// edge to the late_event_route sink).
	Port int
	// From is the upstream operator the batch comes from, at an operator
	// with several inputs (a join tells its sides apart by it); empty
	// elsewhere.
	From string
}

// Output ports.
const (
	PortMain = 0
	PortLate = 1
)

// Gauger is implemented by instances that report metrics of their own.
// Counters are monotonic totals since the instance started (windows fired,
// late rows, entries replayed); gauges are point-in-time values that go
// up and down (open windows, a WAL's cursor). Either may be nil. Both are
// called from other goroutines while the instance runs, so the values must
// be read atomically.
type Gauger interface {
	Counters() map[string]int64
	Gauges() map[string]int64
}

// Journaled is implemented by instances whose keyed state user code
// reads and writes (Process, through state.Value and state.Map): a test
// harness reads that state through the instance's journal, so that it
// sees what the function itself would, staged writes included.
type Journaled interface {
	Journal() *statestore.Journal
}

// Emitter passes batches downstream.
type Emitter interface {
	Emit(ctx context.Context, b Batch) error
}

// Instance is one subtask of an operator.
type Instance interface {
	// Process handles one input batch (see Ownership).
	Process(ctx context.Context, b Batch, out Emitter) error
	// Watermark tells the instance its input watermark advanced to wm (ms);
	// eventtime.EndOfTime means the input ended and everything may be flushed.
	// What it emits goes downstream before the watermark does.
	Watermark(ctx context.Context, wm int64, out Emitter) error
	// Close releases the instance's resources. Held batches' acks are
	// released with ErrAbandoned: their rows will be replayed.
	Close() error
}

// ErrAbandoned is the error held acknowledgements are released with when an
// operator closes without emitting their results (stop, failure): the
// source does not commit them, so a restart replays them.
var ErrAbandoned = fmt.Errorf("arkflow: rows abandoned at shutdown; they will be replayed")

// Context is what a factory gets to build an operator.
type Context struct {
	JobID string
	Spec  *job.Spec
	Op    *job.Operator
	// Input is the schema of the rows the operator receives. It is nil when
	// an upstream component failed to build: the factory then checks only
	// what does not depend on the rows (config fields, names), so that
	// validation reports its problems too; its result is discarded.
	Input *arrow.Schema
	// Inputs is the schema of the rows each upstream operator sends, by
	// its ID, for an operator whose inputs differ (a join; Input is nil
	// then). Nil, like Input, when an upstream failed to build.
	Inputs map[string]*arrow.Schema
	// Keyed is true when every input edge is partitioned by the operator's
	// key_field, or the operator runs with parallelism 1: all rows of a key
	// reach the same subtask.
	Keyed bool
	// Bound is the Go value the builder attached to this operator (a
	// function), or nil.
	Bound any
}

// Built is a validated operator, ready to be instantiated per subtask.
type Built struct {
	// Output is the schema of the rows the operator emits.
	Output *arrow.Schema
	// New creates the instance of one subtask. Stateful operators open
	// their journal and restore their committed state here.
	New func(t Task) (Instance, error)
	// Extra holds kind-specific information for the runtime (for example a
	// window's late-row route).
	Extra any
	// State says the operator keeps keyed state in the store whatever the
	// spec's stateful flag: its state is checkpointed, restored and
	// rescaled by key group.
	State bool
	// Timed says the operator is driven by its input watermark (it fires
	// windows): a processing-time source upstream of it sends the clock as
	// its watermark.
	Timed bool
	// Carry is the per-subtask mark the operator keeps across a restore,
	// or nil (see Carrier).
	Carry Carrier
	// InputKeys names, by upstream operator ID, the column a partitioned
	// edge from that operator routes its rows by, for an operator whose
	// inputs have keys of their own (a join); nil means key_field.
	InputKeys map[string]string
	// LateInput is the schema of the rows the operator sends on PortLate
	// when it is not its input's (a join routes the late rows of its
	// sides that route them, which share one schema); nil otherwise.
	LateInput *arrow.Schema
	// Query says how the operator's state is looked up while the job
	// runs, nil when it is not (see Queryable).
	Query *QueryShape
}

// Carrier describes a mark an operator keeps per subtask, outside its
// keyed state, that outlives the state it was written with: an int64
// that only grows (a window's watermark floor), stored under the first
// key group of the subtask. The runtime, not the operator, handles it
// across restores and rescales, knowing only this:
//
//   - a restore from a checkpoint that the local store ran on from keeps
//     the higher of the local mark and the restored one;
//   - a rescale gives each new subtask the lowest mark of the old subtasks
//     whose key groups it takes;
//   - a restore that may be interrupted saves the marks beside the store
//     as numbers (MarkKey's namespace and user key are not saved).
type Carrier interface {
	// MarkKey is the state key of the mark of the subtask of operator op
	// whose key groups start at group, in the state namespace jobNS.
	MarkKey(jobNS, op string, group int) statestore.Key
	// DecodeMark returns the mark a stored value holds; ok is false for a
	// value that is not one.
	DecodeMark(v []byte) (mark int64, ok bool)
	// EncodeMark returns the stored value of mark.
	EncodeMark(mark int64) []byte
}

// Task is what an operator subtask gets when it is created.
type Task struct {
	connectors.TaskInfo
	// State is the job's state backend (memory when the spec declares no
	// state block). Stateful operators keep their committed state there,
	// through a statestore.Journal.
	State statestore.Backend
	// KeyGroups are the key groups this subtask owns.
	KeyGroups job.KeyGroupRange
	// MaxParallelism is the job's number of key groups.
	MaxParallelism int
	// Groups maps a key to the key group its state is kept in (zero:
	// keys.HashGrouper(MaxParallelism); see Grouper).
	Groups keys.Grouper
	// Now is the wall clock in Unix ms (state TTL).
	Now func() int64
	// CheckpointWatermark returns the watermark the last completed
	// checkpoint recorded for this task (what a restore from it, or from
	// any later one, starts the task at); ok is false before the first.
	// Nil when checkpoints are off.
	CheckpointWatermark func() (wm int64, ok bool)
}

// Grouper is how the task's keyed state groups its keys.
func (t Task) Grouper() keys.Grouper {
	if t.Groups.Width > 0 {
		return t.Groups
	}
	return keys.HashGrouper(t.MaxParallelism)
}

// Factory builds an operator. Errors name their field relative to the
// operator (e.g. "config.expr") through a FieldPath method.
type Factory func(c Context) (Built, error)

// Errf returns a *job.FieldError at a path relative to the operator.
func Errf(path, format string, args ...any) error {
	return &job.FieldError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// Errors is several problems of one operator.
type Errors []error

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap exposes each problem.
func (es Errors) Unwrap() []error { return es }

// Err returns nil for no problems.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// PrefixErrors reports the field errors inside err under base (e.g. a
// config decode error under "config").
func PrefixErrors(base string, err error) Errors {
	var out Errors
	for _, fe := range connectors.FlattenFieldErrors(err) {
		out = append(out, &job.FieldError{Path: config.Join(base, fe.Path), Reason: fe.Reason})
	}
	return out
}

// ColumnList renders a schema's column names for error messages.
func ColumnList(s *arrow.Schema) string { return strings.Join(ColumnNames(s), ", ") }

// ColumnNames returns a schema's column names, in order.
func ColumnNames(s *arrow.Schema) []string {
	names := make([]string, 0, s.NumFields())
	for _, f := range s.Fields() {
		names = append(names, f.Name)
	}
	return names
}

// UnknownColumn is the reason of every error about a column name that is
// not in s: the columns there are, and the one name probably misspells
// (suggest.UnknownColumn).
func UnknownColumn(name string, s *arrow.Schema) string {
	return suggest.UnknownColumn(name, ColumnNames(s))
}

// Passthrough is an instance that emits its input unchanged (source and
// sink operators' own node, a map with nothing to do).
type Passthrough struct{}

// Process forwards the batch.
func (Passthrough) Process(ctx context.Context, b Batch, out Emitter) error { return out.Emit(ctx, b) }

// Watermark does nothing.
func (Passthrough) Watermark(context.Context, int64, Emitter) error { return nil }

// Close does nothing.
func (Passthrough) Close() error { return nil }

// Drop releases a batch whose rows are done with.
func Drop(b Batch) {
	if b.Rec != nil {
		b.Rec.Release()
	}
	b.Ack.Release(nil)
}
