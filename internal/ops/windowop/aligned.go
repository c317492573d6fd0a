package windowop

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// aligned runs tumbling and sliding windows: windows start at multiples of
// slide (= size for tumbling) and every key has its own.
//
// Each open window start has a dense slice from key ID to accumulator
// group, so finding the group of a row is an array index, not a hash
// lookup; a batch is folded in with one pass per window ordinal (an event
// is in at most ceil(size/slide) windows): rows are mapped to groups
// first, then every aggregate folds its column with one tight loop.
// Windows are emitted in order of end, then start, then first arrival of
// their key in the window.
type aligned struct {
	base
	size, slide int64
	perEvent    int // the most windows one event belongs to

	wins      map[int64]*win // open windows by start
	ends      int64Heap      // starts of windows not yet fired, ordered (end = start + size)
	deadlines int64Heap      // starts of fired windows kept for late updates

	held heldHeap

	lastStart int64 // the window of the previous row, cached
	lastWin   *win
	gids      [][]int32
	starts    []int64
	route     []bool
	touched   []touch

	// mu is held while the task changes what a query reads (the key
	// table, the windows and their accumulators), and by queries: a query
	// sees whole batches and firings. The task reads without it.
	mu sync.Mutex
}

// win is one window start: its groups by key and in arrival order.
//
// Its groups are found by key in a map while it holds few of the keys
// the operator has seen (sparse), and in a slice indexed by key ID once
// it holds more (byKey): a slice sized by every key ever seen, made for
// each window, cost a sliding window over a growing key space (Nexmark's
// auctions) most of its time and 2.6 KB allocated an event.
type win struct {
	start   int64
	byKey   []int32         // key ID -> group, -1 when the key has none here; nil while sparse
	sparse  map[int32]int32 // key ID -> group, while byKey is nil
	members []int32         // groups in order of creation
	keys    []int32         // key of each member
	emitted []bool          // per member: emitted at least once
	fired   bool            // the watermark reached its end
	inBatch []bool          // per member: updated by a late row in this batch
}

type touch struct {
	w *win
	m int // member index
}

func newAligned(b base, size, slide int64) *aligned {
	n := int((size + slide - 1) / slide)
	return &aligned{base: b, size: size, slide: slide, perEvent: n, wins: map[int64]*win{}, lastStart: eventtime.NoWatermark}
}

// window finds or opens the window starting at start. late marks a window
// opened by a late row under the update policy: it is never fired by the
// watermark, only emitted at once and kept until its deadline.
func (w *aligned) window(start int64, late bool) *win {
	if start == w.lastStart && w.lastWin != nil {
		return w.lastWin
	}
	x := w.wins[start]
	if x == nil {
		x = &win{start: start, fired: late}
		w.wins[start] = x
		if late {
			heap.Push(&w.deadlines, start)
		} else {
			heap.Push(&w.ends, start)
		}
	}
	w.lastStart, w.lastWin = start, x
	return x
}

// group finds or creates the accumulator group of key in window x; it
// returns the member index too.
func (w *aligned) group(x *win, key int32) int32 {
	if g := x.lookup(key); g >= 0 {
		return g
	}
	g := w.acc.Alloc()
	x.set(key, g, w.keys.Len())
	x.members = append(x.members, g)
	x.keys = append(x.keys, key)
	x.emitted = append(x.emitted, false)
	x.inBatch = append(x.inBatch, false)
	w.m.open.Add(1)
	return g
}

// lookup returns the group of key in x, or -1.
func (x *win) lookup(key int32) int32 {
	if x.byKey == nil {
		if g, ok := x.sparse[key]; ok {
			return g
		}
		return -1
	}
	if int(key) < len(x.byKey) {
		return x.byKey[key]
	}
	return -1
}

// sparseMax is the share of the keys seen (1/sparseMax) up to which a
// window keeps its groups in a map; and a window of at most sparseMin
// keys seen starts with the slice.
const (
	sparseMax = 8
	sparseMin = 1024
)

// set records g as key's group in x, which has seen keys keys so far.
func (x *win) set(key, g int32, keys int) {
	if x.byKey == nil && keys > sparseMin && (len(x.members)+1)*sparseMax < keys {
		if x.sparse == nil {
			x.sparse = map[int32]int32{}
		}
		x.sparse[key] = g
		return
	}
	if int(key) >= len(x.byKey) {
		n := max(int(key)+1, 2*len(x.byKey), keys)
		grown := make([]int32, n)
		copy(grown, x.byKey)
		for i := len(x.byKey); i < n; i++ {
			grown[i] = -1
		}
		for k, v := range x.sparse {
			grown[k] = v
		}
		x.byKey, x.sparse = grown, nil
	}
	x.byKey[key] = g
}

