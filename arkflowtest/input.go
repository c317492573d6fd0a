package arkflowtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
	"github.com/arkflow-rs/arkflow-go/internal/typed"
	"github.com/arkflow-rs/arkflow-go/job"
)

// inputType and outputType are the connector types of Input and Output in
// a job's spec. Only Go code can bind them (a spec naming them is refused
// at validation).
const (
	inputType  = "arkflowtest"
	outputType = "arkflowtest"
)

func init() {
	connectors.RegisterInput(inputType, buildInput)
	connectors.RegisterOutput(outputType, buildOutput)
}

// Input is a source of typed rows that a test pushes into a job: give it
// to Builder.Source, start the job with New, then Push rows (each Push is
// one batch of one partition) and AdvanceWatermark, from the test's
// goroutine. It keeps every pushed row, so that a job restored from a
// Snapshot can replay what the snapshot had not yet acknowledged, at the
// same offsets. Rows carry the metadata columns of other partitioned
// sources (__meta_source, __meta_partition and __meta_offset, the row's
// index in its partition); the package doc says in which order the job
// reads them.
//
// An Input belongs to one running harness at a time. What is pushed while
// none runs its job (before New, or after Stop or Finish) waits for the
// next harness of the builder: a Restore reads it after the snapshot's
// rows, a New reads only it (New starts the input afresh, its offsets
// from 0 again).
type Input[T any] struct {
	in    *input
	codec *typed.Codec[T]
	err   error // the codec's: T cannot be a row
}

// NewInput returns an empty input of rows of type T, with the given
// number of partitions (at least 1). T is a struct whose fields are the
// columns (see the typed rows of package arkflow); a T that
// cannot be a row is reported when the job is built.
func NewInput[T any](partitions int) *Input[T] {
	c, err := typed.For[T]()
	var schema *arrow.Schema
	if err == nil {
		schema = c.Schema()
	} else {
		var zero T
		err = fmt.Errorf("arkflowtest: %T cannot be a row: %w", zero, err)
	}
	in := newInput(schema, max(partitions, 1))
	in.err = err
	return &Input[T]{in: in, codec: c, err: err}
}

// InputType implements arkflow.SourceComponent.
func (i *Input[T]) InputType() string { return inputType }

func (i *Input[T]) core() *input { return i.in }

// Push appends rows, as one batch, to a partition, and, when the input
// belongs to a running harness, returns once the job has handled them
// (see Harness.Settle). Pushed before New, they wait for the job to start.
// A partition out of range, no rows, or rows that cannot be encoded, fail
// the test (or, before New, the harness's start). A zero time.Time in the
// event-time field is a row without an event time, as for a push source:
// the job drops it (counted in null_timestamp_dropped) or routes it, with
// the field null.
func (i *Input[T]) Push(partition int, rows ...T) {
	err := i.err
	if err == nil && len(rows) == 0 {
		err = fmt.Errorf("arkflowtest: Push(%d) without rows: a batch holds at least one row", partition)
	}
	var rec arrow.RecordBatch
	if err == nil {
		rec, err = i.codec.Encode(nil, rows)
		if err != nil {
			err = fmt.Errorf("arkflowtest: encoding rows: %w", err)
		}
	}
	if err == nil {
		err = i.in.push(partition, rec)
		rec.Release()
	}
	i.in.after(err)
}

// AdvanceWatermark promises that no row older than ms (Unix milliseconds,
// as the event-time column reads after conversion) will follow on the
// given partitions (none: all of them). Their watermark candidates rise
// to ms, as if each had delivered a row whose time makes that its
// candidate, in order with the rows pushed before; the job's watermark is,
// as always, the minimum over the active partitions of every source.
// Within a running harness it returns once the job has handled it. An
// input whose source has no event time fails the test (or, before New,
// the harness's start): the advance would change nothing.
func (i *Input[T]) AdvanceWatermark(ms int64, partitions ...int) {
	var err error
	if h := i.in.running(); h != nil && !h.hasEventTime(i.in) {
		err = errNoEventTime
	}
	if len(partitions) == 0 {
		for p := range i.in.parts {
			partitions = append(partitions, p)
		}
	}
	for _, p := range partitions {
		if err != nil {
			break
		}
		err = i.in.advance(p, ms)
	}
	i.in.after(err)
}

// errNoEventTime is the error of a watermark advance on an input whose
// source has no event time, where it would change nothing.
var errNoEventTime = errors.New("arkflowtest: AdvanceWatermark: the source reading the input has no event time (arkflow.EventTime on its Source), so a watermark advance would change nothing")

// harnessInput is what the harness finds among a builder's bindings.
type harnessInput interface{ core() *input }

// item is one pushed batch or watermark advance of a partition.
type item struct {
	seq    uint64            // global push order
	offset int64             // the first row's offset (an advance: the next row's)
	rec    arrow.RecordBatch // nil for an advance
	wm     int64             // an advance's watermark
}

