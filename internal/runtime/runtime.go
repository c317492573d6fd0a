// Package runtime executes a built job in this process.
//
// Each operator chain of the plan runs as one goroutine per subtask. Inside
// a chain, operators call each other directly; between chains, batches
// travel over bounded channels (one per upstream sender), which is where
// backpressure comes from. Keyed edges split every batch column-wise by the
// key group of each row and send each part to the subtask that owns the
// group. Watermarks and end-of-input travel in the same channels as the
// rows.
//
// Lifecycle (R-VAL-3, R-VAL-4): Created → Starting (instantiate, connect
// sources then sinks; a failure closes what was connected, in reverse, and
// ends Failed) → Running → Stopping → Stopped, or Failed after an error.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"github.com/google/uuid"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/durable"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// State is a runtime's lifecycle state.
type State int32

// States, in lifecycle order.
const (
	Created State = iota
	Starting
	Running
	Stopping
	Stopped
	Failed
)

func (s State) String() string {
	switch s {
	case Created:
		return "created"
	case Starting:
		return "starting"
	case Running:
		return "running"
	case Stopping:
		return "stopping"
	case Stopped:
		return "stopped"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("state(%d)", int32(s))
}

// Errors returned by Run and Stop.
var (
	ErrAlreadyRunning = errors.New("arkflow: job already started (a job runs once)")
	ErrNotRunning     = errors.New("arkflow: job is not running")
)

// Options tune a runtime.
type Options struct {
	// Logger receives lifecycle and error logs. Default: discard.
	Logger *slog.Logger
	// ChannelCapacity is the number of messages each channel between
	// chains buffers before its sender blocks (default 16).
	ChannelCapacity int
	// Clock gives the time for idle partitions and processing time
	// (default: the system clock). Tests inject a fake one.
	Clock Clock
	// ProcessingTimeInterval is how often a processing-time source feeding
	// a window advances its watermark to the clock (default 200ms).
	ProcessingTimeInterval time.Duration
	// DataDir is where jobs keep state whose spec gives no state.path:
	// DataDir/<job>/state.
	DataDir string
	// CheckpointStore configures an s3:// checkpoint store (endpoint,
	// credentials); empty fields come from the environment.
	CheckpointStore ckptstore.StoreOptions
	// FromSavepoint starts the job from this savepoint instead of
	// following spec.recovery.
	FromSavepoint string
	// NodeID names this process in checkpoint manifests (default local).
	NodeID string
	// WrapStore, if set, wraps the checkpoint store (fault injection in
	// tests, with ckpttest.FaultStore).
	WrapStore func(ckptstore.Store) ckptstore.Store
	// StartPositions makes source subtasks (by task ID) resume from these
	// positions instead of their configured start (restores, restarts).
	StartPositions map[string][]connectors.Position
}

// Runtime runs one built job once.
type Runtime struct {
	g    *build.Graph
	opts Options
	log  *slog.Logger
	// run identifies this run in the attempt ids of the checkpoints it
	// cuts (see carriedMarks).
	run string

	mu       sync.Mutex
	state    State
	err      error
	stopOnce sync.Once
	stopping chan struct{} // closed by Stop: sources stop reading
	// draining is closed by Drain: sources end their input, every open
	// window fires, and (with checkpoints) a final checkpoint is taken.
	drainOnce sync.Once
	draining  chan struct{}
	// finalCut lets the final checkpoint of a drain cut while Stopping.
	finalCut bool
	done     chan struct{} // closed when Run has finished
	running  chan struct{} // closed when the state turns Running (runningCh)
	cancel   context.CancelFunc
	runCtx   context.Context // Run's: cancelled when the job fails

	tasks          []*taskMetrics
	sources        []*sourceHead
	sinkTasks      []string
	barriers       *barriers
	startPositions map[string][]connectors.Position
	// restoredWatermarks are the source watermarks of the restored
	// checkpoint, by source task.
	restoredWatermarks map[string]int64
	cutMu              sync.Mutex
	cutID              uint64
	ckpt               ckptState
	store              statestore.Backend
	stateDir           string // a Badger store's directory ("": memory)
	lastStateBytes     map[string]int64
	// journals are the state journals of tasks with user-visible keyed
	// state (ops.Journaled), by task, for Journal.
	journals map[string]*statestore.Journal
}

// New returns a runtime for a built graph.
func New(g *build.Graph, opts Options) *Runtime {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ChannelCapacity <= 0 {
		opts.ChannelCapacity = 16
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.ProcessingTimeInterval <= 0 {
		opts.ProcessingTimeInterval = 200 * time.Millisecond
	}
	return &Runtime{g: g, opts: opts, log: opts.Logger.With("job", g.Spec.ID), run: uuid.NewString(), stopping: make(chan struct{}), draining: make(chan struct{}), done: make(chan struct{}), barriers: newBarriers()}
}

// State returns the current lifecycle state.
func (r *Runtime) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Err returns the error the runtime failed with, if any.
func (r *Runtime) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Done is closed when Run has returned.
func (r *Runtime) Done() <-chan struct{} { return r.done }

func (r *Runtime) setState(s State) {
	r.mu.Lock()
	r.state = s
	r.mu.Unlock()
	r.log.Debug("job state", "state", s.String())
}

// resource is a source or sink subtask.
type resource struct {
	kind    string // "source" or "sink"
	task    string
	connect func(context.Context) error
	close   func(context.Context) error
}

// Run starts the job and blocks until it ends: all bounded sources
// finished and their rows were written (nil), Stop completed (nil), an
// error failed the job (the error), or ctx was cancelled (ctx.Err(); the
// job stops without draining, and unacknowledged rows are replayed by the
// next run).
func (r *Runtime) Run(ctx context.Context) (err error) {
	r.mu.Lock()
	if r.state != Created {
		r.mu.Unlock()
		return ErrAlreadyRunning
	}
	r.state = Starting
	runCtx, cancel := context.WithCancel(ctx)
	r.cancel, r.runCtx = cancel, runCtx
	r.mu.Unlock()
	defer close(r.done)
	defer cancel()

	chains, resources, err := r.start(runCtx)
	if err != nil {
		r.fail(err)
		return err
	}
	r.setState(Running)
	close(r.runningCh())
	r.log.Info("job running", "chains", len(chains))
	ckptCtx, stopCkpt := context.WithCancel(runCtx)
	var ckptLoop sync.WaitGroup
	if r.g.Spec.Checkpoint != nil {
		ckptLoop.Add(1)
		go func() {
			defer ckptLoop.Done()
			r.checkpointLoop(ckptCtx)
		}()
	}

	// Run every chain instance; the first error cancels the rest.
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for _, c := range chains {
		wg.Add(1)
		go func(c *chainInstance) {
			defer wg.Done()
			if err := c.run(runCtx, r.stopping, r.opts.Clock); err != nil && !errors.Is(err, context.Canceled) {
				errOnce.Do(func() {
					firstErr = err
					cancel()
				})
			}
			// Only now, after a failure has cancelled the run: a barrier
			// round that counts this chain's sinks as reached (Sync) then
			// sees the run cancelled, and does not take the failure for
			// the end of the input.
			for _, t := range c.sinks {
				c.barriers.sinkEnded(t)
			}
		}(c)
	}
	wg.Wait()
	// A round in progress is abandoned: the previous checkpoint stays.
	stopCkpt()
	ckptLoop.Wait()
	if firstErr == nil && ctx.Err() == nil && r.drained() && r.g.Spec.Checkpoint != nil {
		// A drain ends with a checkpoint of where it left everything: the
		// positions at the end of what was read, the windows it fired
		// behind their floors. A restart from it neither fires them again
		// nor loses a row read before the drain.
		if err := r.finalCheckpoint(runCtx); err != nil {
			firstErr = fmt.Errorf("draining job %q: the final checkpoint failed (a restart takes the previous one, and the windows fired since may be written again): %w", r.g.Spec.ID, err)
		}
	}

	// Close in order: sources, then sinks (R-WAL-6).
	closeErr := r.closeAll(resources, false)
	switch {
	case firstErr != nil:
		r.fail(firstErr)
		return firstErr
	case ctx.Err() != nil:
		r.fail(ctx.Err())
		return ctx.Err()
	case closeErr != nil:
		r.fail(closeErr)
		return closeErr
	}
	r.setState(Stopped)
	r.log.Info("job stopped")
	return nil
}

func (r *Runtime) fail(err error) {
	r.mu.Lock()
	r.state = Failed
	r.err = err
	r.mu.Unlock()
	r.log.Error("job failed", "error", err)
}

// Stop stops the job gracefully: sources stop reading, rows in flight are
// written and acknowledged, then everything is closed. If ctx ends first,
// the job is cancelled without draining and Stop returns ctx.Err(). Stop is
// idempotent and safe to call concurrently; it returns ErrNotRunning before
// Run.
func (r *Runtime) Stop(ctx context.Context) error {
	cancelled, err := r.end(ctx, func() { r.stopOnce.Do(func() { close(r.stopping) }) })
	if cancelled {
		return fmt.Errorf("stopping job %q: %w (cancelled without draining)", r.g.Spec.ID, err)
	}
	return err
}

// end asks the run to end through signal and waits until it has; if ctx
// ends first, it cancels the run, waits, and reports cancelled with ctx's
// error. ErrNotRunning before Run.
func (r *Runtime) end(ctx context.Context, signal func()) (cancelled bool, _ error) {
	r.mu.Lock()
	st := r.state
	if st == Created {
		r.mu.Unlock()
		return false, ErrNotRunning
	}
	if st == Starting || st == Running {
		r.state = Stopping
	}
	r.mu.Unlock()
	signal()
	select {
	case <-r.done:
		return false, nil
	case <-ctx.Done():
		r.mu.Lock()
		cancel := r.cancel
		r.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		<-r.done
		return true, ctx.Err()
	}
}

// Drain ends the job as if every source's input ended now (Flink's stop
// --drain): sources stop reading, a final watermark of +∞ fires every open
// window, sinks write, acknowledgements move the positions to the end of
// what was read; with checkpoints, a final checkpoint is taken; then
// everything closes as after Stop. A restart resumes from those positions
// with the fired windows behind their floors: their rows are late, not
// reopened. If ctx ends first the job is cancelled as Stop's would be,
// and Drain returns ctx.Err(). It returns the job's error if it failed
// (the final checkpoint included), ErrNotRunning before Run. Of Stop and
// Drain, the first to reach a source decides how it ends.
func (r *Runtime) Drain(ctx context.Context) error {
	cancelled, err := r.end(ctx, func() { r.drainOnce.Do(func() { close(r.draining) }) })
	switch {
	case cancelled:
		return fmt.Errorf("draining job %q: %w (cancelled: windows still open were not fired)", r.g.Spec.ID, err)
	case err != nil:
		return err
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("draining job %q: %w", r.g.Spec.ID, err)
	}
	return nil
}

// drained reports whether Drain was called.
func (r *Runtime) drained() bool {
	select {
	case <-r.draining:
		return true
	default:
		return false
	}
}

// finalCheckpoint takes a drain's checkpoint once every chain ended.
func (r *Runtime) finalCheckpoint(ctx context.Context) error {
	r.mu.Lock()
	r.finalCut = true
	r.mu.Unlock()
	m, err := r.takeCheckpoint(ctx, ckptstore.KindCheckpoint, "")
	if err != nil {
		return err
	}
	r.log.Info("drain: final checkpoint taken", "id", m.CheckpointID)
	return nil
}

// DryRun opens and closes every WAL the job would use, without starting
// anything else: a WAL that is locked by another process, unreachable or
// corrupt fails here, and the real start can reopen each one at once
// (R-VAL-2).
func (r *Runtime) DryRun(ctx context.Context) error {
	spec := r.g.Spec
	var errs []error
	for _, src := range spec.Sources {
		cfg := r.g.Durability[src.OperatorID]
		if cfg == nil {
			continue
		}
		op, _ := spec.Operator(src.OperatorID)
		info := connectors.TaskInfo{JobID: spec.ID, OperatorID: src.OperatorID, Parallelism: spec.OperatorParallelism(op), Logger: r.log}
		if err := durable.DryRun(ctx, cfg, r.opts.DataDir, info); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeAll closes resources: in connect order when reverse is false
// (sources before sinks), else in reverse.
func (r *Runtime) closeAll(res []resource, reverse bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for i := range res {
		x := res[i]
		if reverse {
			x = res[len(res)-1-i]
		}
		err := x.close(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("closing %s %s: %w", x.kind, x.task, err))
		}
	}
	return errors.Join(errs...)
}

// start instantiates every chain instance and connects sources, then
// sinks (R-VAL-4). On failure it closes the one that failed, then what was
// connected in reverse order, then what was never connected: every Source
// and Sink is closed exactly once.
func (r *Runtime) start(ctx context.Context) ([]*chainInstance, []resource, error) {
	// State first: operators restore from it when they are created, and it
	// closes last, after the sinks (R-VAL-4, R-WAL-6).
	// The checkpoint to restore is chosen before the state store opens,
	// so that a refused one leaves the state untouched (R-CKPT-6).
	cat, err := r.openCatalog(ctx)
	if err != nil {
		return nil, nil, err
	}
	var restoreFrom *ckptstore.Manifest
	var st statestore.Backend
	fresh := false // st was created empty by this start
	if cat != nil {
		// A state directory that does not exist yet (a new node, or one
		// replacing a lost one) holds nothing a refused checkpoint could
		// leave changed, so it is created while the checkpoint is
		// chosen, and Badger opens in the background
		// (statestore.Options.OpenInBackground): the restore's downloads
		// start before it is open (~10 ms sooner), and only the first
		// call that needs it waits.
		early := r.openNewStateAsync()
		restoreFrom, err = r.selectRestore(ctx, cat)
		if early != nil {
			res := <-early
			if res.st != nil && (err != nil || restoreFrom == nil) {
				// Nothing to restore overlaps the open: report its
				// failure as a failed open, here.
				if rerr := statestore.Ready(res.st); rerr != nil && err == nil {
					err = fmt.Errorf("opening state: %w", rerr)
				}
			}
			if err != nil && res.st != nil {
				res.st.Close()
				os.RemoveAll(res.dir) // it did not exist: nothing is lost
			}
			st, fresh = res.st, res.st != nil
			if err == nil && res.err != nil {
				return nil, nil, res.err
			}
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if st == nil {
		if restoreFrom == nil {
			if err := r.checkLayout(); err != nil {
				return nil, nil, err
			}
		}
		if st, err = r.openState(); err != nil {
			return nil, nil, err
		}
	}
	stateRes := resource{kind: "state", task: r.g.Spec.ID, close: func(context.Context) error {
		// Keep the last sizes for Metrics after the job ended.
		sizes := r.stateBytes(st)
		r.mu.Lock()
		r.lastStateBytes = sizes
		r.mu.Unlock()
		return st.Close()
	}}
	r.mu.Lock()
	r.store = st
	r.mu.Unlock()
	// Restore before any operator is created or source connected: state
	// and positions first, then input (R-CKPT-1, R-CKPT-8).
	r.startPositions = r.opts.StartPositions
	if cat != nil {
		if restoreFrom != nil {
			restored, err := r.restore(ctx, cat, st, restoreFrom, fresh)
			if err == nil {
				err = statestore.Ready(st) // a restore without layers may not have waited
			}
			if err != nil {
				r.closeAll([]resource{stateRes}, false)
				return nil, nil, err
			}
			if r.startPositions == nil {
				r.startPositions = restored
			}
		}
		r.ckpt.mu.Lock()
		r.ckpt.catalog = cat
		r.ckpt.status.Enabled, r.ckpt.status.Healthy = true, true
		r.ckpt.mu.Unlock()
	}
	if restoreFrom == nil {
		// A restore lays the keyed state out for the plan; else it must
		// be laid out so already (checked before the store opened).
		if err := r.saveLayout(); err != nil {
			r.closeAll([]resource{stateRes}, false)
			return nil, nil, err
		}
	}
	// Logs written at another parallelism are redistributed by partition
	// before any opens.
	for _, src := range r.g.Spec.Sources {
		if cfg := r.g.Durability[src.OperatorID]; cfg != nil {
			op, _ := r.g.Spec.Operator(src.OperatorID)
			if err := durable.Reshard(cfg, r.opts.DataDir, r.g.Spec.ID, src.OperatorID, r.g.Spec.OperatorParallelism(op), r.log); err != nil {
				r.closeAll([]resource{stateRes}, false)
				return nil, nil, err
			}
		}
	}
	chains, sources, sinks, err := r.instantiate(st)
	if err != nil {
		r.closeAll([]resource{stateRes}, false)
		return nil, nil, err
	}
	r.mu.Lock()
	r.sources = sources
	for _, s := range sinks {
		r.sinkTasks = append(r.sinkTasks, s.task)
	}
	r.mu.Unlock()
	var all []resource
	for _, s := range sources {
		all = append(all, resource{kind: "source", task: s.task, connect: s.src.Connect, close: s.src.Close})
	}
	for _, s := range sinks {
		all = append(all, resource{kind: "sink", task: s.task, connect: s.snk.Connect, close: s.snk.Close})
	}
	// WALs close after the sinks, before the state (R-WAL-6).
	var wals []resource
	for _, s := range sources {
		if w := s.wal; w != nil {
			wals = append(wals, resource{kind: "WAL", task: s.task, close: func(context.Context) error { return w.CloseWAL() }})
		}
	}
	for i, res := range all {
		if err := res.connect(ctx); err != nil {
			err = fmt.Errorf("connecting %s %s: %w", res.kind, res.task, err)
			r.closeAll(all[i:i+1], false)
			r.closeAll(all[:i], true)
			r.closeAll(all[i+1:], true)
			for _, c := range chains {
				for _, n := range c.nodes {
					_ = n.inst.Close()
				}
			}
			r.closeAll(wals, false)
			r.closeAll([]resource{stateRes}, false)
			return nil, nil, err
		}
	}
	return chains, append(append(all, wals...), stateRes), nil
}

// openState opens the job's state backend: the spec's state block, or an
// in-memory store when it has none (state then lives as long as the run).
// Badger needs a directory: state.path, or the runtime's data directory.
func (r *Runtime) openState() (statestore.Backend, error) { return r.openStateIn(false) }

// openStateIn is openState; background opens a new directory's Badger in
// the background (statestore.Options.OpenInBackground).
func (r *Runtime) openStateIn(background bool) (statestore.Backend, error) {
	s := r.g.Spec.State
	if s == nil || s.Backend == job.BackendMemory {
		return statestore.NewMemory(), nil
	}
	dir, err := r.stateDirPath()
	if err != nil {
		return nil, err
	}
	st, err := statestore.Open(statestore.Options{Backend: s.Backend, Dir: dir, FormatVersion: s.FormatVersion, Logger: r.log, OpenInBackground: background})
	if err != nil {
		return nil, fmt.Errorf("opening state: %w", err)
	}
	r.stateDir = dir
	return st, nil
}

// stateDirPath is the directory of the job's Badger store.
func (r *Runtime) stateDirPath() (string, error) {
	if dir := r.g.Spec.State.Path; dir != "" {
		return dir, nil
	}
	if r.opts.DataDir == "" {
		return "", fmt.Errorf("opening state: the spec's state block has no path and no data directory was given (set state.path, or arkflow.WithDataDir / arkflow run --data-dir)")
	}
	return filepath.Join(r.opts.DataDir, r.g.Spec.ID, "state"), nil
}

// openedState is the outcome of openNewStateAsync.
type openedState struct {
	st  statestore.Backend
	dir string
	err error
}

// openNewStateAsync opens the job's Badger store in the background when
// its directory does not exist, and returns where the outcome will be
// sent; nil (open it later) otherwise.
func (r *Runtime) openNewStateAsync() <-chan openedState {
	s := r.g.Spec.State
	if s == nil || s.Backend == job.BackendMemory {
		return nil
	}
	dir, err := r.stateDirPath()
	if err != nil {
		return nil // openState reports it
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	out := make(chan openedState, 1)
	go func() {
		st, err := r.openStateIn(true)
		out <- openedState{st: st, dir: dir, err: err}
	}()
	return out
}

// stateJob is the job name state keys are stored under: the state
// block's namespace when set (so versions of a job can share state), else
// the job ID.
func stateJob(s *job.Spec) string {
	if s.State != nil && s.State.Namespace != "" {
		return s.State.Namespace
	}
	return s.ID
}

// chainInstance is one subtask of one chain.
type chainInstance struct {
	id     string
	head   *node
	source *sourceHead // set when the chain starts at a source
	inbox  *inbox
	nodes  []*node
	log    *slog.Logger
	// sinks are the sink tasks in the chain; barriers learns when they end.
	sinks    []string
	barriers *barriers
	// restoredWM holds the restored checkpoint's watermarks by task.
	restoredWM map[string]int64
}

// node is one operator subtask inside a chain instance.
type node struct {
	task string
	opID string
	inst ops.Instance
	// children and writers per output port (ops.PortMain, ops.PortLate).
	children [2][]*node
	writers  [2][]*edgeWriter
	m        *taskMetrics
	// onBarrier is set on sink nodes: it reports a barrier's arrival.
	onBarrier func(task string, id uint64)
}

type sourceHead struct {
	task string
	src  connectors.Source
	time *sourceTime     // nil: no watermarks but the final one
	wal  *durable.Source // the source wrapped with its WAL, or nil
	// barriers delivers checkpoint barrier requests to the head's loop;
	// done is closed when the loop has returned.
	barriers chan barrierReq
	done     chan struct{}
	// drain is closed by Drain; draining records that the read stopped
	// for it (the input then ends with a watermark of +∞).
	drain    <-chan struct{}
	draining atomic.Bool
}

type sinkInstance struct {
	task string
	snk  connectors.Sink
}

func (r *Runtime) instantiate(st statestore.Backend) (chains []*chainInstance, sources []*sourceHead, sinks []*sinkInstance, err error) {
	// WALs hold a lock on their directory: one that opened must be closed
	// if instantiation fails.
	var wals []*durable.Source
	defer func() {
		if err != nil {
			for _, w := range wals {
				w.CloseWAL()
			}
		}
	}()
	g := r.g
	plan := g.Plan
	spec := g.Spec
	par := map[string]int{}
	for _, op := range spec.Operators {
		par[op.ID] = spec.OperatorParallelism(&op)
	}
	// Inboxes of chain heads that receive over channels.
	type key struct {
		chain string
		sub   int
	}
	inboxes := map[key]*inbox{}
	// slotIndex[(edge, fromSub, toSub)] = slot at the receiver.
	type slotKey struct {
		edge     string
		from, to int
	}
	slotOf := map[slotKey]int{}
	chainOfOp := map[string]job.Chain{}
	for _, c := range plan.Chains {
		for _, op := range c.Operators {
			chainOfOp[op] = c
		}
	}
	// Count slots per receiving chain instance, in a deterministic order.
	slots := map[key]int{}
	for _, e := range plan.Edges {
		if e.Mode == job.EdgeChained {
			continue
		}
		to := chainOfOp[e.To]
		for t := 0; t < par[e.To]; t++ {
			for f := 0; f < par[e.From]; f++ {
				if e.Mode == job.EdgeForward && f != t {
					continue
				}
				k := key{to.ID, t}
				slotOf[slotKey{e.ID, f, t}] = slots[k]
				slots[k]++
			}
		}
	}
	for k, n := range slots {
		inboxes[k] = newInbox(n, r.opts.ChannelCapacity)
	}
	// Build nodes.
	nodes := map[string]*node{} // task ID -> node
	info := func(op string, sub int) connectors.TaskInfo {
		return connectors.TaskInfo{JobID: spec.ID, OperatorID: op, Subtask: sub, Parallelism: par[op], Logger: r.log.With("task", job.TaskID(op, sub))}
	}
	fail := func(e error) {
		if err == nil {
			err = e
		}
	}
	for _, c := range plan.Chains {
		for sub := 0; sub < c.Parallelism; sub++ {
			ci := &chainInstance{id: fmt.Sprintf("%s-%d", c.ID, sub), inbox: inboxes[key{c.ID, sub}], log: r.log.With("chain", fmt.Sprintf("%s-%d", c.ID, sub)), barriers: r.barriers, restoredWM: r.restoredWatermarks}
			for _, opID := range c.Operators {
				op, _ := spec.Operator(opID)
				task := job.TaskID(opID, sub)
				m := &taskMetrics{task: task, op: opID}
				m.watermark.Store(eventtime.NoWatermark)
				m.finite.Store(eventtime.NoWatermark)
				n := &node{task: task, opID: opID, m: m}
				switch op.Kind {
				case job.KindSource:
					src, e := g.Inputs[opID].NewSource(info(opID, sub))
					if e != nil {
						fail(fmt.Errorf("creating source %s: %w", task, e))
						continue
					}
					var ds *durable.Source
					if cfg := g.Durability[opID]; cfg != nil {
						ds, e = durable.Open(context.Background(), cfg, src, r.opts.DataDir, info(opID, sub), task, durable.Job{Checkpoints: spec.Checkpoint != nil})
						if e != nil {
							fail(e)
							continue
						}
						wals = append(wals, ds)
						src = ds
					}
					if ps, ok := r.startPositions[task]; ok {
						p, can := src.(connectors.Positioner)
						if !can && len(ps) == 0 {
							// Nothing consumed at the checkpoint: the
							// configured start is where it resumes anyway.
						} else if !can {
							fail(fmt.Errorf("source %s cannot resume from positions (its connector does not implement connectors.Positioner)", task))
							continue
						}
						if e := p.Seek(ps); e != nil {
							fail(fmt.Errorf("source %s: seeking to %v: %w", task, ps, e))
							continue
						}
					}
					st, e := r.sourceTime(opID, sub)
					if e != nil {
						fail(fmt.Errorf("source %s: %w", task, e))
						continue
					}
					ci.source = &sourceHead{task: task, src: src, time: st, wal: ds, done: make(chan struct{}), drain: r.draining}
					if spec.Checkpoint != nil {
						ci.source.barriers = make(chan barrierReq)
					}
					if ds != nil {
						m.gauges = ds
					}
					sources = append(sources, ci.source)
					n.inst = ops.Passthrough{}
				case job.KindSink:
					snk, e := g.Outputs[opID].NewSink(info(opID, sub))
					if e != nil {
						fail(fmt.Errorf("creating sink %s: %w", task, e))
						continue
					}
					sinks = append(sinks, &sinkInstance{task: task, snk: snk})
					n.inst = newSinkOp(task, snk, m)
					n.onBarrier = r.barriers.arrived
					ci.sinks = append(ci.sinks, task)
				default:
					t, _ := plan.Task(task)
					stInfo := info(opID, sub)
					stInfo.JobID = stateJob(spec)
					var ckptWM func() (int64, bool)
					if spec.Checkpoint != nil {
						ckptWM = func() (int64, bool) { return r.checkpointWatermark(task) }
					}
					inst, e := g.Ops[opID].New(ops.Task{TaskInfo: stInfo, State: st, KeyGroups: t.KeyGroups(), MaxParallelism: spec.MaxParallelism,
						Now: func() int64 { return r.opts.Clock.Now().UnixMilli() }, CheckpointWatermark: ckptWM})
					if e != nil {
						fail(fmt.Errorf("creating operator %s: %w", task, e))
						continue
					}
					n.inst = inst
					if gg, ok := inst.(ops.Gauger); ok {
						m.gauges = gg
					}
					if jd, ok := inst.(ops.Journaled); ok {
						r.mu.Lock()
						if r.journals == nil {
							r.journals = map[string]*statestore.Journal{}
						}
						r.journals[task] = jd.Journal()
						r.mu.Unlock()
					}
				}
				nodes[task] = n
				ci.nodes = append(ci.nodes, n)
				// Published only once complete: Metrics reads it from
				// other goroutines.
				r.mu.Lock()
				r.tasks = append(r.tasks, m)
				r.mu.Unlock()
			}
			if len(ci.nodes) > 0 {
				ci.head = ci.nodes[0]
			}
			chains = append(chains, ci)
		}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	// Wire edges.
	for _, e := range plan.Edges {
		for f := 0; f < par[e.From]; f++ {
			from := nodes[job.TaskID(e.From, f)]
			port := ops.PortMain
			if e.Port == job.PortLate {
				port = ops.PortLate
			}
			switch e.Mode {
			case job.EdgeChained:
				from.children[port] = append(from.children[port], nodes[job.TaskID(e.To, f)])
				continue
			}
			to := chainOfOp[e.To]
			w := &edgeWriter{edge: e.ID, mode: e.Mode}
			for t := 0; t < par[e.To]; t++ {
				if e.Mode == job.EdgeForward && t != f {
					continue
				}
				w.targets = append(w.targets, inboxes[key{to.ID, t}].slots[slotOf[slotKey{e.ID, f, t}]])
			}
			if e.Mode == job.EdgeKeyGroups {
				op, _ := spec.Operator(e.To)
				idx := g.Schemas[e.From].FieldIndices(op.KeyField)
				if len(idx) == 0 {
					return nil, nil, nil, fmt.Errorf("edge %s: key field %q is not in the rows of %q", e.ID, op.KeyField, e.From)
				}
				w.keyCol = idx[0]
				w.router = keys.NewRouter(spec.MaxParallelism, par[e.To])
			}
			from.writers[port] = append(from.writers[port], w)
		}
	}
	return chains, sources, sinks, nil
}

// run drives one chain instance until its input ends, ctx is cancelled or
// an error occurs.
func (c *chainInstance) run(ctx context.Context, stopping <-chan struct{}, clock Clock) (err error) {
	// A panic in an operator (typically a user's Go function) fails the
	// job with the panic as its error instead of taking the process down.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("chain %s panicked: %v\n%s", c.id, p, debug.Stack())
		}
	}()
	defer func() {
		for _, n := range c.nodes {
			if cerr := n.inst.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("closing %s: %w", n.task, cerr)
			}
		}
	}()
	if c.source != nil {
		defer close(c.source.done)
		return c.runSource(ctx, stopping, clock)
	}
	c.inbox.start(ctx)
	n := len(c.inbox.slots)
	// Barrier alignment: the current barrier and the slots it came
	// through; slots that ended count as arrived.
	slotEnded := make([]bool, n)
	var barrierID uint64
	barrierAt := make([]bool, n)
	aligned := func() bool {
		for i := range barrierAt {
			if !barrierAt[i] && !slotEnded[i] {
				return false
			}
		}
		return true
	}
	forward := func() error {
		if barrierID == 0 || !aligned() {
			return nil
		}
		id := barrierID
		barrierID = 0
		clear(barrierAt)
		return c.head.barrier(ctx, id)
	}
	wms := make([]int64, n)
	for i := range wms {
		wms[i] = eventtime.NoWatermark
	}
	current := int64(eventtime.NoWatermark)
	if wm, ok := c.restoredWM[c.head.task]; ok && wm != eventtime.NoWatermark {
		for i := range wms {
			wms[i] = wm
		}
		current = wm
		if err := c.head.watermark(ctx, wm); err != nil {
			return err
		}
	}
	ended := 0
	for {
		m, slot, err := c.inbox.next(ctx)
		if err != nil {
			return err
		}
		switch m.kind {
		case msgData:
			if err := c.head.process(ctx, ops.Batch{Rec: m.rec, Ack: m.ack}); err != nil {
				return err
			}
		case msgWatermark:
			if m.wm <= wms[slot] {
				continue
			}
			wms[slot] = m.wm
			low := wms[0]
			for _, w := range wms[1:] {
				low = min(low, w)
			}
			if low > current {
				current = low
				if err := c.head.watermark(ctx, current); err != nil {
					return err
				}
			}
		case msgBarrier:
			barrierID = m.id
			barrierAt[slot] = true
			if err := forward(); err != nil {
				return err
			}
		case msgEnd:
			ended++
			slotEnded[slot] = true
			if err := forward(); err != nil {
				return err
			}
			if ended == n {
				return c.head.end(ctx)
			}
		}
	}
}

// process runs the node's operator on a batch.
func (n *node) process(ctx context.Context, b ops.Batch) error {
	n.m.batchesIn.Add(1)
	n.m.rowsIn.Add(b.Rec.NumRows())
	return n.inst.Process(ctx, b, n)
}

// Emit implements ops.Emitter: it fans a batch out to chained operators and
// channel edges.
func (n *node) Emit(ctx context.Context, b ops.Batch) error {
	n.m.batchesOut.Add(1)
	n.m.rowsOut.Add(b.Rec.NumRows())
	port := b.Port
	b.Port = ops.PortMain // the next operator receives it on its input
	children, writers := n.children[port], n.writers[port]
	k := len(children) + len(writers)
	if k == 0 {
		ops.Drop(b)
		return nil
	}
	if k > 1 {
		for i := 1; i < k; i++ {
			b.Rec.Retain()
		}
		b.Ack.Retain(k - 1)
	}
	for _, c := range children {
		if err := c.process(ctx, b); err != nil {
			return err
		}
	}
	for _, w := range writers {
		if err := w.send(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

func (n *node) watermark(ctx context.Context, wm int64) error {
	if err := n.inst.Watermark(ctx, wm, n); err != nil {
		return fmt.Errorf("task %s: %w", n.task, err)
	}
	n.m.watermark.Store(wm)
	if wm != eventtime.EndOfTime {
		n.m.finite.Store(wm)
	}
	for port := range n.children {
		for _, c := range n.children[port] {
			if err := c.watermark(ctx, wm); err != nil {
				return err
			}
		}
		for _, w := range n.writers[port] {
			if err := w.broadcast(ctx, message{kind: msgWatermark, wm: wm}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (n *node) end(ctx context.Context) error {
	for port := range n.children {
		for _, c := range n.children[port] {
			if err := c.end(ctx); err != nil {
				return err
			}
		}
		for _, w := range n.writers[port] {
			if err := w.broadcast(ctx, message{kind: msgEnd}); err != nil {
				return err
			}
		}
	}
	return nil
}

// edgeWriter sends an operator subtask's output over one non-chained edge.
type edgeWriter struct {
	edge    string
	mode    string
	targets []chan message
	rr      int
	keyCol  int
	router  *keys.Router
	dest    []int32
}

func (w *edgeWriter) put(ctx context.Context, ch chan message, m message) error {
	select {
	case ch <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *edgeWriter) send(ctx context.Context, b ops.Batch) error {
	switch w.mode {
	case job.EdgeForward:
		return w.put(ctx, w.targets[0], message{kind: msgData, rec: b.Rec, ack: b.Ack})
	case job.EdgeRebalance:
		t := w.targets[w.rr%len(w.targets)]
		w.rr++
		return w.put(ctx, t, message{kind: msgData, rec: b.Rec, ack: b.Ack})
	}
	// Key groups: split the batch column-wise by owning subtask.
	if len(w.targets) == 1 {
		return w.put(ctx, w.targets[0], message{kind: msgData, rec: b.Rec, ack: b.Ack})
	}
	rows := int(b.Rec.NumRows())
	if cap(w.dest) < rows {
		w.dest = make([]int32, rows)
	}
	dest := w.dest[:rows]
	if err := w.router.Route(b.Rec.Column(w.keyCol), dest); err != nil {
		b.Rec.Release()
		b.Ack.Release(err)
		return fmt.Errorf("edge %s: routing by key: %w", w.edge, err)
	}
	parts, err := batch.Split(b.Rec, dest, len(w.targets))
	b.Rec.Release()
	if err != nil {
		b.Ack.Release(err)
		return fmt.Errorf("edge %s: %w", w.edge, err)
	}
	n := 0
	for _, p := range parts {
		if p != nil {
			n++
		}
	}
	b.Ack.Retain(n - 1)
	for t, p := range parts {
		if p == nil {
			continue
		}
		if err := w.put(ctx, w.targets[t], message{kind: msgData, rec: p, ack: b.Ack}); err != nil {
			return err
		}
	}
	return nil
}

func (w *edgeWriter) broadcast(ctx context.Context, m message) error {
	for _, t := range w.targets {
		if err := w.put(ctx, t, m); err != nil {
			return err
		}
	}
	return nil
}

// sinkOp is the operator instance of a sink subtask: it writes and then
// acknowledges. A connectors.AsyncSink has up to maxAsyncWrites writes in
// flight, each acknowledged when it completes.
type sinkOp struct {
	task string
	snk  connectors.Sink
	m    *taskMetrics

	async    connectors.AsyncSink
	slots    chan struct{} // one per write in flight
	inflight sync.WaitGroup
	ctx      context.Context // the chain's, from the last Process
	gone     atomic.Bool     // the chain ended without waiting: acks stay unreleased
	errMu    sync.Mutex
	err      error // the first failed asynchronous write
}

// maxAsyncWrites bounds the writes an AsyncSink has in flight.
const maxAsyncWrites = 4

func newSinkOp(task string, snk connectors.Sink, m *taskMetrics) *sinkOp {
	s := &sinkOp{task: task, snk: snk, m: m}
	if a, ok := snk.(connectors.AsyncSink); ok {
		s.async, s.slots = a, make(chan struct{}, maxAsyncWrites)
	}
	return s
}

// failed returns the error of a failed asynchronous write.
func (s *sinkOp) failed() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

func (s *sinkOp) Process(ctx context.Context, b ops.Batch, _ ops.Emitter) error {
	if s.async != nil {
		return s.processAsync(ctx, b)
	}
	err := s.snk.Write(ctx, b.Rec)
	rows := b.Rec.NumRows()
	b.Rec.Release()
	if err != nil {
		b.Ack.Release(err)
		return fmt.Errorf("writing sink %s: %w", s.task, err)
	}
	s.m.rowsOut.Add(rows)
	s.m.batchesOut.Add(1)
	b.Ack.Release(nil)
	return nil
}

// processAsync hands the batch to an AsyncSink once a slot is free. A
// failed write fails the chain at the next batch, watermark or its end,
// and its rows are never acknowledged as written (their acknowledgement
// carries the error).
func (s *sinkOp) processAsync(ctx context.Context, b ops.Batch) error {
	if err := s.failed(); err != nil {
		b.Rec.Release()
		b.Ack.Release(err)
		return err
	}
	s.ctx = ctx
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		b.Rec.Release()
		b.Ack.Release(ctx.Err())
		return ctx.Err()
	}
	rows := b.Rec.NumRows()
	s.inflight.Add(1)
	err := s.async.WriteAsync(ctx, b.Rec, func(err error) {
		defer s.inflight.Done()
		defer func() { <-s.slots }()
		if err != nil {
			err = fmt.Errorf("writing sink %s: %w", s.task, err)
			s.errMu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.errMu.Unlock()
		} else {
			s.m.rowsOut.Add(rows)
			s.m.batchesOut.Add(1)
		}
		if !s.gone.Load() {
			b.Ack.Release(err)
		}
	})
	b.Rec.Release()
	if err != nil {
		<-s.slots
		s.inflight.Done()
		b.Ack.Release(err)
		return fmt.Errorf("writing sink %s: %w", s.task, err)
	}
	return nil
}

func (s *sinkOp) Watermark(context.Context, int64, ops.Emitter) error {
	return s.failed()
}

// Close waits for the writes in flight, so that every acknowledgement is
// released before the sources close (R-WAL-6) — unless the chain was
// cancelled: then they are abandoned, and their rows replay after a
// restart.
func (s *sinkOp) Close() error {
	if s.async == nil {
		return nil
	}
	if s.ctx != nil && s.ctx.Err() != nil {
		s.gone.Store(true)
		return s.failed()
	}
	s.inflight.Wait()
	return s.failed()
}

// taskMetrics counts one task's traffic.
type taskMetrics struct {
	task, op                               string
	rowsIn, rowsOut, batchesIn, batchesOut atomic.Int64
	watermark                              atomic.Int64
	// finite is the last watermark below the end of time
	// (eventtime.NoWatermark: none): what a checkpoint records after an
	// input ended or drained.
	finite atomic.Int64
	gauges ops.Gauger
}

// TaskMetrics is a snapshot of one task's counters.
type TaskMetrics struct {
	Task       string
	Operator   string
	RowsIn     int64
	RowsOut    int64
	BatchesIn  int64
	BatchesOut int64
	// Watermark is the task's last input watermark in ms (math.MinInt64
	// before the first; math.MaxInt64 after a bounded input ended).
	Watermark int64
	// Counters are the operator's own totals (windows fired, late rows,
	// WAL entries replayed, …), nil when it has none.
	Counters map[string]int64
	// Gauges are the operator's own point-in-time values (open windows,
	// the WAL's cursor, …), nil when it has none.
	Gauges map[string]int64
}

// StateBytes returns the bytes of state each stateful operator keeps
// (R-STATE-2), by operator ID.
func (r *Runtime) StateBytes() map[string]int64 {
	r.mu.Lock()
	st, last := r.store, r.lastStateBytes
	r.mu.Unlock()
	if last != nil {
		return last
	}
	if st == nil {
		return map[string]int64{}
	}
	return r.stateBytes(st)
}

func (r *Runtime) stateBytes(st statestore.Backend) map[string]int64 {
	out := map[string]int64{}
	for _, op := range r.g.Spec.Operators {
		if op.Stateful || r.g.Ops[op.ID].State {
			if n, err := st.Size(stateJob(r.g.Spec), op.ID); err == nil {
				out[op.ID] = n
			}
		}
	}
	return out
}

// Positions returns the acknowledged positions of every source subtask that
// reports them (connectors.Positioner), by task ID.
func (r *Runtime) Positions() map[string][]connectors.Position {
	r.mu.Lock()
	sources := r.sources
	r.mu.Unlock()
	out := map[string][]connectors.Position{}
	for _, s := range sources {
		if p, ok := s.src.(connectors.Positioner); ok {
			out[s.task] = p.Positions()
		}
	}
	return out
}

// Metrics returns a snapshot of every task's counters, sorted by task.
func (r *Runtime) Metrics() []TaskMetrics {
	r.mu.Lock()
	tasks := append([]*taskMetrics(nil), r.tasks...)
	r.mu.Unlock()
	out := make([]TaskMetrics, 0, len(tasks))
	for _, t := range tasks {
		tm := TaskMetrics{Task: t.task, Operator: t.op, RowsIn: t.rowsIn.Load(), RowsOut: t.rowsOut.Load(), BatchesIn: t.batchesIn.Load(), BatchesOut: t.batchesOut.Load(), Watermark: t.watermark.Load()}
		if t.gauges != nil {
			tm.Counters, tm.Gauges = t.gauges.Counters(), t.gauges.Gauges()
		}
		out = append(out, tm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task < out[j].Task })
	return out
}
