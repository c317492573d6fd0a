package windowop

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/agg"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Metric names reported by window operators (Job.Metrics):
// MetricOpenWindows is a gauge (TaskMetrics.Gauges), the number of windows
// open now; the others are counters (TaskMetrics.Counters), totals since
// the task started. MetricLateDropped counts rows dropped because the
// watermark had passed their window (late_event_policy drop, or update
// past the deadline) and MetricNullDropped rows dropped for a null event
// time; both are also warned about in the job's log (dropWarner). MetricLateRouted and MetricNullRouted count
// rows sent to the late sink (route), MetricLateUpdated late rows that
// updated a fired window. MetricReplayedSkipped counts rows a restart
// read again whose windows had fired before it (see replayOf): they are
// not late, and are neither counted nor warned about as such.
const (
	MetricOpenWindows     = "open_windows"
	MetricLateDropped     = "late_dropped"
	MetricLateRouted      = "late_routed"
	MetricLateUpdated     = "late_updated"
	MetricNullDropped     = "null_timestamp_dropped"
	MetricNullRouted      = "null_timestamp_routed"
	MetricReplayedSkipped = "replayed_skipped"
	MetricWindowsFired    = "windows_fired"
)

// maxOutputRows bounds the rows of one emitted batch.
const maxOutputRows = 4096

var tsMillis = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}

// timing is what a window takes from its sources' time declaration.
type timing struct {
	event    bool
	field    string
	policy   string
	lateness int64
	route    string
}

func timingOf(s *job.Spec, opID string) (timing, error) {
	tm, first, other := sourcesTiming(planner.UpstreamSources(s, opID, nil))
	if other != "" {
		return tm, ops.Errf("config", "its sources %q and %q declare different time semantics (mode, timestamp field, lateness or late policy); one window needs one", first, other)
	}
	return tm, nil
}

// sourcesTiming is the time declaration the sources share. When two
// differ, other is the first that differs from the first source, first.
func sourcesTiming(sources []job.Source) (tm timing, first, other string) {
	for i, src := range sources {
		t := src.Time
		if t == nil {
			t = &job.Time{Mode: job.ProcessingTime}
		}
		cur := timing{event: t.Mode == job.EventTime, field: t.TimestampField, policy: t.LateEventPolicy, lateness: t.AllowedLatenessMS, route: t.LateEventRoute}
		if cur.policy == "" {
			cur.policy = job.LateDrop
		}
		if i == 0 {
			tm, first = cur, src.OperatorID
			continue
		}
		if cur != tm {
			return tm, first, src.OperatorID
		}
	}
	return tm, first, ""
}

// Build is the factory of window operators (job.KindWindow): it checks the
// config and the sources' time declaration, derives the output schema and
// returns a Built whose instances restore kept windows and the watermark
// floor. The Built carries the floor to the runtime (ops.Carrier).
func Build(c ops.Context) (ops.Built, error) {
	var cfg Config
	if err := connectors.DecodeConfig(c.Op.Config, &cfg); err != nil {
		return ops.Built{}, ops.PrefixErrors("config", err)
	}
	var errs ops.Errors
	errs = append(errs, cfg.Window.Check("config.window")...)
	tm, err := timingOf(c.Spec, c.Op.ID)
	if err != nil {
		errs = append(errs, err)
	}
	if c.Input == nil {
		if c.Op.KeyField == "" {
			errs = append(errs, ops.Errf("key_field", "a window operator needs key_field"))
		}
		errs = append(errs, ops.PrefixErrors("", agg.Check(cfg.aggSpecs(), "config.aggregates"))...)
		return ops.Built{}, errs.Err()
	}
	keyCol, err := ops.KeyColumn(c)
	if err != nil {
		errs = append(errs, err)
	}
	set, err := agg.Compile(cfg.aggSpecs(), c.Input, "config.aggregates")
	if err != nil {
		errs = append(errs, ops.PrefixErrors("", err)...)
	}
	tsCol, err := eventTimeColumn(c.Input, tm)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errs.Err(); err != nil {
		return ops.Built{}, err
	}
	key := c.Input.Field(keyCol)
	out, err := outputSchema(key, set)
	if err != nil {
		return ops.Built{}, err
	}
	meta := ops.MetaColumnsOf(c.Input)
	wb := windowBuild{spec: cfg.Window, tm: tm, set: set, out: out, keyType: key.Type, keyCol: keyCol, tsCol: tsCol, meta: meta,
		warn: newDropWarner(c.Spec, c.Op.ID)} // the warner is shared by the subtasks
	return ops.Built{Output: out, State: true, Timed: true, Carry: floorCarrier{}, New: wb.newInstance,
		Query: &ops.QueryShape{Key: key.Type, Schema: out}}, nil
}

