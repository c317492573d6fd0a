package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/arkflow-rs/arkflow-go/job"
)

// PositionsNamespace holds, per operator subtask, the input it has applied
// to its committed state: for every (source, partition), the offset below
// which every row that reached the operator is in committed state.
const PositionsNamespace = "__arkflow_positions"

// Journal stages the state mutations of one operator subtask per epoch
// (one input batch, or one firing) and commits epochs to the backend in
// order, each only once the output it produced has been acknowledged.
// Reads see staged mutations first, then committed state.
//
// A failed epoch (its output was not acknowledged) stops all commits: the
// staged mutations of it and of every later epoch are dropped, and the
// task fails; a restart rebuilds them by replaying the input from the
// committed positions. Each epoch also records the input range it covers,
// committed with its mutations in the same write, so a replay of input
// already applied is recognised (Applied) and never committed twice.
//
// A Journal is safe for concurrent use: the operator stages and reads from
// its goroutine while acknowledgements commit from the sinks'.
type Journal struct {
	b         Backend
	job, op   string
	posGroup  int
	mu        sync.Mutex
	pending   []*Epoch
	overlay   map[string]staged
	next      uint64
	failed    error
	applied   map[position]int64 // committed frontier
	committed int64              // epochs committed
	// inherited are the frontiers of the key groups this subtask took
	// over in a rescale (see InheritedNamespace), by position, sorted by
	// key group; read-only after NewJournal.
	inherited map[position]spans
	// held are committed puts staged by PutUnread that a memory backend
	// has not been given yet, in commit order; cancelled counts those a
	// DeleteUnread cancelled. A memory store does not outlive the
	// process, so what it must hold is only what a read or a
	// checkpoint's freeze sees, and the backend has the puts applied
	// before either (flushDeferred): a row put and deleted between two of
	// those never reaches it. The puts are tracked by handle (Held), not
	// by key, so holding one back costs no hashing. deferTo is nil for
	// other backends, which get every mutation at commit, with the
	// positions it covers.
	held      []*Held
	cancelled int
	deferTo   deferrer
	// flushes counts flushDeferred's runs, lastCommitted is the ID of
	// the last epoch committed (see unreadOp and Held.del).
	flushes       uint64
	lastCommitted uint64
	lazyNS        []string // the namespaces of lazy puts (Held.ns)
}

// unreadOp is a PutUnread (h) or a DeleteUnread (del; h the put it
// undoes, or nil, and key the delete's key when h is nil) of a deferring
// journal.
//
// A delete by handle records, when it is staged, whether its put had been
// given to the backend (applied) and how many flushes there had been
// (gen): committing it then needs no look at the handle unless a flush
// ran in between (see Held.del).
type unreadOp struct {
	h       *Held
	del     bool
	applied bool
	gen     uint64
	key     *Key
}

// Held is a put staged by PutUnread: the handle DeleteUnread takes to
// cancel it while the backend has not been given it. nil when the journal
// gives its backend every mutation at commit.
//
// It is small (40 bytes, its state first) so that an operator can keep
// it beside what it reads when it deletes the row (PutLazy).
type Held struct {
	state uint8 // heldStaged, heldPending, heldApplied or heldCancelled; under the journal's mu
	ns    uint8 // a lazy put's namespace, by index in the journal's lazyNS
	group int32 // a lazy put's key group
	// del is the epoch of the DeleteUnread of the put (0: none). Once it
	// has committed, a held put is dead: a flush skips it, without the
	// delete's commit having marked it cancelled.
	del uint64
	// lazy, for a put staged by PutLazy, encodes the key's user bytes
	// and the value when the backend is given the put (nil after).
	lazy Lazy
	mut  *Mutation // nil while lazy
}

