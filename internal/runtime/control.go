package runtime

import (
	"context"
	"fmt"
	"math"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// The hooks in this file let a test harness (package arkflowtest, through
// internal/harness) drive a job deterministically: advance a source's
// watermark without data, wait until everything sent so far has reached
// the sinks, and read an operator's keyed state. Nothing else
// uses them; none of them changes how a job runs.

// ControlReader is implemented by sources that deliver, besides batches,
// watermark advances in band with them (the harness's inputs, and the
// write-ahead log of internal/durable in front of any source, which passes
// its source's advances through). The runtime calls ReadControl instead of
// Read; each call returns a batch, or an advance (and a zero batch), or an
// error, as Read does.
type ControlReader interface {
	connectors.Source
	ReadControl(ctx context.Context) (connectors.Batch, *eventtime.Advance, error)
}

// readControl reads the next batch or advance of a source.
func readControl(src connectors.Source, ctx context.Context) (connectors.Batch, *eventtime.Advance, error) {
	if cr, ok := src.(ControlReader); ok {
		return cr.ReadControl(ctx)
	}
	b, err := src.Read(ctx)
	return b, nil, err
}

// advanceTo applies an advance in the source head: the watermark moves as
// it would with an event, and goes downstream if it moved.
func (c *chainInstance) advanceTo(ctx context.Context, a *eventtime.Advance, clock Clock) error {
	st := c.source.time
	if st == nil || st.processing {
		return nil
	}
	parts := a.Partitions
	if parts == nil {
		parts = st.parts
	}
	// Observe subtracts the out-of-orderness from an event time: add it,
	// so that the candidate is a.Watermark itself.
	event := a.Watermark
	if st.ooo > 0 && event <= math.MaxInt64-st.ooo {
		event += st.ooo
	} else if st.ooo > 0 {
		event = math.MaxInt64
	}
	now := clock.Now().UnixMilli()
	advanced := false
	for _, p := range parts {
		if _, ok := st.tracker.Observe(p, event, now); ok {
			advanced = true
		}
	}
	if advanced {
		return c.head.watermark(ctx, st.tracker.Watermark())
	}
	return nil
}

// Running is closed once the job runs: every source and sink connected,
// and the chains about to start. A job that fails to start never closes
// it (Done does).
func (r *Runtime) Running() <-chan struct{} { return r.runningCh() }

// runningCh returns the channel Running returns, made on first use.
func (r *Runtime) runningCh() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running == nil {
		r.running = make(chan struct{})
	}
	return r.running
}

// Sync sends a barrier from every running source and waits until it has
// reached every sink: then every batch, watermark and advance a source
// passed on before it has been handled by every operator, and whatever
// that produced has been written by the sinks (synchronous ones; an
// AsyncSink may still have writes in flight) and acknowledged. Unlike a
// checkpoint's cut, it records nothing and does not hold the sources. It
// needs the barriers of a job with a checkpoint block; a job that is not
// running, or is failing, returns errNoCut (IsNotRunning).
func (r *Runtime) Sync(ctx context.Context) error {
	if r.g.Spec.Checkpoint == nil {
		return ErrNoCheckpoints
	}
	r.cutMu.Lock()
	defer r.cutMu.Unlock()
	r.mu.Lock()
	sources, sinks, running := r.sources, r.sinkTasks, r.state == Running
	r.mu.Unlock()
	if !running {
		return errNoCut
	}
	r.cutID++
	id := r.cutID
	resume := make(chan struct{})
	close(resume) // nothing to hold the sources for
	all := r.barriers.start(id, sinks)
	for _, s := range sources {
		req := barrierReq{id: id, injected: make(chan error, 1), resume: resume}
		select {
		case s.barriers <- req:
		case <-s.done:
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case err := <-req.injected:
			if err != nil && r.cancelled() {
				return errNoCut // the job is failing: its error is the news
			} else if err != nil {
				return fmt.Errorf("sync %d: source %s: %w", id, s.task, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case <-all:
		// A sink whose chain ended counts as reached: when the run was
		// cancelled (a failure), the barrier may not have passed.
		if r.cancelled() {
			return errNoCut
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sync %d: waiting for the barrier to reach every sink: %w", id, ctx.Err())
	}
}

// cancelled reports whether the run was cancelled: the job is failing
// (or its Run's context ended).
func (r *Runtime) cancelled() bool {
	r.mu.Lock()
	runCtx := r.runCtx
	r.mu.Unlock()
	return runCtx != nil && runCtx.Err() != nil
}

// IsNotRunning reports whether err is Sync's (or a checkpoint's) refusal
// of a job that is not running.
func IsNotRunning(err error) bool { return err == errNoCut }

// Journal returns the state journal of an operator task whose instance
// keeps user-visible keyed state (ops.Journaled), or nil.
func (r *Runtime) Journal(task string) *statestore.Journal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.journals[task]
}