// eventTimeColumn returns the index of the event-time column in the rows
// in, -1 without event time; the column must be int64 milliseconds or a
// timestamp.
func eventTimeColumn(in *arrow.Schema, tm timing) (int, error) {
	if !tm.event {
		return -1, nil
	}
	idx := in.FieldIndices(tm.field)
	switch {
	case len(idx) == 0:
		return -1, ops.Errf("config", "the event-time field of its source is not in the rows it receives: %s", ops.UnknownColumn(tm.field, in))
	case !eventtime.Supported(in.Field(idx[0]).Type):
		return -1, ops.Errf("config", "the event-time field %q has type %s; it must be int64 (milliseconds) or a timestamp", tm.field, in.Field(idx[0]).Type)
	}
	return idx[0], nil
}

// outputSchema is the schema of a window operator's rows: the key, the
// window's start and end, one column per aggregate and the update flag.
// An aggregate's column may not take the name of another.
func outputSchema(key arrow.Field, set *agg.Set) (*arrow.Schema, error) {
	var errs ops.Errors
	fields := []arrow.Field{
		{Name: key.Name, Type: key.Type, Nullable: true},
		{Name: ColumnStart, Type: tsMillis},
		{Name: ColumnEnd, Type: tsMillis},
	}
	taken := map[string]bool{key.Name: true, ColumnStart: true, ColumnEnd: true, ColumnUpdate: true}
	for i, f := range set.Fields() {
		if taken[f.Name] {
			errs = append(errs, ops.Errf(fmt.Sprintf("config.aggregates[%d].as", i), "output column %q collides with the key or window columns", f.Name))
		}
		fields = append(fields, f)
	}
	fields = append(fields, arrow.Field{Name: ColumnUpdate, Type: arrow.FixedWidthTypes.Boolean})
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

// windowBuild is what Build checked and derived, from which each subtask's
// instance is made.
type windowBuild struct {
	spec          Spec
	tm            timing
	set           *agg.Set
	out           *arrow.Schema
	keyType       arrow.DataType
	keyCol, tsCol int
	meta          ops.MetaColumns
	warn          *dropWarner
}

// newInstance creates one subtask's window operator: its journal, the
// watermark floor it resumes at, per-key session floors, and the windows
// kept for late updates when the last run stopped (they come back fired;
// everything else is rebuilt by replaying the input from the committed
// positions).
func (wb windowBuild) newInstance(info ops.Task) (ops.Instance, error) {
	t, err := keys.NewTable(wb.keyType)
	if err != nil {
		return nil, err
	}
	j, err := statestore.NewJournal(info.State, info.JobID, info.OperatorID, info.KeyGroups)
	if err != nil {
		return nil, err
	}
	fl := newFloor(info.State, info.JobID, info.OperatorID, info.KeyGroups.Start)
	wm, reached, err := fl.load(info.Now())
	if err != nil {
		return nil, fmt.Errorf("operator %q: reading the watermark floor: %w", info.OperatorID, err)
	}
	meta := wb.meta
	meta.Key, meta.MaxParallelism = wb.keyCol, info.MaxParallelism
	b := base{op: info.OperatorID, keyCol: wb.keyCol, tsCol: wb.tsCol, tm: wb.tm, set: wb.set, acc: newMemAccumulators(wb.set), keys: t, out: wb.out, wm: wm, input: eventtime.NoWatermark, reached: reached, m: &counters{},
		journal: j, meta: meta, groups: info.Grouper(), floor: fl, warn: wb.warn, log: info.Logger, now: info.Now}
	var inst interface {
		ops.Instance
		restore(e statestore.Entry) error
	}
	spec := wb.spec
	if spec.Type == TypeSession {
		ss := newSessions(b, spec.GapMS, info.CheckpointWatermark)
		if ss.perKey {
			if err := j.Scan(sessionFloorNamespace, statestore.Scope{Groups: info.KeyGroups}, info.Now(), ss.loadFloor); err != nil {
				return nil, fmt.Errorf("operator %q: reading the session floors: %w", info.OperatorID, err)
			}
		}
		inst = ss
	} else {
		slide := spec.SlideMS
		if spec.Type == TypeTumbling {
			slide = spec.SizeMS
		}
		inst = newAligned(b, spec.SizeMS, slide)
	}
	// Windows kept for late updates when the last run stopped come
	// back fired; everything else is rebuilt by replaying the input
	// from the committed positions.
	if err := j.Scan(keptNamespace, statestore.Scope{Groups: info.KeyGroups}, info.Now(), inst.restore); err != nil {
		return nil, fmt.Errorf("operator %q: restoring kept windows: %w", info.OperatorID, err)
	}
	return inst, nil
}

// keptNamespace holds windows that fired and are kept for late updates
// (update policy with allowed lateness): user key = window start (8 bytes)
// then the key's bytes; value = (sessions: last event time, 8 bytes) then
// the accumulators.
const keptNamespace = "window_kept"

func keptKey(start int64, key []byte) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(start)), key...)
}

