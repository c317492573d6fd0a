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
	return c.runInbox(ctx)
}

// inboxMerge is what a chain head that reads an inbox keeps about its
// slots: barrier alignment (the current barrier and the slots it came
// through; slots that ended count as arrived) and the watermark of each
// slot, whose minimum is the head's.
type inboxMerge struct {
	slotEnded []bool
	ended     int // slots that ended
	barrierID uint64
	barrierAt []bool
	wms       []int64
	current   int64 // the minimum of wms forwarded last
}

func newInboxMerge(n int) *inboxMerge {
	m := &inboxMerge{slotEnded: make([]bool, n), barrierAt: make([]bool, n), wms: make([]int64, n), current: eventtime.NoWatermark}
	for i := range m.wms {
		m.wms[i] = eventtime.NoWatermark
	}
	return m
}

// aligned reports whether the current barrier has arrived on every slot
// that has not ended.
func (m *inboxMerge) aligned() bool {
	for i := range m.barrierAt {
		if !m.barrierAt[i] && !m.slotEnded[i] {
			return false
		}
	}
	return true
}

// takeAligned returns the current barrier once it is aligned, and starts
// waiting for the next; 0 while there is none or it is not aligned.
func (m *inboxMerge) takeAligned() uint64 {
	if m.barrierID == 0 || !m.aligned() {
		return 0
	}
	id := m.barrierID
	m.barrierID = 0
	clear(m.barrierAt)
	return id
}

// watermark records slot's watermark wm and returns the head's new
// watermark, the minimum over the slots, when that advanced.
func (m *inboxMerge) watermark(slot int, wm int64) (int64, bool) {
	if wm <= m.wms[slot] {
		return 0, false
	}
	m.wms[slot] = wm
	low := m.wms[0]
	for _, w := range m.wms[1:] {
		low = min(low, w)
	}
	if low <= m.current {
		return 0, false
	}
	m.current = low
	return low, true
}

// runInbox drives a chain whose head reads an inbox: batches go to the
// head; a watermark is forwarded when the minimum over the slots
// advances; a barrier is forwarded once it has come through every slot
// still open; the chain ends when every slot has. A watermark restored
// from a checkpoint starts every slot, and is forwarded first.
func (c *chainInstance) runInbox(ctx context.Context) error {
	c.inbox.start(ctx)
	n := len(c.inbox.slots)
	mg := newInboxMerge(n)
	forward := func() error {
		if id := mg.takeAligned(); id != 0 {
			return c.head.barrier(ctx, id)
		}
		return nil
	}
	if wm, ok := c.restoredWM[c.head.task]; ok && wm != eventtime.NoWatermark {
		for i := range mg.wms {
			mg.wms[i] = wm
		}
		mg.current = wm
		if err := c.head.watermark(ctx, wm); err != nil {
			return err
		}
	}
	for {
		m, slot, err := c.inbox.next(ctx)
		if err != nil {
			return err
		}
		switch m.kind {
		case msgData:
			b := ops.Batch{Rec: m.rec, Ack: m.ack}
			if slot < len(c.inbox.from) {
				b.From = c.inbox.from[slot]
			}
			if err := c.head.process(ctx, b); err != nil {
				return err
			}
		case msgWatermark:
			if low, ok := mg.watermark(slot, m.wm); ok {
				if err := c.head.watermark(ctx, low); err != nil {
					return err
				}
			}
		case msgBarrier:
			mg.barrierID = m.id
			mg.barrierAt[slot] = true
			if err := forward(); err != nil {
				return err
			}
		case msgEnd:
			mg.ended++
			mg.slotEnded[slot] = true
			if err := forward(); err != nil {
				return err
			}
			if mg.ended == n {
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
		// The keyed operator reads the key column first thing. A batch
		// of Go rows (typed.Batch) encodes a column when it is first
		// read: reading it here puts that work on this task's goroutine
		// rather than the keyed operator's, most often the pipeline's
		// slowest (a keyed window at 1 k keys spent a fifth of its
		// time encoding a string key).
		_ = b.Rec.Column(w.keyCol)
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
