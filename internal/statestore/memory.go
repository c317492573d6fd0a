package statestore

import (
	"io"
	"maps"
	"slices"
	"sort"
	"sync"
	"unsafe"
)

// NewMemory returns a Backend that keeps its entries in a map, with the
// Badger backend's semantics: the key encoding of key.go (scans return
// entries in encoded-key order), the same expiry rules, Size counting the
// same bytes (encoded key + 9-byte value header + value) exactly, and the
// same snapshot format. It is safe for concurrent use.
//
// Layout: a map from encoded key to an immutable entry, plus a sorted index
// of the keys that is brought up to date lazily — new keys are appended to
// a pending list and merged in (sort + merge) by the next scan. Deleting a
// key the index does not hold yet removes it at once (its place in the
// pending list goes stale, and stale places are dropped once they are
// half of it); deleting one the index holds leaves a tombstone in the map
// and index, compacted away once tombstones are more than half of it. So
// a store whose keys come and go between scans (a join's kept rows
// without checkpoints) stays as large as its live keys. Entries whose expiry has passed by the wall
// clock are swept (the memory backend's counterpart of Badger's TTL
// garbage collection) every so often by Apply.
//
// Scan, Snapshot and Size copy the matching entries' pointers under the
// lock and call back without it, so callbacks may use the backend, and a
// snapshot is a consistent point-in-time view.
func NewMemory() Backend {
	return &memBackend{m: make(map[string]*memEntry)}
}

// defer registers j as holding committed mutations back (deferrer).
func (b *memBackend) deferTo(j *Journal) {
	b.fmu.Lock()
	defer b.fmu.Unlock()
	if b.deferring == nil {
		b.deferring = map[*Journal]struct{}{}
	}
	b.deferring[j] = struct{}{}
}

// undefer forgets j (after it applied what it held).
func (b *memBackend) undefer(j *Journal) {
	b.fmu.Lock()
	defer b.fmu.Unlock()
	delete(b.deferring, j)
}

// settle has the journals that hold mutations back apply them: those of
// operator op of job jobName ("" for any). It is called without mu held
// (a journal's flush applies through Apply).
func (b *memBackend) settle(jobName, op string) error {
	b.fmu.Lock()
	if len(b.deferring) == 0 {
		b.fmu.Unlock()
		return nil
	}
	var js []*Journal
	for j := range b.deferring {
		if (jobName == "" || j.job == jobName) && (op == "" || j.op == op) {
			js = append(js, j)
		}
	}
	b.fmu.Unlock()
	for _, j := range js {
		if err := j.flushDeferred(); err != nil {
			return err
		}
	}
	return nil
}

type memEntry struct {
	// indexed says the key is in the sorted index of the live backend,
	// not (only) in its pending list. It is the only field written after
	// the entry is stored, under the live backend's mu, and is never read
	// by a frozen copy (which shares the entries: see Freeze); first, so
	// that it has a word of its own.
	indexed bool
	value   []byte
	exp     int64
	deleted bool
}

// memTombstone stands for a deleted key the sorted index holds (a key it
// does not hold leaves the map on delete).
var memTombstone = &memEntry{deleted: true, indexed: true}

type memBackend struct {
	// deferring are the journals holding committed mutations back from
	// the backend (see Journal: deferred); every read and freeze has them
	// applied first. fmu is taken before mu, never after.
	fmu       sync.Mutex
	deferring map[*Journal]struct{}

	mu      sync.Mutex
	closed  bool
	m       map[string]*memEntry
	sorted  []string // sorted keys, tombstones included
	pending []string // keys not yet in sorted, and stale places (see del)
	stale   int      // places in pending whose key left the map or came again
	tombs   int      // tombstones in m
	applied int      // mutations since the last expiry sweep
	frozen  bool     // a Freeze copy: read only, and it marks no entry
}

// memItem is one entry collected for a callback.
type memItem struct {
	key string
	e   *memEntry
}

func (b *memBackend) Get(k Key, now int64) ([]byte, int64, bool, error) {
	if err := b.settle(k.Job, k.Operator); err != nil {
		return nil, 0, false, err
	}
	enc, err := keyEncode(nil, k)
	if err != nil {
		return nil, 0, false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, 0, false, ErrClosed
	}
	e := b.m[string(enc)]
	if e == nil || e.deleted || !liveAt(e.exp, now, wallSeconds()) {
		return nil, 0, false, nil
	}
	return slices.Clone(e.value), e.exp, true, nil
}

