package arkflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/jobdefaults"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
	"github.com/arkflow-rs/arkflow-go/window"
)

// Builder assembles a job in Go. It produces the same declarative Spec a
// JSON or YAML file would (Spec), so a built job and its spec file compile
// to the same plan.
//
// Operators are added one after another; each is connected from the
// previous one. KeyBy makes the next edge partitioned by a field, so every
// row of a key reaches the same subtask. From moves back to an earlier
// operator to start another branch, or to several, to merge their branches
// into the next operator.
//
// Builder methods never panic and never return errors: mistakes are
// recorded and Build reports all of them together with the spec's own
// validation errors, each naming the Builder call that made it.
type Builder struct {
	spec     job.Spec
	bindings map[string]any
	// cursor is where the next operator connects from: the last one
	// added, or the operators From named.
	cursor  []string
	keyBy   string
	keyCall string // the KeyBy call that set keyBy
	// calls names the Builder call that wrote each operator, edge, source
	// and sink, by its place in the spec ("operators[2]", "edges[1]",
	// "sources[0]"), and the KeyBy call that set an operator's key_field
	// ("operators[2].key_field"), for inBuilderTerms.
	calls    map[string]string
	problems []*job.ValidationError
}

// NewJob starts a job with the given ID (1–128 letters, digits, '-', '_').
func NewJob(id string) *Builder {
	b := &Builder{bindings: map[string]any{}, calls: map[string]string{}}
	b.spec.ID = id
	return b
}

// componentCall renders a call that adds operator id, as `.Window("w", ...)`.
func componentCall(method, id string) string { return fmt.Sprintf(".%s(%q, ...)", method, id) }

func (b *Builder) problem(op, format string, args ...any) {
	b.callProblem(op, "builder", format, args...)
}

// callProblem records a problem with the argument of a Builder call, named
// as the field.
func (b *Builder) callProblem(op, call, format string, args ...any) {
	b.problems = append(b.problems, &job.ValidationError{Job: b.spec.ID, Operator: op, Field: call, Reason: fmt.Sprintf(format, args...)})
}

// Version sets the job's version number (default 1; 0 is a mistake Build
// reports, not the default). A new version of a job that starts from a
// savepoint of the previous one keeps its ID and raises its version.
func (b *Builder) Version(v uint64) *Builder {
	if v == 0 {
		b.callProblem("", ".Version(v)", "must be >= 1 (got 0); leave Version out for the default 1")
		return b
	}
	b.spec.Version = v
	return b
}

// Parallelism sets the default number of subtasks per operator (default 1;
// values below 1 are mistakes Build reports).
func (b *Builder) Parallelism(p int) *Builder {
	if p < 1 {
		b.callProblem("", ".Parallelism(n)", "must be >= 1 (got %d); leave Parallelism out for the default 1", p)
		return b
	}
	b.spec.Parallelism = p
	return b
}

// MaxParallelism sets the number of key groups (default 128; values below
// 1 are mistakes Build reports). It cannot change once the job has state.
func (b *Builder) MaxParallelism(m int) *Builder {
	if m < 1 {
		b.callProblem("", ".MaxParallelism(n)", "must be in [1, %d] (got %d); leave MaxParallelism out for the default %d", jobdefaults.MaxMaxParallelism, m, jobdefaults.MaxParallelism)
		return b
	}
	b.spec.MaxParallelism = m
	return b
}

// SourceOption tunes a source: EventTime and Durable, which only a Source
// takes (passing one to another operator does not compile), and every
// OperatorOption.
type SourceOption interface{ applySource(*opSettings) }

// OperatorOption tunes any operator, sources included: WithParallelism.
type OperatorOption interface {
	SourceOption
	applyOp(*opSettings)
}

// opSettings is what operator options change: the operator, and for a
// source its time declaration.
type opSettings struct {
	op         *job.Operator
	time       *job.Time
	keyedBy    string
	durability json.RawMessage
	schema     *arrow.Schema // WithSchema
	// problems are mistakes in the options' arguments, as {call, reason}.
	problems [][2]string
}

// opOption is an option of every operator.
type opOption func(*opSettings)

func (f opOption) applyOp(s *opSettings)     { f(s) }
func (f opOption) applySource(s *opSettings) { f(s) }

// sourceOption is an option of sources only.
type sourceOption func(*opSettings)