// lazyNamespace returns the index of ns in the namespaces of lazy puts,
// adding it. An operator has a few namespaces; it panics past 256.
func (j *Journal) lazyNamespace(ns string) uint8 {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, n := range j.lazyNS {
		if n == ns {
			return uint8(i)
		}
	}
	if len(j.lazyNS) == 256 {
		panic("statestore: more than 256 namespaces of lazy puts in one journal")
	}
	j.lazyNS = append(j.lazyNS, ns)
	return uint8(len(j.lazyNS) - 1)
}

// heldPut is a PutUnread's handle beside its mutation.
type heldPut struct {
	h Held
	m Mutation
}

// encode has a lazy put's entry encoded into arena's free room (or a new
// arena), which it returns. Callers hold mu.
func (j *Journal) encode(h *Held, arena []byte) []byte {
	if h.lazy == nil {
		return arena
	}
	if cap(arena)-len(arena) < 1024 {
		arena = make([]byte, 0, 64<<10)
	}
	start := len(arena)
	arena, n := h.lazy.AppendEntry(arena)
	h.mut = &Mutation{Key: j.key(j.lazyNS[h.ns], int(h.group), arena[start:start+n:start+n]), Value: arena[start+n : len(arena) : len(arena)]}
	h.lazy = nil
	return arena
}

// Lazy is an entry PutLazy stages without encoding it.
type Lazy interface {
	// AppendEntry appends the entry's user key and then its value to dst
	// and returns dst and the user key's length. It is called at most
	// once, under the journal's lock, by whichever goroutine gives the
	// backend the put.
	AppendEntry(dst []byte) ([]byte, int)
}

const (
	heldStaged    = iota // in an epoch not committed yet
	heldPending          // committed, held back from the backend
	heldApplied          // given to the backend
	heldCancelled        // deleted before the backend was given it
)

// deferrer is a backend journals may hold unread mutations back from.
type deferrer interface {
	deferTo(j *Journal)
	undefer(j *Journal)
}

type staged struct {
	epoch uint64
	mut   Mutation
}

type position struct {
	source    string
	partition int32
}

// Epoch is one unit of staged mutations.
type Epoch struct {
	j    *Journal
	id   uint64
	muts []Mutation
	// unread are the PutUnread and DeleteUnread of a deferring journal,
	// in order (not in muts): the handle of each put, or of the delete
	// (whose mut is the delete) and of the put it undoes.
	unread []unreadOp
	// blind are the PutUnread and DeleteUnread of a journal that gives its
	// backend every mutation at commit (not in the overlay).
	blind []Mutation
	// helds is where PutUnread takes its handles from, a chunk at a time.
	helds []heldPut
	// scratch is where PutLazy encodes an entry it stages at once.
	scratch []byte
	// arena holds the staged keys and values, copied in by the staging
	// goroutine; a full arena is replaced, never moved, so the slices of
	// muts into it stay valid.
	arena   []byte
	ranges  map[position]int64 // end (exclusive) of the input covered
	done    bool
	err     error
	settled []func(error)
}

// OnSettled registers fn to run once the epoch is settled: committed (nil)
// or dropped (the journal's failure). An operator releases its input's
// acknowledgement here, so that the WAL cursor and the source commit follow
// the state commit, never precede it. fn runs without the
// journal's lock held.
func (e *Epoch) OnSettled(fn func(error)) {
	e.j.mu.Lock()
	defer e.j.mu.Unlock()
	e.settled = append(e.settled, fn)
}

// NewJournal returns the journal of one operator subtask, loading its
// committed positions: its own, stored under the first of its key groups,
// and those it inherited for ranges of them in a rescale
// (InheritedNamespace).
func NewJournal(b Backend, jobID, operator string, groups job.KeyGroupRange) (*Journal, error) {
	j := &Journal{b: b, job: jobID, op: operator, posGroup: groups.Start, overlay: map[string]staged{}, applied: map[position]int64{}}
	if d, ok := b.(deferrer); ok {
		j.deferTo = d
	}
	scope := Scope{Job: jobID, Operator: operator}
	scope.Groups.Start, scope.Groups.End = groups.Start, groups.Start
	err := ScanNamespace(b, scope, PositionsNamespace, nil, 0, func(e Entry) error {
		p, off, err := decodePosition(e.Key.User, e.Value)
		if err != nil {
			return fmt.Errorf("operator %q: reading its applied positions: %w", operator, err)
		}
		j.applied[p] = off
		return nil
	})
	if err != nil {
		return nil, err
	}
	if j.inherited, err = loadInherited(b, jobID, operator, groups); err != nil {
		return nil, fmt.Errorf("operator %q: reading its inherited positions: %w", operator, err)
	}
	return j, nil
}

