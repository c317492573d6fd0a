package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Clock is the runtime's time source.
type Clock interface {
	Now() time.Time
	NewTicker(d time.Duration) Ticker
}

// Ticker delivers ticks like time.Ticker.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) NewTicker(d time.Duration) Ticker {
	return systemTicker{time.NewTicker(d)}
}

type systemTicker struct{ t *time.Ticker }

func (t systemTicker) C() <-chan time.Time { return t.t.C }
func (t systemTicker) Stop()               { t.t.Stop() }

// sourceTime is a source subtask's watermark generation.
type sourceTime struct {
	// event time: the column and a tracker of per-partition progress.
	col     int
	field   string
	tracker *eventtime.Tracker
	// parts and ooo are the subtask's partitions and out-of-orderness, for
	// watermark advances without data (Advance).
	parts []int
	ooo   int64
	// processing time: the watermark follows the clock.
	processing bool
	interval   time.Duration
	ts         []int64
	valid      []bool
	cuts       []eventtime.Cut // advance per_row: where the batch splits
	// restored is the watermark a checkpoint restored (NoWatermark: none);
	// the source sends it before its first row.
	restored int64
	// log receives the warning of partitions without rows holding the
	// watermark back (warnStarved), once a run.
	log           *slog.Logger
	starvedWarned bool

	// pub is each partition's watermark candidate and idleness as the
	// source's goroutine last left them (publish), for the metrics of
	// other goroutines (PartitionWatermarks); guarded by pmu.
	pmu sync.Mutex
	pub map[int]PartitionWatermark

	// marks are the unacknowledged batches in read order, each with the
	// watermark before it (event time, batches with an acknowledgement).
	mu    sync.Mutex
	marks []*wmMark
}

type wmMark struct {
	wm   int64
	done bool
}

// mark records a batch about to be read past watermark wm; settle is
// called when its acknowledgement completes.
func (st *sourceTime) mark(wm int64) (settle func()) {
	m := &wmMark{wm: wm}
	st.mu.Lock()
	st.marks = append(st.marks, m)
	st.mu.Unlock()
	return func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		m.done = true
		i := 0
		for i < len(st.marks) && st.marks[i].done {
			st.marks[i] = nil
			i++
		}
		st.marks = st.marks[i:]
	}
}

// frontier returns the watermark from before the first batch not yet
// acknowledged: what the source's watermark was when it read the first
// row a restore from the positions of now would read again. ok is false
// when every batch read was acknowledged.
func (st *sourceTime) frontier() (wm int64, ok bool) {
	if st == nil || st.processing {
		return 0, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.marks) == 0 {
		return 0, false
	}
	return st.marks[0].wm, true
}

// sourceTime returns the watermark generation of a source subtask: event
// time per partition; processing time (the clock) when a window is
// downstream; nil when nothing downstream needs watermarks.
func (r *Runtime) sourceTime(opID string, sub int) (*sourceTime, error) {
	spec := r.g.Spec
	src, _ := spec.Source(opID)
	t := src.Time
	if t != nil && t.Mode == job.EventTime {
		schema := r.g.Schemas[opID]
		idx := schema.FieldIndices(t.TimestampField)
		if len(idx) == 0 {
			return nil, fmt.Errorf("event-time field %q is not in the source's rows", t.TimestampField)
		}
		var parts []int
		par := planner.OperatorParallelism(spec, mustOperator(spec, opID))
		for p := 0; p < r.g.Inputs[opID].Partitions(); p++ {
			if p%par == sub {
				parts = append(parts, p)
			}
		}
		now := r.opts.Clock.Now().UnixMilli()
		st := &sourceTime{col: idx[0], field: t.TimestampField, tracker: eventtime.NewTracker(t.Watermark, parts, now), restored: eventtime.NoWatermark, parts: parts,
			log: r.log.With("operator", opID, "subtask", sub)}
		if w := t.Watermark; w != nil && w.Strategy != job.Monotonous {
			st.ooo = w.OutOfOrdernessMS
		}
		if wm, ok := r.restoredWatermarks[planner.TaskID(opID, sub)]; ok {
			st.tracker.Restore(wm)
			st.restored = wm
		}
		st.publishAll()
		return st, nil
	}
	if r.timedDownstream(opID) {
		return &sourceTime{processing: true, interval: r.opts.ProcessingTimeInterval}, nil
	}
	return nil, nil
}

func mustOperator(s *job.Spec, id string) *job.Operator {
	op, _ := s.Operator(id)
	return op
}