func (f sourceOption) applySource(s *opSettings) { f(s) }

// KeyedBy is a SourceOption promising that the source's input is already
// partitioned by column field: all rows with one value of it are in one
// partition (a Kafka topic whose producer keyed its messages by it), so
// each source subtask reads every row of its keys. An operator keyed by
// the same field (Window, Aggregate, Process with KeyBy's field) then runs
// in the source's subtask without a partitioned edge: no shuffle, and its
// placement units can run on different Agents of a Hub. Its state is kept
// per subtask, so the parallelism of such a job cannot change across a
// restore; re-key through a Kafka topic to change it (see
// examples/rekey). A broken promise splits a key's results across
// subtasks.
func KeyedBy(field string) SourceOption {
	return sourceOption(func(s *opSettings) {
		if field == "" {
			s.problems = append(s.problems, [2]string{"KeyedBy(field)", "needs the column the input is partitioned by"})
			return
		}
		s.keyedBy = field
	})
}

// WithParallelism runs the operator with n subtasks instead of the job's
// parallelism. n must be at least 1 (Build reports a smaller one; leave
// the option out for the job's parallelism).
func WithParallelism(n int) OperatorOption {
	return opOption(func(s *opSettings) {
		if n < 1 {
			s.problems = append(s.problems, [2]string{"WithParallelism(n)", fmt.Sprintf("must be >= 1 (got %d); leave the option out for the job's parallelism", n)})
			return
		}
		s.op.Parallelism = n
	})
}

// WithSchema declares the rows a Map or Process function emits when
// their schema is not its input's, so that the operators after it are
// checked against them at Build. Build reports it on other operators.
func WithSchema(schema *arrow.Schema) OperatorOption {
	return opOption(func(s *opSettings) {
		switch s.op.Kind {
		case job.KindMap, job.KindUDF:
			s.schema = schema
		default:
			s.problems = append(s.problems, [2]string{"WithSchema(schema)", "only a Map or Process function declares its output schema"})
		}
	})
}

// EventTime is a SourceOption: the source's rows carry their event time in
// Field (int64 milliseconds or a timestamp column), and each partition of
// the source has its own watermark, the source's being their minimum. Zero
// fields are the defaults: bounded out-of-orderness of 0, no idle timeout,
// the watermark moving with whole batches, no allowed lateness, late rows
// dropped (counted, and warned about). Durations are whole milliseconds in
// the spec: one between 0 and 1 ms is a mistake Build reports.
type EventTime struct {
	// Field is the event-time column (required).
	Field string
	// OutOfOrderness lets rows arrive up to this far behind the newest row
	// of their partition before they count as late: the watermark is the
	// largest event time seen minus OutOfOrderness.
	OutOfOrderness time.Duration
	// Monotonous declares event times that never decrease within a
	// partition: the watermark is the largest event time seen (no
	// OutOfOrderness with it).
	Monotonous bool
	// IdleTimeout lets a partition that delivered nothing for this long
	// stop holding the watermark back until it delivers again. Without
	// one, a partition that never gets a row holds every window back.
	IdleTimeout time.Duration
	// PerRow classifies each row against the watermark in force before it
	// (spec: watermark.advance "per_row", an arkflow-go extension) instead
	// of ArkFlow's rule, where the watermark moves with the whole batch
	// before its rows are classified (so with OutOfOrderness 0 an in-order
	// row sharing a batch with a later row across a window boundary is
	// late). In-order input is then never late, however it is batched;
	// rows out of order by more than OutOfOrderness still are. A batch
	// with rows behind the watermark is split before them, without
	// copying.
	PerRow bool
	// AdvanceWhenIdle, when above 0, lets the watermark follow the clock
	// while every partition of the source is idle (spec: watermark.all_idle
	// "advance" and all_idle_delay_ms, an arkflow-go extension), so a
	// quiet source still closes its last windows: at each check the
	// watermark becomes max(watermark, now − AdvanceWhenIdle −
	// OutOfOrderness). It needs IdleTimeout. It assumes event times are
	// wall-clock times and that AdvanceWhenIdle bounds how long a row takes
	// to reach the source; do not use it to replay old data. Without it the
	// watermark holds while all partitions are idle, and open windows wait
	// for new rows, the end of the input or Job.Drain.
	AdvanceWhenIdle time.Duration
	// AllowedLateness keeps fired windows this long so that late rows can
	// still update them (with LateUpdate).
	AllowedLateness time.Duration
	// LateUpdate makes late rows within AllowedLateness update their
	// window, which is emitted again with window.ColumnUpdate true.
	LateUpdate bool
	// RouteLate names a sink (see LateSink) that receives late rows, and
	// rows without an event time, with their original columns.
	RouteLate string
}