func splitKeptKey(user []byte) (int64, []byte, error) {
	if len(user) < 8 {
		return 0, nil, fmt.Errorf("malformed kept window key (%d bytes)", len(user))
	}
	return int64(binary.BigEndian.Uint64(user)), user[8:], nil
}

// base holds what every window instance shares: the key table, the
// accumulators, the watermark and the metrics.
type base struct {
	op     string
	keyCol int
	tsCol  int
	tm     timing
	set    *agg.Set
	acc    accumulators
	keys   *keys.Table
	out    *arrow.Schema
	// wm is the watermark windows fire and rows are late by: the
	// highest the input delivered, or the restored floor when that is
	// higher. input is the highest the input delivered alone; reached is
	// the watermark the input had reached when the restored floor was
	// written (see replayOf and encodeFloorReached).
	wm, input, reached int64

	ts    []int64
	valid []bool
	kid   []int32

	m *counters
	// droppedLate and droppedNull count the rows the batch being
	// processed dropped, for warn (see reportDrops); skipped the rows
	// it skipped as replays.
	droppedLate, droppedNull, skipped int64
	warn                              *dropWarner
	log                               *slog.Logger
	now                               func() int64 // the runtime's clock, ms

	journal *statestore.Journal
	meta    ops.MetaColumns
	groups  keys.Grouper
	buf     []byte
	floor   *floor
}

// begin starts the journal epoch of an input batch: rows already in
// committed state (a replay) are dropped, and the epoch commits the input
// positions when the batch's acknowledgement completes, which is after
// every window it fed was emitted and acknowledged. It returns a zero
// Batch when nothing is left to process.
func (b *base) begin(in ops.Batch) (ops.Batch, *statestore.Epoch, error) {
	out, epoch, err := ops.Replayed(b.journal, b.meta, in)
	if err != nil {
		return ops.Batch{}, nil, fmt.Errorf("operator %q: %w", b.op, err)
	}
	return out, epoch, nil
}

// keep stages a kept window's state in an epoch.
func (b *base) keepState(e *statestore.Epoch, start int64, key int32, prefix []byte, g int32) {
	b.buf = b.acc.Encode(append(b.buf[:0], prefix...), g)
	e.Put(keptNamespace, b.keys.GroupWith(key, b.groups), keptKey(start, b.keys.Bytes(key)), b.buf, 0)
}

// forget stages the removal of a kept window.
func (b *base) forget(e *statestore.Epoch, start int64, key int32) {
	e.Delete(keptNamespace, b.keys.GroupWith(key, b.groups), keptKey(start, b.keys.Bytes(key)))
}

// counters are read by Counters and Gauges from other goroutines.
type counters struct {
	open, fired                          atomic.Int64
	lateDropped, lateRouted, lateUpdated atomic.Int64
	nullDropped, nullRouted              atomic.Int64
	replayed                             atomic.Int64
}