// close frees a window's groups.
func (w *aligned) close(x *win) {
	w.acc.Free(x.members)
	w.m.open.Add(-int64(len(x.members)))
	delete(w.wins, x.start)
	if w.lastWin == x {
		w.lastWin, w.lastStart = nil, eventtime.NoWatermark
	}
}

// Process folds a batch's rows into their windows: each row goes to every
// window it belongs to that is still open (or, late under update, within
// its deadline), is counted replayed when a window it belongs to already
// took it before a restart, or is late; then the touched late windows are
// emitted again, late rows routed, and the batch's acknowledgement held
// until the last window it fed fires.
func (w *aligned) Process(ctx context.Context, b ops.Batch, out ops.Emitter) error {
	b, epoch, err := w.begin(b)
	if err != nil || b.Rec == nil {
		return err
	}
	rec := b.Rec
	w.mu.Lock()
	updates, routed, maxEnd, err := w.take(rec, epoch)
	w.mu.Unlock()
	if err != nil {
		rec.Release()
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", w.op, err)
	}
	return finishBatch(ctx, b, out, updates, routed, &w.held, maxEnd)
}

// take folds a batch's rows into their windows, under the lock queries
// take: it returns the late updates and late rows to emit, and the latest
// end of the open windows the rows went to.
func (w *aligned) take(rec arrow.RecordBatch, epoch *statestore.Epoch) (updates, routed []arrow.RecordBatch, maxEnd int64, err error) {
	maxEnd = eventtime.NoWatermark
	fail := func(err error) ([]arrow.RecordBatch, []arrow.RecordBatch, int64, error) {
		return nil, nil, maxEnd, err
	}
	if err := w.prepare(rec); err != nil {
		return fail(err)
	}
	n := len(w.ts)
	w.resetRows(n)
	route := w.route[:n]
	anyRoute := false
	w.touched = w.touched[:0]
	update := w.tm.policy == job.LateUpdate
	wm := w.wm
	tumbling := w.slide == w.size
	for r := 0; r < n; r++ {
		route[r] = false
		if !w.valid[r] {
			if w.lateRow(true) {
				route[r], anyRoute = true, true
			}
			continue
		}
		if tumbling {
			// The common row, inline: a tumbling window the
			// watermark has not passed takes it (assignRow's first
			// case, without its call and its list of starts).
			if t := w.ts[r]; eventtime.InRange(t, w.size) {
				s := eventtime.TumblingStart(t, w.size)
				if end := s + w.size; wm < end {
					x := w.lastWin
					if s != w.lastStart || x == nil {
						x = w.window(s, false)
					}
					g := x.lookup(w.kid[r])
					if g < 0 {
						g = w.group(x, w.kid[r])
					}
					w.gids[0][r] = g
					maxEnd = max(maxEnd, end)
					continue
				}
			}
		}
		routeIt, end, err := w.assignRow(r, wm, update)
		if err != nil {
			return fail(err)
		}
		if routeIt {
			route[r], anyRoute = true, true
		}
		maxEnd = max(maxEnd, end)
	}
	w.reportDrops()
	for k := 0; k < w.perEvent; k++ {
		if err := w.acc.Update(rec, w.gids[k]); err != nil {
			return fail(err)
		}
	}
	late := w.lateUpdates(epoch)
	routed, err = routeRows(rec, route, anyRoute)
	if err != nil {
		return fail(fmt.Errorf("routing late rows: %w", err))
	}
	return w.build(late), routed, maxEnd, nil
}

// resetRows sizes the per-row assignment for n rows: one group slice per
// window an event belongs to (w.perEvent), all -1 (no group), and the
// route mask.
func (w *aligned) resetRows(n int) {
	for len(w.gids) < w.perEvent {
		w.gids = append(w.gids, nil)
	}
	for k := range w.gids {
		if cap(w.gids[k]) < n {
			w.gids[k] = make([]int32, n)
		}
		w.gids[k] = w.gids[k][:n]
		for i := range w.gids[k] {
			w.gids[k][i] = -1
		}
	}
	if cap(w.route) < n {
		w.route = make([]bool, n)
	}
}