func (e EventTime) applySource(s *opSettings) {
	t := &job.Time{Mode: job.EventTime, TimestampField: e.Field, LateEventPolicy: job.LateDrop,
		Watermark:         &job.Watermark{Strategy: job.BoundedOutOfOrderness, OutOfOrdernessMS: e.OutOfOrderness.Milliseconds()},
		AllowedLatenessMS: e.AllowedLateness.Milliseconds()}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"OutOfOrderness", e.OutOfOrderness}, {"IdleTimeout", e.IdleTimeout}, {"AdvanceWhenIdle", e.AdvanceWhenIdle}, {"AllowedLateness", e.AllowedLateness}} {
		if d.v > 0 && d.v < time.Millisecond {
			s.problems = append(s.problems, [2]string{"EventTime{" + d.name + "}", fmt.Sprintf("must be 0 or at least 1ms (got %s): the spec keeps milliseconds", d.v)})
		}
	}
	if e.Monotonous {
		if e.OutOfOrderness != 0 {
			s.problems = append(s.problems, [2]string{"EventTime{Monotonous}", fmt.Sprintf("monotonous event times have no out-of-orderness (got OutOfOrderness %s)", e.OutOfOrderness)})
		}
		t.Watermark.Strategy = job.Monotonous
	}
	if e.IdleTimeout != 0 {
		ms := e.IdleTimeout.Milliseconds()
		t.Watermark.IdleTimeoutMS = &ms
	}
	if e.PerRow {
		t.Watermark.Advance = job.AdvancePerRow
	}
	if e.AdvanceWhenIdle != 0 {
		t.Watermark.AllIdle, t.Watermark.AllIdleDelayMS = job.AllIdleAdvance, e.AdvanceWhenIdle.Milliseconds()
	}
	switch {
	case e.LateUpdate && e.RouteLate != "":
		s.problems = append(s.problems, [2]string{"EventTime{LateUpdate, RouteLate}", "late rows either update their window or go to a sink: set one of the two"})
	case e.LateUpdate:
		t.LateEventPolicy = job.LateUpdate
	case e.RouteLate != "":
		t.LateEventPolicy, t.LateEventRoute = job.LateRoute, e.RouteLate
	}
	s.time = t
}

// SourceComponent is a source configuration: a value whose JSON encoding is
// the spec config of its input type, such as file.SourceConfig or
// generate.Config. Live sources (memory.Source) also carry their data.
type SourceComponent interface{ InputType() string }

// SinkComponent is a sink configuration: a value whose JSON encoding is the
// spec config of its output type, such as file.SinkConfig or a
// *memory.Sink.
type SinkComponent interface{ OutputType() string }

func (b *Builder) config(op string, v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		b.problem(op, "cannot encode the config: %v", err)
		return nil
	}
	if string(raw) == "null" || string(raw) == "{}" {
		return nil
	}
	return raw
}

// add appends an operator connected from each operator of the cursor
// (unless it is a source) and moves the cursor to it. call is the Builder
// call that adds it, as errors name it (componentCall).
func (b *Builder) add(call string, op job.Operator, opts []OperatorOption) opSettings {
	srcOpts := make([]SourceOption, 0, len(opts))
	for _, o := range opts {
		if o != nil {
			srcOpts = append(srcOpts, o)
		}
	}
	return b.addSource(call, op, srcOpts)
}