// timedDownstream reports whether an operator driven by its input
// watermark (ops.Built.Timed: a window) consumes the rows of a source.
func (r *Runtime) timedDownstream(src string) bool {
	s := r.g.Spec
	out := map[string][]string{}
	for _, e := range s.Edges {
		out[e.From] = append(out[e.From], e.To)
	}
	seen := map[string]bool{src: true}
	todo := []string{src}
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if r.g.Ops[n].Timed {
			return true
		}
		for _, m := range out[n] {
			if !seen[m] {
				seen[m] = true
				todo = append(todo, m)
			}
		}
	}
	return false
}

// tickInterval is how often the source head needs the clock: for idle
// detection (a fraction of the timeout) or processing time. Zero: never.
func (st *sourceTime) tickInterval() time.Duration {
	switch {
	case st == nil:
		return 0
	case st.processing:
		return st.interval
	case st.tracker.IdleTimeout() > 0:
		d := time.Duration(st.tracker.IdleTimeout()) * time.Millisecond / 4
		return min(max(d, 5*time.Millisecond), time.Second)
	}
	return 0
}

type readResult struct {
	b   connectors.Batch
	adv *eventtime.Advance
	err error
}

// runSource reads a source until it ends, the job stops, or ctx is done.
// With event time, the watermark advances before the batch that moved it
// is passed on, so rows are classified against it.
func (c *chainInstance) runSource(ctx context.Context, stopping <-chan struct{}, clock Clock) error {
	readCtx, stopRead := context.WithCancel(ctx)
	defer stopRead()
	go func() {
		select {
		case <-stopping:
			stopRead()
		case <-c.source.drain:
			c.source.draining.Store(true)
			stopRead()
		case <-readCtx.Done():
		}
	}()
	src := c.source
	st := src.time
	if st != nil && !st.processing && st.restored != eventtime.NoWatermark {
		if err := c.head.watermark(ctx, st.restored); err != nil {
			return err
		}
	}
	interval := st.tickInterval()
	if interval == 0 && src.barriers == nil {
		for {
			b, adv, err := readControl(src.src, readCtx)
			if adv != nil {
				if err := c.advanceTo(ctx, adv, clock); err != nil {
					return err
				}
				continue
			}
			if done, err := c.handleRead(ctx, readCtx, b, err, clock); done || err != nil {
				return err
			}
		}
	}
	// Ticks need the head awake while Read blocks: a reader goroutine hands
	// batches over an unbuffered channel, so backpressure still reaches
	// the source.
	results := make(chan readResult)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			b, adv, err := readControl(src.src, readCtx)
			select {
			case results <- readResult{b, adv, err}:
			case <-readCtx.Done():
				refuse(b, readCtx.Err())
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		stopRead()
		<-readerDone
	}()
	var tick <-chan time.Time
	if interval > 0 {
		ticker := clock.NewTicker(interval)
		defer ticker.Stop()
		tick = ticker.C()
	}
	for {
		select {
		case req := <-src.barriers:
			if err := c.injectBarrier(ctx, req); err != nil {
				return err
			}
		case r := <-results:
			if r.adv != nil {
				if err := c.advanceTo(ctx, r.adv, clock); err != nil {
					return err
				}
				continue
			}
			if done, err := c.handleRead(ctx, readCtx, r.b, r.err, clock); done || err != nil {
				return err
			}
		case <-tick:
			if err := c.tick(ctx, clock); err != nil {
				return err
			}
		case <-readCtx.Done():
			// Stopped (or cancelled) while the reader was blocked: the
			// reader may exit without handing over its error.
			_, err := c.handleRead(ctx, readCtx, connectors.Batch{}, readCtx.Err(), clock)
			return err
		}
	}
}

// tick advances the watermark with time alone: idle partitions stop
// holding it back; processing time follows the clock.
func (c *chainInstance) tick(ctx context.Context, clock Clock) error {
	st := c.source.time
	now := clock.Now().UnixMilli()
	if st.processing {
		return c.head.watermark(ctx, now)
	}
	wm, advanced := st.tracker.Tick(now)
	st.publishAll()
	if advanced {
		return c.head.watermark(ctx, wm)
	}
	return nil
}

