package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"sort"
	"sync/atomic"
)

// Restored layers.
//
// A checkpoint restore into the Badger backend (RestoreLayers) does not
// rebuild Badger's tables from the snapshots: it downloads each snapshot
// object, as it is, into the state directory (layers/<id>.snap) with
// O_DIRECT, checks it on the way (every record's CRC32C, key order,
// scope, and the manifest's object checksum: a CRC-64/NVME, or a SHA-256
// that also checks the trailer's), keeps a sparse index of its records
// (one offset and key per 4 KiB), and maps the file read-only. The
// snapshot file is then a read-only layer under Badger: Badger holds what
// was written since the restore, the layer what the checkpoint held.
//
// The file is written behind the parser: a chunk goes to the disk once
// the parser has read it, so the parser does not wait for the disk, and
// the download runs at most the read-ahead's 32 MiB ahead of it. When
// the stream has been read and checked, the chunks not yet written (a
// few, up to those 32 MiB) stay in memory as the layer's tail, which
// reads use until they are written; RestoreLayers returns without
// waiting for them (20–40 ms of a 100 MB restore on the benchmark
// machine, whose disk writes no faster than its network reads).
// Building Badger's tables ran at 130–180 MB/s on two cores, well under a
// local object store's download; a layer costs the download, one checksum
// pass and the write (docs/benchmarks/checkpoints.md).
//
// Each layer covers a scope: the restored task's operator and key groups,
// less the scopes Drop has taken out of it since (excluded). Layers never
// cover a key in common: a restore drops its scopes first.
//
// Reads. Get looks in Badger first; an entry found there decides, live or
// not; only a key Badger does not hold is looked up in the layer that
// covers it (binary search of the index, then a walk of at most 4 KiB of
// records, each record's CRC32C checked as in Badger's OnBlockRead). Scans
// and snapshots merge Badger's iterator with the layers' cursors in key
// order, Badger's entry winning over a layer's of the same key.
//
// Writes go to Badger, with two rules for keys a layer holds (looked up by
// Apply): a delete writes a tombstone (a stored value of version 2,
// which every read takes as an entry expired long ago) instead of
// Badger's delete, which would uncover the layer's entry; and a put with
// an expiry does not get Badger's own TTL (the expiry in the stored value
// still hides it), since Badger dropping it would uncover the layer's
// older value. Keys no layer holds are written as before.
//
// Lifetime. A layer stays until its scope is dropped (Drop, which the
// runtime's next restore calls) or the directory is removed. Entries
// written over in Badger stay in the layer's file, unread. The list of
// layers is the file layers/LAYERS (written atomically: temp file, fsync,
// rename, directory fsync), which lists a layer only once its file is
// complete (a process killed while the tail was being written leaves the
// layer unlisted); a layer file is not fsynced (a restore after a power
// loss restores again from the checkpoint, as for Badger's unsynced
// writes). Close waits for the files being written. Open loads every
// listed layer, checking every record's CRC32C, the key order and scope
// and the trailer's count (the checksums were checked when the file was
// downloaded), and removes files LAYERS does not list (a restore cut
// short). Where mmap is not available (not unix) the layer is read into
// memory, once its file is complete.

const (
	layersDirName  = "layers"
	layersFileName = "LAYERS"
	// layerIndexEvery is the spacing of a layer's index, in bytes of
	// records.
	layerIndexEvery = 4096
	// storedTombstone is the stored value version of a tombstone.
	storedTombstone byte = 2
)

// layerMeta is a layer's entry in LAYERS.
type layerMeta struct {
	ID   uint64 `json:"id"`
	File string `json:"file"`
	Size int64  `json:"size"`
	// Checksum is the manifest's checksum of the whole file
	// (internal/objsum), when the restore was given one.
	Checksum string      `json:"checksum,omitempty"`
	Scope    snapScope   `json:"scope"`
	Excluded []snapScope `json:"excluded,omitempty"`
}

// layersFile is LAYERS.
type layersFile struct {
	Layers []layerMeta `json:"layers"`
}

// scopeMatcher tests whether an encoded key is in a scope.
type scopeMatcher struct {
	jobPrefix []byte
	opPrefix  []byte // nil: every operator
	start     int
	end       int
	ok        bool
}

func newScopeMatcher(s Scope) scopeMatcher {
	m := scopeMatcher{}
	var err error
	if m.jobPrefix, err = keyJobPrefix(s.Job); err != nil {
		return m
	}
	if s.Operator != "" {
		if m.opPrefix, err = keyOperatorPrefix(s.Job, s.Operator); err != nil {
			return m
		}
	}
	m.start, m.end, m.ok = scopeGroups(s.Groups)
	return m
}