// addSource is add with source options (a source's, or any operator's
// OperatorOptions, which are SourceOptions too).
func (b *Builder) addSource(call string, op job.Operator, opts []SourceOption) opSettings {
	at, set := b.settle(call, &op, opts)
	if op.Kind != job.KindSource {
		switch {
		case len(b.cursor) == 0:
			b.problem(op.ID, "%s %q has no input: add a Source first, or use From(id)", op.Kind, op.ID)
		default:
			if b.keyBy != "" {
				if op.KeyField == "" {
					op.KeyField = b.keyBy
					b.calls[at+".key_field"] = b.keyCall
				} else if op.KeyField != b.keyBy {
					b.problem(op.ID, "KeyBy(%q) is followed by an operator keyed by %q", b.keyBy, op.KeyField)
				}
			}
			for _, from := range b.cursor {
				e := job.Edge{ID: from + "-" + op.ID, From: from, To: op.ID}
				b.calls[fmt.Sprintf("edges[%d]", len(b.spec.Edges))] = call
				if b.keyBy != "" {
					e.Partitioned = !b.coPartitioned(from, b.keyBy, &op)
				}
				b.spec.Edges = append(b.spec.Edges, e)
			}
		}
	} else if b.keyBy != "" {
		b.problem(op.ID, "KeyBy(%q) must be followed by the operator it keys, not by a source", b.keyBy)
	}
	b.keyBy = ""
	b.spec.Operators = append(b.spec.Operators, op)
	b.cursor = []string{op.ID}
	set.op = nil
	return set
}

// settle applies the options of the operator op that call adds at the
// end of the spec's operators, records their problems and a repeated ID,
// and returns the operator's place in the spec ("operators[3]").
func (b *Builder) settle(call string, op *job.Operator, opts []SourceOption) (string, opSettings) {
	at := fmt.Sprintf("operators[%d]", len(b.spec.Operators))
	b.calls[at] = call
	set := opSettings{op: op}
	for _, o := range opts {
		if o != nil {
			o.applySource(&set)
		}
	}
	for _, p := range set.problems {
		b.callProblem(op.ID, p[0], "%s", p[1])
	}
	if existing, _ := b.spec.Operator(op.ID); existing != nil {
		b.problem(op.ID, "operator %q is added twice", op.ID)
	}
	return at, set
}

// coPartitioned reports whether the rows of from are partitioned by key
// already (KeyedBy) and op runs with from's parallelism.
func (b *Builder) coPartitioned(from, key string, op *job.Operator) bool {
	if build.CoPartitioned(&b.spec)[from] != key {
		return false
	}
	up, _ := b.spec.Operator(from)
	return up != nil && planner.OperatorParallelism(&b.spec, up) == planner.OperatorParallelism(&b.spec, op)
}

// Source adds a source. A job may have several; each starts a branch.
func (b *Builder) Source(id string, src SourceComponent, opts ...SourceOption) *Builder {
	if src == nil {
		b.problem(id, "Source(%q) needs a source component (for example generate.Config or file.SourceConfig)", id)
		return b
	}
	call := componentCall("Source", id)
	set := b.addSource(call, job.Operator{ID: id, Kind: job.KindSource}, opts)
	b.calls[fmt.Sprintf("sources[%d]", len(b.spec.Sources))] = call
	b.spec.Sources = append(b.spec.Sources, job.Source{OperatorID: id, InputType: src.InputType(), Config: b.config(id, src), Time: set.time,
		Durability: set.durability, KeyedBy: set.keyedBy})
	b.bindings[id] = src
	return b
}

// Sink adds a sink fed by the current operator.
func (b *Builder) Sink(id string, snk SinkComponent, opts ...OperatorOption) *Builder {
	if snk == nil {
		b.problem(id, "Sink(%q) needs a sink component (for example file.SinkConfig or memory.NewSink())", id)
		return b
	}
	call := componentCall("Sink", id)
	b.add(call, job.Operator{ID: id, Kind: job.KindSink}, opts)
	b.calls[fmt.Sprintf("sinks[%d]", len(b.spec.Sinks))] = call
	b.spec.Sinks = append(b.spec.Sinks, job.Sink{OperatorID: id, OutputType: snk.OutputType(), Config: b.config(id, snk)})
	b.bindings[id] = snk
	return b
}

// LateSink adds a sink that receives only late rows: name it in
// RouteLate on a source, and every window downstream of that source sends
// the rows it cannot accept (late, or without an event time) there, with
// their original columns. It has no other input, and the current operator
// does not change.
func (b *Builder) LateSink(id string, snk SinkComponent) *Builder {
	if snk == nil {
		b.problem(id, "LateSink(%q) needs a sink component", id)
		return b
	}
	cursor, key := b.cursor, b.keyBy
	b.cursor, b.keyBy = nil, ""
	if existing, _ := b.spec.Operator(id); existing != nil {
		b.problem(id, "operator %q is added twice", id)
	}
	call := componentCall("LateSink", id)
	b.calls[fmt.Sprintf("operators[%d]", len(b.spec.Operators))] = call
	b.calls[fmt.Sprintf("sinks[%d]", len(b.spec.Sinks))] = call
	b.spec.Operators = append(b.spec.Operators, job.Operator{ID: id, Kind: job.KindSink})
	b.spec.Sinks = append(b.spec.Sinks, job.Sink{OperatorID: id, OutputType: snk.OutputType(), Config: b.config(id, snk)})
	b.bindings[id] = snk
	b.cursor, b.keyBy = cursor, key
	return b
}