// assignRow assigns valid row r to the groups of its windows at watermark
// wm: an open window takes it; a window the watermark has passed takes it
// only under update (within its deadline, touched for re-emission), and
// not when the row is a replay the window already holds. It returns
// whether the row is to be routed as late, and the latest end of the open
// windows that took it (eventtime.NoWatermark: none).
func (w *aligned) assignRow(r int, wm int64, update bool) (routeIt bool, maxEnd int64, err error) {
	maxEnd = eventtime.NoWatermark
	t := w.ts[r]
	if !eventtime.InRange(t, w.size) {
		return false, maxEnd, w.rangeError(r, t, w.size)
	}
	if w.slide == w.size {
		w.starts = append(w.starts[:0], eventtime.TumblingStart(t, w.size))
	} else {
		w.starts = eventtime.SlidingStarts(w.starts[:0], t, w.size, w.slide)
	}
	accepted, late, updated, replayed := false, false, false, false
	for k, s := range w.starts {
		end := s + w.size
		if wm >= end {
			if w.replayOf(end) {
				replayed = true // the window has it already
				continue
			}
			late = true
			if !update || wm >= satAdd(end, w.tm.lateness) {
				continue
			}
			x := w.window(s, true)
			g := w.group(x, w.kid[r])
			w.gids[k][r] = g
			accepted, updated = true, true
			m := slices.Index(x.members, g)
			if !x.inBatch[m] {
				x.inBatch[m] = true
				w.touched = append(w.touched, touch{x, m})
			}
			continue
		}
		x := w.window(s, false)
		w.gids[k][r] = w.group(x, w.kid[r])
		accepted = true
		maxEnd = max(maxEnd, end)
	}
	switch {
	case updated:
		w.m.lateUpdated.Add(1)
	case replayed && !accepted:
		// The first time, a window took it (the one replayed): it
		// was not late, whatever its other windows did with it.
		w.replayedRow()
	case late && !accepted:
		return w.lateRow(false), maxEnd, nil
	}
	return false, maxEnd, nil
}

// lateUpdates re-emits every window late rows touched with its corrected
// aggregates, in result order; the corrected windows are kept state and
// commit with the batch's epoch.
func (w *aligned) lateUpdates(epoch *statestore.Epoch) []result {
	var updates []result
	for _, t := range w.touched {
		t.w.inBatch[t.m] = false
		g, key := t.w.members[t.m], t.w.keys[t.m]
		updates = append(updates, result{group: g, key: key, start: t.w.start, end: t.w.start + w.size, update: t.w.emitted[t.m]})
		t.w.emitted[t.m] = true
		// The corrected window is kept state: it commits with this batch.
		w.keepState(epoch, t.w.start, key, nil, g)
	}
	sortResults(updates)
	return updates
}

// Watermark fires every window whose end the watermark reached, in order
// of end, start and first arrival of the key, then frees the windows past
// their deadline. Results are built and emitted a chunk at a time, so a
// firing of a million keys never materializes at once.
func (w *aligned) Watermark(ctx context.Context, wm int64, out ops.Emitter) error {
	w.mu.Lock()
	prev, input := w.wm, w.input
	if !w.advance(wm) {
		w.mu.Unlock()
		return nil
	}
	var firing []*win
	total := 0
	for w.ends.Len() > 0 && satAdd(w.ends[0], w.size) <= wm {
		x := w.wins[heap.Pop(&w.ends).(int64)]
		if x == nil || x.fired {
			continue
		}
		x.fired = true
		firing = append(firing, x)
		total += len(x.members)
	}
	w.m.fired.Add(int64(total))
	acks := popHeld(&w.held, wm)
	// Windows kept for late updates become committed state once their
	// output is acknowledged.
	if w.keeps() {
		var fe *statestore.Epoch
		for _, x := range firing {
			if wm >= satAdd(x.start+w.size, w.tm.lateness) {
				continue
			}
			if fe == nil {
				fe = w.journal.Begin()
			}
			for m, g := range x.members {
				w.keepState(fe, x.start, x.keys[m], nil, g)
			}
		}
		if fe != nil {
			acks = append(acks, ack.New(fe.Done))
		}
	}
	if fl, closes := w.floorAt(prev, wm, firing); total > 0 || closes {
		// The floor first: its write must precede the state commits of
		// the input this firing releases (see floor).
		acks = append([]*ack.Node{w.floor.firing(fl, w.reachedBy(wm, input), nil)}, acks...)
	}
	w.mu.Unlock()
	node := ack.Derive(acks...)
	var err error
	if total == 0 {
		node.Release(nil)
	} else {
		node.Retain((total+maxOutputRows-1)/maxOutputRows - 1)
		buf := make([]result, 0, min(total, maxOutputRows))
		flush := func() {
			if err == nil && len(buf) > 0 {
				recs := w.build(buf)
				err = emitAll(ctx, out, recs, node, ops.PortMain)
			}
			buf = buf[:0]
		}
		for _, x := range firing {
			end := x.start + w.size
			for m, g := range x.members {
				buf = append(buf, result{group: g, key: x.keys[m], start: x.start, end: end, update: x.emitted[m]})
				x.emitted[m] = true
				if len(buf) == maxOutputRows {
					flush()
				}
			}
		}
		flush()
	}
	// Free what is past its deadline: fired windows at once unless updates
	// can reach them, kept ones when the watermark reaches end + lateness.
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range firing {
		if w.keeps() && wm < satAdd(x.start+w.size, w.tm.lateness) {
			heap.Push(&w.deadlines, x.start)
		} else {
			w.close(x)
		}
	}
	var de *statestore.Epoch
	for w.deadlines.Len() > 0 && satAdd(satAdd(w.deadlines[0], w.size), w.tm.lateness) <= wm {
		if x := w.wins[heap.Pop(&w.deadlines).(int64)]; x != nil {
			if de == nil {
				de = w.journal.Begin()
			}
			for _, k := range x.keys {
				w.forget(de, x.start, k)
			}
			w.close(x)
		}
	}
	if de != nil {
		de.Done(nil)
	}
	return err
}

