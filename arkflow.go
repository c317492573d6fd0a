package arkflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"

	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Job is a built, validated job, ready to run once in this process.
type Job struct {
	spec *job.Spec
	plan *job.Plan
	rt   *runtime.Runtime
}

// Option configures how a job runs.
type Option interface{ apply(*options) }

type options struct {
	logger        *slog.Logger
	capacity      int
	dataDir       string
	bindings      map[string]any
	fromSavepoint string
	store         checkpoint.StoreOptions
	connectors    *connectors.Environment
	// tune changes the runtime options (the test harness's fake clock;
	// see internal/harness).
	tune []func(*runtime.Options)
	// problems are mistakes in the options' arguments, as {option, reason}:
	// reported with the job's validation errors instead of being replaced
	// by a default.
	problems [][2]string
}

func newOptions(bindings map[string]any, opts []Option) options {
	o := options{bindings: bindings}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	return o
}

// check returns the options' mistakes, and options the spec gives nothing
// to act on, as validation errors of the job.
func (o *options) check(spec *job.Spec) job.ValidationErrors {
	var out job.ValidationErrors
	for _, p := range o.problems {
		out = append(out, &job.ValidationError{Job: spec.ID, Field: p[0], Reason: p[1]})
	}
	switch name := o.fromSavepoint; {
	case name == "":
	case spec.Checkpoint == nil:
		// The runtime would start from scratch as if it were not given.
		out = append(out, &job.ValidationError{Job: spec.ID, Field: "WithSavepoint(name)",
			Reason: fmt.Sprintf("the job has no checkpoint block, so it has no savepoint %q to start from", name)})
	case ckptstore.ValidKey(name) != nil || strings.Contains(name, "/"):
		out = append(out, &job.ValidationError{Job: spec.ID, Field: "WithSavepoint(name)",
			Reason: fmt.Sprintf("savepoint name %q: use letters, digits, '-', '_' and '.'", name)})
	}
	return out
}

// build runs the deep build with the options and reports their own
// mistakes together with the spec's.
func (o *options) build(spec *job.Spec) (*build.Graph, error) {
	g, err := build.Build(spec, o.env())
	probs := o.check(spec)
	switch {
	case len(probs) == 0:
		return g, err
	case err == nil:
		return nil, probs
	case job.AsValidationErrors(err) != nil:
		return nil, append(probs, job.AsValidationErrors(err)...)
	default:
		return nil, errors.Join(probs, err)
	}
}

