// Package connectors defines how a job reads from and writes to the outside
// world: the Source and Sink interfaces every connector implements, the
// registry that maps a spec's input_type and output_type to a connector, and
// the pieces connectors share (declared schemas, metadata columns, position
// tracking).
//
// # Writing a connector
//
// A connector registers a factory under a type name. The factory decodes and
// checks the spec's config and returns an Input (or Output) without touching
// the outside world: validation calls the same factory that a real start
// does, so it must be free of side effects. The runtime then asks
// the Input for one Source per subtask, connects every source and sink before
// any data moves, and closes them in order on the way out.
//
//	func init() {
//		connectors.RegisterInput("lines", func(bc connectors.BuildContext) (connectors.Input, error) {
//			var cfg Config
//			if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
//				return nil, err
//			}
//			…
//		})
//	}
//
// Config errors that implement FieldPath() (as DecodeConfig's do) are
// reported with the full path in the spec, e.g. sources[0].config.path.
// The RegisterInput example is a complete input, run in a job.
//
// # Sources that cannot read again
//
// A restore of a checkpoint puts back the state as of the checkpoint's
// positions, and a rewindable source reads the rows after them again.
// For an Unrewindable source the runtime does instead:
//
//   - Without a WAL, a restore loses the rows read after the restored
//     checkpoint: they are in neither the restored state nor the input.
//     For those rows the job is at-most-once.
//   - With a WAL (a durability block) in a job that takes checkpoints,
//     nothing acknowledged to the writer is lost. The WAL keeps every
//     entry, also once its cursor has passed it, until a completed
//     checkpoint holds the entry's rows; a restore replays, in order and
//     once each, the entries whose rows the restored checkpoint does not
//     hold, instead of seeking the source back, and the source is sought
//     past everything the WAL holds. The positions tell which rows a
//     checkpoint holds, so the source must implement Positioner and its
//     rows must carry __meta_offset (and __meta_partition when it has
//     several partitions): a row without an offset is never held by a
//     checkpoint, and the WAL keeps its entry, and every later one, for
//     good.
//   - With a WAL and no checkpoints nothing is restored: the WAL replays
//     the entries its cursor has not passed, as for any source, and the
//     local state store holds the rest.
//
// Restores of the checkpoint a restart picks (the latest checkpoint, or
// with recovery latest_savepoint the latest savepoint) are covered. The
// restore of an older one, such as an old savepoint, after the WAL let go
// of the entries it needed, logs a warning naming the rows that cannot be
// replayed, and the job starts without them.
package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/config"
	"github.com/arkflow-rs/arkflow-go/job"
)

// ErrEndOfInput is returned by Source.Read when a bounded source has
// delivered everything. The runtime then sends a final watermark of +∞ and
// end-of-input through the graph, so every window fires and the job ends.
var ErrEndOfInput = errors.New("connectors: end of input")

// Batch is what a source delivers: rows of one source partition, in order,
// and the acknowledgement to call when they have been handled.
type Batch struct {
	// Record holds the rows, including the source's __meta_* columns. The
	// runtime takes ownership and releases it.
	Record arrow.RecordBatch
	// Partition is the source partition the rows come from (0 for
	// unpartitioned sources). Watermarks are tracked per partition.
	Partition int
	// Ack is called exactly once, from any goroutine, when every row of
	// the batch has been handled: nil when all outputs derived from it were
	// acknowledged by their sinks (or filtered away), otherwise the first
	// error. A source commits positions only on success. May be nil.
	Ack func(err error)
	// Accepted, when set, is called once when the job has taken the rows
	// over: with durability on, after the write-ahead log persisted them,
	// so they survive a crash from then on; without it, when the runtime
	// took the batch from Read. It gets an error instead when the rows
	// could not be taken (the WAL append failed, or the job stopped first).
	// Sources fed by callers who wait for an answer (a push source behind
	// an HTTP handler) use it; Ack comes later, when the rows have been
	// processed. May be nil.
	Accepted func(err error)
}

// Source reads the share of an external input that belongs to one subtask.
// Methods are called from one goroutine, except Close, which the runtime
// calls only after Read has returned for good.
type Source interface {
	// Connect opens the input. ctx bounds only connecting, not the life of
	// the connection.
	Connect(ctx context.Context) error
	// Read returns the next batch, blocking until one is available or ctx
	// is done (then it returns ctx.Err()). It returns ErrEndOfInput when a
	// bounded input is exhausted.
	Read(ctx context.Context) (Batch, error)
	// Close releases the input. It is called once, after the last Read,
	// also when Connect failed or was never called.
	Close(ctx context.Context) error
}

