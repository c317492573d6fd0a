// Package push is the untyped core of arkflow.Push: a bounded queue of
// record batches that Go code fills and a job's source subtasks drain.
//
// A pushed batch waits in its partition's queue until the subtask reading
// that partition takes it. The queue holds it only until then: the runtime
// owns it afterwards. Enqueue blocks while the rows queued would exceed
// the limit, and the runtime takes rows only as fast as its bounded
// channels drain, so a slow job slows its pushers instead of growing the
// heap. Rows taken are not counted: a window holds the acknowledgement of
// its input until it fires (event time away), and counting those rows
// would stop the input that moves the watermark.
//
// Offsets. Rows are numbered per partition when a subtask reads them, and
// every run starts each partition at the largest of: the position it was
// restored to (a checkpoint or the WAL), the next offset of the previous
// run in this process, and the clock in nanoseconds. Offsets thus grow
// across restarts and process restarts alike, so a restored position never
// makes a new process skip its first rows (the rows pushed to it are all
// new), and state that deduplicates replayed rows by position never takes a
// new row for an old one. They are unique and increasing, not dense.
//
// Idempotency. A queue made with a Seen deduplicates rows by key (see
// Seen). Its seen-set survives a crash through two sources, which together
// always hold every key accepted (within the retention):
//
//   - the WAL: the queue's batches carry each row's key in __meta_key, so
//     the rows the WAL still holds carry theirs, and the durable source
//     hands every one of them to the readers (its Keeper) as the job
//     starts, before they connect. Pushes wait until every subtask of the
//     run has connected, so no Push is judged before every WAL was read;
//   - the key log, a file beside the WAL: before the WAL persists a cursor,
//     which lets it delete the entries behind it, the durable source calls
//     Seen.Save, which appends every key accepted since the last save and
//     fsyncs. An entry is therefore deleted only after its keys are on
//     disk elsewhere. The log is compacted (rewritten whole, atomically) to
//     the newest keys once it holds twice the retention.
package push

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// ErrStopped is returned for rows pushed after the job reading the queue
// stopped, and for rows still queued when it stopped. The job never took
// them: nothing of them is processed.
var ErrStopped = errors.New("push: the job reading this source has stopped; the rows were not taken")

// ErrClosed is returned for rows pushed after Close.
var ErrClosed = errors.New("push: the source is closed")

// DefaultMaxPending is the default limit of rows pushed and not yet taken.
const DefaultMaxPending = 1 << 16

// Queue is a push source's shared state: per-partition queues, their
// limit and the offsets.
type Queue struct {
	schema *arrow.Schema // the pushed batches' schema, without __meta_*
	limit  int64
	now    func() time.Time

	mu      sync.Mutex
	queued  [][]*item  // per partition, in push order
	next    []int64    // per partition, the next offset to hand out
	pending int64      // rows queued, not yet taken or refused
	readers int        // connected, not yet closed subtasks of the run
	started bool       // a run has connected since the last stop
	et      *EventTime // the event time of the run that connected, or nil
	stopped bool       // the last run ended and no other has connected
	closed  bool       // Close was called: readers end after the queue
	changed chan struct{}

	seen *Seen // the keys accepted, for an idempotent source; or nil
	par  int   // the subtasks of the run (readers to wait for, with seen)
}

type item struct {
	rec      arrow.RecordBatch
	n        int64
	keys     []string // with a Seen: each row's key ("": none)
	sums     []Sum    // their sums, claimed until the rows are accepted or not
	seen     *Seen
	accepted func(error)
	done     func(error)
}

// New returns a queue for batches of schema in partitions partitions, with
// at most limit rows queued (DefaultMaxPending when limit <= 0). seen, when
// not nil, makes the source idempotent (see Seen).
func New(schema *arrow.Schema, partitions int, limit int, seen *Seen) *Queue {
	if partitions < 1 {
		partitions = 1
	}
	if limit <= 0 {
		limit = DefaultMaxPending
	}
	return &Queue{
		schema: schema, limit: int64(limit), now: time.Now,
		queued: make([][]*item, partitions), next: make([]int64, partitions),
		changed: make(chan struct{}), seen: seen, par: 1,
	}
}

// Seen returns the queue's seen-set, or nil.
func (q *Queue) Seen() *Seen { return q.seen }

// Schema is the schema of the pushed batches (without __meta_* columns).
func (q *Queue) Schema() *arrow.Schema { return q.schema }