// Gauges reports the windows open now.
func (b *base) Gauges() map[string]int64 {
	return map[string]int64{MetricOpenWindows: b.m.open.Load()}
}

// Counters reports the operator's totals: windows fired, late rows and
// rows without an event time, by what happened to them.
func (b *base) Counters() map[string]int64 {
	return map[string]int64{
		MetricWindowsFired: b.m.fired.Load(),
		MetricLateDropped:  b.m.lateDropped.Load(),
		MetricLateRouted:   b.m.lateRouted.Load(),
		MetricLateUpdated:  b.m.lateUpdated.Load(),
		MetricNullDropped:  b.m.nullDropped.Load(),
		MetricNullRouted:   b.m.nullRouted.Load(),

		MetricReplayedSkipped: b.m.replayed.Load(),
	}
}

// prepare converts the batch's event times and keys. In processing time
// every row gets the operator's watermark, which its processing-time
// source sets to the clock before each batch.
func (b *base) prepare(rec arrow.RecordBatch) error {
	n := int(rec.NumRows())
	if cap(b.ts) < n {
		b.ts, b.valid, b.kid = make([]int64, n), make([]bool, n), make([]int32, n)
	}
	b.ts, b.valid, b.kid = b.ts[:n], b.valid[:n], b.kid[:n]
	if b.tm.event {
		if _, err := eventtime.Millis(rec.Column(b.tsCol), b.tm.field, b.ts, b.valid); err != nil {
			return err
		}
	} else {
		now := max(b.wm, 0)
		for i := range b.ts {
			b.ts[i], b.valid[i] = now, true
		}
	}
	return b.keys.IDs(rec.Column(b.keyCol), b.kid)
}

// keeps reports whether fired windows are kept until end + lateness: only
// the update policy can change a fired window; under drop and route the
// late decision needs only the watermark, so the state goes at once.
func (b *base) keeps() bool { return b.tm.policy == job.LateUpdate && b.tm.lateness > 0 }

// rangeError is an event whose windows would leave the int64 range.
func (b *base) rangeError(row int, t, span int64) error {
	return &eventtime.TimeError{Field: b.tm.field, Row: row, Value: t, Unit: "ms", Span: span}
}

// lateRow records a row no window accepted because it was late or had no
// event time, and reports whether it is routed.
func (b *base) lateRow(null bool) bool {
	route := b.tm.policy == job.LateRoute
	switch {
	case null && route:
		b.m.nullRouted.Add(1)
	case null:
		b.m.nullDropped.Add(1)
	case route:
		b.m.lateRouted.Add(1)
	default:
		b.m.lateDropped.Add(1)
	}
	if !route {
		if null {
			b.droppedNull++
		} else {
			b.droppedLate++
		}
	}
	return route
}

// advance records a watermark the input delivered: the input's own, and
// the operator's when it passes the restored floor. It reports whether the
// operator's moved (windows may fire).
func (b *base) advance(wm int64) bool {
	b.input = max(b.input, wm)
	if wm <= b.wm {
		return false
	}
	b.wm = wm
	return true
}

// replayOf reports whether a window ending at end, behind the operator's
// watermark, fired before a restart that now reads one of its rows again.
//
// After a restart the operator starts at the restored floor (see floor),
// and the source re-reads rows from the restored positions: rows of
// batches that were held because they also fed a window still open, so
// their windows may have fired, with those rows in them, before the
// restart. The floor puts such windows behind the watermark; the input's
// own watermark, which the re-read rows move again as they did the first
// time, does not. A window behind the floor but ahead of the input's
// watermark is therefore one the restored state already emitted (and, for
// kept windows, holds) with this row: the row is a replay, skipped
// without counting it late. A row behind the input's watermark is late as
// it was the first time. Without a restart nothing is a replay.
//
// Only up to the watermark the input had reached when the floor was
// written: the end of time (an input that ended, a drain) fires windows
// the watermark never reached and puts the floor past them, and a row
// for one of them after the restart is new input, late (the end of time
// closed its window), not one read before.
func (b *base) replayOf(end int64) bool { return end > b.input && end <= b.reached }