// KeyBy partitions the edge to the next operator by field (every edge to
// it, after a From that names several operators): every row goes to the
// subtask that owns the key group of its field value, and the next
// operator gets field as its key_field. When the rows of an edge are
// already partitioned by field (a source with KeyedBy(field), through
// operators of the same parallelism) and the next operator has that
// parallelism too, the edge stays a forward one: the key needs no shuffle.
func (b *Builder) KeyBy(field string) *Builder {
	if field == "" {
		b.problem(b.current(), "KeyBy needs a field name")
	}
	if b.keyBy != "" {
		b.problem(b.current(), "KeyBy(%q) follows KeyBy(%q) with no operator between them", field, b.keyBy)
	}
	b.keyBy, b.keyCall = field, fmt.Sprintf(".KeyBy(%q)", field)
	return b
}

// From continues building from an existing operator, to add another
// branch: the next operator is connected from id. Given more operators,
// it is connected from each of them, which merges their branches into
// it; a KeyBy before it partitions each of those edges:
//
//	From("clicks", "orders").KeyBy("user").Window("w", def)
func (b *Builder) From(id string, more ...string) *Builder {
	ids := append([]string{id}, more...)
	call := "From(" + quoteAll(ids) + ")"
	for i, id := range ids {
		switch op, _ := b.spec.Operator(id); {
		case op == nil && len(ids) == 1:
			b.problem(id, "%s: no such operator (add it first)", call)
		case op == nil:
			b.problem(id, "%s: no such operator %q (add it first)", call, id)
		case slices.Contains(ids[:i], id):
			b.problem(id, "%s names %q twice: every row would be delivered twice", call, id)
		}
	}
	if b.keyBy != "" {
		b.problem(id, "KeyBy(%q) is not followed by an operator", b.keyBy)
		b.keyBy = ""
	}
	b.cursor = ids
	return b
}

// current is the operator the builder is at, for problems that name one:
// the first the cursor names.
func (b *Builder) current() string {
	if len(b.cursor) == 0 {
		return ""
	}
	return b.cursor[0]
}

// quoteAll renders ids as Go string literals separated by commas.
func quoteAll(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	return strings.Join(q, ", ")
}

// MapFunc transforms a batch in Go, returning rows of the same schema
// (give Map WithSchema for another). It must not keep rec; the returned
// record is owned by the runtime. A batch with no rows, or nil, emits
// nothing.
type MapFunc func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error)

// Map adds a Go transformation. It runs only in the program that defines
// f; in the spec it is a map operator naming its function.
func (b *Builder) Map(id string, f MapFunc, opts ...OperatorOption) *Builder {
	if f == nil {
		b.problem(id, "Map(%q) needs a MapFunc", id)
		return b
	}
	set := b.add(componentCall("Map", id), job.Operator{ID: id, Kind: job.KindMap, Config: b.config(id, ops.MapConfig{Function: id})}, opts)
	b.bindings[id] = ops.MapBinding{Name: id, Fn: ops.MapFunc(f), Output: set.schema}
	return b
}

// Columns adds a declarative map: computed columns, drops and a
// selection, in the expression language (see the package documentation).
func (b *Builder) Columns(id string, c job.Columns, opts ...OperatorOption) *Builder {
	if set := b.add(componentCall("Columns", id), job.Operator{ID: id, Kind: job.KindMap, Config: b.config(id, ops.NewMapConfig(c))}, opts); set.schema != nil {
		b.callProblem(id, "WithSchema(schema)", "a Columns map computes its output schema from its expressions")
	}
	return b
}

