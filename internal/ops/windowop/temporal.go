package windowop

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/rowbin"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// tableNamespace holds a temporal join's table versions: user key = the
// key's bytes, then the version's event time (8 bytes, big-endian, sign
// bit flipped so that byte order is time order); value = 1 and the row's
// right-side output columns (rowbin), or 0 alone for a delete.
const tableNamespace = "join_table"

// version is one version of a table key: its event time and its row, nil
// for a delete.
type version struct {
	ts  int64
	row []byte
}

// temporalJoin is one subtask of a temporal join: the right side is a
// table (the latest row of each key, kept by event time), the left a
// stream, each of whose rows joins the version of its key that was
// current at the row's event time.
//
// Table rows become versions in the state store as they arrive, each
// batch's in the epoch of the batch, so they are checkpointed, restored
// and rescaled by key group like any keyed state; a table row never waits
// for anything. A table row whose every value column is null (all but the
// key, the event time and the deleted_field), or whose deleted_field is
// true, deletes the key from its time on. Of the versions older than the
// horizon, the watermark less the history retention (retention_ms, 0 by
// default), a key keeps only the newest, which is the one every row still
// to come joins (rows behind the horizon are late and dropped).
//
// A stream row waits until the watermark, the lower of both sides', has
// passed its event time, so that every table row up to that time is in;
// it is then emitted, in order of event time and arrival, with the right
// columns of the version current at its time, or under how "left" with
// nulls when there is none (or the key was deleted), and dropped under
// "inner". A stream row behind the watermark but not the horizon is
// joined at once with the version current at its time. A stream on
// processing time joins the newest version at once.
// Stream rows hold their input batch's acknowledgement until they are
// emitted, so a restart replays the rows still waiting.
type temporalJoin struct {
	base
	jb       *joinBuild
	maxPar   int
	outer    bool
	codec    *rowbin.Codec
	deleted  int // the table's deleted_field column, or -1
	versions [][]version
	waiting  keptHeap // stream rows, by event time then arrival
	seq      int64
	buf      []byte
	// committed reads the committed table, for queries; owned are the
	// subtask's key groups.
	committed *statestore.Journal
	owned     job.KeyGroupRange
}

func (jb *joinBuild) newTemporal(b base, info ops.Task) (*temporalJoin, error) {
	c, err := rowbin.New(jb.in[1], jb.sides[1].cols)
	if err != nil {
		return nil, fmt.Errorf("operator %q: %w", info.OperatorID, err)
	}
	w := &temporalJoin{base: b, jb: jb, maxPar: info.MaxParallelism, outer: jb.cfg.How == HowLeft, codec: c, deleted: jb.deletedCol, committed: b.journal.ReadCommitted(), owned: info.KeyGroups}
	// The table comes back from the committed state.
	err = b.journal.Scan(tableNamespace, statestore.Scope{Groups: info.KeyGroups}, info.Now(), func(e statestore.Entry) error {
		u := e.Key.User
		if len(u) < 8 || len(e.Value) == 0 {
			return fmt.Errorf("a table version of %d bytes with a key of %d: %w", len(e.Value), len(u), rowbin.ErrCorrupt)
		}
		kid, err := w.keys.IDOfBytes(u[:len(u)-8])
		if err != nil {
			return err
		}
		v := version{ts: int64(binary.BigEndian.Uint64(u[len(u)-8:]) ^ 1<<63)}
		if e.Value[0] == 1 {
			v.row = append([]byte(nil), e.Value[1:]...)
		}
		w.put(kid, v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("operator %q: restoring the table: %w", info.OperatorID, err)
	}
	return w, nil
}

// userKey is the state key of a version of kid at ts.
func (w *temporalJoin) userKey(kid int32, ts int64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), w.keys.Bytes(kid)...), uint64(ts)^1<<63)
}

// put inserts v into the versions of kid in time order; a version at the
// same time replaces it. It returns the index of v.
func (w *temporalJoin) put(kid int32, v version) int {
	for int(kid) >= len(w.versions) {
		w.versions = append(w.versions, nil)
	}
	vs := w.versions[kid]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].ts >= v.ts })
	if i < len(vs) && vs[i].ts == v.ts {
		vs[i] = v
		return i
	}
	vs = append(vs, version{})
	copy(vs[i+1:], vs[i:])
	vs[i] = v
	w.versions[kid] = vs
	return i
}