// reachedBy returns the watermark the input has reached once a firing at
// wm is done: wm, but at the end of time the highest finite one it
// delivered before (input, as advance left it before that firing), or the
// one the restored floor records, if higher.
func (b *base) reachedBy(wm, input int64) int64 {
	if wm != eventtime.EndOfTime {
		return wm
	}
	return max(input, b.reached)
}

// replayedRow records a row skipped as a replay (see replayOf).
func (b *base) replayedRow() {
	b.m.replayed.Add(1)
	b.skipped++
}

// reportDrops passes the rows the batch dropped to the rate-limited
// warning, and those it skipped as replays to the one line saying so.
func (b *base) reportDrops() {
	if b.skipped > 0 {
		b.warn.replayed(b.log)
		b.skipped = 0
	}
	if b.droppedLate == 0 && b.droppedNull == 0 {
		return
	}
	var now int64
	if b.now != nil {
		now = b.now()
	}
	b.warn.dropped(b.log, now, b.droppedLate, b.droppedNull)
	b.droppedLate, b.droppedNull = 0, 0
}

// closeWarnings reports drops not yet warned about, as the operator closes.
func (b *base) closeWarnings() {
	b.reportDrops()
	if b.warn != nil {
		b.warn.flush(b.log)
	}
}

// result is a window to emit.
type result struct {
	group  int32
	key    int32
	start  int64
	end    int64
	update bool
}

// build renders results (already ordered) as output batches.
func (b *base) build(rs []result) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	for lo := 0; lo < len(rs); lo += maxOutputRows {
		part := rs[lo:min(lo+maxOutputRows, len(rs))]
		n := len(part)
		kids := make([]int32, n)
		groups := make([]int32, n)
		starts := make([]int64, n)
		ends := make([]int64, n)
		upd := array.NewBooleanBuilder(memory.DefaultAllocator)
		upd.Reserve(n)
		for i, r := range part {
			kids[i], groups[i], starts[i], ends[i] = r.key, r.group, r.start, r.end
			upd.UnsafeAppend(r.update)
		}
		cols := []arrow.Array{b.keys.Build(kids), timestamps(starts), timestamps(ends)}
		cols = append(cols, b.acc.Build(groups)...)
		cols = append(cols, upd.NewArray())
		upd.Release()
		out = append(out, array.NewRecordBatch(b.out, cols, int64(n)))
		for _, c := range cols {
			c.Release()
		}
	}
	return out
}

// answer renders a query's results, in order, as one record.
func (b *base) answer(rs []result) arrow.RecordBatch {
	if len(rs) == 0 {
		return ops.EmptyRecord(b.out)
	}
	sortResults(rs)
	return b.concat(b.build(rs), len(rs))
}

// concat makes one record of the batches build made of n results.
func (b *base) concat(recs []arrow.RecordBatch, n int) arrow.RecordBatch {
	if len(recs) == 1 {
		return recs[0]
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	cols := make([]arrow.Array, b.out.NumFields())
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for k, r := range recs {
			parts[k] = r.Column(i)
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			panic(err) // the parts share their type: it cannot fail
		}
		defer c.Release()
		cols[i] = c
	}
	return array.NewRecordBatch(b.out, cols, int64(n))
}

// timestamps returns v as a column of millisecond timestamps, without
// copying it: from then on v is the column's, and the caller must not
// write it.
func timestamps(v []int64) arrow.Array {
	data := array.NewData(tsMillis, len(v), []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(v))}, nil, 0, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// emitAll emits batches sharing one acknowledgement node, which holds one
// reference per batch when called (the caller retains them).
func emitAll(ctx context.Context, out ops.Emitter, recs []arrow.RecordBatch, node *ack.Node, port int) error {
	for i, r := range recs {
		if err := out.Emit(ctx, ops.Batch{Rec: r, Ack: node, Port: port}); err != nil {
			for _, rest := range recs[i+1:] {
				rest.Release()
			}
			return err
		}
	}
	return nil
}

// heldAck is an input batch's acknowledgement held until every window its
// rows went into has been emitted: until the watermark reaches maxEnd.
type heldAck struct {
	maxEnd int64
	node   *ack.Node
}

type heldHeap []heldAck