// handleRead passes one Read result on. done reports the end of the
// source's loop.
func (c *chainInstance) handleRead(ctx, readCtx context.Context, b connectors.Batch, err error, clock Clock) (done bool, _ error) {
	src := c.source
	switch {
	case err == nil:
	case errors.Is(err, connectors.ErrEndOfInput):
		if err := c.head.watermark(ctx, eventtime.EndOfTime); err != nil {
			return true, err
		}
		return true, c.head.end(ctx)
	case ctx.Err() != nil:
		return true, ctx.Err()
	case readCtx.Err() != nil:
		// Graceful stop: no final watermark, windows keep their contents;
		// rows in flight drain to the sinks. A batch read as the stop
		// came is not passed on: refused to its pusher and unacknowledged,
		// it is read again after a restart.
		refuse(b, readCtx.Err())
		if src.draining.Load() {
			// Drain: the input ends here as a bounded one does, and
			// every open window fires.
			if err := c.head.watermark(ctx, eventtime.EndOfTime); err != nil {
				return true, err
			}
		}
		return true, c.head.end(ctx)
	default:
		return true, fmt.Errorf("reading source %s: %w", src.task, err)
	}
	if b.Record == nil {
		return false, nil
	}
	if b.Accepted != nil {
		b.Accepted(nil)
	}
	var node *ack.Node
	if b.Ack != nil {
		done := b.Ack
		if st := src.time; st != nil && !st.processing {
			settle := st.mark(st.tracker.Watermark())
			node = ack.New(func(err error) { done(err); settle() })
		} else {
			node = ack.New(done)
		}
	}
	if b.Record.NumRows() == 0 {
		b.Record.Release()
		node.Release(nil)
		return false, nil
	}
	if st := src.time; st != nil && !st.processing && st.tracker.PerRow() {
		return false, c.perRow(ctx, st, b, node, clock)
	}
	if st := src.time; st != nil {
		if err := c.advance(ctx, st, b, clock); err != nil {
			b.Record.Release()
			node.Release(err)
			return true, fmt.Errorf("source %s: %w", src.task, err)
		}
	}
	return false, c.head.process(ctx, ops.Batch{Rec: b.Record, Ack: node})
}

// advance moves the watermark with a batch, before the batch goes on.
func (c *chainInstance) advance(ctx context.Context, st *sourceTime, b connectors.Batch, clock Clock) error {
	now := clock.Now().UnixMilli()
	if st.processing {
		return c.head.watermark(ctx, now)
	}
	ts, valid, err := st.times(b.Record)
	if err != nil {
		return err
	}
	if wm, advanced := st.observe(b.Partition, ts, valid, now); advanced {
		return c.head.watermark(ctx, wm)
	}
	return nil
}

// times converts a batch's event times to ms (valid marks the non-null
// ones), into buffers the source reuses.
func (st *sourceTime) times(rec arrow.RecordBatch) (ts []int64, valid []bool, err error) {
	n := int(rec.NumRows())
	if cap(st.ts) < n {
		st.ts, st.valid = make([]int64, n), make([]bool, n)
	}
	ts, valid = st.ts[:n], st.valid[:n]
	if _, err := eventtime.Millis(rec.Column(st.col), st.field, ts, valid); err != nil {
		return nil, nil, err
	}
	return ts, valid, nil
}

// observe gives the tracker a batch of partition p: its largest event
// time, or, without any, the partition's activity.
func (st *sourceTime) observe(p int, ts []int64, valid []bool, now int64) (int64, bool) {
	maxTS, any := int64(eventtime.NoWatermark), false
	for i, t := range ts {
		if valid[i] && (!any || t > maxTS) {
			maxTS, any = t, true
		}
	}
	var wm int64
	var advanced bool
	if any {
		wm, advanced = st.tracker.Observe(p, maxTS, now)
	} else {
		wm, advanced = st.tracker.Touch(p, now)
	}
	st.publish(p)
	if !advanced && !st.starvedWarned {
		st.warnStarved(now)
	}
	return wm, advanced
}

// PartitionWatermark is one source partition's event-time progress.
type PartitionWatermark struct {
	Partition int
	// Watermark is the watermark the partition alone allows (its largest
	// event time minus the out-of-orderness), in ms; NoWatermark before
	// its first event.
	Watermark int64
	// Idle is set while the partition is idle (no data for the source's
	// idle timeout): it does not hold the source's watermark back.
	Idle bool
}

// publish makes partition p's progress visible to PartitionWatermarks;
// the source's goroutine calls it after the tracker saw p's data.
func (st *sourceTime) publish(p int) {
	cand, idle, ok := st.tracker.Partition(p)
	if !ok {
		return
	}
	st.pmu.Lock()
	if st.pub == nil {
		st.pub = map[int]PartitionWatermark{}
	}
	st.pub[p] = PartitionWatermark{Partition: p, Watermark: cand, Idle: idle}
	st.pmu.Unlock()
}