// asOf returns the version of kid current at ts, or false.
func (w *temporalJoin) asOf(kid int32, ts int64) (version, bool) {
	if int(kid) >= len(w.versions) {
		return version{}, false
	}
	vs := w.versions[kid]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].ts > ts })
	if i == 0 {
		return version{}, false
	}
	return vs[i-1], true
}

// Process takes a table batch into the table, or a stream batch into the
// rows waiting for the watermark.
func (w *temporalJoin) Process(ctx context.Context, b ops.Batch, out ops.Emitter) error {
	side, b, epoch, err := w.jb.start(&w.base, b, w.maxPar)
	if err != nil || b.Rec == nil {
		return err
	}
	if side == 1 {
		late := w.table(b.Rec, epoch)
		err := emitLate(ctx, out, b.Rec, late, b.Ack)
		b.Rec.Release()
		b.Ack.Release(err) // the epoch commits the versions
		if err != nil {
			return fmt.Errorf("operator %q: %w", w.op, err)
		}
		return nil
	}
	return w.stream(ctx, b, out)
}

// table stages the versions of a table batch in epoch and drops the
// versions no row to come can join. It returns the rows it routes as
// late.
func (w *temporalJoin) table(rec arrow.RecordBatch, epoch *statestore.Epoch) []int32 {
	var late []int32
	keyCol := rec.Column(w.keyCol)
	var del *array.Boolean
	if w.deleted >= 0 {
		del, _ = rec.Column(w.deleted).(*array.Boolean)
	}
	for r := range w.ts {
		if !w.valid[r] {
			if w.lateRow(true) {
				late = append(late, int32(r))
			}
			continue
		}
		if keyCol.IsNull(r) {
			continue // a null key matches no key
		}
		kid, ts := w.kid[r], w.ts[r]
		v := version{ts: ts}
		w.buf = append(w.buf[:0], 0)
		if !(del != nil && del.IsValid(r) && del.Value(r)) && !w.allNull(rec, r) {
			w.buf = w.codec.Append(append(w.buf[:0], 1), rec, r)
			v.row = append([]byte(nil), w.buf[1:]...)
		}
		group := w.keys.GroupWith(kid, w.groups)
		horizon := w.horizon()
		if i := w.put(kid, v); w.tm.event && ts < horizon {
			// Behind the history kept: a version still joins rows to
			// come only as the newest before it; one a newer version
			// before the horizon supersedes is late, and dropped.
			if vs := w.versions[kid]; i+1 < len(vs) && vs[i+1].ts <= horizon {
				w.versions[kid] = append(vs[:i], vs[i+1:]...)
				if w.lateRow(false) {
					late = append(late, int32(r))
				}
				continue
			}
		}
		epoch.Put(tableNamespace, group, w.userKey(kid, ts), w.buf, 0)
		// Of the versions before the horizon only the newest can still
		// be joined; a delete that is all that is left goes too.
		vs := w.versions[kid]
		keep := sort.Search(len(vs), func(i int) bool { return vs[i].ts >= horizon })
		if keep > 0 {
			keep-- // the newest before the horizon stays
		}
		if keep == len(vs)-1 && vs[keep].row == nil && vs[keep].ts < horizon {
			keep++
		}
		for _, old := range vs[:keep] {
			epoch.Delete(tableNamespace, group, w.userKey(kid, old.ts))
		}
		w.versions[kid] = append(vs[:0], vs[keep:]...)
	}
	w.reportDrops()
	return late
}

// horizon is the oldest event time a stream row can still have and be
// joined: the watermark less the history retention.
func (w *temporalJoin) horizon() int64 {
	if w.wm == eventtime.NoWatermark {
		return w.wm
	}
	return max(w.wm-w.jb.cfg.RetentionMS, eventtime.NoWatermark)
}

// allNull reports whether every value column of row r (its stored
// columns but the event time and the deleted_field) is null: a tombstone.
func (w *temporalJoin) allNull(rec arrow.RecordBatch, r int) bool {
	s := w.jb.sides[1]
	for _, c := range s.cols {
		if c != s.tsCol && c != w.deleted && rec.Column(c).IsValid(r) {
			return false
		}
	}
	return true
}

