package windowop

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/rowbin"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// rowsNamespace holds the rows an interval join keeps: user key = the
// key's bytes, then the row's event time (8 bytes, big-endian, sign bit
// flipped), its side (1 byte) and its arrival sequence (8 bytes); value =
// a flags byte (1: the row had paired when it came) and the side's key
// and output columns (rowbin).
const rowsNamespace = "join_rows"

// pairedNamespace marks, under a kept row's user key, a left row of an
// outer interval join that paired after it came (a row of its own, so
// that the mark is a put of a new key, like every row: see
// statestore.Epoch.PutUnread).
const pairedNamespace = "join_paired"

// keySuffix is the length of what follows the key's bytes in a kept
// row's user key.
const keySuffix = 17

// intervalJoin is one subtask of an interval join.
//
// Every row that is not late is kept, by key, until the watermark passes
// the last event time a partner of it could have (its end): a left row
// until right.ts + lower can no longer reach it, a right row until
// left.ts - upper cannot. A row pairs with the kept rows of the other
// side when it arrives, so each pair is emitted once, with the second of
// its rows. A row whose own event time is behind the watermark is late:
// partners of it may be gone. Under how "left", a left row that never
// paired is emitted with nulls when it ends (a left row with a null key
// at once: it pairs with nothing).
//
// The kept rows are keyed state: each input batch's rows, and the
// "paired" mark of a kept left row it pairs, are staged in the batch's
// journal epoch, which commits once the pairs it emitted are
// acknowledged; the rows that end are deleted in the epoch of the
// watermark that ends them, with the null rows it emits. So a checkpoint
// holds the rows and a restore, or a rescale by key group, brings them
// back; a source commits a row only once its state has committed, and
// what a restart replays pairs again, so a pair is emitted at least once
// (twice only when its epoch had not committed at a crash).
type intervalJoin struct {
	base
	jb           *joinBuild
	maxPar       int
	lower, upper int64
	outer        bool
	codecs       [2]*rowbin.Codec
	// byKey holds, by key ID (dense: the key table's), the key's kept
	// rows of both sides in arrival order and its key group: what a row
	// of the key reads and writes is in one place.
	byKey []keyRows
	// ends orders the kept rows by end, then arrival, in runs (one per
	// input batch, sorted): they end from its top as the watermark
	// passes. A heap of runs costs a heap operation per batch, not per
	// row.
	ends  runHeap
	nkept int
	// stale counts the ended rows still in their keys' lists: a list
	// drops its ended rows when pairing or keeping next reads it (the
	// list is in the cache then), and every list is swept once stale
	// outnumbers the kept rows, which bounds the lists of keys that came
	// no more.
	stale int
	seq   int64
	// puts is stage's buffer; touched is what touch read.
	puts    []statestore.LazyPut
	touched int64
	counts  []int32 // sortByEnd's buffer
	// pairL and pairR are Process's buffers of pairs, kept between
	// calls (cleared, so they hold no row alive) since their appends
	// grew them anew for every batch.
	pairL, pairR []*keptRow
	// lazy says the rows Process keeps are put by handle (put is the
	// row's held): the journal holds puts back (see stage).
	lazy bool
	buf  []byte
}

// keyRows are the kept rows of a key and its key group (-1: not yet
// known).
type keyRows struct {
	rows  []keptRef
	group int32
}

// keptRef is a kept row in its key's list: its side and event time beside
// it, so that pairing scans the list without reading the rows.
type keptRef struct {
	ts   int64
	row  *keptRow
	side int
}

// keptRow is a row kept for pairing.
//
// What an interval join reads when a row ends (put, group and the lazy
// put's handle, held) and when a pair of it is output (from, row) fills
// its first 64 bytes: one cache line.
type keptRow struct {
	held  statestore.Held // where put points, when the put is lazy
	put   *statestore.Held
	from  *keptBatch
	row   int32
	group int32
	// marked says the row's paired mark is stored.
	marked  bool
	matched bool
	null    bool // its key is null (a window join's outer left row)
	// came says the row paired when it came (an interval join's stored
	// flag); unlike matched, it does not change once the row is staged.
	came    bool
	kid     int32
	ts, end int64 // end: the watermark at which no partner can come
	seq     int64 // arrival order, for a deterministic order
	side    int
	// put and mark are the handles of the row's put and of its paired
	// mark's (nil when read back from the store, or the backend is
	// given every mutation at commit).
	mark *statestore.Held
	_    [16]byte // 128 bytes: a slab's rows start at cache lines
}