func positionKey(p position) []byte {
	k := binary.BigEndian.AppendUint32(nil, uint32(p.partition))
	return append(k, p.source...)
}

func decodePosition(key, value []byte) (position, int64, error) {
	if len(key) < 4 || len(value) != 8 {
		return position{}, 0, fmt.Errorf("malformed position entry")
	}
	return position{source: string(key[4:]), partition: int32(binary.BigEndian.Uint32(key))}, int64(binary.BigEndian.Uint64(value)), nil
}

// Applied returns the offset below which the rows of (source, partition)
// that reach this operator are already in committed state: a replay skips
// them.
func (j *Journal) Applied(source string, partition int32) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if off, ok := j.applied[position{source, partition}]; ok {
		return off
	}
	return -1 << 63
}

// Inherited returns the highest offset below which the journal inherited
// rows of (source, partition) as committed for some of its key groups in a
// rescale (see AppliedIn), and false when it inherited none.
func (j *Journal) Inherited(source string, partition int32) (int64, bool) {
	sp, ok := j.inherited[position{source, partition}]
	if !ok {
		return 0, false
	}
	return sp.max(), true
}

// AppliedIn is Applied for the rows of (source, partition) whose key lies
// in key group group: the subtask's own frontier, or the one it inherited
// for the group in a rescale, whichever is higher.
func (j *Journal) AppliedIn(source string, partition int32, group int) int64 {
	own := j.Applied(source, partition)
	if off, ok := j.inherited[position{source, partition}].at(group); ok && off > own {
		return off
	}
	return own
}

// Begin starts an epoch. Epochs commit in the order they began.
func (j *Journal) Begin() *Epoch {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.next++
	e := &Epoch{j: j, id: j.next}
	j.pending = append(j.pending, e)
	return e
}

func (j *Journal) key(ns string, group int, user []byte) Key {
	return Key{Job: j.job, Operator: j.op, Namespace: ns, KeyGroup: group, User: user}
}

// Put stages a value (expiresAt: Unix ms, 0 = never).
func (e *Epoch) Put(ns string, group int, user, value []byte, expiresAt int64) {
	m := Mutation{Key: e.j.key(ns, group, e.copy(user)), Value: e.copy(value), ExpiresAt: expiresAt}
	e.stage(m)
	e.j.read(e, m)
}

// Delete stages the removal of a key.
func (e *Epoch) Delete(ns string, group int, user []byte) {
	m := Mutation{Key: e.j.key(ns, group, e.copy(user)), Delete: true}
	e.stage(m)
	e.j.read(e, m)
}

// PutUnread is Put for state the operator keeps in memory and reads from
// the store only when it starts (Scan), of a key it has not put since it
// was last deleted (each row it keeps, under a key of its own): the
// mutation commits like any other, but Get and ScanPrefix do not see it
// before it does. On a memory backend the put may stay in the journal
// until something reads the store (see Journal), and DeleteUnread given
// the returned handle then cancels it. A key must not be staged both
// ways.
func (e *Epoch) PutUnread(ns string, group int, user, value []byte) *Held {
	m := Mutation{Key: e.j.key(ns, group, e.copy(user)), Value: e.copy(value)}
	if e.j.deferTo == nil {
		e.stageBlind(m)
		return nil
	}
	if len(e.helds) == 0 {
		e.helds = make([]heldPut, max(16, min(256, cap(e.unread)-len(e.unread))))
	}
	hp := &e.helds[0]
	e.helds = e.helds[1:]
	hp.m = m
	hp.h.mut = &hp.m
	e.stageUnread(unreadOp{h: &hp.h})
	return &hp.h
}

