package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// A checkpoint's synchronous phase is a cut through the running graph,
// taken at one acknowledged boundary and aligned across multiple inputs:
//
//  1. Each running source head, between two batches, sends a barrier
//     downstream and pauses: it reads nothing and sends nothing until the
//     cut is over.
//  2. The barrier travels in-band, behind every batch the source sent
//     before it. A chain with several inputs forwards it once it has come
//     through all of them (alignment; inputs that ended count as arrived).
//     With every source paused, nothing follows a barrier on any channel
//     until the cut ends, so alignment holds no data back.
//  3. When the barrier has reached every sink, every batch sent before it
//     was written and its acknowledgement ran — except the ones stateful
//     operators hold (open windows), which are not waited for:
//     their rows lie after the sources' contiguous positions and are replayed.
//     Acknowledgements commit the state journal before they move positions,
//     so the committed state covers at least everything up to the
//     positions; what it holds beyond them is recognised on replay by the
//     positions each operator commits with its state, and skipped.
//  4. The cut records positions and watermarks and freezes the state store
//     (a point-in-time view), then resumes the sources. Snapshots stream
//     from the frozen view afterwards, while the pipeline runs.
type barrierReq struct {
	id       uint64
	injected chan error
	resume   <-chan struct{}
}

// cut is what the synchronous phase of a checkpoint collects.
type cut struct {
	ID         uint64
	Positions  map[string][]connectors.Position // by source task
	Watermarks map[string]int64                 // by task; only tasks with one
	Frozen     statestore.Frozen
	// Pause is how long the sources were held.
	Pause time.Duration
}

// barriers tracks one cut's barrier through the sinks.
type barriers struct {
	mu      sync.Mutex
	id      uint64
	pending map[string]bool // sink tasks the barrier has not reached
	ended   map[string]bool // sink tasks whose chain has ended
	all     chan struct{}   // closed when pending is empty
}

func newBarriers() *barriers { return &barriers{ended: map[string]bool{}} }

// start opens a cut over the given sink tasks.
func (b *barriers) start(id uint64, sinks []string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.id = id
	b.pending = map[string]bool{}
	for _, s := range sinks {
		if !b.ended[s] {
			b.pending[s] = true
		}
	}
	b.all = make(chan struct{})
	if len(b.pending) == 0 {
		close(b.all)
	}
	return b.all
}

// arrived records the barrier at a sink task.
func (b *barriers) arrived(task string, id uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id != b.id || b.pending == nil || !b.pending[task] {
		return
	}
	delete(b.pending, task)
	if len(b.pending) == 0 {
		close(b.all)
	}
}

// ended records that a sink task's chain has ended: no barrier will reach
// it, and none needs to.
func (b *barriers) sinkEnded(task string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended[task] = true
	if b.pending != nil && b.pending[task] {
		delete(b.pending, task)
		if len(b.pending) == 0 {
			close(b.all)
		}
	}
}

// errNoCut is returned when a cut is requested before the job runs or
// after it stopped.
var errNoCut = errors.New("the job is not running")

// cut runs the synchronous phase of a checkpoint. The caller must close the
// returned cut's Frozen view.
func (r *Runtime) cut(ctx context.Context) (*cut, error) {
	r.cutMu.Lock()
	defer r.cutMu.Unlock()
	r.mu.Lock()
	sources, sinks, st, running := r.sources, r.sinkTasks, r.store, r.state == Running || r.state == Stopping && r.finalCut
	tasks := append([]*taskMetrics(nil), r.tasks...)
	r.mu.Unlock()
	if !running {
		return nil, errNoCut
	}
	fr, ok := st.(statestore.Freezer)
	if !ok {
		return nil, fmt.Errorf("the state backend cannot freeze a view for a checkpoint")
	}
	r.cutID++
	id := r.cutID
	start := time.Now()
	resume := make(chan struct{})
	resumed := false
	defer func() {
		if !resumed {
			close(resume)
		}
	}()
	all := r.barriers.start(id, sinks)
	for _, s := range sources {
		req := barrierReq{id: id, injected: make(chan error, 1), resume: resume}
		select {
		case s.barriers <- req:
		case <-s.done:
			continue // ended: its end went through instead
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case err := <-req.injected:
			if err != nil {
				return nil, fmt.Errorf("checkpoint %d: source %s: %w", id, s.task, err)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		return nil, fmt.Errorf("checkpoint %d: waiting for the barrier to reach every sink: %w", id, ctx.Err())
	}
	c := &cut{ID: id, Positions: r.Positions(), Watermarks: map[string]int64{}}
	// The watermarks recorded are those of the positions, not of the
	// moment: a restore reads again from the first unacknowledged batch
	// (rows held in windows), and its rows must meet the watermark they
	// met the first time, not a later one — a session window would
	// otherwise find its early rows late. So no task's watermark is
	// recorded above what a source's was before the first batch it would
	// read again.
	capWM, capped := int64(0), false
	for _, s := range sources {
		if wm, ok := s.time.frontier(); ok && (!capped || wm < capWM) {
			capWM, capped = wm, true
		}
	}
	for _, m := range tasks {
		wm := m.watermark.Load()
		if wm == eventtime.EndOfTime {
			// An input that ended (or drained) fired every window with
			// +∞; that is no point in event time to resume at, the last
			// watermark before it is (the windows it fired lie behind
			// their floors: see windowop.floor).
			wm = m.finite.Load()
		}
		if wm != eventtime.NoWatermark {
			if capped && capWM < wm {
				wm = capWM
			}
			if wm != eventtime.NoWatermark {
				c.Watermarks[m.task] = wm
			}
		}
	}
	frozen, err := fr.Freeze()
	if err != nil {
		return nil, fmt.Errorf("checkpoint %d: freezing the state: %w", id, err)
	}
	c.Frozen = frozen
	c.Pause = time.Since(start)
	close(resume)
	resumed = true
	return c, nil
}

// barrier passes a barrier on: to chained operators, over every edge, or,
// at a sink, to the cut's tracker.
func (n *node) barrier(ctx context.Context, id uint64) error {
	any := false
	for port := range n.children {
		for _, c := range n.children[port] {
			any = true
			if err := c.barrier(ctx, id); err != nil {
				return err
			}
		}
		for _, w := range n.writers[port] {
			any = true
			if err := w.broadcast(ctx, message{kind: msgBarrier, id: id}); err != nil {
				return err
			}
		}
	}
	if !any && n.onBarrier != nil {
		n.onBarrier(n.task, id)
	}
	return nil
}

// injectBarrier handles a barrier request in a source head: send the
// barrier, report it, and hold until the cut resumes the sources.
func (c *chainInstance) injectBarrier(ctx context.Context, req barrierReq) error {
	err := c.head.barrier(ctx, req.id)
	req.injected <- err
	if err != nil {
		return err
	}
	select {
	case <-req.resume:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