// keptBatch is an input batch some of whose rows are kept (or, after a
// restore, the kept rows of a side read back from state): it holds the
// batch until the last of them is dropped. ack, when set, is released
// with it (a temporal join's waiting stream rows hold their input).
type keptBatch struct {
	rec  arrow.RecordBatch
	ack  *ack.Node
	live atomic.Int32 // an interval join's ended rows drop theirs as their deletes settle
	// codec and keyCol encode the batch's rows for state (PutLazy).
	codec  *rowbin.Codec
	keyCol int
	// gen and idx are the batch's number in the gather call gen (the
	// operator's goroutine alone reads and writes them).
	gen uint64
	idx int32
}

// gathers numbers gather's calls.
var gathers atomic.Uint64

// newKeptBatch is a keptBatch of rec holding one reference.
func newKeptBatch(rec arrow.RecordBatch) *keptBatch {
	k := &keptBatch{rec: rec}
	k.live.Store(1)
	return k
}

// batchDrop is n rows of kb that ended.
type batchDrop struct {
	kb *keptBatch
	n  int32
}

func (k *keptBatch) drop() { k.dropN(1) }

// dropN drops n rows' references.
func (k *keptBatch) dropN(n int32) {
	if k.live.Add(-n) == 0 {
		k.rec.Release()
		if k.ack != nil {
			k.ack.Release(nil)
		}
	}
}

// holding returns an acknowledgement for an output batch of the given
// rows that holds one more reference of each input batch they came from.
func holding(rows []*keptRow) *ack.Node {
	seen := map[*keptBatch]bool{}
	var acks []*ack.Node
	for _, k := range rows {
		if k != nil && !seen[k.from] {
			seen[k.from] = true
			k.from.ack.Retain(1)
			acks = append(acks, k.from.ack)
		}
	}
	return ack.Derive(acks...)
}

// abandon releases the input batches of waiting rows at shutdown, their
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

// keptHeap orders rows by end, then arrival. Its entries carry both, so
// that ordering reads no row.
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

// run is the kept rows of one input batch (or of a restore), sorted by
// end then arrival, each beside its end and arrival so that sorting and
// taking them reads no row; rows[i:] have not ended.
type run struct {
	rows []keptEnd
	i    int
	// end and seq are those of rows[i].
	end, seq int64
	// from is the batch of every row (nil: of several), and ended the
	// rows a Watermark call ended, so that it releases them by batch.
	from  *keptBatch
	ended int32
}

func (r *run) before(o *run) bool {
	if r.end != o.end {
		return r.end < o.end
	}
	return r.seq < o.seq
}

// next moves past rows[i].
func (r *run) next() {
	r.i++
	if r.i < len(r.rows) {
		r.end, r.seq = r.rows[r.i].end, r.rows[r.i].seq
	}
}

// runHeap is a min-heap of runs by their next row.
type runHeap []*run