// Position is a source's resume point in one partition: the offset of the
// next record to read. Offsets before it have all been acknowledged (it is a
// contiguous frontier, never a high-water mark). The shape is ArkFlow v1's
// SourcePosition.
type Position struct {
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Positioner is implemented by sources that can report and resume from
// positions (checkpoints record them; restores seek to them).
type Positioner interface {
	// Positions returns the current acknowledged frontier of every
	// partition this subtask reads.
	Positions() []Position
	// Seek makes the next Connect resume from the given positions.
	// Partitions without a position keep the configured start.
	Seek(positions []Position) error
}

// CoverageAware is implemented by sources that need to know what a
// write-ahead log in front of them has covered. Behind a WAL a source is
// sought past everything the WAL holds, and the WAL replays its entries
// after the cursor itself, so the source's own frontier runs ahead of what
// was processed until those replays are acknowledged. The runtime's WAL
// wrapper calls SetCovered, before Connect, with a function returning the
// positions its cursor covers (every row before them acknowledged;
// partitions the cursor covers nothing of yet are absent, even when the
// WAL holds entries of them). Safe for concurrent use.
type CoverageAware interface {
	SetCovered(covered func() []Position)
}

// Unrewindable is implemented by sources that cannot read their input
// again: once read, a row exists only in the pipeline (and in the
// write-ahead log in front of the source, when durability is on). A push
// source, whose rows Go code hands over in process, is one. Seek on such a
// source never reads rows again; it only says where its positions go on
// from. What a restore then does, with and without a WAL, is in the
// package documentation ("Sources that cannot read again"): with a WAL
// and checkpoints nothing acknowledged to the writer is lost, provided the
// source implements Positioner and its rows carry __meta_offset.
type Unrewindable interface {
	Unrewindable()
}

// Progress is how far a source subtask is through its input: Position of
// End, both in Unit. End is 0 when the end is not known: an unbounded
// input, or one whose size cannot be told before it ends.
type Progress struct {
	Position, End int64
	// Unit is what Position and End count: "rows" or "bytes".
	Unit string
}

// ProgressReporter is implemented by sources that know how far through
// their input they are, such as a bounded generate input (rows of count)
// or a file input (bytes of the file's size). The runtime reports it as
// the task's gauges source_position_<unit> and source_end_<unit>, which
// "arkflow run" shows as position of end. Progress is called from other
// goroutines while Read runs, so it must read its values atomically; a
// source should update them per batch, not per row, so that reporting
// costs the pipeline nothing it would notice.
type ProgressReporter interface {
	Progress() Progress
}

// Sink writes rows to an external output. Methods are called from one
// goroutine.
type Sink interface {
	// Connect opens the output. ctx bounds only connecting.
	Connect(ctx context.Context) error
	// Write writes the rows and returns once they are delivered as far as
	// the sink promises (at-least-once: durable or acknowledged by the
	// remote end). The runtime acknowledges the rows' sources only after
	// Write returns nil. The record is owned by the runtime; a sink that
	// keeps it must Retain it.
	Write(ctx context.Context, rec arrow.RecordBatch) error
	// Close flushes and releases the output. It is called once, also when
	// Connect failed or was never called.
	Close(ctx context.Context) error
}

// AsyncSink is a Sink that can have several writes in flight. WriteAsync
// hands the rows to the output and returns; done is called exactly once,
// from any goroutine, when they are delivered as far as Write promises, or
// with the error that stopped them. An error returned by WriteAsync itself
// means nothing was handed over, and done is not called. rec is owned by
// the runtime again once WriteAsync returns. The runtime keeps a bounded
// number of writes in flight, acknowledges each write's rows when its done
// reports success (in any order: positions stay contiguous), and waits for
// every write in flight before the sink's chain ends. Close is called only
// after that, and never concurrently with WriteAsync.
type AsyncSink interface {
	Sink
	WriteAsync(ctx context.Context, rec arrow.RecordBatch, done func(error)) error
}

// TaskInfo describes the subtask a Source or Sink is created for.
type TaskInfo struct {
	JobID       string
	OperatorID  string
	Subtask     int
	Parallelism int
	// Logger is the job's logger for this subtask: the runtime has
	// already added the job, operator and subtask keys, so a connector
	// adds only its own. nil discards; a connector never falls back to
	// slog.Default.
	Logger *slog.Logger
}

// BuildContext is what a factory gets to build an Input or Output.
type BuildContext struct {
	JobID      string
	OperatorID string
	// Config is the spec's config for this source or sink, verbatim JSON
	// (never nil; "{}" when absent).
	Config json.RawMessage
	// Bound is the Go value given to the builder for this operator (for
	// example a memory.Source holding its batches), or nil for declarative
	// specs. Factories that need live values use it; others ignore it.
	Bound any
	// Time is a source's time block (nil for sinks, and for a source
	// under processing time without one). A source whose rows a caller
	// hands over and can be answered (push; a server) uses it to refuse a
	// row without an event time at the call, instead of letting the job
	// drop it after the caller was told it was accepted.
	Time *job.Time
	// Logger is the job's logger for this operator (the job and operator
	// keys already added), for what the Input or Output logs outside a
	// subtask, such as a metadata lookup. nil discards; a connector never
	// falls back to slog.Default.
	Logger *slog.Logger
}

// Input is a validated, not yet connected source configuration.
type Input interface {
	// Schema is the schema of every batch the sources produce, including
	// __meta_* columns.
	Schema() *arrow.Schema
	// Partitions is the number of source partitions, or 0 when not known
	// before connecting. Subtask s of P reads partitions p with p % P == s.
	Partitions() int
	// NewSource creates the source of one subtask. It must not do I/O.
	NewSource(info TaskInfo) (Source, error)
}

// Output is a validated, not yet connected sink configuration.
type Output interface {
	// NewSink creates the sink of one subtask. It must not do I/O.
	NewSink(info TaskInfo) (Sink, error)
}

// InputFactory builds an Input from a spec. It must have no side effects.
type InputFactory func(bc BuildContext) (Input, error)

// OutputFactory builds an Output from a spec for rows of the given schema.
// It must have no side effects. schema is nil when the rows' schema is
// unknown because an upstream component failed to build: the factory then
// checks only its config, so that validation reports every problem at once.
type OutputFactory func(bc BuildContext, schema *arrow.Schema) (Output, error)

// global is the registry the package-level functions use: connector
// packages register into it from init.
var global = newEnvironment()

// RegisterInput makes an input type available to specs. It is meant to be
// called from init; registering a name twice panics (a programming error,
// like database/sql.Register).
func RegisterInput(name string, f InputFactory) {
	if err := global.RegisterInput(name, f); err != nil {
		panic(err.Error())
	}
}

// RegisterOutput makes an output type available to specs; see RegisterInput.
func RegisterOutput(name string, f OutputFactory) {
	if err := global.RegisterOutput(name, f); err != nil {
		panic(err.Error())
	}
}

// LookupInput returns the factory of a globally registered input type.
func LookupInput(name string) (InputFactory, bool) { return global.LookupInput(name) }

// LookupOutput returns the factory of a globally registered output type.
func LookupOutput(name string) (OutputFactory, bool) { return global.LookupOutput(name) }

// InputTypes lists the globally registered input types, sorted.
func InputTypes() []string { return global.InputTypes() }

// OutputTypes lists the globally registered output types, sorted.
func OutputTypes() []string { return global.OutputTypes() }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// DecodeConfig decodes a connector config strictly: unknown fields and
// values of the wrong type are errors, all reported at once, each a
// *job.FieldError naming its field path relative to the config. The
// returned error implements Unwrap() []error over them.
func DecodeConfig(raw json.RawMessage, dst any) error {
	return fieldErrors(config.Decode(raw, dst))
}

// fieldErrors turns decode problems into one error over *job.FieldError
// values (nil when there are none). errors.Join prints one per line, as
// the decoder's list always did.
func fieldErrors(ps config.Problems) error {
	if len(ps) == 0 {
		return nil
	}
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = &job.FieldError{Path: p.Path, Reason: p.Reason}
	}
	return errors.Join(errs...)
}

