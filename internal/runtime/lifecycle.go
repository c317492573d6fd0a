package runtime

// This file holds the runtime's lifecycle: Run, Stop and Drain, the state
// transitions between them (State, Err, Done), DryRun, and start, which
// opens the state (restoring a checkpoint first), instantiates the chains
// and connects sources then sinks, and closeAll, which closes them again
// in order.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/durable"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

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
	go r.watchRecovery(runCtx)
	ckptCtx, stopCkpt := context.WithCancel(runCtx)
	var ckptLoop sync.WaitGroup
	if r.g.Spec.Checkpoint != nil && r.periodic() {
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
	r.closeQueries()
	// A round in progress is abandoned: the previous checkpoint stays.
	stopCkpt()
	ckptLoop.Wait()
	if firstErr == nil && ctx.Err() == nil && r.drained() && r.g.Spec.Checkpoint != nil && r.periodic() {
		// A drain ends with a checkpoint of where it left everything: the
		// positions at the end of what was read, the windows it fired
		// behind their floors. A restart from it neither fires them again
		// nor loses a row read before the drain.
		if err := r.finalCheckpoint(runCtx); err != nil {
			firstErr = fmt.Errorf("draining job %q: the final checkpoint failed (a restart takes the previous one, and the windows fired since may be written again): %w", r.g.Spec.ID, err)
		}
	}

	// Close in order: sources, then sinks.
	closeErr := r.closeAll(resources, false)
	switch {
	case firstErr != nil:
		r.fail(firstErr)
		return firstErr
	case ctx.Err() != nil:
		r.cancelledBy(ctx.Err())
		return ctx.Err()
	case closeErr != nil:
		r.fail(closeErr)
		return closeErr
	}
	r.setState(Stopped)
	r.log.Info("job stopped")
	return nil
}

// cancelledBy ends the run as Failed with err, the run context's error:
// the caller's cancellation (a service shutting down, a second signal) is
// no fault of the job, so it is logged as a warning, not as a failure.
func (r *Runtime) cancelledBy(err error) {
	r.mu.Lock()
	r.state = Failed
	r.err = err
	r.mu.Unlock()
	r.log.Warn("job cancelled: its context ended before it stopped, without draining; rows not acknowledged are read again by the next run where the sources can replay them", "error", err)
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

// periodic reports whether the runtime cuts checkpoints on its own (the
// periodic loop, a drain's final one): not when the Hub drives them
// (Options.HubCheckpoints), nor in a run of part of the job.
func (r *Runtime) periodic() bool { return !r.opts.HubCheckpoints && r.local == nil }

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
	r.log.Info("drain: final checkpoint taken", "checkpoint", m.CheckpointID)
	return nil
}

// DryRun opens and closes every WAL the job would use, without starting
// anything else: a WAL that is locked by another process, unreachable or
// corrupt fails here, and the real start can reopen each one at once.
func (r *Runtime) DryRun(ctx context.Context) error {
	spec := r.g.Spec
	var errs []error
	for _, src := range spec.Sources {
		cfg := r.g.Durability[src.OperatorID]
		if cfg == nil {
			continue
		}
		op, _ := spec.Operator(src.OperatorID)
		info := connectors.TaskInfo{JobID: spec.ID, OperatorID: src.OperatorID, Parallelism: planner.OperatorParallelism(spec, op), Logger: r.log.With("operator", src.OperatorID)}
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
// sinks. On failure it closes the one that failed, then what was
// connected in reverse order, then what was never connected: every Source
// and Sink is closed exactly once.
//
// State comes first: operators restore from it when they are created, and
// it closes last, after the sinks. Then the WALs are
// resharded, the graph instantiated and its sources and sinks connected.
func (r *Runtime) start(ctx context.Context) ([]*chainInstance, []resource, error) {
	if len(r.opts.Tasks) > 0 {
		if err := ValidateTasks(r.g.Plan, r.opts.Tasks); err != nil {
			return nil, nil, err
		}
	}
	cat, restoreFrom, st, fresh, err := r.openStartState(ctx)
	if err != nil {
		return nil, nil, err
	}
	stateRes := resource{kind: "state", task: r.g.Spec.ID, close: func(context.Context) error {
		// Keep the last sizes for Metrics after the job ended.
		sizes := r.stateSizes(st)
		r.mu.Lock()
		r.lastStateSizes = sizes
		r.mu.Unlock()
		return st.Close()
	}}
	r.mu.Lock()
	r.store = st
	r.mu.Unlock()
	if err := r.prepareState(ctx, cat, st, restoreFrom, fresh); err != nil {
		r.closeAll([]resource{stateRes}, false)
		return nil, nil, err
	}
	if err := r.reshardWALs(ctx); err != nil {
		r.closeAll([]resource{stateRes}, false)
		return nil, nil, err
	}
	chains, sources, sinks, err := r.instantiate(ctx, st)
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
	res, err := r.connectAll(ctx, chains, sources, sinks, stateRes)
	if err != nil {
		return nil, nil, err
	}
	return chains, res, nil
}

// openStartState opens the checkpoint catalog (nil without checkpoints),
// chooses the checkpoint to restore (nil for none) and opens the state
// backend. The checkpoint is chosen before the state store opens, so that
// a refused one leaves the state untouched; fresh reports that
// this call created the state directory empty. On error nothing stays
// open.
func (r *Runtime) openStartState(ctx context.Context) (cat *ckptstore.Catalog, restoreFrom *ckptstore.Manifest, st statestore.Backend, fresh bool, err error) {
	cat, err = r.openCatalog(ctx)
	if err != nil {
		return nil, nil, nil, false, err
	}
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
				return nil, nil, nil, false, res.err
			}
		}
		if err != nil {
			return nil, nil, nil, false, err
		}
	}
	if st == nil {
		if restoreFrom == nil {
			if err := r.checkLayout(); err != nil {
				return nil, nil, nil, false, err
			}
		}
		if st, err = r.openState(); err != nil {
			return nil, nil, nil, false, err
		}
	}
	return cat, restoreFrom, st, fresh, nil
}