func (b *memBackend) Apply(muts []Mutation) error {
	keys := make([]string, len(muts))
	var buf []byte
	for i := range muts {
		var err error
		if buf, err = keyEncode(buf[:0], muts[i].Key); err != nil {
			return err
		}
		if err := mutationCheck(&muts[i]); err != nil {
			return err
		}
		keys[i] = string(buf)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	for i := range muts {
		if muts[i].Delete {
			b.del(keys[i])
		} else {
			b.put(keys[i], slices.Clone(muts[i].Value), muts[i].ExpiresAt)
		}
	}
	b.applied += len(muts)
	if b.applied > max(4096, len(b.m)) {
		b.applied = 0
		b.sweep()
	}
	return nil
}

// put stores an entry; value is owned by the backend. Callers hold mu.
func (b *memBackend) put(k string, value []byte, exp int64) {
	if value == nil {
		value = []byte{}
	}
	old, ok := b.m[k]
	switch {
	case !ok:
		b.pending = append(b.pending, k)
	case old.deleted:
		b.tombs--
	}
	b.m[k] = &memEntry{value: value, exp: exp, indexed: ok && old.indexed}
}

// del deletes an entry. Callers hold mu.
func (b *memBackend) del(k string) {
	old, ok := b.m[k]
	switch {
	case !ok || old.deleted:
	case !old.indexed:
		delete(b.m, k)
		b.stale++
		if b.stale > max(4096, len(b.pending)/2) {
			b.dropStale()
		}
	default:
		b.m[k] = memTombstone
		b.tombs++
	}
}

// dropStale removes from the pending list the places whose key left the
// map, and the repeats of a key that left and came again. Callers hold
// mu.
func (b *memBackend) dropStale() {
	seen := make(map[string]struct{}, len(b.pending)-b.stale)
	live := b.pending[:0]
	for _, k := range b.pending {
		if e, ok := b.m[k]; ok && !e.indexed {
			if _, dup := seen[k]; !dup {
				seen[k] = struct{}{}
				live = append(live, k)
			}
		}
	}
	clear(b.pending[len(live):])
	b.pending, b.stale = live, 0
}

// sweep deletes the entries the wall-clock TTL has collected.
func (b *memBackend) sweep() {
	wall := wallSeconds()
	for k, e := range b.m {
		if !e.deleted && !notCollected(e.exp, wall) {
			b.del(k)
		}
	}
}

// index brings the sorted index up to date. Callers hold mu.
func (b *memBackend) index() {
	if b.stale > 0 {
		b.dropStale()
	}
	if len(b.pending) > 0 {
		sort.Strings(b.pending)
		if !b.frozen {
			for _, k := range b.pending {
				b.m[k].indexed = true
			}
		}
		merged := make([]string, 0, len(b.sorted)+len(b.pending))
		i, j := 0, 0
		for i < len(b.sorted) && j < len(b.pending) {
			if b.sorted[i] < b.pending[j] {
				merged = append(merged, b.sorted[i])
				i++
			} else {
				merged = append(merged, b.pending[j])
				j++
			}
		}
		merged = append(merged, b.sorted[i:]...)
		merged = append(merged, b.pending[j:]...)
		b.sorted, b.pending = merged, nil
	}
	if b.tombs > 1024 && b.tombs > len(b.m)/2 {
		live := b.sorted[:0]
		for _, k := range b.sorted {
			if b.m[k].deleted {
				delete(b.m, k)
			} else {
				live = append(live, k)
			}
		}
		clear(b.sorted[len(live):])
		b.sorted, b.tombs = live, 0
	}
}

// memCursor walks the sorted index, skipping tombstones.
type memCursor struct {
	b *memBackend
	i int
}

func (c *memCursor) skip() {
	for c.i < len(c.b.sorted) && c.b.m[c.b.sorted[c.i]].deleted {
		c.i++
	}
}

func (c *memCursor) seek(k []byte) {
	c.i = sort.SearchStrings(c.b.sorted, string(k))
	c.skip()
}

func (c *memCursor) valid() bool { return c.i < len(c.b.sorted) }

func (c *memCursor) key() []byte {
	s := c.b.sorted[c.i]
	return unsafe.Slice(unsafe.StringData(s), len(s)) // read only
}

func (c *memCursor) next() {
	c.i++
	c.skip()
}

// collect returns the scope's entries for which keep is true. Callers
// hold mu.
func (b *memBackend) collect(scope Scope, sub []byte, keep func(*memEntry) bool) ([]memItem, error) {
	b.index()
	c := &memCursor{b: b}
	var items []memItem
	err := walkScopeSub(c, scope, sub, func() error {
		k := b.sorted[c.i]
		if e := b.m[k]; keep(e) {
			items = append(items, memItem{key: k, e: e})
		}
		return nil
	})
	return items, err
}

// live collects the scope's entries live at now, or returns ErrClosed.
func (b *memBackend) live(scope Scope, sub []byte, now int64) ([]memItem, error) {
	if err := b.settle(scope.Job, scope.Operator); err != nil {
		return nil, err
	}
	if _, err := keyJobPrefix(scope.Job); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	wall := wallSeconds()
	return b.collect(scope, sub, func(e *memEntry) bool { return liveAt(e.exp, now, wall) })
}

func (b *memBackend) Scan(scope Scope, now int64, fn func(Entry) error) error {
	return b.scanSub(scope, nil, now, fn)
}

func (b *memBackend) scanSub(scope Scope, sub []byte, now int64, fn func(Entry) error) error {
	items, err := b.live(scope, sub, now)
	if err != nil {
		return err
	}
	var (
		ent  Entry
		kbuf []byte
		vbuf []byte
	)
	for _, it := range items {
		// Fresh copies per call: a callback that keeps or changes the
		// slices cannot reach the stored entry.
		kbuf = append(kbuf[:0], it.key...)
		if err := keyDecode(kbuf, &ent.Key); err != nil {
			return err
		}
		vbuf = append(vbuf[:0], it.e.value...)
		ent.Value, ent.ExpiresAt = vbuf, it.e.exp
		if err := fn(ent); err != nil {
			return err
		}
	}
	return nil
}

func (b *memBackend) Snapshot(w io.Writer, scope Scope, now int64) (SnapshotInfo, error) {
	items, err := b.live(scope, nil, now)
	if err != nil {
		return SnapshotInfo{}, err
	}
	return snapshotWrite(w, scope, now, func(_ Scope, _ int64, fn func(key, value []byte, expiresAt int64) error) error {
		for _, it := range items {
			if err := fn(unsafe.Slice(unsafe.StringData(it.key), len(it.key)), it.e.value, it.e.exp); err != nil {
				return err
			}
		}
		return nil
	})
}

func (b *memBackend) Restore(r io.Reader, scope Scope, now int64) (RestoreInfo, error) {
	empty := func(scope Scope, now int64) (bool, error) {
		items, err := b.live(scope, nil, now)
		return len(items) == 0, err
	}
	return snapshotRestore(r, scope, now, empty, &memSink{b: b}, b.Drop)
}

// memSink buffers restored entries and applies them in chunks.
type memSink struct {
	b   *memBackend
	buf []memItem
}

func (s *memSink) put(key, value []byte, exp int64) error {
	s.buf = append(s.buf, memItem{key: string(key), e: &memEntry{value: slices.Clone(value), exp: exp}})
	if len(s.buf) >= 1024 {
		return s.flush()
	}
	return nil
}

func (s *memSink) flush() error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.b.closed {
		return ErrClosed
	}
	for _, it := range s.buf {
		s.b.put(it.key, it.e.value, it.e.exp)
	}
	s.buf = s.buf[:0]
	return nil
}