// Partitions is the number of partitions.
func (q *Queue) Partitions() int { return len(q.queued) }

// wakeLocked wakes everyone waiting on a change. q.mu must be held.
func (q *Queue) wakeLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Enqueue hands rec (owned by the queue from now on, also on error) to
// partition part. It blocks while the rows queued would exceed the limit
// (a batch larger than the limit waits until nothing is queued).
// accepted is called once when the job took the rows (after the WAL append
// when the source has durability on) or could not; done once when they
// were processed (acknowledged by every sink they reached) or not. Either
// may be nil. An error returned by Enqueue means neither will be called.
//
// keys and sums, with a Seen, are the rows' keys and their claimed sums
// (Seen.Claim): the claims settle when the rows are accepted or not, also
// when Enqueue returns an error.
func (q *Queue) Enqueue(ctx context.Context, part int, rec arrow.RecordBatch, keys []string, sums []Sum, accepted, done func(error)) error {
	it := &item{rec: rec, n: rec.NumRows(), accepted: accepted, done: done}
	if q.seen != nil {
		it.keys, it.sums, it.seen = keys, sums, q.seen
	}
	q.mu.Lock()
	for {
		var err error
		switch {
		case q.closed:
			err = ErrClosed
		case q.stopped:
			err = ErrStopped
		case q.pending == 0 || q.pending+it.n <= q.limit:
			q.pending += it.n
			q.queued[part] = append(q.queued[part], it)
			q.wakeLocked()
			q.mu.Unlock()
			return nil
		}
		if err != nil {
			q.mu.Unlock()
			it.drop(err)
			return err
		}
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			it.drop(ctx.Err())
			return ctx.Err()
		case <-changed:
		}
		q.mu.Lock()
	}
}

// Reading waits until a job reads the queue and returns its event time
// (nil under processing time), so that a pusher checks its rows against
// the job that takes them: ErrStopped when the last job stopped and none
// reads it since, ErrClosed after Close, ctx's error when ctx ends first.
// With a Seen it waits until every subtask of the job has connected, that
// is, until the keys of every WAL are in the Seen.
func (q *Queue) Reading(ctx context.Context) (*EventTime, error) {
	q.mu.Lock()
	for {
		switch {
		case q.closed:
			q.mu.Unlock()
			return nil, ErrClosed
		case q.stopped:
			q.mu.Unlock()
			return nil, ErrStopped
		case q.started && (q.seen == nil || q.readers >= q.par):
			et := q.et
			q.mu.Unlock()
			return et, nil
		}
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
		q.mu.Lock()
	}
}

// Close ends the input: subtasks deliver what is queued, then report the
// end of input (the job fires its windows and ends). Later pushes fail
// with ErrClosed.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		q.wakeLocked()
	}
}

// Pending returns the rows pushed and not yet taken or refused.
func (q *Queue) Pending() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending
}

// connect registers a subtask of a run and returns the first offset of
// each of its partitions.
func (q *Queue) connect(parts []int, seek map[int32]int64, et *EventTime) []int64 {
	now := q.now().UnixNano()
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.started {
		// Every subtask of a run reads through one Input: one et.
		q.started, q.stopped, q.et = true, false, et
	}
	q.readers++
	q.wakeLocked() // Reading waits for every subtask of an idempotent source
	first := make([]int64, len(parts))
	for i, p := range parts {
		q.next[p] = max(q.next[p], seek[int32(p)], now)
		first[i] = q.next[p]
	}
	return first
}

// disconnect ends a subtask of the run; when the last one ends, the rows
// still queued are refused and pushes fail until another run connects.
func (q *Queue) disconnect() {
	var refused []*item
	q.mu.Lock()
	q.readers--
	if q.readers == 0 && q.started {
		q.started, q.stopped = false, true
		for p, items := range q.queued {
			refused = append(refused, items...)
			q.queued[p] = nil
		}
		for _, it := range refused {
			q.pending -= it.n
		}
		q.wakeLocked()
	}
	q.mu.Unlock()
	for _, it := range refused {
		it.refuse(ErrStopped)
	}
}

// drop releases an item that was never queued and settles its claims.
func (it *item) drop(err error) {
	it.rec.Release()
	it.settle(err)
}

// settle ends the claims of the item's keys: accepted when err is nil.
func (it *item) settle(err error) {
	if it.seen != nil {
		it.seen.Settle(it.sums, err)
	}
}