// PutLazy is PutUnread of an entry that v encodes only if the backend is
// given it: on a memory backend a row put and deleted between two reads
// or checkpoints is never encoded. v must stay readable until the put
// settles: until the epoch of a DeleteUnread given the returned handle
// has settled (Epoch.OnSettled), or the journal failed or closed.
//
// The handle is h, memory of the caller's (a kept row's own, so that
// cancelling the put reads what deleting the row just read), unless the
// backend is given every mutation at commit: then the entry is encoded
// at once and PutLazy returns nil.
func (e *Epoch) PutLazy(ns string, group int, v Lazy, h *Held) *Held {
	if e.j.deferTo == nil {
		b, n := v.AppendEntry(e.scratch[:0])
		e.scratch = b
		e.stageBlind(Mutation{Key: e.j.key(ns, group, e.copy(b[:n])), Value: e.copy(b[n:])})
		return nil
	}
	*h = Held{ns: e.j.lazyNamespace(ns), group: int32(group), lazy: v}
	e.stageUnread(unreadOp{h: h})
	return h
}

// LazyPut is a put of PutLazyAll: PutLazy's arguments.
type LazyPut struct {
	Group int
	V     Lazy
	H     *Held
}

// PutLazyAll is PutLazy of every put, in order, taking the journal's lock
// once. It reports whether the handles (each put's H) are the puts':
// false when the backend is given every mutation at commit (PutLazy
// returns nil).
func (e *Epoch) PutLazyAll(ns string, puts []LazyPut) bool {
	j := e.j
	if j.deferTo == nil {
		for _, p := range puts {
			e.PutLazy(ns, p.Group, p.V, p.H)
		}
		return false
	}
	nsi := j.lazyNamespace(ns)
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, p := range puts {
		*p.H = Held{ns: nsi, group: int32(p.Group), lazy: p.V}
		e.unread = append(e.unread, unreadOp{h: p.H})
	}
	return true
}

// DeleteHeld is DeleteUnread of the puts of every handle (none nil),
// taking the journal's lock once.
func (e *Epoch) DeleteHeld(puts []*Held) {
	j := e.j
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, h := range puts {
		h.del = e.id
		e.unread = append(e.unread, unreadOp{h: h, del: true, applied: h.state == heldApplied, gen: j.flushes})
	}
}

// Grow makes room for n more mutations staged by PutUnread and
// DeleteUnread: an operator staging a batch's rows says how many.
func (e *Epoch) Grow(n int) {
	j := e.j
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.deferTo != nil {
		e.unread = slices.Grow(e.unread, n)
	} else {
		e.blind = slices.Grow(e.blind, n)
	}
}

// DeleteUnread is Delete for a key staged by PutUnread, with the handle
// that put returned (nil for a key the operator read back from the
// store when it started); with a handle, user may be nil.
func (e *Epoch) DeleteUnread(ns string, group int, user []byte, put *Held) {
	if put != nil && e.j.deferTo != nil {
		e.DeleteHeld([]*Held{put})
		return
	}
	if e.j.deferTo == nil {
		e.stageBlind(Mutation{Key: e.j.key(ns, group, e.copy(user)), Delete: true})
		return
	}
	op := unreadOp{h: put, del: true}
	if put == nil {
		k := e.j.key(ns, group, e.copy(user))
		op.key = &k
	}
	e.stageUnread(op)
}

// copy returns a copy of b in the epoch's arena (nil stays nil).
func (e *Epoch) copy(b []byte) []byte {
	if b == nil {
		return nil
	}
	if cap(e.arena)-len(e.arena) < len(b) {
		e.arena = make([]byte, 0, max(4096, 2*cap(e.arena), len(b)))
	}
	start := len(e.arena)
	e.arena = append(e.arena, b...)
	return e.arena[start:len(e.arena):len(e.arena)]
}