// floorAt returns the floor a firing at wm persists (see floor): wm,
// except for the end of time (an input that ended, or a drain: Job.Drain),
// which fires and frees every window. Its floor is the furthest deadline
// of the windows it closes (their end, plus the allowed lateness when they
// are kept for updates), never below prev: a restart resumes past them,
// so their rows are late rather than reopening them, without the end of
// time making every later row late. closes reports an end of time that
// frees kept windows, whose floor must be written even if nothing fires.
func (w *aligned) floorAt(prev, wm int64, firing []*win) (fl int64, closes bool) {
	if wm != eventtime.EndOfTime {
		return wm, false
	}
	fl = max(prev, eventtime.NoWatermark)
	deadline := func(start int64) int64 {
		end := satAdd(start, w.size)
		if w.keeps() {
			return satAdd(end, w.tm.lateness)
		}
		return end
	}
	for _, x := range firing {
		fl = max(fl, deadline(x.start))
	}
	for _, start := range w.deadlines {
		fl, closes = max(fl, deadline(start)), true
	}
	return fl, closes
}

// restore brings back a window that was kept for late updates.
func (w *aligned) restore(e statestore.Entry) error {
	start, keyBytes, err := splitKeptKey(e.Key.User)
	if err != nil {
		return err
	}
	key, err := w.keys.IDOfBytes(keyBytes)
	if err != nil {
		return err
	}
	x := w.window(start, true)
	g := w.group(x, key)
	x.emitted[len(x.emitted)-1] = true
	return w.acc.Decode(g, e.Value)
}

// Close abandons the acknowledgements still held: their rows will be
// replayed.
func (w *aligned) Close() error {
	w.closeWarnings()
	for _, h := range w.held {
		h.node.Release(ops.ErrAbandoned)
	}
	w.held = nil
	return nil
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > eventtime.EndOfTime-b {
		return eventtime.EndOfTime
	}
	return a + b
}

// Lookup implements ops.Queryable: the key's windows, open ones and fired
// ones kept for late updates, in order of end, as the rows the operator
// emits (update is true for a window that has fired).
func (w *aligned) Lookup(key []byte) (arrow.RecordBatch, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var rs []result
	if id, ok := w.keys.Find(key); ok {
		for _, x := range w.wins {
			if g := x.lookup(id); g >= 0 {
				rs = append(rs, result{group: g, key: id, start: x.start, end: x.start + w.size, update: x.fired})
			}
		}
	}
	return w.answer(rs), nil
}

// Scan implements ops.Scanner: a page of keys with their windows, as
// Lookup answers each.
func (w *aligned) Scan(q ops.ScanRequest) (ops.ScanPage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	byKey := map[int32][]result{}
	for _, x := range w.wins {
		for m, id := range x.keys {
			byKey[id] = append(byKey[id], result{group: x.members[m], key: id, start: x.start, end: x.start + w.size, update: x.fired})
		}
	}
	return w.scanPage(q, byKey), nil
}