func (s *memSink) abort() { s.buf = nil }

func (b *memBackend) Size(jobName, operator string) (int64, error) {
	n, _, err := b.Measure(jobName, operator)
	return n, err
}

func (b *memBackend) Measure(jobName, operator string) (bytes, keys int64, err error) {
	if err := b.settle(jobName, operator); err != nil {
		return 0, 0, err
	}
	if _, err := keyJobPrefix(jobName); err != nil {
		return 0, 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, 0, ErrClosed
	}
	b.index()
	wall := wallSeconds()
	c := &memCursor{b: b}
	err = walkScope(c, Scope{Job: jobName, Operator: operator, Groups: AllKeyGroups}, func() error {
		k := b.sorted[c.i]
		if e := b.m[k]; notCollected(e.exp, wall) {
			bytes += int64(len(k) + storedValueHeader + len(e.value))
			keys++
		}
		return nil
	})
	return bytes, keys, err
}

func (b *memBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.m, b.sorted, b.pending = nil, nil, nil
	}
	return nil
}

// Freeze returns a copy of the map (entries are immutable once stored, so
// a shallow copy is a consistent view).
func (b *memBackend) Freeze() (Frozen, error) {
	if err := b.settle("", ""); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if b.stale > 0 {
		b.dropStale() // the copy's pending list is then every key it lacks in sorted, once
	}
	return &memBackend{m: maps.Clone(b.m), sorted: slices.Clone(b.sorted), pending: slices.Clone(b.pending), tombs: b.tombs, frozen: true}, nil
}

// Drop deletes every entry of scope.
func (b *memBackend) Drop(scope Scope) error {
	if err := b.settle(scope.Job, scope.Operator); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	items, err := b.collect(scope, nil, func(*memEntry) bool { return true })
	for _, it := range items {
		b.del(it.key)
	}
	return err
}
