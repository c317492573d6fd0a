package windowop

import (
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/rowbin"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// windowJoin is one subtask of a window join.
//
// Its rows are keyed state, as an interval join's are (rowsNamespace; the
// flags byte also marks a null key): each input batch's rows are staged
// in the batch's journal epoch, which commits as soon as the batch is
// taken in, and a row is deleted in the epoch of the firing of the last
// window it is in, which commits once that firing's output is
// acknowledged, with the watermark floor (see floor) in the same write.
// So a checkpoint holds the open windows, a restore or a rescale by key
// group brings them back, and a source commits a row as soon as it is in
// committed state, however long its windows stay open. After a restart
// the operator starts at the floor: the windows that fired and were
// acknowledged before it are gone from state with their rows, and a row
// read again for one of them is skipped as a replay (base.replayOf).
type windowJoin struct {
	base
	jb          *joinBuild
	maxPar      int
	size, slide int64
	outer       bool
	codecs      [2]*rowbin.Codec
	floorGroup  int
	wins        map[int64]*joinWin // open windows by start
	ends        int64Heap          // starts of open windows
	starts      []int64
	seq         int64
	buf         []byte
	groupOf     []int32 // key group by key ID (-1: not yet known)
}

// joinWin is one open window: the rows of each side in arrival order, and
// the rows whose last window it is, deleted from state when it fires.
type joinWin struct {
	start int64
	rows  [2][]*keptRow
	last  []*keptRow
}

func (jb *joinBuild) newWindowJoin(b base, info ops.Task) (*windowJoin, error) {
	slide := jb.cfg.Window.SlideMS
	if jb.cfg.Window.Type == TypeTumbling {
		slide = jb.cfg.Window.SizeMS
	}
	w := &windowJoin{base: b, jb: jb, maxPar: info.MaxParallelism, size: jb.cfg.Window.SizeMS, slide: slide,
		outer: jb.cfg.How == HowLeft, floorGroup: info.KeyGroups.Start, wins: map[int64]*joinWin{}}
	var err error
	if w.codecs, err = jb.keptCodecs(); err != nil {
		return nil, fmt.Errorf("operator %q: %w", info.OperatorID, err)
	}
	if err := w.restore(info); err != nil {
		return nil, fmt.Errorf("operator %q: restoring the open windows: %w", info.OperatorID, err)
	}
	return w, nil
}

// restore reads the rows of the subtask's key groups back from the
// committed state into their windows still open above the floor; rows
// whose windows are all behind it (fired, with the floor carried past
// the restored state: see floor) are deleted.
func (w *windowJoin) restore(info ops.Task) error {
	rows, users, kbs, err := w.jb.readKept(w.journal, w.keys, w.codecs, info)
	if err != nil || len(rows) == 0 {
		return err
	}
	var gone *statestore.Epoch
	for i, k := range rows {
		w.seq = max(w.seq, k.seq+1)
		if !w.place(k) {
			if gone == nil {
				gone = w.journal.Begin()
			}
			gone.DeleteUnread(rowsNamespace, int(k.group), users[i], nil)
		}
	}
	if gone != nil {
		gone.Done(nil)
	}
	kbs[0].drop() // the rows hold the batches now
	kbs[1].drop()
	return nil
}

// A kept row's flags byte: flagPaired marks an interval join's row that
// had paired when it came, flagNullKey a window join's row whose key is
// null.
const (
	flagPaired  = 1
	flagNullKey = 2
)

// place puts k into its windows still open (ending after the watermark),
// opening them as needed, and reports whether there was one; k then holds
// one reference of its batch until its last window fires.
func (w *windowJoin) place(k *keptRow) bool {
	w.windowsOf(k.ts)
	var last *joinWin
	for _, st := range w.starts {
		if w.wm >= st+w.size {
			continue
		}
		x := w.wins[st]
		if x == nil {
			x = &joinWin{start: st}
			w.wins[st] = x
			heap.Push(&w.ends, st)
			w.m.open.Add(1)
		}
		x.rows[k.side] = append(x.rows[k.side], k)
		if last == nil || st > last.start {
			last = x
		}
	}
	if last == nil {
		return false
	}
	last.last = append(last.last, k)
	k.from.live.Add(1)
	return true
}

// windowsOf sets w.starts to the starts of the windows a row at t is in.
func (w *windowJoin) windowsOf(t int64) {
	if w.slide == w.size {
		w.starts = append(w.starts[:0], eventtime.TumblingStart(t, w.size))
	} else {
		w.starts = eventtime.SlidingStarts(w.starts[:0], t, w.size, w.slide)
	}
}

// group returns the key group of key ID kid.
func (w *windowJoin) group(kid int32) int32 {
	for int(kid) >= len(w.groupOf) {
		w.groupOf = append(w.groupOf, -1)
	}
	g := w.groupOf[kid]
	if g < 0 {
		g = int32(w.keys.GroupWith(kid, w.groups))
		w.groupOf[kid] = g
	}
	return g
}

// userKey is the state key of a kept row (see rowsNamespace); a null key
// has no bytes.
func (w *windowJoin) userKey(k *keptRow) []byte {
	u := w.buf[:0]
	if !k.null {
		u = w.keys.AppendBytes(u, k.kid)
	}
	u = binary.BigEndian.AppendUint64(u, uint64(k.ts)^1<<63)
	u = append(u, byte(k.side))
	u = binary.BigEndian.AppendUint64(u, uint64(k.seq))
	w.buf = u
	return u
}

// Process puts a batch's rows into their windows and stages them in the
// batch's epoch; late rows are dropped (rows of windows that fired
// before a restart, read again, are skipped as replays).
func (w *windowJoin) Process(ctx context.Context, b ops.Batch, out ops.Emitter) error {
	side, b, epoch, err := w.jb.start(&w.base, b, w.maxPar)
	if err != nil || b.Rec == nil {
		return err
	}
	rec := b.Rec
	epoch.Grow(len(w.ts))
	kb := newKeptBatch(rec) // the call's own reference, dropped below
	defer kb.drop()
	keyCol := rec.Column(w.keyCol)
	var slab []keptRow
	var late []int32 // rows routed as late
	for r := range w.ts {
		if !w.valid[r] {
			if w.lateRow(true) {
				late = append(late, int32(r))
			}
			continue
		}
		t := w.ts[r]
		if !eventtime.InRange(t, w.size) {
			err := fmt.Errorf("operator %q: %w", w.op, w.rangeError(r, t, w.size))
			b.Ack.Release(err)
			return err
		}
		null := keyCol.IsNull(r)
		if null && (side == 1 || !w.outer) {
			continue // a null key equals no key, another null included (as in SQL): only an outer join's left row shows
		}
		if len(slab) == 0 {
			slab = make([]keptRow, len(w.ts)-r)
		}
		k := &slab[0]
		*k = keptRow{side: side, ts: t, kid: w.kid[r], null: null, from: kb, row: int32(r), seq: w.seq}
		if !w.place(k) {
			if w.droppedRow(t) {
				late = append(late, int32(r))
			}
			continue
		}
		slab = slab[1:]
		w.seq++
		k.group = w.group(k.kid)
		flags := byte(0)
		if null {
			flags = flagNullKey
		}
		key := w.userKey(k)
		n := len(key)
		v := w.codecs[side].Append(append(key, flags), rec, r)
		w.buf = v
		k.put = epoch.PutUnread(rowsNamespace, int(k.group), v[:n], v[n:])
	}
	w.reportDrops()
	if err := emitLate(ctx, out, rec, late, b.Ack); err != nil {
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", w.op, err)
	}
	b.Ack.Release(nil) // the epoch commits the rows once routed ones are written
	return nil
}

// droppedRow counts a row none of whose windows is open: late, or read
// again after a restart for windows that fired before it (see replayOf).
// It reports whether the row is routed as late.
func (w *windowJoin) droppedRow(t int64) bool {
	replayed := false
	for _, st := range w.starts {
		if w.replayOf(st + w.size) {
			replayed = true
		}
	}
	if replayed {
		w.replayedRow()
		return false
	}
	return w.lateRow(false)
}

// Watermark fires every window whose end the watermark reached, in order
// of end: it emits the window's pairs, and deletes the rows whose last
// window it was, with the new floor, in an epoch that commits once the
// pairs are acknowledged.
func (w *windowJoin) Watermark(ctx context.Context, wm int64, out ops.Emitter) error {
	prev, input := w.wm, w.input
	if !w.advance(wm) {
		return nil
	}
	var firing []*joinWin
	for w.ends.Len() > 0 && satAdd(w.ends[0], w.size) <= wm {
		start := heap.Pop(&w.ends).(int64)
		if x := w.wins[start]; x != nil {
			firing = append(firing, x)
			delete(w.wins, start)
		}
	}
	if len(firing) == 0 {
		return nil
	}
	w.m.open.Add(-int64(len(firing)))
	w.m.fired.Add(int64(len(firing)))
	fl := wm
	if wm == eventtime.EndOfTime {
		fl = max(prev, eventtime.NoWatermark)
		for _, x := range firing {
			fl = max(fl, satAdd(x.start, w.size))
		}
	}
	epoch := w.journal.Begin()
	var recs []arrow.RecordBatch
	var err error
	for _, x := range firing {
		if err == nil {
			var rs []arrow.RecordBatch
			rs, err = w.pairs(x)
			recs = append(recs, rs...)
		}
	}
	n := 0
	for _, x := range firing {
		n += len(x.last)
	}
	epoch.Grow(n)
	for _, x := range firing {
		for _, k := range x.last {
			if k.put != nil {
				epoch.DeleteUnread(rowsNamespace, int(k.group), nil, k.put) // the handle knows the key
			} else {
				epoch.DeleteUnread(rowsNamespace, int(k.group), w.userKey(k), nil)
			}
			k.from.drop()
		}
	}
	epoch.Put(floorNamespace, w.floorGroup, []byte("wm"), encodeFloorReached(fl, w.reachedBy(wm, input)), 0)
	node := ack.New(epoch.Done)
	if err != nil || len(recs) == 0 {
		for _, r := range recs {
			r.Release()
		}
		node.Release(err)
		return err
	}
	node.Retain(len(recs) - 1)
	return emitAll(ctx, out, recs, node, ops.PortMain)
}

// Close drops the open windows: their rows are state, which a restart
// reads back.
func (w *windowJoin) Close() error {
	for _, x := range w.wins {
		for _, k := range x.last {
			k.from.drop()
		}
	}
	clear(w.wins)
	w.ends = nil
	w.closeWarnings()
	return w.journal.Close()
}

// pairs builds the output of one window: for every left row in arrival
// order, a row per right row of its key in arrival order (under how left,
// one row with null right columns when there is none; always for a left
// row whose key is null).
func (w *windowJoin) pairs(x *joinWin) ([]arrow.RecordBatch, error) {
	if len(x.rows[0]) == 0 || (!w.outer && len(x.rows[1]) == 0) {
		return nil, nil
	}
	byKey := map[int32][]*keptRow{}
	for _, r := range x.rows[1] {
		if !r.null {
			byKey[r.kid] = append(byKey[r.kid], r)
		}
	}
	var left, right []*keptRow
	for _, l := range x.rows[0] {
		var m []*keptRow
		if !l.null {
			m = byKey[l.kid]
		}
		if len(m) == 0 {
			if w.outer {
				left, right = append(left, l), append(right, nil)
			}
			continue
		}
		for _, r := range m {
			left, right = append(left, l), append(right, r)
		}
	}
	var out []arrow.RecordBatch
	for lo := 0; lo < len(left); lo += maxOutputRows {
		hi := min(lo+maxOutputRows, len(left))
		rec, err := w.build(x, left[lo:hi], right[lo:hi])
		if err != nil {
			for _, r := range out {
				r.Release()
			}
			return nil, fmt.Errorf("operator %q: %w", w.op, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// build makes one output batch of a window's pairs (left[i], right[i]).
func (w *windowJoin) build(x *joinWin, left, right []*keptRow) (arrow.RecordBatch, error) {
	n := len(left)
	lcols, rcols, err := w.jb.gatherPairs(left, right)
	if err != nil {
		return nil, err
	}
	defer releaseAll(lcols)
	defer releaseAll(rcols)
	starts, ends := make([]int64, n), make([]int64, n)
	for i := range starts {
		starts[i], ends[i] = x.start, x.start+w.size
	}
	cols := []arrow.Array{lcols[0], timestamps(starts), timestamps(ends)}
	cols = append(cols, lcols[1:]...)
	cols = append(cols, rcols...)
	defer cols[1].Release()
	defer cols[2].Release()
	return array.NewRecordBatch(w.out, cols, int64(n)), nil
}