// FieldError returns an error about one config field, a *job.FieldError,
// reported with the field's full path in the spec.
func FieldError(path, format string, args ...any) error {
	return &job.FieldError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// Fields collects several config problems into one error (nil when empty).
type Fields struct{ errs config.Problems }

// Add records a problem at path (relative to the config).
func (f *Fields) Add(path, format string, args ...any) { f.errs.Add(path, format, args...) }

// Merge records every field error inside err (as returned by DecodeConfig
// or FieldError) under base, and any other error at base.
func (f *Fields) Merge(base string, err error) {
	if err == nil {
		return
	}
	for _, e := range FlattenFieldErrors(err) {
		f.errs.Add(config.Join(base, e.Path), "%s", e.Reason)
	}
}

// Err returns the collected problems, each a *job.FieldError, or nil.
func (f *Fields) Err() error { return fieldErrors(f.errs) }

// FlattenFieldErrors turns err into a list of field errors: a
// *job.FieldError is kept, other errors with a FieldPath() method keep
// their path (and FieldReason(), if they have one, as the reason), lists
// (Unwrap() []error) are walked, and anything else gets an empty path.
func FlattenFieldErrors(err error) []*job.FieldError {
	var out []*job.FieldError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if fe, ok := e.(*job.FieldError); ok {
			out = append(out, fe)
			return
		}
		if fp, ok := e.(interface{ FieldPath() string }); ok {
			out = append(out, &job.FieldError{Path: fp.FieldPath(), Reason: reasonOf(e)})
			return
		}
		if u, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range u.Unwrap() {
				walk(x)
			}
			return
		}
		out = append(out, &job.FieldError{Reason: e.Error()})
	}
	walk(err)
	return out
}

func reasonOf(e error) string {
	if r, ok := e.(interface{ FieldReason() string }); ok {
		return r.FieldReason()
	}
	return e.Error()
}