// input is the untyped core of Input: partitions of items, and the
// readers of the job that runs it.
type input struct {
	schema *arrow.Schema // the rows', without metadata columns
	err    error         // why the row type has no schema (schema nil)

	mu      sync.Mutex
	parts   [][]item
	rows    []int64 // rows per partition
	seq     uint64
	ended   bool
	readers []*reader
	// changed is closed (and replaced) whenever something Settle waits
	// for may have changed: a push, a reader waiting or ending.
	changed chan struct{}
	h       *Harness // the harness it belongs to last, nil before New
	// early is the first error of a Push or AdvanceWatermark made while
	// no test could be told (before New, or once the test of its last
	// harness is over); the next New or Restore reports it.
	early error
	// cut is, once the job of its harness has ended, the number of items
	// of each partition that job had: the items after it wait for the
	// next harness. Nil while none were pushed since.
	cut []int
	// epoch counts the runs the input started afresh (begin): a
	// snapshot's rows are the input's only within the epoch it was taken.
	epoch uint64
}

func newInput(schema *arrow.Schema, partitions int) *input {
	return &input{schema: schema, parts: make([][]item, partitions), rows: make([]int64, partitions), changed: make(chan struct{})}
}

// signal wakes Settle and readers; in.mu must be held.
func (in *input) signal() {
	close(in.changed)
	in.changed = make(chan struct{})
}

func (in *input) checkPartition(p int) error {
	if p < 0 || p >= len(in.parts) {
		return fmt.Errorf("arkflowtest: partition %d out of range [0, %d)", p, len(in.parts))
	}
	return nil
}

// mark records where the items of the input's ended job end, before the
// first item pushed after it (in.mu held).
func (in *input) mark() {
	if in.cut != nil || in.h == nil || !in.h.done() {
		return
	}
	in.cut = make([]int, len(in.parts))
	for p, items := range in.parts {
		in.cut[p] = len(items)
	}
}

// running returns the harness the input belongs to if its job runs, or
// nil.
func (in *input) running() *Harness {
	in.mu.Lock()
	h := in.h
	in.mu.Unlock()
	if h == nil || h.cleaned || h.done() {
		return nil
	}
	return h
}

func (in *input) push(p int, rec arrow.RecordBatch) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.checkPartition(p); err != nil {
		return err
	}
	if !in.schema.Equal(rec.Schema()) {
		return fmt.Errorf("arkflowtest: batch schema %s differs from the input's %s", rec.Schema(), in.schema)
	}
	in.mark()
	rec.Retain()
	in.seq++
	in.parts[p] = append(in.parts[p], item{seq: in.seq, offset: in.rows[p], rec: rec})
	in.rows[p] += rec.NumRows()
	in.signal()
	return nil
}

func (in *input) advance(p int, wm int64) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.checkPartition(p); err != nil {
		return err
	}
	in.mark()
	in.seq++
	in.parts[p] = append(in.parts[p], item{seq: in.seq, offset: in.rows[p], wm: wm})
	in.signal()
	return nil
}

// end makes the input bounded: readers end after the last item.
func (in *input) end() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.ended = true
	in.signal()
}

// after settles the input's harness after a Push or an advance, or
// reports err to the harness's test. With no test to report to (before
// New, or once the test of its last harness is over) err waits for the
// next New; once the job of its harness has ended (Stop, Finish, or by
// itself) what was pushed waits for the next harness, which reads it, and
// the harness's cleanup fails the test if none does.
func (in *input) after(err error) {
	in.mu.Lock()
	h := in.h
	if (h == nil || h.cleaned) && err != nil && in.early == nil {
		in.early = err
	}
	in.mu.Unlock()
	if h == nil || h.cleaned {
		return
	}
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
	if h.done() && h.job.Err() == nil {
		return
	}
	h.Settle()
}

// epochOf returns the input's epoch.
func (in *input) epochOf() uint64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.epoch
}

// begin readies the input for a harness that starts, before attach. With
// same (a Restore of a snapshot taken of this input in this epoch) it
// resumes the snapshot's run: it keeps every item, those pushed since
// included. Otherwise the run starts afresh: the items of the job of an
// earlier harness are dropped (what was pushed after that job ended is
// kept, at offsets from 0), and hist, the snapshot's items of a Restore,
// is loaded. eventTime says whether a source reading the input has event
// time: without it, a watermark advance pushed while no job ran is
// refused, as it would be while one runs.
func (in *input) begin(hist [][]item, same, eventTime bool) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	wait := make([]int, len(in.parts)) // the first item pushed while no job ran
	switch {
	case same && in.cut != nil:
		copy(wait, in.cut)
	case same:
		for p, items := range in.parts {
			wait[p] = len(items)
		}
	case in.h != nil:
		in.restart()
	}
	in.ended, in.cut = false, nil
	if !eventTime {
		for p, items := range in.parts {
			for _, it := range items[wait[p]:] {
				if it.rec == nil {
					return errNoEventTime
				}
			}
		}
	}
	if hist != nil && !same {
		if err := in.load(hist); err != nil {
			return fmt.Errorf("restoring it: %w", err)
		}
	}
	return nil
}

