package runtime

// This file holds what runs inside a chain: the per-chain goroutine (run:
// the inbox loop with barrier alignment, watermarks and end of input), a
// node's process, Emit, watermark and end, and edgeWriter, which sends a
// node's output over a non-chained edge, splitting batches by key group on
// keyed edges.

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/job"
)

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
	n.m.bytesIn.Add(recordBytes(b.Rec))
	return n.inst.Process(ctx, b, n)
}

// Emit implements ops.Emitter: it fans a batch out to chained operators and
// channel edges.
func (n *node) Emit(ctx context.Context, b ops.Batch) error {
	n.m.batchesOut.Add(1)
	n.m.rowsOut.Add(b.Rec.NumRows())
	n.m.bytesOut.Add(recordBytes(b.Rec))
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
