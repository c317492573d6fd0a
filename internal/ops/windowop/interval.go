package windowop

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
)

// intervalJoin is one subtask of an interval join.
//
// Every row that is not late is kept, by key, until the watermark passes
// the last event time a partner of it could have (its end): a left row
// until right.ts + lower can no longer reach it, a right row until
// left.ts - upper cannot. A row pairs with the kept rows of the other
// side when it arrives, so each pair is emitted once, with the second of
// its rows. A row whose own event time is behind the watermark is late:
// partners of it may be gone.
//
// The rows keep their input batch, and its acknowledgement, until the
// last of them ends; the acknowledgement of an output batch holds those
// of every input batch a row of it came from. So a source commits a row
// only once it has ended and every pair it made is acknowledged: no pair
// is lost to a crash. A restart replays the rows still kept, which pair
// again, so pairs of rows kept at a crash may be emitted twice; the
// window join's watermark floor, which prevents that, does not carry over
// to rows whose partners end at different times, and the kept rows move
// into checkpointed state for that.
type intervalJoin struct {
	base
	jb           *joinBuild
	maxPar       int
	lower, upper int64
	outer        bool
	kept         [2][][]keptRef // by key ID (dense: the key table's), in arrival order
	// queue is every kept row in arrival order. Rows end from its front
	// once the watermark passes their end: a row behind one that ends
	// later waits for it, which keeps it a little longer (bounded by the
	// disorder) but changes nothing, since pairing checks the bounds.
	queue []*keptRow
	head  int // queue[:head] have ended
	seq   int64
}

// keptRef is a kept row in its key's list: its event time beside it, so
// that pairing scans the list without reading the rows.
type keptRef struct {
	ts  int64
	row *keptRow
}

// keptRow is a row kept for pairing.
type keptRow struct {
	side    int
	ts, end int64 // end: the watermark at which no partner can come
	seq     int64 // arrival order, for a deterministic expiry order
	kid     int32
	from    *keptBatch
	row     int32
	matched bool
	gone    bool
}

// keptBatch is an input batch some of whose rows are kept: it holds one
// reference of the batch's acknowledgement until the last of them ends.
type keptBatch struct {
	rec  arrow.RecordBatch
	ack  *ack.Node
	live int
}

func (k *keptBatch) drop() {
	k.live--
	if k.live == 0 {
		k.rec.Release()
		k.ack.Release(nil)
	}
}

// keptHeap orders the kept rows by end, then arrival. Its entries carry
// both, so that ordering reads no row.
// holding returns an acknowledgement for an output batch of the given
// rows (nil ones skipped) that holds one more reference of each input
// batch they came from.
func holding(rows ...[]*keptRow) *ack.Node {
	seen := map[*keptBatch]bool{}
	var acks []*ack.Node
	for _, rs := range rows {
		for _, k := range rs {
			if k != nil && !seen[k.from] {
				seen[k.from] = true
				k.from.ack.Retain(1)
				acks = append(acks, k.from.ack)
			}
		}
	}
	return ack.Derive(acks...)
}

// abandon releases the input batches of kept rows at shutdown, their
// acknowledgements as abandoned, so that their rows are replayed.
func abandon(rows []*keptRow) {
	seen := map[*keptBatch]bool{}
	for _, k := range rows {
		if !seen[k.from] {
			seen[k.from] = true
			k.from.rec.Release()
			k.from.ack.Release(ops.ErrAbandoned)
		}
	}
}

type keptHeap []keptEnd

type keptEnd struct {
	end, seq int64
	row      *keptRow
}