// stream queues a stream batch's rows for the watermark (or, on
// processing time, joins them at once).
func (w *temporalJoin) stream(ctx context.Context, b ops.Batch, out ops.Emitter) error {
	kb := &keptBatch{rec: b.Rec, ack: b.Ack}
	keyCol := b.Rec.Column(w.keyCol)
	var now, past []*keptRow
	var late []int32 // rows routed as late
	horizon := w.horizon()
	for r := range w.ts {
		if !w.valid[r] {
			if w.lateRow(true) {
				late = append(late, int32(r))
			}
			continue
		}
		ts := w.ts[r]
		if w.tm.event && ts < horizon {
			if w.lateRow(false) {
				late = append(late, int32(r))
			}
			continue
		}
		k := &keptRow{side: 0, ts: ts, seq: w.seq, kid: w.kid[r], from: kb, row: int32(r), matched: keyCol.IsNull(r)}
		w.seq++
		kb.live.Add(1)
		switch {
		case !w.tm.event:
			now = append(now, k)
		case ts < w.wm:
			past = append(past, k) // within the history kept: every table row up to it is in
		default:
			heap.Push(&w.waiting, keptEnd{end: ts, seq: k.seq, row: k})
		}
	}
	w.reportDrops()
	w.m.open.Store(int64(w.waiting.Len()))
	if err := emitLate(ctx, out, b.Rec, late, b.Ack); err != nil {
		b.Rec.Release()
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", w.op, err)
	}
	if kb.live.Load() == 0 {
		b.Rec.Release()
		b.Ack.Release(nil)
		return nil
	}
	kb.live.Add(1) // this call's own reference, dropped below
	defer kb.drop()
	if err := w.emit(ctx, out, past, false); err != nil {
		return err
	}
	return w.emit(ctx, out, now, true)
}

// Watermark emits the stream rows the watermark passed.
func (w *temporalJoin) Watermark(ctx context.Context, wm int64, out ops.Emitter) error {
	if !w.advance(wm) {
		return nil
	}
	var due []*keptRow
	for w.waiting.Len() > 0 && w.waiting[0].end < wm {
		due = append(due, heap.Pop(&w.waiting).(keptEnd).row)
	}
	w.m.open.Store(int64(w.waiting.Len()))
	return w.emit(ctx, out, due, false)
}

// emit joins stream rows with the table and emits them, then drops them;
// latest joins the newest version (processing time) instead of the one
// current at each row's time. A row whose key is null (marked matched
// when it came) joins nothing.
func (w *temporalJoin) emit(ctx context.Context, out ops.Emitter, rows []*keptRow, latest bool) error {
	defer func() {
		for _, k := range rows {
			k.from.drop()
		}
	}()
	var left []*keptRow
	var right []version
	for _, k := range rows {
		var v version
		ok := false
		if !k.matched {
			if latest {
				if int(k.kid) < len(w.versions) && len(w.versions[k.kid]) > 0 {
					vs := w.versions[k.kid]
					v, ok = vs[len(vs)-1], true
				}
			} else {
				v, ok = w.asOf(k.kid, k.ts)
			}
		}
		if ok && v.row != nil {
			left, right = append(left, k), append(right, v)
		} else if w.outer {
			left, right = append(left, k), append(right, version{})
		}
	}
	for lo := 0; lo < len(left); lo += maxOutputRows {
		hi := min(lo+maxOutputRows, len(left))
		rec, err := w.build(left[lo:hi], right[lo:hi])
		if err != nil {
			return fmt.Errorf("operator %q: %w", w.op, err)
		}
		if err := out.Emit(ctx, ops.Batch{Rec: rec, Ack: holding(left[lo:hi])}); err != nil {
			return err
		}
	}
	return nil
}

// build makes one output batch: the stream rows' key and columns, then
// the versions' columns (nulls for a version without a row).
func (w *temporalJoin) build(left []*keptRow, right []version) (arrow.RecordBatch, error) {
	lcols, err := gather(w.jb.sides[0], w.jb.in[0], left, true)
	if err != nil {
		return nil, err
	}
	cols := lcols
	defer func() { releaseAll(cols) }()
	s := w.jb.sides[1]
	bs := make([]array.Builder, len(s.cols))
	for i, c := range s.cols {
		bs[i] = array.NewBuilder(memory.DefaultAllocator, w.jb.in[1].Field(c).Type)
		defer bs[i].Release()
	}
	for _, v := range right {
		if v.row == nil {
			for _, b := range bs {
				b.AppendNull()
			}
			continue
		}
		if err := w.codec.Decode(v.row, bs); err != nil {
			return nil, err
		}
	}
	for _, b := range bs {
		cols = append(cols, b.NewArray())
	}
	return array.NewRecordBatch(w.out, cols, int64(len(left))), nil
}