// restart drops the items of the job of the input's last harness, keeping
// those pushed since at offsets that count from 0, as in a new input
// (in.mu held).
func (in *input) restart() {
	in.epoch++
	for p, items := range in.parts {
		n := len(items)
		if in.cut != nil {
			n = in.cut[p]
		}
		drop := in.rows[p] // rows before the first kept item
		if n < len(items) {
			drop = items[n].offset
		}
		for _, it := range items[:n] {
			if it.rec != nil {
				it.rec.Release()
			}
		}
		kept := append([]item(nil), items[n:]...)
		for k := range kept {
			kept[k].offset -= drop
		}
		in.parts[p] = kept
		in.rows[p] -= drop
	}
}

// attach makes the input h's: its readers from now on are the job's.
func (in *input) attach(h *Harness) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.h = h
	live := in.readers[:0]
	for _, r := range in.readers {
		if !r.closed {
			live = append(live, r)
		}
	}
	in.readers = live
	in.signal()
}

// unread returns how many items were pushed after the job of the
// input's last harness ended (they wait for the next harness).
func (in *input) unread() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cut == nil {
		return 0
	}
	n := 0
	for p, items := range in.parts {
		n += len(items) - in.cut[p]
	}
	return n
}

// history returns a copy of every partition's items, records retained,
// for a snapshot.
func (in *input) history() [][]item {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([][]item, len(in.parts))
	for p, items := range in.parts {
		out[p] = append([]item(nil), items...)
		for _, it := range items {
			if it.rec != nil {
				it.rec.Retain()
			}
		}
	}
	return out
}

// load fills a fresh input with a snapshot's history, which it retains
// (in.mu held).
func (in *input) load(hist [][]item) error {
	for _, items := range in.parts {
		if len(items) > 0 {
			return errors.New("it already holds rows: restore into a job whose inputs are new (or are the very inputs of the snapshot's job)")
		}
	}
	if len(hist) != len(in.parts) {
		return fmt.Errorf("it has %d partitions, the snapshot's input %d", len(in.parts), len(hist))
	}
	for p, items := range hist {
		for _, it := range items {
			if it.rec != nil {
				if !in.schema.Equal(it.rec.Schema()) {
					return fmt.Errorf("its schema %s differs from the snapshot's input's %s", in.schema, it.rec.Schema())
				}
				it.rec.Retain()
				in.rows[p] = it.offset + it.rec.NumRows()
			} else {
				in.rows[p] = it.offset
			}
			in.seq = max(in.seq, it.seq)
			in.parts[p] = append(in.parts[p], it)
		}
	}
	in.signal()
	return nil
}

// drained reports whether every reader of the running job has delivered
// all its items and waits for more (or ended): then the job has taken
// everything pushed. If not, it says what is left. in.mu must be held.
func (in *input) drained() (bool, string) {
	for _, r := range in.readers {
		if r.closed || r.done {
			continue
		}
		for k, p := range r.parts {
			if r.next[k] < len(in.parts[p]) {
				return false, fmt.Sprintf("partition %d has %d items not yet read", p, len(in.parts[p])-r.next[k])
			}
		}
		if !r.waiting {
			return false, fmt.Sprintf("source subtask %d is handling its last batch", r.subtask)
		}
	}
	return true, ""
}

// inputConn is the connectors.Input of an Input within one job.
type inputConn struct {
	in     *input
	schema *arrow.Schema // with metadata columns
	etCol  int           // the event-time column, or -1
}

func buildInput(bc connectors.BuildContext) (connectors.Input, error) {
	hi, ok := bc.Bound.(harnessInput)
	if !ok {
		return nil, fmt.Errorf("input type %q takes its rows from Go: pass an arkflowtest.Input to Builder.Source", inputType)
	}
	in := hi.core()
	if in.schema == nil {
		return nil, in.err
	}
	// Go writes "no time" as the zero time.Time: as the event time it is
	// null (the job drops or routes it by its rule for rows without an
	// event time), never a year-1 row that is late for every window.
	schema, etCol := in.schema, -1
	if t := bc.Time; t != nil && t.Mode == job.EventTime {
		if idx := schema.FieldIndices(t.TimestampField); len(idx) == 1 && schema.Field(idx[0]).Type.ID() == arrow.TIMESTAMP {
			etCol = idx[0]
			fs := slices.Clone(schema.Fields())
			fs[etCol].Nullable = true
			schema = arrow.NewSchema(fs, nil)
		}
	}
	return &inputConn{in: in, schema: connectors.WithMeta(schema), etCol: etCol}, nil
}