// prepareState puts the state the run starts from in place, before any
// operator is created or source connected: state and positions first,
// then input. With a checkpoint to restore it
// restores it into st and takes its positions (unless the options gave
// some); without one it saves the key-group layout of the plan. With a
// catalog, the runtime's checkpoint status is enabled. The caller closes
// st on error.
func (r *Runtime) prepareState(ctx context.Context, cat *ckptstore.Catalog, st statestore.Backend, restoreFrom *ckptstore.Manifest, fresh bool) error {
	r.startPositions = r.opts.StartPositions
	if cat != nil {
		if restoreFrom != nil {
			restored, err := r.restore(ctx, cat, st, restoreFrom, fresh)
			if err == nil {
				err = statestore.Ready(st) // a restore without layers may not have waited
			}
			if err != nil {
				return err
			}
			if r.startPositions == nil {
				r.startPositions = restored
			}
		}
		r.ckpt.mu.Lock()
		r.ckpt.catalog = cat
		r.ckpt.status.Enabled, r.ckpt.status.Healthy = true, true
		if restoreFrom == nil {
			// Nothing to restore: the recovery is done, as
			// RecoveryProgress documents (a readiness check waits for it).
			r.ckpt.status.Recovery.Done = true
		}
		r.ckpt.mu.Unlock()
	}
	if restoreFrom == nil {
		// A restore lays the keyed state out for the plan; else it must
		// be laid out so already (checked before the store opened).
		if err := r.saveLayout(); err != nil {
			return err
		}
	}
	return nil
}

// reshardWALs redistributes, by partition, the logs of durable sources
// written at another parallelism, before any of them opens. A cancelled
// ctx stops it (durable.Reshard).
func (r *Runtime) reshardWALs(ctx context.Context) error {
	for _, src := range r.g.Spec.Sources {
		if cfg := r.g.Durability[src.OperatorID]; cfg != nil {
			op, _ := r.g.Spec.Operator(src.OperatorID)
			if err := durable.Reshard(ctx, cfg, r.opts.DataDir, r.g.Spec.ID, src.OperatorID, planner.OperatorParallelism(r.g.Spec, op), r.log.With("operator", src.OperatorID)); err != nil {
				return err
			}
		}
	}
	return nil
}

// connectAll connects every source, then every sink, and returns all the
// run's resources in the order they close: sources and sinks, then the
// WALs, then the state.
// When one fails to connect it closes that one, then the connected ones
// in reverse, then the never-connected ones, then the operator instances,
// the WALs and the state, and returns the failure.
func (r *Runtime) connectAll(ctx context.Context, chains []*chainInstance, sources []*sourceHead, sinks []*sinkInstance, stateRes resource) ([]resource, error) {
	var all []resource
	for _, s := range sources {
		all = append(all, resource{kind: "source", task: s.task, connect: s.src.Connect, close: s.src.Close})
	}
	for _, s := range sinks {
		all = append(all, resource{kind: "sink", task: s.task, connect: s.snk.Connect, close: s.snk.Close})
	}
	// WALs close after the sinks, before the state.
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
			return nil, err
		}
	}
	return append(append(all, wals...), stateRes), nil
}
