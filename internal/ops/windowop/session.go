package windowop

import (
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// sessions runs session windows: per key, a session spans [first event,
// last event + gap); an event within gap of a session extends it, and an
// event that bridges two sessions merges them into one, whose aggregates
// combine both. A merged session fires once, when the
// watermark reaches its end.
type sessions struct {
	base
	gap   int64
	byKey map[int32][]*session
	ends  sessionHeap
	batch uint64 // sequence of the batch being processed

	firingEpoch *statestore.Epoch // kept sessions of the firing being emitted
	curEpoch    *statestore.Epoch // the epoch of the batch being processed
	gid         []int32
	route       []bool

	// perKey: replayed rows are told from live ones by each key's floor
	// (sessionFloorNamespace), not by the operator-wide floor; not under
	// the update policy, whose kept sessions take late rows (there the
	// operator-wide floor applies, as for aligned windows).
	perKey bool
	// firedTo holds each key's floor: the last event time of its last
	// fired session (absent: none), all of them read from the store when
	// the operator starts. floorEnds orders them by end (last + gap) for
	// their removal: a floor is needed only while a restore could replay
	// rows of its session at a watermark below the session's end; once
	// the last completed checkpoint recorded a watermark at or past that
	// end (every restore from it or a later one starts there, and the
	// session's rows are then late by the watermark alone), it is
	// removed. Without checkpoints floors stay.
	firedTo   map[int32]int64
	floorEnds floorHeap
	ckptWM    func() (int64, bool)

	// mu is held while the task changes what a query reads (the key
	// table, the sessions and their accumulators), and by queries.
	mu sync.Mutex
}

// floorAt is a key's floor in floorEnds (stale once the key's floor has
// moved on).
type floorAt struct {
	end, last int64
	key       int32
}

type floorHeap []floorAt

func (h floorHeap) Len() int           { return len(h) }
func (h floorHeap) Less(i, j int) bool { return h[i].end < h[j].end }
func (h floorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *floorHeap) Push(x any)        { *h = append(*h, x.(floorAt)) }
func (h *floorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type session struct {
	// stored: the session is kept state, under storedStart.
	stored      bool
	storedStart int64

	key     int32
	start   int64
	last    int64 // latest event time; end = last + gap
	group   int32
	fired   bool // its end has been reached (it is not waiting in ends)
	emitted bool // it has been emitted at least once
	alive   bool
	acks    []*ack.Node
	ackOf   uint64 // batch sequence of the last ack appended
}

func (s *session) end(gap int64) int64 { return satAdd(s.last, gap) }

func newSessions(b base, gap int64, ckptWM func() (int64, bool)) *sessions {
	w := &sessions{base: b, gap: gap, byKey: map[int32][]*session{}, firedTo: map[int32]int64{}, ckptWM: ckptWM}
	if b.tm.policy != job.LateUpdate {
		// The operator-wide floor would make early rows of sessions
		// still open at the crash late; each key's floor is used instead.
		w.perKey, w.wm = true, eventtime.NoWatermark
	}
	return w
}

// loadFloor takes one persisted key floor (at start).
func (w *sessions) loadFloor(e statestore.Entry) error {
	last, ok := DecodeFloor(e.Value)
	if !ok {
		return fmt.Errorf("malformed session floor (%d bytes)", len(e.Value))
	}
	key, err := w.keys.IDOfBytes(e.Key.User)
	if err != nil {
		return err
	}
	w.setFloor(key, last)
	return nil
}

func (w *sessions) setFloor(key int32, last int64) {
	if to, ok := w.firedTo[key]; ok && to >= last {
		return
	}
	w.firedTo[key] = last
	heap.Push(&w.floorEnds, floorAt{end: satAdd(last, w.gap), last: last, key: key})
}

// expiredFloors removes the key floors no restore needs any more (see
// firedTo) and returns their deletions.
func (w *sessions) expiredFloors() []statestore.Mutation {
	if w.ckptWM == nil || w.floorEnds.Len() == 0 {
		return nil
	}
	wm, ok := w.ckptWM()
	if !ok {
		return nil
	}
	var dels []statestore.Mutation
	for w.floorEnds.Len() > 0 && w.floorEnds[0].end <= wm {
		f := heap.Pop(&w.floorEnds).(floorAt)
		if to, ok := w.firedTo[f.key]; !ok || to != f.last {
			continue // stale: the key's floor moved on
		}
		delete(w.firedTo, f.key)
		dels = append(dels, statestore.Mutation{Key: w.sessionFloorKey(f.key), Delete: true})
	}
	return dels
}

// sessionFloorKey is the state key of key's floor.
func (w *sessions) sessionFloorKey(key int32) statestore.Key {
	k := w.floor.key
	k.Namespace, k.KeyGroup, k.User = sessionFloorNamespace, w.keys.GroupWith(key, w.groups), append([]byte(nil), w.keys.Bytes(key)...)
	return k
}

// firedUpTo returns key's floor (eventtime.NoWatermark: none).
func (w *sessions) firedUpTo(key int32) int64 {
	if v, ok := w.firedTo[key]; ok {
		return v
	}
	return eventtime.NoWatermark
}

func (w *sessions) newGroup() int32 { return w.acc.Alloc() }

func (w *sessions) drop(s *session) {
	if s.stored {
		// It was kept state: remove it with the batch being processed, or
		// on its own when it goes at its deadline.
		e := w.curEpoch
		if e == nil {
			e = w.journal.Begin()
			defer e.Done(nil)
		}
		w.forget(e, s.storedStart, s.key)
		s.stored = false
	}
	s.alive = false
	w.acc.Free([]int32{s.group})
	w.m.open.Add(-1)
}

// flush folds the rows assigned so far into their groups and clears the
// assignment. It must run before groups merge or move.
func (w *sessions) flush(b ops.Batch, dirty *bool) error {
	if !*dirty {
		return nil
	}
	if err := w.acc.Update(b.Rec, w.gid); err != nil {
		return err
	}
	for i := range w.gid {
		w.gid[i] = -1
	}
	*dirty = false
	return nil
}

// Process assigns a batch's rows to their keys' sessions (starting,
// extending or merging them), skips rows a restore replays and handles
// late ones by the late policy, folds the rows into the sessions'
// groups, emits the sessions late rows updated and routes late rows. The
// batch's acknowledgement is held by every live session it fed, until it
// fires.
func (w *sessions) Process(ctx context.Context, b ops.Batch, out ops.Emitter) error {
	b, epoch, err := w.begin(b)
	if err != nil || b.Rec == nil {
		return err
	}
	w.curEpoch = epoch
	defer func() { w.curEpoch = nil }()
	fail := func(err error) error {
		w.mu.Unlock()
		b.Rec.Release()
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", w.op, err)
	}
	w.mu.Lock()
	if err := w.prepare(b.Rec); err != nil {
		return fail(err)
	}
	w.batch++
	n := len(w.ts)
	if cap(w.gid) < n {
		w.gid, w.route = make([]int32, n), make([]bool, n)
	}
	w.gid, w.route = w.gid[:n], w.route[:n]
	for i := range w.gid {
		w.gid[i], w.route[i] = -1, false
	}
	sb := &sessionBatch{b: b, update: w.tm.policy == job.LateUpdate, wm: w.wm}
	for r := 0; r < n; r++ {
		if err := w.assignRow(sb, r); err != nil {
			return fail(err)
		}
	}
	w.reportDrops()
	if err := w.flush(b, &sb.dirty); err != nil {
		return fail(err)
	}
	refs := 0
	for _, s := range sb.pending {
		if s.alive && s.ackOf == w.batch {
			s.acks = append(s.acks, b.Ack)
			refs++
		}
	}
	updates := w.lateUpdates(epoch, sb.touched)
	routed, err := routeRows(b.Rec, w.route, sb.anyRoute)
	if err != nil {
		return fail(err)
	}
	recs := w.build(updates)
	w.mu.Unlock()
	total := refs + len(recs) + len(routed)
	if total == 0 {
		b.Rec.Release()
		b.Ack.Release(nil)
		return nil
	}
	b.Ack.Retain(total - 1)
	b.Rec.Release()
	for i, r := range recs {
		if err := out.Emit(ctx, ops.Batch{Rec: r, Ack: b.Ack}); err != nil {
			for _, x := range append(recs[i+1:], routed...) {
				x.Release()
			}
			return err
		}
	}
	return emitAll(ctx, out, routed, b.Ack, ops.PortLate)
}

// sessionBatch is what Process keeps while it assigns one batch's rows.
type sessionBatch struct {
	b        ops.Batch
	update   bool       // the late policy is update
	wm       int64      // the watermark the rows are classified against
	anyRoute bool       // some row goes to the late port
	dirty    bool       // rows were assigned since the last flush
	touched  []*session // sessions to emit now (late updates)
	pending  []*session // sessions holding this batch's acknowledgement
}

// hold records that s holds the batch's acknowledgement (once per batch).
func (w *sessions) hold(sb *sessionBatch, s *session) {
	if s.ackOf != w.batch {
		s.ackOf = w.batch
		sb.pending = append(sb.pending, s)
	}
}

// assignRow assigns row r to its key's session, or skips it: a row
// without a time or late is routed or dropped by the late policy, a
// replayed one is counted. A row joining a session the watermark has
// passed (late, within the deadline under update) marks it for emission
// now; any other row reschedules its session's firing when its end moved
// and makes it hold the batch's acknowledgement.
func (w *sessions) assignRow(sb *sessionBatch, r int) error {
	if !w.valid[r] {
		if w.lateRow(true) {
			w.route[r], sb.anyRoute = true, true
		}
		return nil
	}
	t := w.ts[r]
	if !eventtime.InRange(t, w.gap) {
		return w.rangeError(r, t, w.gap)
	}
	k := w.kid[r]
	list := w.byKey[k]
	// Sessions the event's own window [t, t+gap) overlaps. A key's
	// sessions are disjoint and sorted, so their ends are too.
	lo := sort.Search(len(list), func(i int) bool { return list[i].end(w.gap) > t })
	hi := lo
	for hi < len(list) && list[hi].start < t+w.gap {
		hi++
	}
	overlap := list[lo:hi]
	if w.perKey && len(overlap) == 0 {
		// At or before the key's floor and joining no open session:
		// a replayed row of a fired session, or one as late as that
		// session's end, which the watermark had passed.
		if t <= w.firedUpTo(k) {
			// Which of the two the watermark tells: the first time,
			// a late row met one past its own window [t, t+gap)
			// (the session fired at last+gap >= t+gap, and the
			// watermark never moves back), a row of the session
			// one before it; a restart re-reads the row at the
			// watermark it met then (see base.replayOf).
			if w.replayOf(satAdd(t, w.gap)) {
				w.replayedRow()
			} else if w.lateRow(false) {
				w.route[r], sb.anyRoute = true, true
			}
			return nil
		}
	}
	end := t + w.gap
	anyEmitted := false
	for _, s := range overlap {
		end = max(end, s.end(w.gap))
		anyEmitted = anyEmitted || s.emitted
	}
	// Late: the merged window's end is already behind the watermark
	// (then every session it touches has fired); a replay when only
	// the restored floor put it there (base.replayOf).
	late := sb.wm >= end
	if late && w.replayOf(end) {
		w.replayedRow()
		return nil
	}
	if late && (!sb.update || sb.wm >= satAdd(end, w.tm.lateness)) {
		if w.lateRow(false) {
			w.route[r], sb.anyRoute = true, true
		}
		return nil
	}
	s, reschedule, err := w.join(sb, k, t, lo, hi, anyEmitted)
	if err != nil {
		return err
	}
	w.gid[r] = s.group
	sb.dirty = true
	if late {
		// Within the deadline under update: emitted now and kept
		// until its deadline.
		w.m.lateUpdated.Add(1)
		s.fired = true
		if !containsSession(sb.touched, s) {
			sb.touched = append(sb.touched, s)
		}
		return nil
	}
	if reschedule {
		s.fired = false
		heap.Push(&w.ends, sessionAt{end: s.end(w.gap), s: s})
	}
	w.hold(sb, s)
	return nil
}

// join returns the session of key k that an event at t joins, given the
// key's sessions [lo, hi) it overlaps: a new one when it overlaps none,
// the one it overlaps extended to t, or, when it bridges several, the
// first with the others merged into it (their groups, acknowledgements
// and emitted flag; the rows assigned so far are folded first).
// reschedule reports that the session's end changed or it had fired, so
// its firing must be scheduled again.
func (w *sessions) join(sb *sessionBatch, k int32, t int64, lo, hi int, anyEmitted bool) (s *session, reschedule bool, err error) {
	list := w.byKey[k]
	overlap := list[lo:hi]
	switch len(overlap) {
	case 0:
		s = &session{key: k, start: t, last: t, group: w.newGroup(), alive: true}
		w.m.open.Add(1)
		list = append(list, nil)
		copy(list[lo+1:], list[lo:])
		list[lo] = s
		reschedule = true
	case 1:
		s = overlap[0]
		old := s.end(w.gap)
		s.start, s.last = min(s.start, t), max(s.last, t)
		reschedule = s.fired || s.end(w.gap) != old
	default:
		// The event bridges sessions: fold them into the first.
		if err := w.flush(sb.b, &sb.dirty); err != nil {
			return nil, false, err
		}
		s = overlap[0]
		for _, o := range overlap[1:] {
			if err := w.acc.Merge(s.group, o.group); err != nil {
				return nil, false, err
			}
			s.last = max(s.last, o.last)
			s.acks = append(s.acks, o.acks...)
			o.acks = nil
			if o.ackOf == w.batch {
				w.hold(sb, s)
			}
			w.drop(o)
		}
		s.start, s.last = min(s.start, t), max(s.last, t)
		s.emitted = anyEmitted
		list = append(list[:lo+1], list[hi:]...)
		reschedule = true
	}
	w.byKey[k] = list
	return s, reschedule, nil
}

// lateUpdates returns the results of the sessions late rows touched that
// are still fired, in result order. Each is kept until its deadline and
// persisted with the batch's epoch.
func (w *sessions) lateUpdates(epoch *statestore.Epoch, touched []*session) []result {
	var updates []result
	for _, s := range touched {
		// A later row of the batch may have extended the session past the
		// watermark (it is no longer fired): it fires at its new end, not
		// now, which would emit a window the watermark has not closed.
		if !s.alive || !s.fired {
			continue
		}
		updates = append(updates, result{group: s.group, key: s.key, start: s.start, end: s.end(w.gap), update: s.emitted})
		s.emitted = true
		w.keepUntilDeadline(s)
		w.persist(epoch, s)
	}
	sortResults(updates)
	return updates
}

func containsSession(list []*session, s *session) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// keepUntilDeadline schedules a fired session's removal at end + lateness.
func (w *sessions) keepUntilDeadline(s *session) {
	heap.Push(&w.ends, sessionAt{end: satAdd(s.end(w.gap), w.tm.lateness), s: s, deadline: true})
}

// Watermark fires the sessions whose end the watermark reached and removes
// those past their deadline.
func (w *sessions) Watermark(ctx context.Context, wm int64, out ops.Emitter) error {
	// closedTo is, at the end of time (an input that ended, or a drain),
	// the furthest deadline of the sessions it closes: the floor it
	// persists instead of the end of time (see aligned.floorAt).
	closedTo, closes := max(w.wm, eventtime.NoWatermark), false
	w.mu.Lock()
	input := w.input
	if !w.advance(wm) {
		w.mu.Unlock()
		return nil
	}
	fired, acks, closedTo, closes := w.due(wm, closedTo, closes)
	if w.keeps() {
		w.firingEpoch = w.persistKept(wm, fired)
	}
	fire, keyFloors, closedTo := w.fireResults(wm, fired, closedTo)
	sortResults(fire)
	recs := w.build(fire)
	w.m.fired.Add(int64(len(fire)))
	for _, s := range fired {
		if w.keeps() && wm < satAdd(s.end(w.gap), w.tm.lateness) {
			w.keepUntilDeadline(s)
		} else {
			w.remove(s)
		}
	}
	if fe := w.firingEpoch; fe != nil {
		w.firingEpoch = nil
		acks = append(acks, ack.New(fe.Done))
	}
	w.mu.Unlock()
	fl := wm
	if wm == eventtime.EndOfTime {
		fl = closedTo
	} else {
		closes = false
	}
	if len(recs) > 0 || closes {
		// The floor first: its write must precede the state commits of
		// the input this firing releases (see floor).
		acks = append([]*ack.Node{w.floor.firing(fl, w.reachedBy(wm, input), keyFloors)}, acks...)
	}
	node := ack.Derive(acks...)
	if len(recs) == 0 {
		node.Release(nil)
		return nil
	}
	node.Retain(len(recs) - 1)
	return emitAll(ctx, out, recs, node, ops.PortMain)
}

// due pops the sessions the watermark wm has reached: those whose end it
// reached fire (they are returned with the acknowledgements they held),
// and those whose deadline it reached are removed, which moves closedTo
// to their deadline and sets closes. Stale entries (a session that grew,
// fired already, or is gone) are skipped.
func (w *sessions) due(wm, closedTo int64, closes bool) (fired []*session, acks []*ack.Node, _ int64, _ bool) {
	for w.ends.Len() > 0 && w.ends[0].end <= wm {
		e := heap.Pop(&w.ends).(sessionAt)
		s := e.s
		if !s.alive {
			continue
		}
		if e.deadline {
			if s.fired && satAdd(s.end(w.gap), w.tm.lateness) == e.end {
				closedTo, closes = max(closedTo, e.end), true
				w.remove(s)
			}
			continue
		}
		if s.fired || s.end(w.gap) != e.end {
			continue // stale entry: the session grew or already fired
		}
		s.fired = true
		fired = append(fired, s)
		acks = append(acks, s.acks...)
		s.acks = nil
	}
	return fired, acks, closedTo, closes
}

// persistKept stages the state of the fired sessions kept for late
// updates (their deadline is after wm) in one epoch of the firing, and
// returns it (nil when none is kept).
func (w *sessions) persistKept(wm int64, fired []*session) *statestore.Epoch {
	var fe *statestore.Epoch
	for _, s := range fired {
		if wm < satAdd(s.end(w.gap), w.tm.lateness) {
			if fe == nil {
				fe = w.journal.Begin()
			}
			w.persist(fe, s)
		}
	}
	return fe
}

// fireResults returns the results of the fired sessions (in firing
// order), and, with per-key floors, the floor writes of their keys
// followed by the deletions of the floors no restore needs any more.
// closedTo moves to each session's deadline (its end when nothing is
// kept).
func (w *sessions) fireResults(wm int64, fired []*session, closedTo int64) ([]result, []statestore.Mutation, int64) {
	fire := make([]result, len(fired))
	var keyFloors []statestore.Mutation
	for i, s := range fired {
		if w.keeps() {
			closedTo = max(closedTo, satAdd(s.end(w.gap), w.tm.lateness))
		} else {
			closedTo = max(closedTo, s.end(w.gap))
		}
		fire[i] = result{group: s.group, key: s.key, start: s.start, end: s.end(w.gap), update: s.emitted}
		s.emitted = true
		if w.perKey {
			last := s.last
			if wm == eventtime.EndOfTime {
				// The end of time closes the session for good: a row
				// after a restart that would have joined it (before its
				// end) is late, as for aligned windows, instead of
				// starting a session with part of its rows.
				last = max(last, s.end(w.gap)-1)
			}
			w.setFloor(s.key, last)
			keyFloors = append(keyFloors, statestore.Mutation{Key: w.sessionFloorKey(s.key), Value: binary.BigEndian.AppendUint64(nil, uint64(last))})
		}
	}
	if w.perKey && len(fired) > 0 {
		// Deletions go with the firing's floor write, after its new
		// floors (a floor written and expired at once ends deleted).
		keyFloors = append(keyFloors, w.expiredFloors()...)
	}
	return fire, keyFloors, closedTo
}

// persist stages a kept session's state; a session whose start moved is
// removed under its old start.
func (w *sessions) persist(e *statestore.Epoch, s *session) {
	if s.stored && s.storedStart != s.start {
		w.forget(e, s.storedStart, s.key)
	}
	var last [8]byte
	binary.BigEndian.PutUint64(last[:], uint64(s.last))
	w.keepState(e, s.start, s.key, last[:], s.group)
	s.stored, s.storedStart = true, s.start
}

// restore brings back a session that was kept for late updates.
func (w *sessions) restore(e statestore.Entry) error {
	start, keyBytes, err := splitKeptKey(e.Key.User)
	if err != nil {
		return err
	}
	if len(e.Value) < 8 {
		return fmt.Errorf("malformed kept session (%d bytes)", len(e.Value))
	}
	key, err := w.keys.IDOfBytes(keyBytes)
	if err != nil {
		return err
	}
	s := &session{key: key, start: start, last: int64(binary.BigEndian.Uint64(e.Value)), group: w.newGroup(), fired: true, emitted: true, alive: true, stored: true, storedStart: start}
	if err := w.acc.Decode(s.group, e.Value[8:]); err != nil {
		return err
	}
	w.m.open.Add(1)
	list := w.byKey[key]
	i := sort.Search(len(list), func(i int) bool { return list[i].start > start })
	list = append(list, nil)
	copy(list[i+1:], list[i:])
	list[i] = s
	w.byKey[key] = list
	w.keepUntilDeadline(s)
	return nil
}

// remove frees a session and takes it out of its key's list.
func (w *sessions) remove(s *session) {
	list := w.byKey[s.key]
	for i, x := range list {
		if x == s {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(w.byKey, s.key)
	} else {
		w.byKey[s.key] = list
	}
	w.drop(s)
}

func (w *sessions) Close() error {
	w.closeWarnings()
	for _, list := range w.byKey {
		for _, s := range list {
			for _, a := range s.acks {
				a.Release(ops.ErrAbandoned)
			}
			s.acks = nil
		}
	}
	return nil
}

type sessionAt struct {
	end      int64
	s        *session
	deadline bool
}

type sessionHeap []sessionAt

func (h sessionHeap) Len() int { return len(h) }
func (h sessionHeap) Less(i, j int) bool {
	if h[i].end != h[j].end {
		return h[i].end < h[j].end
	}
	return !h[i].deadline && h[j].deadline // fire before freeing
}
func (h sessionHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sessionHeap) Push(x any)   { *h = append(*h, x.(sessionAt)) }
func (h *sessionHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Lookup implements ops.Queryable: the key's sessions, open ones and
// fired ones kept for late updates, in order of end, as the rows the
// operator emits (update is true for a session that has fired).
func (w *sessions) Lookup(key []byte) (arrow.RecordBatch, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var rs []result
	if id, ok := w.keys.Find(key); ok {
		for _, s := range w.byKey[id] {
			if s.alive {
				rs = append(rs, result{group: s.group, key: id, start: s.start, end: s.end(w.gap), update: s.fired})
			}
		}
	}
	return w.answer(rs), nil
}

// Scan implements ops.Scanner: a page of keys with their sessions, as
// Lookup answers each.
func (w *sessions) Scan(q ops.ScanRequest) (ops.ScanPage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	byKey := map[int32][]result{}
	for id, list := range w.byKey {
		for _, s := range list {
			if s.alive {
				byKey[id] = append(byKey[id], result{group: s.group, key: id, start: s.start, end: s.end(w.gap), update: s.fired})
			}
		}
	}
	return w.scanPage(q, byKey), nil
}