// SQL adds a map that runs query, a single SELECT over each batch read
// as the table flow, e.g. SQL("big", "SELECT user, amount * 2 AS twice
// FROM flow WHERE amount > 10"); its rows are the query's. A SQL
// engine must be linked in: import _ "github.com/arkflow-rs/arkflow-go/connectors/duckdb"
// (it needs cgo). Without one, the job fails validation.
func (b *Builder) SQL(id, query string, opts ...OperatorOption) *Builder {
	if set := b.add(componentCall("SQL", id), job.Operator{ID: id, Kind: job.KindMap, Config: b.config(id, ops.MapConfig{SQL: query})}, opts); set.schema != nil {
		b.callProblem(id, "WithSchema(schema)", "a SQL map's output schema is its query's")
	}
	return b
}

// FilterFunc returns, for each row of rec, whether to keep it.
type FilterFunc func(ctx context.Context, rec arrow.RecordBatch) ([]bool, error)

// Filter adds a Go filter. It runs only in the program that defines f.
func (b *Builder) Filter(id string, f FilterFunc, opts ...OperatorOption) *Builder {
	if f == nil {
		b.problem(id, "Filter(%q) needs a FilterFunc", id)
		return b
	}
	b.add(componentCall("Filter", id), job.Operator{ID: id, Kind: job.KindFilter, Config: b.config(id, ops.FilterConfig{Function: id})}, opts)
	b.bindings[id] = ops.FilterBinding{Name: id, Fn: ops.FilterFunc(f)}
	return b
}

// Where adds a filter that keeps the rows for which the boolean
// expression expr is true (null counts as false), e.g.
// Where("big-de", "amount > 10 and country == 'DE'").
func (b *Builder) Where(id, expr string, opts ...OperatorOption) *Builder {
	b.add(componentCall("Where", id), job.Operator{ID: id, Kind: job.KindFilter, Config: b.config(id, ops.FilterConfig{Expr: expr})}, opts)
	return b
}

// Aggregate adds a keyed running aggregate (no window): per key, the
// aggregates over every row seen so far, emitted after each batch
// (job.Running) or once at the end of the input (job.Final), e.g.
// Aggregate("per-user", job.Running(job.Count("n"), job.Sum("amount", "total"))).
// The aggregates are the values a Window's definition takes. It must be
// keyed: use KeyBy before it, or run it with parallelism 1.
func (b *Builder) Aggregate(id string, a job.Aggregation, opts ...OperatorOption) *Builder {
	op := job.Operator{ID: id, Kind: job.KindAggregate, Stateful: true, Config: b.config(id, a)}
	if b.keyBy == "" && len(b.cursor) > 0 {
		b.problem(id, "Aggregate(%q) needs a key: call KeyBy(field) before it", id)
	}
	b.add(componentCall("Aggregate", id), op, opts)
	return b
}

// Window adds a keyed window operator: tumbling, sliding or session
// windows with aggregates, fired by the watermark of its sources' event
// time (or by the clock for processing-time sources), e.g.
// Window("per-minute", window.Tumbling(time.Minute, job.Count("n"), job.Sum("amount", "total"))).
// Call KeyBy before it. See the window package for the semantics.
func (b *Builder) Window(id string, w window.Definition, opts ...OperatorOption) *Builder {
	if b.keyBy == "" && len(b.cursor) > 0 {
		b.problem(id, "Window(%q) needs a key: call KeyBy(field) before it", id)
	}
	b.add(componentCall("Window", id), job.Operator{ID: id, Kind: job.KindWindow, Stateful: true, Config: b.config(id, w)}, opts)
	return b
}

// ProcessContext gives a Process function the keyed state of its rows.
type ProcessContext struct {
	keyed func(row int) (*statestore.Keyed, error)
}

// State returns the keyed state of row's key, to read and write with
// state.Value and state.Map. Writes commit when the batch's output is
// acknowledged.
func (pc *ProcessContext) State(row int) (*state.Keyed, error) {
	k, err := pc.keyed(row)
	if err != nil {
		return nil, err
	}
	return statestore.Public(k).(*state.Keyed), nil
}

// ProcessFunc is a Go function over a batch with keyed state. It returns
// the rows to emit (nil or empty: none), of the input schema (give Process
// WithSchema for another). It must not keep rec.
type ProcessFunc func(ctx context.Context, pc *ProcessContext, rec arrow.RecordBatch) (arrow.RecordBatch, error)

func wrapProcess(f ProcessFunc) ops.ProcessFunc {
	return func(ctx context.Context, keyed func(int) (*statestore.Keyed, error), rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		return f(ctx, &ProcessContext{keyed: keyed}, rec)
	}
}