func (m *scopeMatcher) has(key []byte) bool {
	if !m.ok || !bytes.HasPrefix(key, m.jobPrefix) {
		return false
	}
	opLen, g, err := keySplit(key)
	if err != nil || g < m.start || g > m.end {
		return false
	}
	return m.opPrefix == nil || bytes.Equal(key[:opLen], m.opPrefix)
}

// scopeContains reports whether every key of inner is in outer.
func scopeContains(outer, inner Scope) bool {
	if outer.Job != inner.Job || (outer.Operator != "" && outer.Operator != inner.Operator) {
		return false
	}
	is, ie, iok := scopeGroups(inner.Groups)
	if !iok {
		return true
	}
	ostart, oend, ook := scopeGroups(outer.Groups)
	return ook && ostart <= is && ie <= oend
}

func toSnapScope(s Scope) snapScope { return snapScope(s) }

func fromSnapScope(s snapScope) Scope { return Scope(s) }

// layer is one restored snapshot file.
type layer struct {
	meta  layerMeta
	path  string
	scope Scope
	in    scopeMatcher
	// excluded is replaced (never changed in place) by Drop.
	excluded atomic.Pointer[[]scopeMatcher]

	data       []byte
	unmap      func() error
	first, end int64   // the first record's offset, the trailer's
	index      []int64 // record offsets, one per layerIndexEvery bytes
	// keys holds the key of every indexed record, end to end; keyEnd[i]
	// is where index[i]'s ends. The binary search of a lookup reads
	// memory only, not the file (cold after the restore wrote it with
	// O_DIRECT: 15 page faults to disk per first lookup).
	keys   []byte
	keyEnd []int
	// namespaces are those of the layer's records: a scan of another
	// namespace passes the layer by (it would seek in every key group,
	// each seek a page fault on the cold file: the journal's scan of the
	// rescale namespace at an operator's start took 150 ms after a
	// 100 MB restore).
	namespaces map[string]struct{}

	refs   atomic.Int64 // the set's reference, and one per reader
	remove atomic.Bool  // delete the file with the last reference

	// tail holds the bytes from tail.off on while the restore's
	// write-behind has not written them to the file (finishLayer); nil
	// once the file holds everything.
	tail atomic.Pointer[layerTail]
	// writing is set until the file is written: LAYERS does not list
	// the layer before.
	writing atomic.Bool
}

// layerTail is the end of a layer's bytes, in the read-ahead's chunks:
// chunks[0] starts at off, and every chunk but the last has layerChunk
// bytes.
type layerTail struct {
	off    int64
	chunks [][]byte
}

// span returns the layer's n bytes at off: a subslice of the file's
// mapping or of one tail chunk, or a copy for bytes across chunks.
func (l *layer) span(off, n int64) []byte {
	t := l.tail.Load()
	if t == nil || off+n <= t.off {
		return l.data[off : off+n]
	}
	if off >= t.off {
		i, j := (off-t.off)/layerChunk, (off-t.off)%layerChunk
		if c := t.chunks[i]; j+n <= int64(len(c)) {
			return c[j : j+n]
		}
	}
	out := make([]byte, n)
	for k := int64(0); k < n; {
		p := off + k
		var src []byte
		if p < t.off {
			src = l.data[p:t.off]
		} else {
			i, j := (p-t.off)/layerChunk, (p-t.off)%layerChunk
			src = t.chunks[i][j:]
		}
		k += int64(copy(out[k:], src))
	}
	return out
}

func newLayer(meta layerMeta, path string, ix *layerIndexer, data []byte, unmap func() error) *layer {
	l := &layer{meta: meta, path: path, scope: fromSnapScope(meta.Scope), data: data, unmap: unmap,
		first: ix.first, end: ix.endOff, index: ix.index, keys: ix.keys, keyEnd: ix.keyEnd, namespaces: ix.namespaces}
	if l.namespaces == nil {
		l.namespaces = map[string]struct{}{}
	}
	l.in = newScopeMatcher(l.scope)
	ex := make([]scopeMatcher, len(meta.Excluded))
	for i, s := range meta.Excluded {
		ex[i] = newScopeMatcher(fromSnapScope(s))
	}
	l.excluded.Store(&ex)
	l.refs.Store(1)
	return l
}