// refuse releases an item the job does not take and reports err to its
// pusher.
func (it *item) refuse(err error) {
	it.rec.Release()
	it.settle(err)
	if it.accepted != nil {
		it.accepted(err)
	}
	if it.done != nil {
		it.done(err)
	}
}

// Input is the connectors.Input of the queue for a job. et is the job's
// event-time column, nil under processing time: every batch the job takes
// is checked against it (see EventTime).
func (q *Queue) Input(et *EventTime) connectors.Input {
	schema := q.schema
	if et != nil && et.Route {
		// Rows without an event time go on, null in that column.
		fs := slices.Clone(schema.Fields())
		fs[et.Col].Nullable = true
		schema = arrow.NewSchema(fs, nil)
	}
	schema = connectors.WithMeta(schema)
	if q.seen != nil {
		schema = withKeyField(schema)
	}
	return &input{q: q, schema: schema, et: et}
}

type input struct {
	q      *Queue
	schema *arrow.Schema
	et     *EventTime
}

// Idempotent reports whether the source's pushes are idempotent
// (Config.IdempotencyKey), which needs a write-ahead log.
func (in *input) Idempotent() bool { return in.q.seen != nil }

// ErrNotDurable is the refusal of an idempotent source without a WAL.
var ErrNotDurable = errNotDurable

func (in *input) Schema() *arrow.Schema { return in.schema }
func (in *input) Partitions() int       { return in.q.Partitions() }

func (in *input) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	in.q.mu.Lock()
	in.q.par = max(info.Parallelism, 1)
	in.q.mu.Unlock()
	r := &reader{q: in.q, schema: in.schema, et: in.et, op: info.OperatorID, tracker: connectors.NewTracker(""), seek: map[int32]int64{}}
	for p := 0; p < in.q.Partitions(); p++ {
		if p%info.Parallelism == info.Subtask {
			r.parts = append(r.parts, p)
		}
	}
	return r, nil
}

// reader is the source of one subtask.
type reader struct {
	q         *Queue
	schema    *arrow.Schema
	et        *EventTime
	op        string
	parts     []int
	turn      int
	tracker   *connectors.Tracker
	seek      map[int32]int64
	connected bool
	kept      bool // a durable source keeps its keys (OpenKeeper)
}

// Unrewindable marks the source as one whose rows cannot be read again.
func (r *reader) Unrewindable() {}

func (r *reader) Connect(context.Context) error {
	if r.q.seen != nil && !r.kept {
		return errNotDurable
	}
	first := r.q.connect(r.parts, r.seek, r.et)
	for i, p := range r.parts {
		r.tracker.Start(int32(p), first[i])
	}
	r.connected = true
	return nil
}

func (r *reader) Positions() []connectors.Position { return r.tracker.Positions() }

func (r *reader) Seek(ps []connectors.Position) error {
	for _, p := range ps {
		if p.Topic != "" {
			return fmt.Errorf("push source %s: position of topic %q: a push source has no topics", r.op, p.Topic)
		}
		r.seek[p.Partition] = p.Offset
	}
	return nil
}

func (r *reader) Read(ctx context.Context) (connectors.Batch, error) {
	q := r.q
	for {
		q.mu.Lock()
		for i := range r.parts {
			k := (r.turn + i) % len(r.parts)
			p := r.parts[k]
			if len(q.queued[p]) == 0 {
				continue
			}
			it := q.queued[p][0]
			q.queued[p][0] = nil
			q.queued[p] = q.queued[p][1:]
			q.pending -= it.n
			q.wakeLocked()
			start := q.next[p]
			q.next[p] += it.n
			q.mu.Unlock()
			r.turn = k + 1
			rec := r.et.nullify(it.rec)
			out := r.addMeta(rec, int32(p), start, it.keys)
			rec.Release()
			ack := r.tracker.Deliver(int32(p), start, start+it.n)
			done := it.done
			return connectors.Batch{Record: out, Partition: p, Accepted: it.acceptedFunc(), Ack: func(err error) {
				ack(err)
				if done != nil {
					done(err)
				}
			}}, nil
		}
		if q.closed {
			q.mu.Unlock()
			return connectors.Batch{}, connectors.ErrEndOfInput
		}
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return connectors.Batch{}, ctx.Err()
		case <-changed:
		}
	}
}

func (r *reader) Close(context.Context) error {
	if r.connected {
		r.connected = false
		r.q.disconnect()
	}
	return nil
}