// Process adds a keyed, stateful Go operator (a stateful "udf" in the
// spec): call KeyBy before it; the function reads and writes the state of
// each row's key with state.Value and state.Map. State lives in the job's
// state backend (the spec's state block; in memory without one). Give it
// WithSchema when its rows have another schema than its input.
func (b *Builder) Process(id string, f ProcessFunc, opts ...OperatorOption) *Builder {
	if f == nil {
		b.problem(id, "Process(%q) needs a ProcessFunc", id)
		return b
	}
	if b.keyBy == "" && len(b.cursor) > 0 {
		b.problem(id, "Process(%q) needs a key: call KeyBy(field) before it", id)
	}
	set := b.add(componentCall("Process", id), job.Operator{ID: id, Kind: job.KindUDF, Stateful: true, Config: b.config(id, ops.MapConfig{Function: id})}, opts)
	b.bindings[id] = ops.ProcessBinding{Name: id, Fn: wrapProcess(f), Output: set.schema}
	return b
}

// State configures the job's keyed state. Without State (and without
// Checkpoint), state lives in memory and is gone when the process ends.
//
// An empty Backend is job.BackendBadger, which keeps its files in Path,
// or, when Path is empty, under the data directory (WithDataDir:
// DIR/<job id>/state): the job needs one of the two. A zero FormatVersion
// is 1; a nil TTLMS keeps state forever.
func (b *Builder) State(st job.State) *Builder {
	if st.Backend == "" {
		st.Backend = job.BackendBadger
	}
	b.spec.State = &st
	return b
}

// Checkpoint configures periodic checkpoints to cp.ObjectStoreURI
// (file:///dir or s3://bucket/prefix; required). A zero IntervalMS or
// Retention takes ArkFlow v1's default (30 s, 3 checkpoints kept).
//
// Checkpoints need keyed state on disk: without State, the job uses the
// default backend, Badger, as if State(job.State{Backend: "badger"}) had
// been called, so it needs a data directory (WithDataDir).
func (b *Builder) Checkpoint(cp job.Checkpoint) *Builder { b.spec.Checkpoint = &cp; return b }

// Spec returns the declarative spec the builder describes, with defaults
// filled in (the Badger state of a job with Checkpoint and without State
// included). Its JSON is what a Hub stores; FromSpec on it (with the same
// Go values bound) builds the same job.
func (b *Builder) Spec() *job.Spec {
	s := b.spec.Clone()
	if s.Checkpoint != nil && s.State == nil {
		s.State = &job.State{Backend: job.BackendBadger}
	}
	job.ApplyDefaults(s)
	return s
}

// Build validates the job (the builder's own checks plus the deep build of
// every component) and returns it ready to run, or every problem found as
// ValidationErrors. An error names the Builder call that made the
// mistake, followed by the path inside the value that call was given
// (".Checkpoint(job.Checkpoint{...}): interval_ms: must be > 0",
// `.Window("w", ...): aggregates[0].field: unknown column "amout" (…);
// did you mean "amount"?`, `.KeyBy("usr"): unknown column "usr" (…)`),
// not the spec path ("checkpoint.interval_ms", "operators[1].key_field")
// the Go code never wrote.
func (b *Builder) Build(opts ...Option) (*Job, error) {
	var all job.ValidationErrors
	all = append(all, b.problems...)
	if b.keyBy != "" {
		all = append(all, &job.ValidationError{Job: b.spec.ID, Operator: b.current(), Field: "builder", Reason: fmt.Sprintf("KeyBy(%q) is not followed by an operator", b.keyBy)})
	}
	bindings := make(map[string]any, len(b.bindings))
	for k, v := range b.bindings {
		bindings[k] = v
	}
	j, err := newJob(b.Spec(), bindings, opts)
	if err != nil {
		ves := job.AsValidationErrors(err)
		if ves == nil { // not a validation: say so, after the builder's own problems
			if len(all) == 0 {
				return nil, err
			}
			return nil, errors.Join(all, err)
		}
		// The builder's own problems come first; the spec's validation
		// may find the same mistake again (a Join's missing Left).
		said := map[[2]string]bool{}
		for _, e := range b.problems {
			said[[2]string{e.Operator, e.Field}] = true
		}
		for _, e := range ves {
			if e = b.inBuilderTerms(e); !said[[2]string{e.Operator, e.Field}] {
				all = append(all, e)
			}
		}
	}
	if len(all) > 0 {
		return nil, all
	}
	return j, nil
}

