package arkflowtest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/harness"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

// settleTimeout bounds every wait of the harness. The waits are for events
// (a reader taking a batch, a barrier reaching the sinks), never for time to
// pass, so reaching it means the job is stuck, not slow.
const settleTimeout = time.Minute

// Harness runs one job for a test, on a fake clock, and moves it only when
// the test says so: every method that changes something (Push and
// AdvanceWatermark of its inputs, AdvanceWatermark, AdvanceClock) returns
// once the job has handled it completely (see Settle). Methods must be
// called from the test's goroutine; a failure of the job, or a mistake of
// the test, fails the test (t.Fatal).
type Harness struct {
	t       testing.TB
	job     *arkflow.Job
	rt      *runtime.Runtime
	clock   *clock
	inputs  map[string]*input // by source operator ID
	store   string            // the checkpoint store's URI
	stopped bool              // by Stop or the cleanup
	// finished is set by Finish.
	finished bool
	// cleaned is set once the cleanup ran: the test is over, and nothing
	// may be reported to it any more.
	cleaned bool
	// failed is set once the job's failure has failed the test, which the
	// cleanup then does not report again.
	failed bool
}

// Option tunes a harness.
type Option interface{ apply(*config) }

type config struct {
	start   time.Time
	jobOpts []arkflow.Option
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// StartAt sets the fake clock's time when the job starts (default: the
// Unix epoch, time.UnixMilli(0); for Restore, the snapshot's time).
func StartAt(t time.Time) Option { return optionFunc(func(c *config) { c.start = t }) }

// JobOptions passes options to Builder.Build, for example
// arkflow.WithLogger. The harness sets WithDataDir itself (a temporary
// directory); a WithDataDir given here overrides it, and the job's state
// and write-ahead logs then live there.
func JobOptions(opts ...arkflow.Option) Option {
	return optionFunc(func(c *config) { c.jobOpts = append(c.jobOpts, opts...) })
}

// New builds the job b describes and starts it on a fake clock, with its
// data directory and checkpoint store in fresh temporary directories, and
// returns once it runs and has handled whatever its inputs already hold.
// The job stops when the test ends (t.Cleanup).
//
// The harness never touches the places b's spec names for checkpoints,
// state and write-ahead logs; the rest of the spec (backends, sync modes,
// intervals) is kept, and b itself is not changed (see "Isolation" in the
// package documentation). b's sources are typically Inputs and its sinks
// Outputs, though any connector works. A job without a checkpoint block
// gets one (no periodic checkpoints), which Snapshot and Settle need; a
// job without a state block then keeps its state in memory.
func New(t testing.TB, b *arkflow.Builder, opts ...Option) *Harness {
	t.Helper()
	return start(t, b, nil, opts)
}

// Restore starts the job b describes from a snapshot, as New does: its
// state, source positions and watermarks are the snapshot's, and the fake
// clock starts at the snapshot's time. b may be the builder of the
// snapshot's job, once that harness has stopped (its inputs then resume
// where the snapshot left them), or a new version of the job (an upgrade)
// whose inputs are new: they receive the rows the snapshot's inputs of
// the same operator IDs held, so that rows the snapshot had not yet
// acknowledged (held in open windows) are replayed. Outputs shared with
// the snapshot's job keep the rows it wrote (Take separates them).
//
// The restored job works in fresh temporary directories, as New's does,
// but for its checkpoint store: the snapshot's, which holds the
// savepoint.
func Restore(t testing.TB, b *arkflow.Builder, s *Snapshot, opts ...Option) *Harness {
	t.Helper()
	if s == nil {
		t.Fatal("arkflowtest: Restore needs a snapshot (Harness.Snapshot)")
	}
	return start(t, b, s, opts)
}

// start runs the job b describes under a new harness (from snap when it
// is not nil): it claims b's inputs and outputs, builds the job in the
// harness's own directories, begins the inputs (anew, or resumed from
// snap) and outputs, runs the job and waits until it runs and settles.
func start(t testing.TB, b *arkflow.Builder, snap *Snapshot, opts []Option) *Harness {
	t.Helper()
	cfg := config{start: time.UnixMilli(0)}
	if snap != nil {
		cfg.start = snap.now
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	h := &Harness{t: t, clock: newClock(cfg.start), inputs: map[string]*input{}}
	ids, outputs := h.claim(b)
	j := h.build(b, snap, cfg)
	h.beginInputs(ids, snap, j.Spec())
	for _, id := range ids {
		h.inputs[id].attach(h)
	}
	for _, o := range outputs {
		o.begin(h, snap == nil)
	}
	go j.Run(context.Background()) // its error is Err's
	t.Cleanup(h.cleanup)
	h.awaitStart()
	h.Settle()
	return h
}

// claim collects the builder's inputs (by operator ID, sorted) and
// outputs, and fails the test when an input still belongs to a running
// harness or was used before it was attached.
func (h *Harness) claim(b *arkflow.Builder) (ids []string, outputs []harnessOutput) {
	t := h.t
	t.Helper()
	bound := harness.Bindings(b)
	ids = make([]string, 0, len(bound))
	for id, v := range bound {
		switch c := v.(type) {
		case harnessInput:
			ids = append(ids, id)
			h.inputs[id] = c.core()
		case harnessOutput:
			outputs = append(outputs, c)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		in := h.inputs[id]
		in.mu.Lock()
		prev, early := in.h, in.early
		in.mu.Unlock()
		if prev != nil && !prev.done() {
			t.Fatalf("arkflowtest: input %q belongs to a harness that still runs: Stop it first", id)
		}
		if early != nil {
			t.Fatalf("arkflowtest: input %q: %v", id, early)
		}
	}
	return ids, outputs
}

// build builds the job, on a copy of the builder's spec that works in the
// harness's own directories (isolate): b is not changed. A restore uses
// the snapshot's checkpoint store and savepoint.
func (h *Harness) build(b *arkflow.Builder, snap *Snapshot, cfg config) *arkflow.Job {
	t := h.t
	t.Helper()
	dir := t.TempDir()
	h.store = (&url.URL{Scheme: "file", Path: filepath.Join(dir, "checkpoints")}).String()
	if snap != nil {
		h.store = snap.store
	}
	clk := h.clock
	jobOpts := []any{
		arkflow.WithDataDir(filepath.Join(dir, "data")),
		harness.Option(func(o *runtime.Options) { o.Clock = clk }),
	}
	if snap != nil {
		jobOpts = append(jobOpts, arkflow.WithSavepoint(snap.name))
	}
	for _, o := range cfg.jobOpts {
		jobOpts = append(jobOpts, o)
	}
	built, err := harness.Build(b, func(s *job.Spec) { isolate(s, h.store) }, jobOpts)
	if err != nil {
		t.Fatalf("arkflowtest: building the job: %v", err)
	}
	j := built.(*arkflow.Job)
	h.job, h.rt = j, harness.RuntimeOf(j)
	return j
}

// beginInputs starts a new run of each input (New), or resumes the
// snapshot's run of it (Restore), once per input shared by several IDs.
func (h *Harness) beginInputs(ids []string, snap *Snapshot, spec *job.Spec) {
	t := h.t
	t.Helper()
	seen := map[*input]bool{}
	for _, id := range ids {
		in := h.inputs[id]
		if seen[in] {
			continue
		}
		seen[in] = true
		var hist [][]item
		var same bool
		if snap != nil {
			hist = snap.inputs[id]
			same = hist != nil && snap.cores[id] == in && snap.epochs[id] == in.epochOf()
		}
		if err := in.begin(hist, same, hasEventTime(spec, h.inputs, in)); err != nil {
			t.Fatalf("arkflowtest: input %q: %v", id, err)
		}
	}
}

// awaitStart waits until the job runs, or has ended already (its sources
// are bounded), and fails the test when it failed to start or did not
// within settleTimeout.
func (h *Harness) awaitStart() {
	t, j := h.t, h.job
	t.Helper()
	timer := time.NewTimer(settleTimeout)
	defer timer.Stop()
	select {
	case <-h.rt.Running():
	case <-j.Done():
		// Started and ended already (its sources are bounded), or failed.
		if err := j.Err(); err != nil {
			h.failed = true
			t.Fatalf("arkflowtest: starting the job: %v", err)
		}
	case <-timer.C:
		t.Fatalf("arkflowtest: the job did not start within %v", settleTimeout)
	}
}

func (h *Harness) done() bool {
	select {
	case <-h.job.Done():
		return true
	default:
		return false
	}
}

// cleanup stops the job at the end of the test, and fails the test if
// rows pushed to its inputs after the job ended were read by no harness.
func (h *Harness) cleanup() {
	defer func() { h.cleaned = true }()
	if !h.stopped {
		h.stopped = true
		if err := h.stopWithin(settleTimeout); err != nil {
			h.t.Errorf("arkflowtest: stopping the job: %v", err)
		} else if err := h.job.Err(); err != nil && !h.failed {
			h.failed = true
			h.t.Errorf("arkflowtest: the job failed: %v", err)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(h.inputs)) {
		in := h.inputs[id]
		in.mu.Lock()
		mine := in.h == h
		in.mu.Unlock()
		if n := in.unread(); mine && n > 0 {
			h.t.Errorf("arkflowtest: input %q: %d pushes (Push, AdvanceWatermark) came after its job ended and no harness read them: push while a harness runs, or before New or Restore", id, n)
		}
	}
}

// hasEventTime reports whether a source of spec that reads in (one of
// inputs, by operator ID) has event time.
func hasEventTime(spec *job.Spec, inputs map[string]*input, in *input) bool {
	for id, x := range inputs {
		if x != in {
			continue
		}
		if src, _ := spec.Source(id); src != nil && src.Time != nil && src.Time.Mode == job.EventTime {
			return true
		}
	}
	return false
}

// hasEventTime reports whether a source of the job that reads in has
// event time.
func (h *Harness) hasEventTime(in *input) bool { return hasEventTime(h.job.Spec(), h.inputs, in) }

// mustRun fails the test when the job has ended, saying why what cannot
// apply (so, what follows). A job that failed fails it with its error.
func (h *Harness) mustRun(what, so string) {
	h.t.Helper()
	if !h.done() {
		return
	}
	h.ended()
	why := "it ended by itself (its sources ended, or Job().Stop or Drain)"
	switch {
	case h.finished:
		why = "Finish"
	case h.stopped:
		why = "Stop"
	}
	h.t.Fatalf("arkflowtest: %s: the job has ended (%s), so %s: start another harness (New, or Restore from a Snapshot)", what, why, so)
}

// nothingHandles is what follows for a call that moves an ended job.
const nothingHandles = "nothing would handle it"

// Job returns the running job, for what the harness has no method for.
func (h *Harness) Job() *arkflow.Job { return h.job }

// Settle returns once the job has handled everything it was given so far:
// every row pushed to its inputs has been read, every watermark and clock
// tick has gone through every operator (windows whose end it reached have
// fired), and every row produced has been written by the sinks and
// acknowledged (state written by Process operators is committed, unless a
// window downstream still holds the rows). The methods of the harness and
// of its inputs settle by themselves; call Settle after driving the job
// some other way (a source that is not an Input, Job().Checkpoint).
//
// It waits for the engine's own signals, never for time to pass ("How a
// step completes" in the package doc). Sinks that write asynchronously
// (connectors.AsyncSink) may still have writes in flight. A job that
// failed fails the test; one that ended (Finish, Stop) is settled.
func (h *Harness) Settle() {
	h.t.Helper()
	deadline := time.Now().Add(settleTimeout)
	timer := time.NewTimer(settleTimeout)
	defer timer.Stop()
	for _, id := range slices.Sorted(maps.Keys(h.inputs)) {
		in := h.inputs[id]
		for {
			in.mu.Lock()
			ok, why := in.drained()
			changed := in.changed
			in.mu.Unlock()
			if ok {
				break
			}
			select {
			case <-changed:
			case <-h.job.Done():
				h.ended()
				return
			case <-timer.C:
				h.t.Fatalf("arkflowtest: input %q was not read within %v: %s", id, settleTimeout, why)
			}
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err := h.rt.Sync(ctx)
	switch {
	case err == nil:
		return
	case runtime.IsNotRunning(err):
		// Ended or ending: by itself (Finish), by Stop, or failed.
		select {
		case <-h.job.Done():
		case <-timer.C:
			h.t.Fatalf("arkflowtest: the job is neither running nor ended after %v", settleTimeout)
		}
		h.ended()
	default:
		h.t.Fatalf("arkflowtest: settling: %v", err)
	}
}

// ended reports the error of a job that ended.
func (h *Harness) ended() {
	h.t.Helper()
	if err := h.job.Err(); err != nil {
		h.failed = true
		h.t.Fatalf("arkflowtest: the job failed: %v", err)
	}
}

// AdvanceWatermark advances every partition of every Input with event
// time to ms (Unix milliseconds), as Input.AdvanceWatermark does, then
// settles: windows whose end is at or before ms fire, unless another
// source holds the watermark back. The watermark never goes back; ms
// below it changes nothing. A job without an Input with event time, or
// one that has ended, fails the test.
func (h *Harness) AdvanceWatermark(ms int64) {
	h.t.Helper()
	h.mustRun(fmt.Sprintf("AdvanceWatermark(%d)", ms), nothingHandles)
	spec := h.job.Spec()
	n := 0
	for id, in := range h.inputs {
		src, _ := spec.Source(id)
		if src == nil || src.Time == nil || src.Time.Mode != job.EventTime {
			continue
		}
		for p := range in.parts {
			if err := in.advance(p, ms); err != nil {
				h.t.Fatal(err)
			}
		}
		n++
	}
	if n == 0 {
		h.t.Fatal("arkflowtest: AdvanceWatermark: no input of the job has event time (arkflow.EventTime on its Source)")
	}
	h.Settle()
}

// AdvanceClock moves the fake clock forward by d and settles: processing
// time sources send the new time as their watermark (processing-time
// windows fire), partitions silent for their idle timeout turn idle, and
// state written from now on expires d later than it would have. The clock
// never moves on its own. A negative d, a job in which nothing follows the
// clock (no processing-time source with a window after it, no idle
// timeout, no state TTL) and a job that has ended fail the test.
func (h *Harness) AdvanceClock(d time.Duration) {
	h.t.Helper()
	what := fmt.Sprintf("AdvanceClock(%v)", d)
	if d < 0 {
		h.t.Fatalf("arkflowtest: %s: the clock does not go back", what)
	}
	h.mustRun(what, nothingHandles)
	st := h.job.Spec().State
	if h.clock.live() == 0 && (st == nil || st.TTLMS == nil || *st.TTLMS <= 0) {
		h.t.Fatalf("arkflowtest: %s: nothing in the job follows the clock (a processing-time source with a window after it, "+
			"an idle timeout, a state TTL), so moving it would change nothing; event time moves with AdvanceWatermark", what)
	}
	h.clock.advance(d, h.job.Done())
	h.Settle()
}

// Now returns the fake clock's time.
func (h *Harness) Now() time.Time { return h.clock.Now() }

// Counter returns an operator's counter summed over its subtasks (see
// arkflow.TaskMetrics: windows_fired, late_dropped, late_routed,
// late_updated, …), 0 when it has not counted any. An operator the job
// does not have, or a counter it does not keep, fails the test (it says
// which counters the operator keeps).
func (h *Harness) Counter(op, name string) int64 {
	h.t.Helper()
	if o, _ := h.job.Spec().Operator(op); o == nil {
		h.t.Fatalf("arkflowtest: Counter(%q, %q): the job has no operator %q", op, name, op)
	}
	counters := h.job.Metrics().Operator(op).Counters
	n, ok := counters[name]
	if !ok {
		names := make([]string, 0, len(counters))
		for k := range counters {
			names = append(names, k)
		}
		sort.Strings(names)
		keeps := "keeps no counters"
		if len(names) > 0 {
			keeps = "keeps " + strings.Join(names, ", ")
		}
		h.t.Fatalf("arkflowtest: Counter(%q, %q): operator %q has no counter %q (it %s)", op, name, op, name, keeps)
	}
	return n
}

// Finish ends every Input, as a bounded source ends: its final watermark
// of +∞ fires every open window; and waits until the job has written
// everything and ended. The methods that move the job (AdvanceWatermark,
// AdvanceClock, Snapshot) then fail the test; what is pushed to the
// inputs waits for the next harness of their builder (New or Restore).
// Finish on a job that ended without its final watermark (Stop before, or
// Job().Stop) fails the test: its open windows did not fire.
func (h *Harness) Finish() {
	h.t.Helper()
	for _, in := range h.inputs {
		in.end()
	}
	h.wait("finish")
	h.finished = true
	spec := h.job.Spec()
	m := h.job.Metrics()
	for _, snk := range spec.Sinks {
		if wm := m.Operator(snk.OperatorID).Watermark; wm != math.MaxInt64 {
			why := "it was stopped before (Stop or Job().Stop)"
			if h.stopped {
				why = "Stop stopped it before"
			}
			h.t.Fatalf("arkflowtest: Finish: the job ended without its final watermark reaching sink %q: %s, so its open windows did not fire", snk.OperatorID, why)
		}
	}
}

// Stop stops the job gracefully, as Job.Stop does (open windows keep their
// contents, for a Restore), and waits until it has. It is what the end of
// the test does anyway; call it before restoring the job's builder. A
// second Stop changes nothing. Afterwards the methods that move the job
// fail the test, and what is pushed to its inputs waits for the next
// harness of their builder (New or Restore).
func (h *Harness) Stop() {
	h.t.Helper()
	h.stopped = true
	if err := h.stopWithin(settleTimeout); err != nil {
		h.t.Fatalf("arkflowtest: stopping the job: %v", err)
	}
	h.wait("stop")
}

func (h *Harness) wait(what string) {
	h.t.Helper()
	timer := time.NewTimer(settleTimeout)
	defer timer.Stop()
	select {
	case <-h.job.Done():
	case <-timer.C:
		h.t.Fatalf("arkflowtest: the job did not %s within %v", what, settleTimeout)
	}
	h.ended()
}

// Snapshot is a savepoint of a harness's job, with the rows its inputs
// held, to start another harness from (Restore).
type Snapshot struct {
	store  string // the checkpoint store's URI
	name   string // savepoint name
	now    time.Time
	inputs map[string][][]item
	cores  map[string]*input
	epochs map[string]uint64 // the cores' epochs
}

// Name returns the snapshot's savepoint name, to start the job outside the
// harness (arkflow.WithSavepoint with the same checkpoint store).
func (s *Snapshot) Name() string { return s.name }

var snapshotSeq atomic.Uint64

// Snapshot settles, then takes a savepoint of the job (its state, source
// positions and watermarks) into the harness's checkpoint store, and
// returns it with a copy of what the inputs hold. The job keeps running.
// A job that has ended fails the test.
func (h *Harness) Snapshot() *Snapshot {
	h.t.Helper()
	h.mustRun("Snapshot", "it has no state to save")
	h.Settle()
	name := fmt.Sprintf("arkflowtest-%d", snapshotSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := h.job.Savepoint(ctx, name); err != nil {
		h.t.Fatalf("arkflowtest: taking a savepoint: %v", err)
	}
	s := &Snapshot{store: h.store, name: name, now: h.clock.Now(), inputs: map[string][][]item{}, cores: map[string]*input{}, epochs: map[string]uint64{}}
	for id, in := range h.inputs {
		s.inputs[id] = in.history()
		s.cores[id] = in
		s.epochs[id] = in.epochOf()
	}
	return s
}

// stopWithin stops the job gracefully, giving up after d.
func (h *Harness) stopWithin(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return h.job.Stop(ctx)
}