func (h *runHeap) push(r *run) {
	*h = append(*h, r)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q[i].before(q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

// fix restores the heap after its top's next row changed, dropping the
// top when it has no row left.
func (h *runHeap) fix() {
	q := *h
	if q[0].i == len(q[0].rows) {
		n := len(q) - 1
		q[0], q[n] = q[n], nil
		q = q[:n]
		*h = q
	}
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(q) {
			return
		}
		if c+1 < len(q) && q[c+1].before(q[c]) {
			c++
		}
		if !q[c].before(q[i]) {
			return
		}
		q[i], q[c] = q[c], q[i]
		i = c
	}
}

// keptCols are the columns of a side an interval join keeps in state:
// its key, then its output columns.
func keptCols(s joinSide) []int { return append([]int{s.keyCol}, s.cols...) }

func (jb *joinBuild) newInterval(b base, info ops.Task) (*intervalJoin, error) {
	w := &intervalJoin{base: b, jb: jb, maxPar: info.MaxParallelism, lower: *jb.cfg.LowerMS, upper: *jb.cfg.UpperMS, outer: jb.cfg.How == HowLeft}
	var err error
	if w.codecs, err = jb.keptCodecs(); err != nil {
		return nil, fmt.Errorf("operator %q: %w", info.OperatorID, err)
	}
	if err := w.restore(info); err != nil {
		return nil, fmt.Errorf("operator %q: restoring the kept rows: %w", info.OperatorID, err)
	}
	return w, nil
}

// restore reads the kept rows of the subtask's key groups back from the
// committed state, with their paired marks, in arrival order.
func (w *intervalJoin) restore(info ops.Task) error {
	rows, _, kbs, err := w.jb.readKept(w.journal, w.keys, w.codecs, info)
	if err != nil || len(rows) == 0 {
		return err
	}
	defer kbs[0].drop() // the rows hold the batches now
	defer kbs[1].drop()
	marks := map[string]bool{}
	err = w.journal.Scan(pairedNamespace, statestore.Scope{Groups: info.KeyGroups}, info.Now(), func(e statestore.Entry) error {
		marks[string(e.Key.User)] = true
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range rows {
		k.end = w.endOf(k.side, k.ts)
		if marks[string(w.userKey(k))] {
			k.matched, k.marked = true, true
		}
		w.group(k.kid) // makes room for its key
		w.keep(k)
		w.seq = max(w.seq, k.seq+1)
	}
	w.addRun(rows, nil)
	return nil
}

// restoredBatch is a batch of schema whose columns cols are the builders'
// arrays and whose other columns are null.
func restoredBatch(schema *arrow.Schema, cols []int, bs []array.Builder) arrow.RecordBatch {
	arrs := make([]arrow.Array, schema.NumFields())
	n := 0
	for i, c := range cols {
		arrs[c] = bs[i].NewArray()
		n = arrs[c].Len()
	}
	for c := range arrs {
		if arrs[c] == nil {
			arrs[c] = array.MakeArrayOfNull(memory.DefaultAllocator, schema.Field(c).Type, n)
		}
	}
	defer releaseAll(arrs)
	return array.NewRecordBatch(schema, arrs, int64(n))
}

// keep adds k to its key's list; the caller adds it to a run.
func (w *intervalJoin) keep(k *keptRow) {
	k.from.live.Add(1)
	w.nkept++
	kr := &w.byKey[k.kid]
	kr.rows = append(kr.rows, keptRef{ts: k.ts, row: k, side: k.side})
}

// live returns the list of kid without its ended rows, which it drops
// from the list.
func (w *intervalJoin) live(kid int32) []keptRef {
	kr := &w.byKey[kid]
	if w.stale == 0 || len(kr.rows) == 0 {
		return kr.rows
	}
	live := kr.rows[:0]
	for _, k := range kr.rows {
		if w.endOf(k.side, k.ts) > w.wm {
			live = append(live, k)
		}
	}
	if n := len(kr.rows) - len(live); n > 0 {
		w.stale -= n
		clear(kr.rows[len(live):])
		kr.rows = live
	}
	return live
}

// sweep drops the ended rows of every list.
func (w *intervalJoin) sweep() {
	for kid := range w.byKey {
		w.live(int32(kid))
	}
	w.stale = 0
}

// group returns the key group of kid, making room for kid in byKey.
func (w *intervalJoin) group(kid int32) int32 {
	for int(kid) >= len(w.byKey) {
		w.byKey = append(w.byKey, keyRows{group: -1})
	}
	kr := &w.byKey[kid]
	if kr.group < 0 {
		kr.group = int32(w.keys.GroupWith(kid, w.groups))
	}
	return kr.group
}

// addRun adds rows, in arrival order, to the rows by end.
// from is the batch of every row, or nil.
func (w *intervalJoin) addRun(rows []*keptRow, from *keptBatch) {
	if len(rows) == 0 {
		return
	}
	r := &run{rows: sortByEnd(rows, &w.counts), from: from}
	r.end, r.seq = r.rows[0].end, r.rows[0].seq
	w.ends.push(r)
}

// sortByEnd returns rows, given in arrival order, as keptEnds sorted by
// end, then arrival. The ends of a batch's rows usually lie within a few
// times as many milliseconds as it has rows: then a counting sort by end,
// which keeps arrival order, in two passes (counts is its buffer);
// otherwise a comparison sort.
func sortByEnd(rows []*keptRow, counts *[]int32) []keptEnd {
	out := make([]keptEnd, len(rows))
	lo, hi := rows[0].end, rows[0].end
	for _, k := range rows {
		lo, hi = min(lo, k.end), max(hi, k.end)
	}
	if span := uint64(hi) - uint64(lo); span >= uint64(4*len(rows)+64) {
		for i, k := range rows {
			out[i] = keptEnd{end: k.end, seq: k.seq, row: k}
		}
		slices.SortFunc(out, func(a, b keptEnd) int {
			if c := cmp.Compare(a.end, b.end); c != 0 {
				return c
			}
			return cmp.Compare(a.seq, b.seq)
		})
		return out
	}
	c := slices.Grow((*counts)[:0], int(hi-lo)+2)[:int(hi-lo)+2]
	clear(c)
	for _, k := range rows {
		c[k.end-lo+1]++
	}
	for i := 1; i < len(c); i++ {
		c[i] += c[i-1]
	}
	for _, k := range rows {
		at := &c[k.end-lo]
		out[*at] = keptEnd{end: k.end, seq: k.seq, row: k}
		*at++
	}
	*counts = c
	return out
}

// userKey is the state key of a kept row.
func (w *intervalJoin) userKey(k *keptRow) []byte {
	u := w.keys.AppendBytes(w.buf[:0], k.kid)
	u = binary.BigEndian.AppendUint64(u, uint64(k.ts)^1<<63)
	u = append(u, byte(k.side))
	u = binary.BigEndian.AppendUint64(u, uint64(k.seq))
	w.buf = u
	return u
}

// stage puts new kept rows, with whether each has paired, in epoch. The
// entries are encoded only if the backend is given them (PutLazy): a
// row's batch stays held until the delete of the row has settled.
func (w *intervalJoin) stage(epoch *statestore.Epoch, rows []*keptRow) {
	puts := w.puts[:0]
	for _, k := range rows {
		k.came = k.matched
		puts = append(puts, statestore.LazyPut{Group: int(k.group), V: k, H: &k.held})
	}
	if w.lazy = epoch.PutLazyAll(rowsNamespace, puts); w.lazy {
		for _, k := range rows {
			k.put = &k.held
		}
	}
	clear(puts)
	w.puts = puts[:0]
}

// touch makes room for the keys of the batch's rows from r on, a chunk
// of them, and reads each key's entry and first kept row, in a loop whose
// loads do not wait on each other: their cache misses overlap, where
// pairing would take them one after another. (A chunk, not the batch:
// what it reads must still be in the cache when the rows pair.)
func (w *intervalJoin) touch(r int) {
	var x int64
	for _, kid := range w.kid[r:min(r+touchChunk, len(w.kid))] {
		w.group(kid)
		if rows := w.byKey[kid].rows; len(rows) > 0 {
			x += rows[0].ts
		}
	}
	w.touched = x
}

// touchChunk is the rows touch reads ahead.
const touchChunk = 128

// AppendEntry appends a kept row's user key (see rowsNamespace: the same
// as userKey) and its value to dst (statestore.Lazy). It reads only what
// does not change once the row is staged.
func (k *keptRow) AppendEntry(dst []byte) ([]byte, int) {
	start, kb := len(dst), k.from
	dst = keys.AppendValueBytes(dst, kb.rec.Column(kb.keyCol), int(k.row))
	dst = binary.BigEndian.AppendUint64(dst, uint64(k.ts)^1<<63)
	dst = append(dst, byte(k.side))
	dst = binary.BigEndian.AppendUint64(dst, uint64(k.seq))
	n := len(dst) - start
	flag := byte(0)
	if k.came {
		flag = flagPaired
	}
	return kb.codec.Append(append(dst, flag), kb.rec, int(k.row)), n
}

// unstage deletes a kept row's entry in namespace ns, put by the handle
// put (nil: read back from the store, or no handle).
func (w *intervalJoin) unstage(epoch *statestore.Epoch, ns string, k *keptRow, put *statestore.Held) {
	if put != nil {
		epoch.DeleteUnread(ns, int(k.group), nil, put) // the handle knows the key
		return
	}
	epoch.DeleteUnread(ns, int(k.group), w.userKey(k), nil)
}

// unstageEnded stages the deletes of the ended rows (loose: those read
// back from state, put by no handle) and of their paired marks. The
// handle of a row Process kept on a deferring journal is the row's held,
// known without reading the row: the deletes' cache misses are taken by
// DeleteHeld's loop, where they overlap.
func (w *intervalJoin) unstageEnded(epoch *statestore.Epoch, ended, loose []*keptRow) {
	if w.lazy {
		held := make([]*statestore.Held, 0, len(ended)-len(loose))
		restored := make(map[*keptRow]bool, len(loose))
		for _, k := range loose {
			restored[k] = true
		}
		for _, e := range ended {
			if !restored[e] {
				held = append(held, &e.held)
			}
		}
		epoch.DeleteHeld(held)
		for _, e := range loose {
			w.unstage(epoch, rowsNamespace, e, nil)
		}
	} else {
		for _, e := range ended {
			w.unstage(epoch, rowsNamespace, e, e.put)
		}
	}
	if !w.outer { // only a left outer join marks rows
		return
	}
	for _, e := range ended {
		if e.marked {
			w.unstage(epoch, pairedNamespace, e, e.mark)
		}
	}
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
	side, b, epoch, err := w.jb.start(&w.base, b, w.maxPar)
	if err != nil || b.Rec == nil {
		return err
	}
	rec := b.Rec
	epoch.Grow(len(w.ts))
	kb := newKeptBatch(rec) // the call's own reference, dropped below
	defer kb.drop()
	kb.codec, kb.keyCol = w.codecs[side], w.keyCol
	left, right := w.pairL[:0], w.pairR[:0] // the pairs, in order
	defer func() {
		clear(left)
		clear(right)
		w.pairL, w.pairR = left[:0], right[:0]
	}()
	var paired []*keptRow // kept left rows this batch paired first
	other := 1 - side
	keyCol := rec.Column(w.keyCol)
	var slab []keptRow // the batch's kept rows, allocated together
	kept := make([]*keptRow, 0, len(w.ts))
	var late []int32 // rows routed as late
	for r := range w.ts {
		if r%touchChunk == 0 {
			w.touch(r)
		}
		if !w.valid[r] {
			if w.lateRow(true) {
				late = append(late, int32(r))
			}
			continue
		}
		ts := w.ts[r]
		if ts < w.wm {
			if w.lateRow(false) {
				late = append(late, int32(r))
			}
			continue
		}
		if len(slab) == 0 {
			slab = make([]keptRow, len(w.ts)-r)
		}
		k := &slab[0]
		slab = slab[1:]
		// The slab is new: setting the fields, not the whole row, skips
		// zeroing it again.
		k.side, k.ts, k.end, k.kid, k.from, k.row = side, ts, w.endOf(side, ts), w.kid[r], kb, int32(r)
		if keyCol.IsNull(r) {
			// A null key equals no key, another null included (as in SQL): under how left its
			// row is emitted with nulls now; it is not kept.
			if w.outer && side == 0 {
				left, right = append(left, k), append(right, nil)
			}
			continue
		}
		k.seq, k.group = w.seq, w.byKey[k.kid].group
		w.seq++
		{
			for _, o := range w.live(k.kid) {
				if o.side != other {
					continue
				}
				lt, rt := ts, o.ts
				if side == 1 {
					lt, rt = o.ts, ts
				}
				if !w.pairs(lt, rt) {
					continue
				}
				l, rr := k, o.row
				if side == 1 {
					l, rr = o.row, k
					if w.outer && !l.matched {
						paired = append(paired, l)
					}
				}
				l.matched = true
				left, right = append(left, l), append(right, rr)
			}
		}
		w.keep(k)
		kept = append(kept, k)
	}
	w.stage(epoch, kept)
	w.addRun(kept, kb)
	for _, l := range paired {
		l.mark, l.marked = epoch.PutUnread(pairedNamespace, int(l.group), w.userKey(l), nil), true
	}
	w.reportDrops()
	w.m.open.Store(int64(w.open()))
	if err := emitLate(ctx, out, rec, late, b.Ack); err != nil {
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", w.op, err)
	}
	return w.emitPairs(ctx, out, b.Ack, left, right)
}

// open is the number of kept rows.
func (w *intervalJoin) open() int { return w.nkept }

// emitPairs emits the pairs (left[i], right[i]), a nil right row standing
// for nulls, in batches of at most maxOutputRows, each with a reference
// of node, whose own reference it releases.
func (w *intervalJoin) emitPairs(ctx context.Context, out ops.Emitter, node *ack.Node, left, right []*keptRow) error {
	var recs []arrow.RecordBatch
	for lo := 0; lo < len(left); lo += maxOutputRows {
		hi := min(lo+maxOutputRows, len(left))
		rec, err := w.build(left[lo:hi], right[lo:hi])
		if err != nil {
			for _, r := range recs {
				r.Release()
			}
			node.Release(err)
			return fmt.Errorf("operator %q: %w", w.op, err)
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		node.Release(nil)
		return nil
	}
	node.Retain(len(recs) - 1)
	return emitAll(ctx, out, recs, node, ops.PortMain)
}

// build makes one output batch of the pairs (left[i], right[i]).
func (w *intervalJoin) build(left, right []*keptRow) (arrow.RecordBatch, error) {
	n := len(left)
	cols := make([]arrow.Array, 0, w.out.NumFields())
	defer func() { releaseAll(cols) }()
	lcols, rcols, err := w.jb.gatherPairs(left, right)
	if err != nil {
		return nil, err
	}
	defer releaseAll(lcols)
	defer releaseAll(rcols)
	for _, c := range lcols {
		c.Retain()
		cols = append(cols, c)
	}
	for _, c := range rcols {
		c.Retain()
		cols = append(cols, c)
	}
	return array.NewRecordBatch(w.out, cols, int64(n)), nil
}

// gather returns the key column (withKey) and the output columns of a
// side for the given kept rows, in order; a nil row gives nulls.
func gather(s joinSide, schema *arrow.Schema, rows []*keptRow, withKey bool) ([]arrow.Array, error) {
	var batches []*keptBatch
	gen := gathers.Add(1) // marks the batches this call numbered (keptBatch.gen)
	src, row := make([]int32, len(rows)), make([]int32, len(rows))
	for i, k := range rows {
		if k == nil {
			src[i] = -1
			continue
		}
		if b := k.from; b.gen != gen {
			b.gen, b.idx = gen, int32(len(batches))
			batches = append(batches, b)
		}
		src[i], row[i] = k.from.idx, k.row
	}
	cols := s.cols
	if withKey {
		cols = keptCols(s)
	}
	out := make([]arrow.Array, 0, len(cols))
	arrays := make([]arrow.Array, len(batches))
	for _, c := range cols {
		for j, b := range batches {
			arrays[j] = b.rec.Column(c)
		}
		a, err := batch.Gather(schema.Field(c).Type, arrays, src, row)
		if err != nil {
			releaseAll(out)
			return nil, fmt.Errorf("column %q: %w", schema.Field(c).Name, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Watermark ends the kept rows the watermark passed, deleting them from
// state; under how left, a left row that never paired is emitted with
// nulls, in order of end and arrival.
func (w *intervalJoin) Watermark(ctx context.Context, wm int64, out ops.Emitter) error {
	if !w.advance(wm) {
		return nil
	}
	var ended, unmatched, loose []*keptRow
	var runs []*run // those whose rows ended
	for len(w.ends) > 0 && w.ends[0].end <= wm {
		top := w.ends[0]
		k := top.rows[top.i].row
		top.rows[top.i].row = nil
		switch {
		case top.from == nil:
			loose = append(loose, k)
		case top.ended == 0:
			runs = append(runs, top)
			fallthrough
		default:
			top.ended++
		}
		top.next()
		w.ends.fix() // usually one comparison: the run's next row stays first
		ended = append(ended, k)
		if w.outer && k.side == 0 && !k.matched {
			unmatched = append(unmatched, k)
		}
	}
	w.nkept -= len(ended)
	w.m.open.Store(int64(w.open()))
	if len(ended) == 0 {
		return nil
	}
	w.stale += len(ended)
	if w.stale > max(w.nkept, 1<<14) {
		w.sweep()
	}
	epoch := w.journal.Begin()
	// A row's batch is what its lazy put encodes from until its delete
	// has settled.
	drops := make([]batchDrop, len(runs))
	for i, r := range runs {
		drops[i] = batchDrop{r.from, r.ended}
		r.ended = 0
	}
	epoch.OnSettled(func(error) {
		for _, d := range drops {
			d.kb.dropN(d.n)
		}
		for _, k := range loose {
			k.from.drop()
		}
	})
	epoch.Grow(len(ended))
	w.unstageEnded(epoch, ended, loose)
	return w.emitPairs(ctx, out, ack.New(epoch.Done), unmatched, make([]*keptRow, len(unmatched)))
}

// Close drops the kept rows (they are state: a restart reads them back)
// once the journal has closed.
func (w *intervalJoin) Close() error {
	err := w.journal.Close() // encodes what it holds from the rows' batches
	for _, r := range w.ends {
		for _, k := range r.rows[r.i:] {
			k.row.from.drop()
		}
	}
	w.ends, w.nkept = nil, 0
	w.byKey = nil
	w.closeWarnings()
	return err
}