// env is what the deep build needs to know of the options.
func (o *options) env() build.Env {
	return build.Env{Bindings: o.bindings, DataDir: o.dataDir, CheckpointStore: storeOptions(o.store), Connectors: o.connectors, Logger: o.logger}
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithEnvironment makes the job find its input and output types in env
// instead of the global registry (connectors.RegisterInput): how a test,
// or a service running jobs for others, adds connectors for some jobs
// without changing what every other job in the process sees. Start from
// connectors.NewEnvironment, which holds every type registered globally.
func WithEnvironment(env *connectors.Environment) Option {
	return optionFunc(func(o *options) { o.connectors = env })
}

// WithLogger sends the job's logs to l (default, and with nil: discarded;
// the job never falls back to slog.Default). The job adds job=<its ID> to
// every record, so l should not carry that key already; the other keys
// are listed under Logging in the package doc. The logger is borrowed,
// never closed.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// WithChannelCapacity sets how many batches each channel between operator
// chains buffers before the sender waits (default 16). Larger values absorb
// bursts at the cost of memory; backpressure starts when a channel is full.
// n must be at least 1: Build, FromSpec and Validate report a smaller one
// (leave the option out for the default).
func WithChannelCapacity(n int) Option {
	return optionFunc(func(o *options) {
		if n < 1 {
			o.problems = append(o.problems, [2]string{"WithChannelCapacity(n)", fmt.Sprintf("must be >= 1 (got %d); leave the option out for the default 16", n)})
			return
		}
		o.capacity = n
	})
}

// WithDataDir sets where a job keeps the state and write-ahead logs its
// spec gives no path for: DIR/<job id>/state and DIR/<job id>/wal. There is
// no default (the arkflow command's is ./arkflow-data): a job with Badger
// state or a WAL and no path needs it. An empty dir means none.
func WithDataDir(dir string) Option { return optionFunc(func(o *options) { o.dataDir = dir }) }

// Validate runs the same deep, side-effect-free build as a real start:
// it checks the graph, and builds every source, operator and
// sink from its config against the rows it receives. It returns nil or
// ValidationErrors with every problem, each naming the job, the operator
// and the field path.
//
// Give it the options the job will run with: what a start checks depends
// on some of them (WithDataDir decides where a state block or a
// durability block without a path keeps its files).
func Validate(spec *job.Spec, opts ...Option) error {
	_, err := compile(spec, opts...)
	return err
}

// compile validates a spec, as Validate does, and returns its plan
// (cmd/arkflow's plan command reaches it through internal/harness).
func compile(spec *job.Spec, opts ...Option) (*job.Plan, error) {
	o := newOptions(nil, opts)
	g, err := o.build(spec)
	if err != nil {
		return nil, err
	}
	return g.Plan, nil
}

// Load reads a JSON or YAML spec file and builds the job. A spec with
// unknown fields or values of the wrong type is still validated as far as
// it decoded, so the error lists those problems together with every other
// one of the spec.
func Load(path string, opts ...Option) (*Job, error) {
	spec, err := job.ParseFile(path)
	if spec == nil {
		return nil, err
	}
	// The spec remembers its decode problems: the build reports them
	// with the rest, and never builds it.
	return FromSpec(spec, opts...)
}

// FromSpec builds a job from a declarative spec.
func FromSpec(spec *job.Spec, opts ...Option) (*Job, error) {
	return newJob(spec, nil, opts)
}

func newJob(spec *job.Spec, bindings map[string]any, opts []Option) (*Job, error) {
	o := newOptions(bindings, opts)
	g, err := o.build(spec)
	if err != nil {
		return nil, err
	}
	ro := runtime.Options{Logger: o.logger, ChannelCapacity: o.capacity, DataDir: o.dataDir, FromSavepoint: o.fromSavepoint, CheckpointStore: storeOptions(o.store)}
	for _, f := range o.tune {
		f(&ro)
	}
	rt := runtime.New(g, ro)
	return &Job{spec: g.Spec, plan: g.Plan, rt: rt}, nil
}

// Spec returns the job's canonical spec (defaults filled in).
func (j *Job) Spec() *job.Spec { return j.spec.Clone() }

// Plan returns the job's physical plan: its subtasks, their chains, key
// groups and placement units. Its String is what "arkflow plan" prints.
// It is a copy: changing it changes nothing of the job.
func (j *Job) Plan() *job.Plan { return clonePlan(j.plan) }

// clonePlan copies p deeply: the runtime runs the original.
func clonePlan(p *job.Plan) *job.Plan {
	c := *p
	if p.Spec != nil {
		c.Spec = p.Spec.Clone()
	}
	c.Tasks = slices.Clone(p.Tasks)
	for i := range c.Tasks {
		c.Tasks[i].Partitions = slices.Clone(c.Tasks[i].Partitions)
	}
	c.Chains = slices.Clone(p.Chains)
	for i := range c.Chains {
		c.Chains[i].Operators = slices.Clone(c.Chains[i].Operators)
	}
	c.Edges = slices.Clone(p.Edges)
	c.PlacementUnits = slices.Clone(p.PlacementUnits)
	for i := range c.PlacementUnits {
		c.PlacementUnits[i].Tasks = slices.Clone(c.PlacementUnits[i].Tasks)
	}
	return &c
}

// Run starts the job and blocks until it ends: every bounded source was
// read to its end and every row written (nil); Stop finished (nil); an
// error failed the job (that error); or ctx was cancelled (ctx.Err(): the
// job stops without draining; unacknowledged rows are replayed on the next
// run when the sources can replay). A Job runs once; a second Run returns
// ErrAlreadyRunning. Run connects every source and sink before any data
// moves; if one fails to connect, the ones already connected are closed and
// Run returns the error with the job in state Failed.
func (j *Job) Run(ctx context.Context) error { return j.rt.Run(ctx) }

// Stop stops a running job gracefully: sources stop reading, rows in
// flight are written and acknowledged, then sources, sinks and state are
// closed in that order. Open windows keep their contents (they are not
// fired early; Drain fires them). If ctx ends first, the job is cancelled
// without draining.
// Stop is idempotent and safe to call from any goroutine; it returns
// ErrNotRunning before Run.
func (j *Job) Stop(ctx context.Context) error { return j.rt.Stop(ctx) }

// Drain ends a running job as if every source's input ended now (what
// Flink calls stop --drain): sources stop reading, a final watermark of +∞
// fires every open window and its rows are written, every row read is
// acknowledged, a job with a checkpoint block takes a final checkpoint,
// and everything closes as after Stop. Run returns nil. A restart resumes
// after the last row read, and the windows the drain fired are not fired
// again: a row that would have joined one is late (ARCHITECTURE.md,
// "Lifecycle and errors"). So drain to end a job; use Stop to pause and
// resume with windows intact.
//
// If ctx ends first, the job is cancelled without draining and Drain
// returns an error wrapping ctx.Err(). Drain returns the job's error if it
// failed (a failed final checkpoint included), and ErrNotRunning before
// Run. It is idempotent and safe to call from any goroutine; of Stop and
// Drain, the first to reach a source decides how its input ends.
func (j *Job) Drain(ctx context.Context) error { return j.rt.Drain(ctx) }

// Done is closed when Run has returned.
func (j *Job) Done() <-chan struct{} { return j.rt.Done() }

// Status is where a job is in its lifecycle.
type Status int

// Job states: Created → Starting → Running → Stopping → Stopped, or Failed.
const (
	Created Status = iota
	Starting
	Running
	Stopping
	Stopped
	Failed
)

// String returns the status's lower-case name, such as "running".
func (s Status) String() string { return runtime.State(s).String() }

// Status returns where the job is in its lifecycle.
func (j *Job) Status() Status { return Status(j.rt.State()) }

// Err returns the error the job failed with, or nil.
func (j *Job) Err() error { return j.rt.Err() }

// TaskMetrics counts one task's traffic: one subtask's (Metrics.Tasks), or
// an operator's over all its subtasks (Metrics.Operator).
type TaskMetrics struct {
	Task       string
	Operator   string
	RowsIn     int64
	RowsOut    int64
	BatchesIn  int64
	BatchesOut int64
	// Watermark is the task's input watermark in Unix ms: math.MinInt64
	// before the first, math.MaxInt64 after a bounded input ended.
	Watermark int64
	// Counters are the operator's own totals since the task started, nil
	// when it has none. Window operators count windows_fired,
	// late_dropped, late_routed, late_updated, null_timestamp_dropped,
	// null_timestamp_routed and replayed_skipped (see the window package;
	// rows dropped are also warned about in the job's log, at most every
	// 10 s; replayed_skipped counts rows a restart read again whose
	// windows had fired before it, which are not late); a source with a
	// write-ahead log counts wal_replayed (entries replayed after a
	// restart) and wal_parked_timeouts.
	Counters map[string]int64
	// Gauges are the operator's own values now, which go up and down, nil
	// when it has none: open_windows for window operators; wal_cursor (the
	// last entry acknowledged through) and wal_last (the last appended)
	// for a source with a write-ahead log.
	Gauges map[string]int64
}

// Metrics is a snapshot of a job's counters.
type Metrics struct {
	// Status is the job's lifecycle status when the snapshot was taken.
	Status Status
	Tasks  []TaskMetrics
	// StateBytes is the size of each stateful operator's committed state
	// in bytes.
	StateBytes map[string]int64
	// Checkpoints is the checkpoint health ("degraded" = Healthy false)
	// and the recovery progress of the start.
	Checkpoints CheckpointStatus
}

// Metrics returns a snapshot of the job's counters.
func (j *Job) Metrics() Metrics {
	m := Metrics{Status: j.Status(), StateBytes: j.rt.StateBytes(), Checkpoints: checkpointStatus(j.rt.CheckpointStatus())}
	for _, t := range j.rt.Metrics() {
		m.Tasks = append(m.Tasks, TaskMetrics(t))
	}
	return m
}

// summedGauges are the gauges whose sum over an operator's tasks means
// something. A WAL's wal_cursor and wal_last are sequence numbers of one
// subtask's log: their sum is no position of anything.
var summedGauges = map[string]bool{windowop.MetricOpenWindows: true}

// Operator returns an operator's metrics over all its tasks: the rows and
// batches and every counter summed; the watermark, the minimum over its
// tasks (math.MinInt64 until every task has one, math.MaxInt64 once every
// bounded input ended, and math.MinInt64 for an unknown operator); and of
// the gauges only open_windows, summed. The others (wal_cursor, wal_last)
// mean something per task only: read them in Tasks.
func (m Metrics) Operator(id string) TaskMetrics {
	out := TaskMetrics{Task: id, Operator: id, Watermark: math.MaxInt64}
	found := false
	add := func(to *map[string]int64, k string, v int64) {
		if *to == nil {
			*to = map[string]int64{}
		}
		(*to)[k] += v
	}
	for _, t := range m.Tasks {
		if t.Operator != id {
			continue
		}
		found = true
		out.RowsIn += t.RowsIn
		out.RowsOut += t.RowsOut
		out.BatchesIn += t.BatchesIn
		out.BatchesOut += t.BatchesOut
		out.Watermark = min(out.Watermark, t.Watermark)
		for k, v := range t.Counters {
			add(&out.Counters, k, v)
		}
		for k, v := range t.Gauges {
			if summedGauges[k] {
				add(&out.Gauges, k, v)
			}
		}
	}
	if !found {
		out.Watermark = math.MinInt64
	}
	return out
}