// stage adds m to the epoch.
func (e *Epoch) stage(m Mutation) {
	j := e.j
	j.mu.Lock()
	defer j.mu.Unlock()
	e.muts = append(e.muts, m)
}

// stageBlind adds a PutUnread or DeleteUnread of a journal that defers
// nothing.
func (e *Epoch) stageBlind(m Mutation) {
	j := e.j
	j.mu.Lock()
	defer j.mu.Unlock()
	e.blind = append(e.blind, m)
}

// stageUnread adds a PutUnread or DeleteUnread of a deferring journal.
func (e *Epoch) stageUnread(op unreadOp) {
	j := e.j
	j.mu.Lock()
	defer j.mu.Unlock()
	e.unread = append(e.unread, op)
}

// read puts a mutation staged by Put or Delete in the overlay, where Get
// and ScanPrefix see it.
func (j *Journal) read(e *Epoch, m Mutation) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.overlay[overlayKey(m.Key)] = staged{epoch: e.id, mut: m}
}

// overlayKey is the overlay's map key of k: namespace, key group and user
// key, NUL-separated. Built by appending rather than by fmt.Sprintf: it
// runs twice per staged mutation (stage and commit), a million times for
// a million new keys (a restore test once spent 5 % of its CPU in
// Sprintf here).
func overlayKey(k Key) string {
	b := make([]byte, 0, len(k.Namespace)+len(k.User)+12)
	b = append(b, k.Namespace...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(k.KeyGroup), 10)
	b = append(b, 0)
	b = append(b, k.User...)
	return string(b)
}

// Covers records that the epoch applies the input rows of (source,
// partition) up to offset end (exclusive).
func (e *Epoch) Covers(source string, partition int32, end int64) {
	j := e.j
	j.mu.Lock()
	defer j.mu.Unlock()
	if e.ranges == nil {
		e.ranges = map[position]int64{}
	}
	p := position{source, partition}
	if cur, ok := e.ranges[p]; !ok {
		// The source name may point into a batch's buffer: keep a copy.
		e.ranges[position{strings.Clone(source), partition}] = end
	} else if end > cur {
		e.ranges[p] = end
	}
}

// Done reports the fate of the epoch's output: nil when every sink
// acknowledged it. Epochs commit in order as soon as every earlier one is
// done; an error stops all commits for good.
func (e *Epoch) Done(err error) {
	j := e.j
	j.mu.Lock()
	if e.done {
		j.mu.Unlock()
		return
	}
	e.done, e.err = true, err
	if err != nil && j.failed == nil {
		j.failed = fmt.Errorf("operator %q: epoch %d failed, staged state is dropped: %w", j.op, e.id, err)
	}
	settled, result := j.commitReady()
	j.mu.Unlock()
	for _, e := range settled {
		for _, fn := range e.settled {
			fn(result)
		}
	}
}