// publishAll publishes every partition (after a tick, which may turn any
// of them idle).
func (st *sourceTime) publishAll() {
	st.pmu.Lock()
	defer st.pmu.Unlock()
	if st.pub == nil {
		st.pub = map[int]PartitionWatermark{}
	}
	st.tracker.EachPartition(func(p int, cand int64, idle bool) {
		st.pub[p] = PartitionWatermark{Partition: p, Watermark: cand, Idle: idle}
	})
}

// partitionWatermarks returns what was published, by partition.
func (st *sourceTime) partitionWatermarks() []PartitionWatermark {
	if st == nil || st.processing {
		return nil
	}
	st.pmu.Lock()
	out := make([]PartitionWatermark, 0, len(st.pub))
	for _, pw := range st.pub {
		out = append(out, pw)
	}
	st.pmu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

// starvedAfter is how long (ms) a partition may go without its first row,
// while others have rows, before the source warns that it holds the
// watermark back.
const starvedAfter = 10_000

// warnStarved warns, once a run, when partitions that never had a row
// hold the watermark back: without an idle timeout, no window downstream
// fires until they get one.
func (st *sourceTime) warnStarved(now int64) {
	if st.log == nil || st.tracker.IdleTimeout() > 0 {
		return
	}
	parts := st.tracker.Starved(now, starvedAfter)
	if len(parts) == 0 {
		return
	}
	st.starvedWarned = true
	st.log.Warn("event time: partitions of this source that have had no row yet hold its watermark back, so no window downstream fires until they get one; "+
		"if they may stay empty, set the source's watermark.idle_timeout_ms (arkflow.EventTime{IdleTimeout: d} in Go)",
		"partitions", parts, "watermark", st.tracker.Watermark())
}

// perRow passes a batch on under advance per_row: every row
// meets the watermark in force before it, the one the rows before it
// gave. The batch goes on in segments split where Tracker.Cuts says, the
// watermark moving between them; in-order input is one segment, behind
// the watermark of before the batch. After the batch the watermark is the
// one advance batch sends before it. It consumes the batch and node.
func (c *chainInstance) perRow(ctx context.Context, st *sourceTime, b connectors.Batch, node *ack.Node, clock Clock) error {
	now := clock.Now().UnixMilli()
	rec := b.Record
	ts, valid, err := st.times(rec)
	if err != nil {
		rec.Release()
		node.Release(err)
		return fmt.Errorf("source %s: %w", c.source.task, err)
	}
	st.cuts = st.tracker.Cuts(b.Partition, ts, valid, st.cuts[:0])
	// The tracker learns the batch now (Cuts has what it needs), so that
	// ts and valid, which the operators may not keep, are not needed after.
	wm, advanced := st.observe(b.Partition, ts, valid, now)
	if len(st.cuts) == 0 {
		if err := c.head.process(ctx, ops.Batch{Rec: rec, Ack: node}); err != nil {
			return err
		}
	} else {
		// One acknowledgement reference per segment; the record's own is
		// released once every segment holds its slice.
		node.Retain(len(st.cuts))
		defer rec.Release()
		lo := int64(0)
		for i := 0; i <= len(st.cuts); i++ {
			hi := rec.NumRows()
			if i < len(st.cuts) {
				hi = int64(st.cuts[i].Row)
			}
			if err := c.head.process(ctx, ops.Batch{Rec: rec.NewSlice(lo, hi), Ack: node}); err != nil {
				for range len(st.cuts) - i {
					node.Release(err) // the segments never passed on
				}
				return err
			}
			if i < len(st.cuts) {
				if err := c.head.watermark(ctx, st.cuts[i].WM); err != nil {
					for range len(st.cuts) - i {
						node.Release(err)
					}
					return err
				}
				lo = hi
			}
		}
	}
	if advanced && (len(st.cuts) == 0 || wm > st.cuts[len(st.cuts)-1].WM) {
		return c.head.watermark(ctx, wm)
	}
	return nil
}

// refuse drops a batch read while the source was being stopped: its rows
// never entered the pipeline. They are not acknowledged either, so the
// source keeps them as unprocessed (a replayable source reads them again).
func refuse(b connectors.Batch, cause error) {
	if b.Record == nil {
		return
	}
	b.Record.Release()
	if b.Accepted != nil {
		b.Accepted(fmt.Errorf("the job stopped before it took the rows: %w", cause))
	}
	if b.Ack != nil {
		b.Ack(fmt.Errorf("the job stopped before it took the rows: %w", cause))
	}
}