// Close drops the waiting stream rows: their acknowledgements are
// released as abandoned, so their rows will be replayed.
func (w *temporalJoin) Close() error {
	rows := make([]*keptRow, len(w.waiting))
	for i, e := range w.waiting {
		rows[i] = e.row
	}
	abandon(rows)
	w.waiting = nil
	w.closeWarnings()
	return nil
}

// tableSchema is the schema of the rows a query of a temporal join's
// table answers: the table's key, then the columns of the table that the
// join carries, under the names the table's rows have.
func (jb *joinBuild) tableSchema() *arrow.Schema {
	in, side := jb.in[1], jb.sides[1]
	fields := []arrow.Field{in.Field(side.keyCol)}
	for _, c := range side.cols {
		fields = append(fields, in.Field(c))
	}
	return arrow.NewSchema(fields, nil)
}

// Lookup implements ops.Queryable: the newest committed version of the
// key in the table, none when the key has none or its newest is a
// delete.
func (w *temporalJoin) Lookup(key []byte) (arrow.RecordBatch, error) {
	var newest []byte
	err := w.committed.ScanPrefix(tableNamespace, w.groups.Of(key), key, w.now(), func(user, value []byte) bool {
		if len(user) == len(key)+8 { // not a longer key with this prefix
			newest = value // user keys sort by version time
		}
		return true
	})
	r := w.newRows()
	if err == nil {
		err = r.add(key, newest)
	}
	if err != nil {
		r.release()
		return nil, err
	}
	return r.record(), nil
}

// Scan implements ops.Scanner over the committed table: the newest
// version of each key that is not a delete.
func (w *temporalJoin) Scan(q ops.ScanRequest) (ops.ScanPage, error) {
	r := w.newRows()
	page := ops.ScanPage{}
	var key, newest []byte // the key being read, and its newest version so far
	group := -1
	flush := func() error {
		if key == nil || !q.After(group, key) || !q.Match(key) || len(newest) == 0 || newest[0] != 1 {
			return nil
		}
		if err := r.add(key, newest); err != nil {
			return err
		}
		page.Keys, page.LastGroup, page.LastKey = page.Keys+1, group, key
		if page.Keys == q.Limit {
			return errPageFull
		}
		return nil
	}
	scope := statestore.Scope{Groups: w.owned}
	scope.Groups.Start = max(scope.Groups.Start, q.AfterGroup)
	err := w.committed.Scan(tableNamespace, scope, w.now(), func(e statestore.Entry) error {
		u := e.Key.User
		if len(u) < 8 {
			return fmt.Errorf("a table version with a key of %d bytes: %w", len(u), rowbin.ErrCorrupt)
		}
		if k := u[:len(u)-8]; e.Key.KeyGroup != group || !bytes.Equal(k, key) {
			if err := flush(); err != nil {
				return err
			}
			group, key = e.Key.KeyGroup, append([]byte(nil), k...)
		}
		newest = append(newest[:0], e.Value...)
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil && err != errPageFull {
		r.release()
		return ops.ScanPage{}, err
	}
	page.Rec = r.record()
	return page, nil
}

// errPageFull stops a scan whose page is full.
var errPageFull = errors.New("page full")

// tableRows builds a query's answer from committed table versions.
type tableRows struct {
	w      *temporalJoin
	schema *arrow.Schema
	tbl    *keys.Table
	ids    []int32
	b      *array.RecordBuilder
}

func (w *temporalJoin) newRows() *tableRows {
	schema := w.jb.tableSchema()
	tbl, _ := keys.NewTable(w.jb.keyType) // the join's own key type
	return &tableRows{w: w, schema: schema, tbl: tbl, b: array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(schema.Fields()[1:], nil))}
}

// add decodes a key's newest version, skipped when it is a delete (or
// there is none).
func (r *tableRows) add(key, newest []byte) error {
	if len(newest) == 0 || newest[0] != 1 {
		return nil
	}
	id, err := r.tbl.IDOfBytes(key)
	if err != nil {
		return err
	}
	if err := r.w.codec.Decode(newest[1:], r.b.Fields()); err != nil {
		return fmt.Errorf("operator %q: the table version of key %x: %w", r.w.op, key, err)
	}
	r.ids = append(r.ids, id)
	return nil
}

func (r *tableRows) release() { r.b.Release() }

func (r *tableRows) record() arrow.RecordBatch {
	defer r.b.Release()
	rest := r.b.NewRecordBatch()
	defer rest.Release()
	cols := append([]arrow.Array{r.tbl.Build(r.ids)}, rest.Columns()...)
	defer cols[0].Release()
	return array.NewRecordBatch(r.schema, cols, int64(len(r.ids)))
}
