package window

import (
	"container/heap"
	"context"
	"fmt"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/job"
)

// aligned runs tumbling and sliding windows: windows start at multiples of
// slide (= size for tumbling) and every key has its own.
//
// Each (key, window) is a dense group of the accumulator state. A batch is
// folded in with one pass per window ordinal (an event is in at most
// ceil(size/slide) windows): rows are mapped to groups first, then every
// aggregate folds its column with one tight loop. A per-key cache of the
// last window avoids the map lookup for the common case of a key's events
// landing in its current window.
type aligned struct {
	base
	size, slide int64
	perEvent    int // the most windows one event belongs to

	groups map[pane]int32
	gKey   []int32
	gStart []int64
	gFired []bool
	gAlive []bool
	free   []int32

	byEnd     map[int64][]int32 // not yet fired windows, by end
	ends      int64Heap         // distinct keys of byEnd
	deadlines int64Heap         // end + lateness of fired, kept windows
	byDead    map[int64][]int32

	lastStart []int64 // per key: start of its cached window
	lastGroup []int32 // per key: its group

	held heldHeap

	gids    [][]int32
	starts  []int64
	route   []bool
	touched []int32
	inBatch []bool
}

type pane struct {
	key   int32
	start int64
}

func newAligned(b base, size, slide int64) *aligned {
	n := int((size + slide - 1) / slide)
	return &aligned{base: b, size: size, slide: slide, perEvent: n,
		groups: map[pane]int32{}, byEnd: map[int64][]int32{}, byDead: map[int64][]int32{}}
}

// group finds or creates the group of (key, start).
func (w *aligned) group(key int32, start int64, late bool) int32 {
	if int(key) < len(w.lastStart) && w.lastStart[key] == start {
		if g := w.lastGroup[key]; w.gAlive[g] && w.gKey[g] == key && w.gStart[g] == start {
			return g
		}
	}
	g, ok := w.groups[pane{key, start}]
	if !ok {
		if n := len(w.free); n > 0 {
			g = w.free[n-1]
			w.free = w.free[:n-1]
			w.st.Reset(int(g))
		} else {
			g = int32(len(w.gKey))
			w.gKey = append(w.gKey, 0)
			w.gStart = append(w.gStart, 0)
			w.gFired = append(w.gFired, false)
			w.gAlive = append(w.gAlive, false)
			w.inBatch = append(w.inBatch, false)
			w.st.Grow(len(w.gKey))
		}
		w.gKey[g], w.gStart[g], w.gFired[g], w.gAlive[g] = key, start, false, true
		w.groups[pane{key, start}] = g
		w.m.open.Add(1)
		end := start + w.size
		if late {
			// Created by a late row under the update policy: it is emitted
			// at once and kept until its deadline.
			w.gFired[g] = true
			w.keep(g, end)
		} else {
			if _, ok := w.byEnd[end]; !ok {
				heap.Push(&w.ends, end)
			}
			w.byEnd[end] = append(w.byEnd[end], g)
		}
	}
	for int(key) >= len(w.lastStart) {
		w.lastStart = append(w.lastStart, NoWatermark)
		w.lastGroup = append(w.lastGroup, 0)
	}
	w.lastStart[key], w.lastGroup[key] = start, g
	return g
}

// keep schedules a fired window to be freed at its deadline.
func (w *aligned) keep(g int32, end int64) {
	d := satAdd(end, w.tm.lateness)
	if _, ok := w.byDead[d]; !ok {
		heap.Push(&w.deadlines, d)
	}
	w.byDead[d] = append(w.byDead[d], g)
}

func (w *aligned) release(g int32) {
	if !w.gAlive[g] {
		return
	}
	delete(w.groups, pane{w.gKey[g], w.gStart[g]})
	w.gAlive[g] = false
	w.free = append(w.free, g)
	w.m.open.Add(-1)
}