func (h heldHeap) Len() int           { return len(h) }
func (h heldHeap) Less(i, j int) bool { return h[i].maxEnd < h[j].maxEnd }
func (h heldHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *heldHeap) Push(x any)        { *h = append(*h, x.(heldAck)) }
func (h *heldHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// popHeld removes the acknowledgements whose windows have all fired by wm.
func popHeld(h *heldHeap, wm int64) []*ack.Node {
	var out []*ack.Node
	for h.Len() > 0 && (*h)[0].maxEnd <= wm {
		out = append(out, heap.Pop(h).(heldAck).node)
	}
	return out
}

// int64Heap is a min-heap of window ends or deadlines.
type int64Heap []int64

func (h int64Heap) Len() int           { return len(h) }
func (h int64Heap) Less(i, j int) bool { return h[i] < h[j] }
func (h int64Heap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *int64Heap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *int64Heap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sortResults orders late updates and session firings by end, start, then
// key ID (keys are numbered by their first arrival at this subtask, so the
// order is deterministic).
func sortResults(rs []result) {
	slices.SortStableFunc(rs, func(a, b result) int {
		switch {
		case a.end != b.end:
			return cmp.Compare(a.end, b.end)
		case a.start != b.start:
			return cmp.Compare(a.start, b.start)
		}
		return cmp.Compare(a.key, b.key)
	})
}

// finishBatch emits a processed batch's immediate outputs (late updates,
// routed rows) and holds its acknowledgement while its rows wait in open
// windows. It consumes the batch's record and acknowledgement reference.
func finishBatch(ctx context.Context, b ops.Batch, out ops.Emitter, updates, routed []arrow.RecordBatch, hold *heldHeap, maxEnd int64) error {
	refs := len(updates) + len(routed)
	if maxEnd != eventtime.NoWatermark {
		refs++
	}
	if refs == 0 {
		b.Rec.Release()
		b.Ack.Release(nil)
		return nil
	}
	b.Ack.Retain(refs - 1)
	if maxEnd != eventtime.NoWatermark {
		heap.Push(hold, heldAck{maxEnd: maxEnd, node: b.Ack})
	}
	b.Rec.Release()
	for i, r := range updates {
		if err := out.Emit(ctx, ops.Batch{Rec: r, Ack: b.Ack}); err != nil {
			for _, x := range append(updates[i+1:], routed...) {
				x.Release()
			}
			return err
		}
	}
	return emitAll(ctx, out, routed, b.Ack, ops.PortLate)
}

// routeRows returns the rows of rec marked in mask (nil if none).
func routeRows(rec arrow.RecordBatch, mask []bool, any bool) ([]arrow.RecordBatch, error) {
	if !any {
		return nil, nil
	}
	r, err := batch.Filter(rec, mask)
	if err != nil || r == nil {
		return nil, err
	}
	return []arrow.RecordBatch{r}, nil
}

// scanPage answers a scan of windows: of the keys with windows (their
// results in byKey), the first q.Limit after the cursor that q.Match
// accepts, in order of (key group, key bytes), each with its windows in
// order of end. Callers hold the operator's lock.
func (b *base) scanPage(q ops.ScanRequest, byKey map[int32][]result) ops.ScanPage {
	type cand struct {
		group int
		key   []byte
		id    int32
	}
	var cands []cand
	for id := range byKey {
		k := b.keys.Bytes(id)
		g := b.groups.Of(k)
		if q.After(g, k) && q.Match(k) {
			cands = append(cands, cand{g, k, id})
		}
	}
	slices.SortFunc(cands, func(x, y cand) int {
		if x.group != y.group {
			return cmp.Compare(x.group, y.group)
		}
		return bytes.Compare(x.key, y.key)
	})
	cands = cands[:min(len(cands), q.Limit)]
	var rs []result
	page := ops.ScanPage{Keys: len(cands)}
	for _, c := range cands {
		part := byKey[c.id]
		sortResults(part)
		rs = append(rs, part...)
		page.LastGroup, page.LastKey = c.group, c.key
	}
	if len(rs) == 0 {
		page.Rec = ops.EmptyRecord(b.out)
		return page
	}
	page.Rec = b.concat(b.build(rs), len(rs))
	return page
}