func (c *inputConn) Schema() *arrow.Schema { return c.schema }
func (c *inputConn) Partitions() int       { return len(c.in.parts) }

func (c *inputConn) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	r := &reader{in: c.in, schema: c.schema, etCol: c.etCol, op: info.OperatorID, subtask: info.Subtask, tracker: connectors.NewTracker(""), seek: map[int32]int64{}}
	for p := range c.in.parts {
		if p%info.Parallelism == info.Subtask {
			r.parts = append(r.parts, p)
		}
	}
	r.next = make([]int, len(r.parts))
	c.in.mu.Lock()
	c.in.readers = append(c.in.readers, r)
	c.in.mu.Unlock()
	return r, nil
}

// reader is one source subtask's reader of an input. It delivers the
// items of its partitions in push order.
type reader struct {
	in      *input
	schema  *arrow.Schema
	etCol   int // the event-time column, or -1
	op      string
	subtask int
	parts   []int
	tracker *connectors.Tracker
	seek    map[int32]int64

	// Guarded by in.mu.
	next    []int // next item per partition (index into in.parts[p])
	waiting bool  // blocked in ReadControl with nothing to deliver
	done    bool  // returned ErrEndOfInput
	closed  bool
}

var _ runtime.ControlReader = (*reader)(nil)

func (r *reader) Connect(context.Context) error {
	for _, p := range r.parts {
		r.tracker.Start(int32(p), r.seek[int32(p)])
	}
	return nil
}

func (r *reader) Positions() []connectors.Position { return r.tracker.Positions() }

func (r *reader) Seek(ps []connectors.Position) error {
	for _, p := range ps {
		r.seek[p.Partition] = p.Offset
	}
	return nil
}

func (r *reader) Read(ctx context.Context) (connectors.Batch, error) {
	for {
		b, adv, err := r.ReadControl(ctx)
		if adv == nil {
			return b, err
		}
	}
}

// ReadControl implements runtime.ControlReader: the next item of the
// reader's partitions in push order, skipping what lies before the seek
// positions (a restore).
func (r *reader) ReadControl(ctx context.Context) (connectors.Batch, *eventtime.Advance, error) {
	in := r.in
	for {
		in.mu.Lock()
		best := -1
		for k, p := range r.parts {
			for r.next[k] < len(in.parts[p]) && r.skip(p, in.parts[p][r.next[k]]) {
				r.next[k]++
			}
			if r.next[k] < len(in.parts[p]) && (best < 0 || in.parts[p][r.next[k]].seq < in.parts[r.parts[best]][r.next[best]].seq) {
				best = k
			}
		}
		if best >= 0 {
			p := r.parts[best]
			it := in.parts[p][r.next[best]]
			r.next[best]++
			if r.waiting {
				r.waiting = false
			}
			if it.rec != nil {
				it.rec.Retain()
			}
			in.mu.Unlock()
			if it.rec == nil {
				return connectors.Batch{}, &eventtime.Advance{Partitions: []int{p}, Watermark: it.wm}, nil
			}
			rec, start := it.rec, it.offset
			if skip := r.seek[int32(p)] - start; skip > 0 {
				sl := rec.NewSlice(skip, rec.NumRows())
				rec.Release()
				rec, start = sl, start+skip
			}
			if r.etCol >= 0 {
				rec = eventtime.ZeroTimeAsNull(rec, r.etCol)
			}
			out := connectors.AddMeta(r.schema, rec, r.op, int32(p), start)
			rec.Release()
			return connectors.Batch{Record: out, Partition: p, Ack: r.tracker.Deliver(int32(p), start, start+out.NumRows())}, nil, nil
		}
		if in.ended {
			r.done = true
			in.signal()
			in.mu.Unlock()
			return connectors.Batch{}, nil, connectors.ErrEndOfInput
		}
		if !r.waiting {
			r.waiting = true
			in.signal()
		}
		changed := in.changed
		in.mu.Unlock()
		select {
		case <-ctx.Done():
			in.mu.Lock()
			r.waiting = false
			in.mu.Unlock()
			return connectors.Batch{}, nil, ctx.Err()
		case <-changed:
		}
	}
}

// skip reports whether an item lies wholly before the reader's seek
// position in partition p (in.mu held). An advance at the seek position
// is replayed with the rows after it.
func (r *reader) skip(p int, it item) bool {
	seek := r.seek[int32(p)]
	if it.rec == nil {
		return it.offset < seek
	}
	return it.offset+it.rec.NumRows() <= seek
}

func (r *reader) Close(context.Context) error {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	r.closed = true
	r.in.signal()
	return nil
}