// builderCalls are the spec paths a Builder writes and the calls that
// write them; "[]" stands for any index. The longest matching path wins,
// over the Builder's own calls too (Builder.calls: the call that added an
// operator, edge, source or sink).
var builderCalls = []struct{ path, call string }{
	{"version", ".Version(v)"},
	{"id", "NewJob(id)"},
	{"parallelism", ".Parallelism(n)"},
	{"max_parallelism", ".MaxParallelism(n)"},
	{"state", ".State(job.State{...})"},
	{"checkpoint", ".Checkpoint(job.Checkpoint{...})"},
	{"durability", ".Durability(job.Durability{...})"},
	{"sources", ".Source(...)"},
	{"sinks", ".Sink(...)"},
	{"operators[].parallelism", "WithParallelism(n)"},
	{"sources[].time", "EventTime{...}"},
	{"sources[].time.timestamp_field", "EventTime{Field}"},
	{"sources[].time.watermark.out_of_orderness_ms", "EventTime{OutOfOrderness}"},
	{"sources[].time.watermark.idle_timeout_ms", "EventTime{IdleTimeout}"},
	{"sources[].time.watermark.advance", "EventTime{PerRow}"},
	{"sources[].time.watermark.all_idle", "EventTime{AdvanceWhenIdle}"},
	{"sources[].time.watermark.all_idle_delay_ms", "EventTime{AdvanceWhenIdle}"},
	{"sources[].time.allowed_lateness_ms", "EventTime{AllowedLateness}"},
	{"sources[].time.late_event_route", "EventTime{RouteLate}"},
	{"sources[].durability", "Durable(job.Durability{...})"},
	{"sources[].keyed_by", "KeyedBy(field)"},
}

// inBuilderTerms returns e with its spec path replaced by the Builder call
// that wrote it, followed by the rest of the path (".State(job.State{...}):
// path"; `.Window("w", ...): aggregates[0].field`, the path inside the
// value given to the call). Paths no call wrote stay.
func (b *Builder) inBuilderTerms(e *job.ValidationError) *job.ValidationError {
	call, rest, best := "", "", -1
	consumed := func(r string) int {
		if r == "" {
			return len(e.Field)
		}
		return len(e.Field) - len(r) - 1
	}
	for _, c := range builderCalls {
		if r, ok := matchPath(e.Field, c.path); ok && consumed(r) > best {
			call, rest, best = c.call, r, consumed(r)
		}
	}
	// The call that added the operator, edge, source or sink at fault,
	// unless an option's entry above names a field of it more closely.
	component := false
	for at, c := range b.calls {
		if r, ok := matchPath(e.Field, at); ok && consumed(r) > best {
			call, rest, best, component = c, r, consumed(r), true
		}
	}
	if best < 0 {
		return e
	}
	if component {
		// The component's config is the value given to the call; which
		// operator a source or sink binds is the call itself.
		rest = strings.TrimPrefix(rest, "config.")
		if rest == "config" || rest == "operator_id" {
			rest = ""
		}
		if strings.HasPrefix(call, ".Join(") {
			// A Join call was given a job.Join, not the config.
			rest = joinField(rest)
		}
	}
	if call == ".State(job.State{...})" && b.spec.State == nil {
		call = `.Checkpoint(job.Checkpoint{...}) with its default .State(job.State{Backend: "badger"})`
	}
	out := *e
	out.Field = call
	if rest != "" {
		out.Field += ": " + rest
	}
	return &out
}

// matchPath reports whether the spec path field starts with pattern at a
// segment boundary, "[]" in pattern matching any index, and returns the
// path after it.
func matchPath(field, pattern string) (rest string, ok bool) {
	i := 0
	for j := 0; j < len(pattern); {
		if i >= len(field) {
			return "", false
		}
		if strings.HasPrefix(pattern[j:], "[]") {
			k := strings.IndexByte(field[i:], ']')
			if field[i] != '[' || k < 0 {
				return "", false
			}
			i, j = i+k+1, j+2
			continue
		}
		if field[i] != pattern[j] {
			return "", false
		}
		i, j = i+1, j+1
	}
	switch {
	case i == len(field):
		return "", true
	case field[i] == '.':
		return field[i+1:], true
	}
	return "", false
}