func (h keptHeap) Len() int { return len(h) }
func (h keptHeap) Less(i, j int) bool {
	if h[i].end != h[j].end {
		return h[i].end < h[j].end
	}
	return h[i].seq < h[j].seq
}
func (h keptHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *keptHeap) Push(x any)   { *h = append(*h, x.(keptEnd)) }
func (h *keptHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newIntervalJoin(b base, jb *joinBuild, maxPar int) *intervalJoin {
	return &intervalJoin{base: b, jb: jb, maxPar: maxPar, lower: *jb.cfg.LowerMS, upper: *jb.cfg.UpperMS, outer: jb.cfg.How == HowLeft}
}

// endOf is the watermark at which a row of side at ts can pair no more:
// past left.ts - lower for a left row, right.ts + upper for a right one.
func (w *intervalJoin) endOf(side int, ts int64) int64 {
	if side == 0 {
		return satAdd(ts-w.lower, 1)
	}
	return satAdd(satAdd(ts, w.upper), 1)
}

// pairs reports whether a left row at lt and a right row at rt pair.
func (w *intervalJoin) pairs(lt, rt int64) bool {
	return lt >= rt+w.lower && lt <= rt+w.upper
}

// Process pairs a batch's rows with the kept rows of the other side, emits
// the pairs, and keeps the rows that are not late.
func (w *intervalJoin) Process(ctx context.Context, b ops.Batch, out ops.Emitter) error {
	side, b, _, err := w.jb.start(&w.base, b, w.maxPar)
	if err != nil || b.Rec == nil {
		return err
	}
	rec := b.Rec
	kb := &keptBatch{rec: rec, ack: b.Ack}
	var left, right []*keptRow // the pairs, in order
	other := 1 - side
	keyCol := rec.Column(w.keyCol)
	var slab []keptRow // the batch's kept rows, allocated together
	for r := range w.ts {
		if !w.valid[r] {
			w.lateRow(true)
			continue
		}
		if keyCol.IsNull(r) {
			continue // a null key matches no key (see nullKey): an inner join drops the row
		}
		ts := w.ts[r]
		end := w.endOf(side, ts)
		if ts < w.wm {
			w.lateRow(false)
			continue
		}
		if len(slab) == 0 {
			slab = make([]keptRow, len(w.ts)-r)
		}
		k := &slab[0]
		slab = slab[1:]
		*k = keptRow{side: side, ts: ts, end: end, seq: w.seq, kid: w.kid[r], from: kb, row: int32(r)}
		w.seq++
		for int(k.kid) >= len(w.kept[side]) || int(k.kid) >= len(w.kept[other]) {
			w.kept[0], w.kept[1] = append(w.kept[0], nil), append(w.kept[1], nil)
		}
		// A row of the list that has ended pairs no more: the bounds
		// say so without reading it.
		for _, o := range w.kept[other][k.kid] {
			lt, rt := ts, o.ts
			if side == 1 {
				lt, rt = o.ts, ts
			}
			if w.pairs(lt, rt) {
				l, rr := k, o.row
				if side == 1 {
					l, rr = o.row, k
				}
				l.matched = true
				left, right = append(left, l), append(right, rr)
			}
		}
		kb.live++
		w.kept[side][k.kid] = append(w.kept[side][k.kid], keptRef{ts: ts, row: k})
		w.queue = append(w.queue, k)
	}
	w.reportDrops()
	w.m.open.Store(int64(len(w.queue) - w.head))
	// The batch's own reference goes with its kept rows, or now; each
	// output batch holds one more of it and of every other batch a row
	// of it came from.
	if kb.live == 0 {
		defer func() { rec.Release(); b.Ack.Release(nil) }()
	}
	return w.emitPairs(ctx, out, left, right)
}

// emitPairs emits the pairs (left[i], right[i]), a nil right row standing
// for nulls, in batches of at most maxOutputRows; each batch's
// acknowledgement holds those of the input batches its rows came from.
func (w *intervalJoin) emitPairs(ctx context.Context, out ops.Emitter, left, right []*keptRow) error {
	for lo := 0; lo < len(left); lo += maxOutputRows {
		hi := min(lo+maxOutputRows, len(left))
		rec, err := w.build(left[lo:hi], right[lo:hi])
		if err != nil {
			return fmt.Errorf("operator %q: %w", w.op, err)
		}
		if err := out.Emit(ctx, ops.Batch{Rec: rec, Ack: holding(left[lo:hi], right[lo:hi])}); err != nil {
			return err
		}
	}
	return nil
}

// build makes one output batch of the pairs (left[i], right[i]).
func (w *intervalJoin) build(left, right []*keptRow) (arrow.RecordBatch, error) {
	n := len(left)
	cols := make([]arrow.Array, 0, w.out.NumFields())
	defer func() { releaseAll(cols) }()
	lcols, err := gather(w.jb.sides[0], w.jb.in[0], left)
	if err != nil {
		return nil, err
	}
	defer releaseAll(lcols)
	rcols, err := gather(w.jb.sides[1], w.jb.in[1], right)
	if err != nil {
		return nil, err
	}
	defer releaseAll(rcols)
	for _, c := range lcols {
		c.Retain()
		cols = append(cols, c)
	}
	for _, c := range rcols[1:] {
		c.Retain()
		cols = append(cols, c)
	}
	return array.NewRecordBatch(w.out, cols, int64(n)), nil
}

// gather returns the key column and the output columns of a side for the
// given kept rows, in order; a nil row gives nulls.
func gather(s joinSide, schema *arrow.Schema, rows []*keptRow) ([]arrow.Array, error) {
	// The rows of each input batch are taken together, then the pieces
	// concatenated and put in order with one more take.
	var batches []*keptBatch
	idx := map[*keptBatch][]int32{}
	pos := make([]int32, len(rows)) // position in the concatenation, before the batch offset
	for i, k := range rows {
		if k == nil {
			continue
		}
		if _, ok := idx[k.from]; !ok {
			batches = append(batches, k.from)
		}
		pos[i] = int32(len(idx[k.from]))
		idx[k.from] = append(idx[k.from], k.row)
	}
	offset := map[*keptBatch]int32{}
	total := int32(0)
	for _, b := range batches {
		offset[b] = total
		total += int32(len(idx[b]))
	}
	order := make([]int32, len(rows))
	for i, k := range rows {
		if k == nil {
			order[i] = total // the null row after the pieces
			continue
		}
		order[i] = offset[k.from] + pos[i]
	}
	cols := append([]int{s.keyCol}, s.cols...)
	out := make([]arrow.Array, 0, len(cols))
	for _, c := range cols {
		parts := make([]arrow.Array, 0, len(batches)+1)
		for _, b := range batches {
			p, err := batch.TakeArray(b.rec.Column(c), idx[b])
			if err != nil {
				releaseAll(parts)
				releaseAll(out)
				return nil, fmt.Errorf("column %q: %w", schema.Field(c).Name, err)
			}
			parts = append(parts, p)
		}
		parts = append(parts, array.MakeArrayOfNull(memory.DefaultAllocator, schema.Field(c).Type, 1))
		all, err := array.Concatenate(parts, memory.DefaultAllocator)
		releaseAll(parts)
		if err != nil {
			releaseAll(out)
			return nil, fmt.Errorf("column %q: %w", schema.Field(c).Name, err)
		}
		a, err := batch.TakeArray(all, order)
		all.Release()
		if err != nil {
			releaseAll(out)
			return nil, fmt.Errorf("column %q: %w", schema.Field(c).Name, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Watermark ends the kept rows the watermark passed: under how left, a
// left row that never paired is emitted with nulls, in order of end and
// arrival; then the rows are dropped, and with the last row of an input
// batch its acknowledgement is released.
func (w *intervalJoin) Watermark(ctx context.Context, wm int64, out ops.Emitter) error {
	if !w.advance(wm) {
		return nil
	}
	var ended, unmatched []*keptRow
	for w.head < len(w.queue) && w.queue[w.head].end <= wm {
		k := w.queue[w.head]
		w.queue[w.head] = nil
		w.head++
		k.gone = true
		ended = append(ended, k)
		if w.outer && k.side == 0 && !k.matched {
			unmatched = append(unmatched, k)
		}
	}
	if w.head > len(w.queue)/2 { // reuse the front
		w.queue = append(w.queue[:0], w.queue[w.head:]...)
		w.head = 0
	}
	w.m.open.Store(int64(len(w.queue) - w.head))
	if len(ended) == 0 {
		return nil
	}
	// Only the keys of the ended rows have rows to drop.
	for _, e := range ended {
		rows := w.kept[e.side][e.kid]
		live := rows[:0]
		for _, k := range rows {
			if !k.row.gone {
				live = append(live, k)
			}
		}
		clear(rows[len(live):])
		w.kept[e.side][e.kid] = live
	}
	err := w.emitPairs(ctx, out, unmatched, make([]*keptRow, len(unmatched)))
	for _, k := range ended {
		k.from.drop()
	}
	return err
}

// Close drops the kept rows: their acknowledgements are released as
// abandoned, so their rows will be replayed.
func (w *intervalJoin) Close() error {
	abandon(w.queue[w.head:])
	w.queue, w.head = nil, 0
	w.kept = [2][][]keptRef{}
	w.closeWarnings()
	return nil
}