// commitReady commits the done prefix of pending epochs in one write, or
// drops every pending epoch once the journal failed. It returns the epochs
// it settled and their result.
func (j *Journal) commitReady() ([]*Epoch, error) {
	if j.failed != nil {
		return j.dropAll(), j.failed
	}
	n := 0
	for n < len(j.pending) && j.pending[n].done {
		n++
	}
	if n == 0 {
		return nil, nil
	}
	var muts []Mutation
	switch {
	case j.deferTo != nil:
		for _, e := range j.pending[:n] {
			muts = append(muts, e.muts...)
			for _, op := range e.unread {
				if m, ok := j.hold(op); ok {
					muts = append(muts, m)
				}
			}
		}
	case n == 1 && len(j.pending[0].blind) == 0:
		muts = j.pending[0].muts // settled now: nothing stages into it again
	case n == 1 && len(j.pending[0].muts) == 0:
		muts = j.pending[0].blind
	}
	positions := map[position]int64{}
	for _, e := range j.pending[:n] {
		if j.deferTo == nil && (n > 1 || (len(e.muts) > 0 && len(e.blind) > 0)) {
			muts = append(append(muts, e.muts...), e.blind...)
		}
		for p, end := range e.ranges {
			if end > positions[p] {
				positions[p] = end
			}
		}
	}
	for p, end := range positions {
		if end <= j.applied[p] {
			continue
		}
		v := binary.BigEndian.AppendUint64(nil, uint64(end))
		muts = append(muts, Mutation{Key: j.key(PositionsNamespace, j.posGroup, positionKey(p)), Value: v})
	}
	if len(muts) > 0 {
		if err := j.b.Apply(muts); err != nil {
			j.failed = fmt.Errorf("operator %q: committing state: %w", j.op, err)
			return j.dropAll(), j.failed
		}
	}
	for p, end := range positions {
		if end > j.applied[p] {
			j.applied[p] = end
		}
	}
	for _, e := range j.pending[:n] {
		for _, m := range e.muts {
			k := overlayKey(m.Key)
			if s, ok := j.overlay[k]; ok && s.epoch == e.id {
				delete(j.overlay, k)
			}
		}
	}
	j.committed += int64(n)
	j.lastCommitted = j.pending[n-1].id
	done := append([]*Epoch(nil), j.pending[:n]...)
	j.pending = append(j.pending[:0], j.pending[n:]...)
	return done, nil
}

// hold takes a committed PutUnread or DeleteUnread of a deferring
// journal: a put is held back; a delete cancels its put if that is still
// held, and otherwise is returned, for the backend. Callers hold mu.
func (j *Journal) hold(op unreadOp) (Mutation, bool) {
	h := op.h
	if !op.del {
		if len(j.held) == 0 && j.cancelled == 0 {
			j.deferTo.deferTo(j)
		}
		h.state = heldPending
		j.held = append(j.held, h)
		return Mutation{}, false
	}
	if h == nil {
		return Mutation{Key: *op.key, Delete: true}, true
	}
	// Without a flush since the delete was staged, its put was given to
	// the backend only if it had been then; the put dies as this commits
	// (Held.del). Otherwise the handle says.
	applied := op.applied
	if op.gen != j.flushes {
		applied = h.state == heldApplied
		if h.state == heldPending {
			h.state = heldCancelled
		}
	}
	if applied {
		return Mutation{Key: h.mut.Key, Delete: true}, true
	}
	j.cancelled++
	if j.cancelled > max(4096, len(j.held)/2) {
		live := j.held[:0]
		for _, p := range j.held {
			if j.live(p) {
				live = append(live, p)
			}
		}
		clear(j.held[len(live):])
		j.held, j.cancelled = live, 0
	}
	return Mutation{}, false
}

// live reports whether a held put is still to be given to the backend:
// committed, neither given nor cancelled, its delete (if any) not yet
// committed. Callers hold mu.
func (j *Journal) live(h *Held) bool {
	return h.state == heldPending && (h.del == 0 || h.del > j.lastCommitted)
}

// flushDeferred gives the backend the puts held back (see held).
func (j *Journal) flushDeferred() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.held) == 0 {
		return nil
	}
	muts := make([]Mutation, 0, len(j.held)-j.cancelled)
	var arena []byte
	for _, h := range j.held {
		if !j.live(h) {
			continue
		}
		h.state = heldApplied
		arena = j.encode(h, arena)
		muts = append(muts, *h.mut)
	}
	j.flushes++
	clear(j.held)
	j.held, j.cancelled = j.held[:0], 0
	if err := j.b.Apply(muts); err != nil {
		return fmt.Errorf("operator %q: committing state: %w", j.op, err)
	}
	return nil
}