// acquire takes a reference; false when the layer is already released
// for good (dropped).
func (l *layer) acquire() bool {
	for {
		n := l.refs.Load()
		if n <= 0 {
			return false
		}
		if l.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one unmaps the file (and deletes
// it when the layer was dropped).
func (l *layer) release() {
	if l.refs.Add(-1) != 0 {
		return
	}
	if l.unmap != nil {
		l.unmap()
	}
	if l.remove.Load() {
		os.Remove(l.path)
	}
}

// covers reports whether the layer answers for key.
func (l *layer) covers(key []byte) bool {
	if !l.in.has(key) {
		return false
	}
	for _, m := range *l.excluded.Load() {
		if m.has(key) {
			return false
		}
	}
	return true
}

// warm asks the kernel to read the layer's file into the page cache, a
// slice at a time, in the background: the restore wrote it with O_DIRECT,
// so the first reads would otherwise wait for the disk. Each slice is
// waited for (its last page read) before the next is asked for: the
// advice itself does not wait, and asking for the whole file at once
// queued all of it ahead of the first lookups' page faults (an
// operator's start waited 30–70 ms behind 100 MB of read-ahead; with a
// slice of 4 MiB, 5–16 ms). It stops when the layer is dropped.
func (l *layer) warm() {
	const step = 1 << 20
	var sum byte
	for off := 0; off < len(l.data); off += step {
		if !l.acquire() {
			return
		}
		if l.remove.Load() {
			l.release()
			return
		}
		end := min(off+step, len(l.data))
		adviseWillNeed(l.data[off:end])
		sum += l.data[end-1] // waits for the slice's read
		l.release()
	}
	warmSink.Add(uint32(sum))
}

// warmSink keeps warm's reads from being optimized away.
var warmSink atomic.Uint32

func (l *layer) corrupt(off int64, what string) error {
	return fmt.Errorf("%w: restored layer %s: record at byte offset %d: %s", ErrCorrupt, l.path, off, what)
}

// recordAt checks and parses the record at off.
func (l *layer) recordAt(off int64) (key, value []byte, exp int64, next int64, err error) {
	if off < l.first || off+5 > l.end {
		return nil, nil, 0, 0, l.corrupt(off, "not a record")
	}
	h := l.span(off, 5)
	if h[0] != snapKindEntry {
		return nil, nil, 0, 0, l.corrupt(off, "not a record")
	}
	n := int64(binary.BigEndian.Uint32(h[1:]))
	next = off + 5 + n + 4
	if n < 16 || next > l.end {
		return nil, nil, 0, 0, l.corrupt(off, "bad length")
	}
	d := l.span(off, 5+n+4)
	rec := d[5 : 5+n]
	crc := crc32.Update(0, crc32c, d[:5])
	crc = crc32.Update(crc, crc32c, rec)
	if crc != binary.BigEndian.Uint32(d[5+n:]) {
		return nil, nil, 0, 0, l.corrupt(off, "CRC32C mismatch")
	}
	if key, value, exp, err = snapParseRecord(rec); err != nil {
		return nil, nil, 0, 0, l.corrupt(off, err.Error())
	}
	return key, value, exp, next, nil
}

// seekOffset returns the offset of the last indexed record whose key is
// <= k (the first record when none is).
func (l *layer) seekOffset(k []byte) (int64, error) {
	i := sort.Search(len(l.index), func(i int) bool {
		return bytes.Compare(l.indexKey(i), k) > 0
	})
	if i == 0 {
		return l.first, nil
	}
	return l.index[i-1], nil
}

func (l *layer) indexKey(i int) []byte {
	start := 0
	if i > 0 {
		start = l.keyEnd[i-1]
	}
	return l.keys[start:l.keyEnd[i]]
}

// get finds k in the layer's file (covered or not: the caller checks);
// value aliases the mapping.
func (l *layer) get(k []byte) (value []byte, exp int64, found bool, err error) {
	off, err := l.seekOffset(k)
	if err != nil {
		return nil, 0, false, err
	}
	for off < l.end {
		key, val, e, next, err := l.recordAt(off)
		if err != nil {
			return nil, 0, false, err
		}
		switch c := bytes.Compare(key, k); {
		case c == 0:
			return val, e, true, nil
		case c > 0:
			return nil, 0, false, nil
		}
		off = next
	}
	return nil, 0, false, nil
}

// layerCursor is a kvCursor over a layer's records (covered or not).
type layerCursor struct {
	l   *layer
	off int64
	k   []byte
	v   []byte
	exp int64
	nxt int64
	err error
}

func (c *layerCursor) load() {
	if c.off >= c.l.end {
		return
	}
	var err error
	c.k, c.v, c.exp, c.nxt, err = c.l.recordAt(c.off)
	if err != nil {
		c.err, c.off = err, c.l.end
	}
}

func (c *layerCursor) seek(k []byte) {
	if c.err != nil {
		return
	}
	off, err := c.l.seekOffset(k)
	if err != nil {
		c.err, c.off = err, c.l.end
		return
	}
	c.off = off
	c.load()
	for c.valid() && bytes.Compare(c.k, k) < 0 {
		c.next()
	}
}

func (c *layerCursor) valid() bool { return c.off < c.l.end }
func (c *layerCursor) key() []byte { return c.k }

func (c *layerCursor) next() {
	if c.off >= c.l.end {
		return
	}
	c.off = c.nxt
	c.load()
}

// layerIndexer is the restoreSink of a layer's parse: it keeps the
// sparse index and stores nothing.
type layerIndexer struct {
	index  []int64
	keys   []byte
	keyEnd []int
	first  int64
	endOff int64
	last   int64
	seen   bool
	// namespaces are those of every record; lastNS the last record's.
	namespaces map[string]struct{}
	lastNS     []byte
}

func (ix *layerIndexer) record(off int64, key []byte) {
	if ns, ok := keyNamespace(key); ok && (ix.namespaces == nil || !bytes.Equal(ns, ix.lastNS)) {
		if ix.namespaces == nil {
			ix.namespaces = map[string]struct{}{}
		}
		ix.namespaces[string(ns)] = struct{}{}
		ix.lastNS = append(ix.lastNS[:0], ns...)
	}
	if ix.seen && off-ix.last < layerIndexEvery {
		return
	}
	if !ix.seen {
		ix.seen, ix.first = true, off
	}
	ix.last = off
	ix.index = append(ix.index, off)
	ix.keys = append(ix.keys, key...)
	ix.keyEnd = append(ix.keyEnd, len(ix.keys))
}

func (ix *layerIndexer) end(off int64) {
	ix.endOff = off
	if !ix.seen {
		ix.first = off
	}
}

func (ix *layerIndexer) put([]byte, []byte, int64) error { return nil }
func (ix *layerIndexer) flush() error                    { return nil }
func (ix *layerIndexer) abort()                          {}

// mayHold reports whether the layer may hold keys that continue with sub
// after their key group (see scopeIter): false when sub names a namespace
// the layer has no record of.
func (l *layer) mayHold(sub []byte) bool {
	if len(sub) < 2 {
		return true
	}
	n := int(binary.BigEndian.Uint16(sub))
	if len(sub) < 2+n {
		return true
	}
	_, ok := l.namespaces[string(sub[2:2+n])]
	return ok
}

// walkMerged calls fn for every entry of scope (continuing with sub, see
// scopeIter) that live accepts, in key order: Badger's entries (c) merged with the layers' covered entries, a
// Badger entry (a tombstone too) hiding a layer's of the same key. key
// and value are valid only during the call.
func walkMerged(c badgerCursor, layers []*layer, scope Scope, sub []byte, live func(exp int64) bool, fn func(key, value []byte, exp int64) error) error {
	bi := newScopeIter(c, scope, sub)
	var (
		lis []*scopeIter
		lcs []*layerCursor
	)
	for _, l := range layers {
		if scopesOverlap(l.scope, scope) && l.mayHold(sub) {
			lc := &layerCursor{l: l}
			lis = append(lis, newScopeIter(lc, scope, sub))
			lcs = append(lcs, lc)
		}
	}
	err := func() error {
		for {
			m := -1
			for i, li := range lis {
				if li.valid() && (m < 0 || bytes.Compare(li.key(), lis[m].key()) < 0) {
					m = i
				}
			}
			if bi.valid() && (m < 0 || bytes.Compare(bi.key(), lis[m].key()) <= 0) {
				item := c.it.Item()
				k := item.Key()
				for _, li := range lis {
					for li.valid() && bytes.Equal(li.key(), k) {
						li.next()
					}
				}
				err := item.Value(func(v []byte) error {
					value, exp, err := storedValueDecode(v)
					if err != nil {
						return fmt.Errorf("%w (key %x)", err, k)
					}
					if !live(exp) {
						return nil
					}
					return fn(k, value, exp)
				})
				if err != nil {
					return err
				}
				bi.next()
				continue
			}
			if m < 0 {
				return nil
			}
			lc := lcs[m]
			if lc.l.covers(lc.k) && live(lc.exp) {
				if err := fn(lc.k, lc.v, lc.exp); err != nil {
					return err
				}
			}
			lis[m].next()
		}
	}()
	if err != nil {
		return err
	}
	if bi.err != nil {
		return bi.err
	}
	for i := range lis {
		if lis[i].err != nil {
			return lis[i].err
		}
		if lcs[i].err != nil {
			return lcs[i].err
		}
	}
	return nil
}