func (w *aligned) Process(ctx context.Context, b ops.Batch, out ops.Emitter) error {
	rec := b.Rec
	if err := w.prepare(rec); err != nil {
		rec.Release()
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", w.op, err)
	}
	n := len(w.ts)
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
	route := w.route[:n]
	anyRoute := false
	maxEnd := int64(NoWatermark)
	w.touched = w.touched[:0]
	update := w.tm.policy == job.LateUpdate
	wm := w.wm
	for r := 0; r < n; r++ {
		route[r] = false
		if !w.valid[r] {
			if w.lateRow(true) {
				route[r], anyRoute = true, true
			}
			continue
		}
		t := w.ts[r]
		if !InRange(t, w.size) {
			err := &TimeError{Field: w.tm.field, Row: r, Value: t, Unit: "ms"}
			rec.Release()
			b.Ack.Release(err)
			return fmt.Errorf("operator %q: %w", w.op, err)
		}
		if w.slide == w.size {
			w.starts = append(w.starts[:0], TumblingStart(t, w.size))
		} else {
			w.starts = SlidingStarts(w.starts[:0], t, w.size, w.slide)
		}
		accepted, late, updated := false, false, false
		for k, s := range w.starts {
			end := s + w.size
			if wm >= end {
				late = true
				if !update || wm >= satAdd(end, w.tm.lateness) {
					continue
				}
				g := w.group(w.kid[r], s, true)
				w.gids[k][r] = g
				accepted, updated = true, true
				if !w.inBatch[g] {
					w.inBatch[g] = true
					w.touched = append(w.touched, g)
				}
				continue
			}
			w.gids[k][r] = w.group(w.kid[r], s, false)
			accepted = true
			maxEnd = max(maxEnd, end)
		}
		switch {
		case updated:
			w.m.lateUpdated.Add(1)
		case late && !accepted:
			if w.lateRow(false) {
				route[r], anyRoute = true, true
			}
		}
	}
	for k := 0; k < w.perEvent; k++ {
		if err := w.st.Update(rec, w.gids[k]); err != nil {
			rec.Release()
			b.Ack.Release(err)
			return fmt.Errorf("operator %q: %w", w.op, err)
		}
	}
	// Late updates: re-emit every touched window with its corrected
	// aggregates (R-TIME-8).
	var updates []result
	for _, g := range w.touched {
		w.inBatch[g] = false
		updates = append(updates, result{group: g, key: w.gKey[g], start: w.gStart[g], end: w.gStart[g] + w.size, update: true})
	}
	sortResults(updates)
	routed, err := routeRows(rec, route, anyRoute)
	if err != nil {
		rec.Release()
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: routing late rows: %w", w.op, err)
	}
	return finishBatch(ctx, b, out, w.build(updates), routed, &w.held, maxEnd)
}

// Watermark fires every window whose end the watermark reached, in order
// of end, start and key, then frees the windows past their deadline.
func (w *aligned) Watermark(ctx context.Context, wm int64, out ops.Emitter) error {
	if wm <= w.wm {
		return nil
	}
	w.wm = wm
	var fire []result
	for w.ends.Len() > 0 && w.ends[0] <= wm {
		end := heap.Pop(&w.ends).(int64)
		for _, g := range w.byEnd[end] {
			if !w.gAlive[g] || w.gFired[g] {
				continue
			}
			w.gFired[g] = true
			fire = append(fire, result{group: g, key: w.gKey[g], start: w.gStart[g], end: end})
		}
		delete(w.byEnd, end)
	}
	sortResults(fire)
	recs := w.build(fire)
	w.m.fired.Add(int64(len(fire)))
	node := ack.Derive(popHeld(&w.held, wm)...)
	for _, r := range fire {
		if w.tm.lateness > 0 && wm < satAdd(r.end, w.tm.lateness) {
			w.keep(r.group, r.end)
		} else {
			w.release(r.group)
		}
	}
	for w.deadlines.Len() > 0 && w.deadlines[0] <= wm {
		d := heap.Pop(&w.deadlines).(int64)
		for _, g := range w.byDead[d] {
			w.release(g)
		}
		delete(w.byDead, d)
	}
	if len(recs) == 0 {
		node.Release(nil)
		return nil
	}
	node.Retain(len(recs) - 1)
	return emitAll(ctx, out, recs, node, ops.PortMain)
}

// Close abandons the acknowledgements still held: their rows will be
// replayed.
func (w *aligned) Close() error {
	for _, h := range w.held {
		h.node.Release(ops.ErrAbandoned)
	}
	w.held = nil
	return nil
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > EndOfTime-b {
		return EndOfTime
	}
	return a + b
}