// Close applies what the journal holds back and lets its backend forget
// it. An instance that staged unread mutations closes its journal when
// it closes.
func (j *Journal) Close() error {
	if j.deferTo == nil {
		return nil
	}
	err := j.flushDeferred()
	j.deferTo.undefer(j)
	// The epochs still pending may commit after the operator closed,
	// when what their lazy puts encode from may be gone.
	j.mu.Lock()
	defer j.mu.Unlock()
	var arena []byte
	for _, h := range j.held {
		if j.live(h) {
			arena = j.encode(h, arena)
		}
	}
	for _, e := range j.pending {
		for _, op := range e.unread {
			if !op.del {
				arena = j.encode(op.h, arena)
			}
		}
	}
	return err
}

func (j *Journal) dropAll() []*Epoch {
	dropped := j.pending
	j.pending = nil
	j.overlay = map[string]staged{}
	// The dropped epochs settle now: what their operator releases then
	// may be what a held lazy put encodes from.
	var arena []byte
	for _, h := range j.held {
		if j.live(h) {
			arena = j.encode(h, arena)
		}
	}
	return dropped
}

// Err returns why the journal stopped committing, or nil.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failed
}

// Pending returns the number of epochs staged and not yet committed.
func (j *Journal) Pending() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending)
}

// Committed returns the number of epochs committed.
func (j *Journal) Committed() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.committed
}

// Get reads a value: the latest staged mutation of the key if there is
// one, else the committed value not expired at now.
func (j *Journal) Get(ns string, group int, user []byte, now int64) ([]byte, bool, error) {
	k := j.key(ns, group, user)
	j.mu.Lock()
	s, ok := j.overlay[overlayKey(k)]
	j.mu.Unlock()
	if ok {
		if s.mut.Delete || (s.mut.ExpiresAt != 0 && s.mut.ExpiresAt <= now) {
			return nil, false, nil
		}
		return s.mut.Value, true, nil
	}
	v, _, found, err := j.b.Get(k, now)
	return v, found, err
}

// ReadCommitted returns a journal over the same operator's state that
// has staged nothing and stages nothing: reads through it see committed
// state only. A query reads through it, beside the operator's own journal.
func (j *Journal) ReadCommitted() *Journal {
	return &Journal{b: j.b, job: j.job, op: j.op, posGroup: j.posGroup, overlay: map[string]staged{}, applied: map[position]int64{}}
}

// Scan calls fn for the committed entries of a namespace in the given key
// groups (staged mutations are not included: operators scan at open, to
// restore their state).
func (j *Journal) Scan(ns string, groups Scope, now int64, fn func(Entry) error) error {
	scope := groups
	scope.Job, scope.Operator = j.job, j.op
	return ScanNamespace(j.b, scope, ns, nil, now, fn)
}

// ScanPrefix calls fn, in key-byte order, for every live entry of a
// namespace in one key group whose user key starts with prefix: committed
// entries merged with staged mutations (which win). fn returning false
// stops. It reads the namespace's entries of the key group with the
// prefix from the backend at once, so it suits maps of moderate size.
func (j *Journal) ScanPrefix(ns string, group int, prefix []byte, now int64, fn func(user, value []byte) bool) error {
	type kv struct {
		user, value []byte
	}
	merged := map[string]kv{}
	scope := Scope{Job: j.job, Operator: j.op}
	scope.Groups.Start, scope.Groups.End = group, group
	err := ScanNamespace(j.b, scope, ns, prefix, now, func(e Entry) error {
		merged[string(e.Key.User)] = kv{append([]byte(nil), e.Key.User...), append([]byte(nil), e.Value...)}
		return nil
	})
	if err != nil {
		return err
	}
	j.mu.Lock()
	for _, s := range j.overlay {
		k := s.mut.Key
		if k.Namespace != ns || k.KeyGroup != group || !bytes.HasPrefix(k.User, prefix) {
			continue
		}
		if s.mut.Delete || (s.mut.ExpiresAt != 0 && s.mut.ExpiresAt <= now) {
			delete(merged, string(k.User))
			continue
		}
		merged[string(k.User)] = kv{k.User, s.mut.Value}
	}
	j.mu.Unlock()
	keys := make([]string, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !fn(merged[k].user, merged[k].value) {
			return nil
		}
	}
	return nil
}
