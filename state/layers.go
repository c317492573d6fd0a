package state

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/arkflow-rs/arkflow-go/internal/objsum"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// LayerRestorer is implemented by backends that restore snapshots as
// read-only layers under the store (the Badger backend; see layer.go):
// the restore costs the download and its checks, not rebuilding the
// store.
type LayerRestorer interface {
	// RestoreLayers drops every entry of each source's scope (as Drop)
	// and restores the sources into those scopes. Entries outside a
	// source's scope or expired at now are not visible afterwards, as
	// with Restore. The scopes must not overlap. Nothing may use the
	// store while it runs. On failure (a *RestoreError, wrapping
	// ErrCorruptSnapshot when a snapshot's bytes are at fault) the
	// sources' scopes are left empty. progress, if not nil, is called
	// (one call at a time) as each source completes.
	RestoreLayers(srcs []RestoreSource, now int64, progress func(i int, info RestoreInfo)) ([]RestoreInfo, error)
}

// LayerStats describes the restored layers of a Badger backend.
type LayerStats struct {
	Layers int
	Bytes  int64
}

// LayerStatsOf returns the restored layers of a Badger backend; ok is
// false for other backends.
func LayerStatsOf(b Backend) (stats LayerStats, ok bool) {
	bb, ok := b.(*badgerBackend)
	if !ok {
		return LayerStats{}, false
	}
	for _, l := range bb.currentLayers() {
		stats.Layers++
		stats.Bytes += l.meta.Size
	}
	return stats, true
}

// layerSet is the backend's layers; the slice is replaced, never
// changed, under layerMu.
type layerSet struct {
	mu   sync.Mutex // serializes changes and LAYERS writes
	cur  atomic.Pointer[[]*layer]
	next uint64
}

func (b *badgerBackend) currentLayers() []*layer {
	if p := b.layers.cur.Load(); p != nil {
		return *p
	}
	return nil
}

// pinLayers takes a reference on every current layer overlapping job's
// scope (all when job is ""); unpinLayers gives them back.
func (b *badgerBackend) pinLayers(jobName string) []*layer {
	cur := b.currentLayers()
	if len(cur) == 0 {
		return nil
	}
	out := make([]*layer, 0, len(cur))
	for _, l := range cur {
		if (jobName == "" || l.scope.Job == jobName) && l.acquire() {
			out = append(out, l)
		}
	}
	return out
}

func unpinLayers(ls []*layer) {
	for _, l := range ls {
		l.release()
	}
}

// coveringLayer returns the layer that covers key, pinned, or nil.
func (b *badgerBackend) coveringLayer(key []byte) *layer {
	for _, l := range b.currentLayers() {
		if l.covers(key) && l.acquire() {
			return l
		}
	}
	return nil
}

// layerHolds reports whether a layer covers key and holds an entry for it
// that the wall clock has not expired (an entry a Badger delete or TTL
// would uncover).
func (b *badgerBackend) layerHolds(key []byte) (bool, error) {
	l := b.coveringLayer(key)
	if l == nil {
		return false, nil
	}
	defer l.release()
	_, exp, found, err := l.get(key)
	if err != nil {
		return false, err
	}
	return found && notCollected(exp, wallSeconds()), nil
}

func (b *badgerBackend) layersDir() string { return filepath.Join(b.dir, layersDirName) }

// writeLayersFile records ls in LAYERS (the caller holds layers.mu).
func (b *badgerBackend) writeLayersFile(ls []*layer) error {
	f := layersFile{Layers: []layerMeta{}}
	for _, l := range ls {
		f.Layers = append(f.Layers, l.meta)
	}
	data, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(b.layersDir(), layersFileName, append(data, '\n')); err != nil {
		return fmt.Errorf("state: writing %s: %w", filepath.Join(b.layersDir(), layersFileName), err)
	}
	return nil
}

// loadLayers opens the layers LAYERS lists, checking every record of each,
// and removes the files it does not list.
func (b *badgerBackend) loadLayers() error {
	dir := b.layersDir()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	var f layersFile
	data, err := os.ReadFile(filepath.Join(dir, layersFileName))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("state: %w", err)
	default:
		if err := json.Unmarshal(data, &f); err != nil {
			return fmt.Errorf("%w: %s: unreadable %s: %v", ErrCorrupt, dir, layersFileName, err)
		}
	}
	listed := map[string]bool{}
	var ls []*layer
	fail := func(err error) error {
		unpinLayers(ls)
		return err
	}
	for _, m := range f.Layers {
		if m.File != filepath.Base(m.File) || !strings.HasSuffix(m.File, ".snap") {
			return fail(fmt.Errorf("%w: %s: bad file name %q in %s", ErrCorrupt, dir, m.File, layersFileName))
		}
		listed[m.File] = true
		l, err := openLayer(filepath.Join(dir, m.File), m)
		if err != nil {
			return fail(err)
		}
		ls = append(ls, l)
		b.layers.next = max(b.layers.next, m.ID+1)
	}
	for _, e := range ents {
		if n := e.Name(); n != layersFileName && !listed[n] {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return fail(fmt.Errorf("state: removing %s, left by a restore cut short: %w", n, err))
			}
		}
	}
	b.layers.cur.Store(&ls)
	return nil
}

// openLayer opens and checks a listed layer file.
func openLayer(path string, m layerMeta) (*layer, error) {
	fp, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: restored layer %s is missing", ErrCorrupt, path)
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	defer fp.Close()
	fi, err := fp.Stat()
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if fi.Size() != m.Size {
		return nil, fmt.Errorf("%w: restored layer %s has %d bytes, %d when it was restored", ErrCorrupt, path, fi.Size(), m.Size)
	}
	scope := fromSnapScope(m.Scope)
	prefix, err := keyJobPrefix(scope.Job)
	if err != nil {
		return nil, fmt.Errorf("%w: restored layer %s: %v", ErrCorrupt, path, err)
	}
	// The SHA-256s were checked by the restore that wrote the file;
	// what can have happened to it since is damage on the disk, which the
	// records' CRC32Cs, the order and scope checks and the trailer's count
	// find at a fraction of the cost.
	ix := &layerIndexer{}
	if _, err := snapshotReadHash(bufio.NewReaderSize(fp, 1<<20), scope, 0, prefix, "", ix, false); err != nil {
		return nil, fmt.Errorf("%w: restored layer %s: %w", ErrCorrupt, path, err)
	}
	data, unmap, err := mapFile(fp, m.Size)
	if err != nil {
		return nil, fmt.Errorf("state: mapping %s: %w", path, err)
	}
	return newLayer(m, path, ix, data, unmap), nil
}

// dropLayers takes scope out of the layers: a layer wholly inside it is
// removed (its file deleted once no reader has it), one partly inside it
// stops covering it. The caller has entered.
func (b *badgerBackend) dropLayers(scope Scope) error {
	b.layers.mu.Lock()
	defer b.layers.mu.Unlock()
	cur := b.currentLayers()
	var (
		keep    []*layer
		dropped []*layer
		partial []*layer
	)
	for _, l := range cur {
		switch {
		case !scopesOverlap(l.scope, scope):
			keep = append(keep, l)
		case scopeContains(scope, l.scope):
			dropped = append(dropped, l)
		default:
			keep = append(keep, l)
			partial = append(partial, l)
		}
	}
	if len(dropped) == 0 && len(partial) == 0 {
		return nil
	}
	for _, l := range partial {
		l.meta.Excluded = append(l.meta.Excluded, toSnapScope(scope))
	}
	if err := b.writeLayersFile(keep); err != nil {
		for _, l := range partial {
			l.meta.Excluded = l.meta.Excluded[:len(l.meta.Excluded)-1]
		}
		return err
	}
	for _, l := range partial {
		ex := append(append([]scopeMatcher{}, *l.excluded.Load()...), newScopeMatcher(scope))
		l.excluded.Store(&ex)
	}
	b.layers.cur.Store(&keep)
	for _, l := range dropped {
		l.remove.Store(true)
		l.release()
	}
	return nil
}

// closeLayers releases the set's references (Close; no reader is left).
func (b *badgerBackend) closeLayers() {
	b.layers.mu.Lock()
	defer b.layers.mu.Unlock()
	unpinLayers(b.currentLayers())
	b.layers.cur.Store(nil)
}

// RestoreLayers implements LayerRestorer: each source is downloaded into
// a layer file (read ahead of its parser, which checks it and indexes
// it), up to bulkConcurrency at once, and the layers are listed in LAYERS
// once all are complete. An in-memory store has no directory for layers:
// it restores with RestoreEmpty (and ErrNotEmpty when it holds anything).
func (b *badgerBackend) RestoreLayers(srcs []RestoreSource, now int64, progress func(i int, info RestoreInfo)) ([]RestoreInfo, error) {
	if b.inMemory {
		return b.RestoreEmpty(srcs, now, progress)
	}
	prefixes, err := checkSources(srcs)
	if err != nil {
		return nil, err
	}
	if err := b.enterOpening(); err != nil {
		return nil, err
	}
	defer b.exit()
	b.bulkMu.Lock() // no Size while scopes are dropped
	defer b.bulkMu.Unlock()
	dir := b.layersDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state: restore: %w", err)
	}
	b.layers.mu.Lock()
	first := b.layers.next
	b.layers.next += uint64(len(srcs))
	b.layers.mu.Unlock()

	// The scopes are emptied beside the downloads, which do not need
	// Badger: a store opened in the background (Options.OpenInBackground)
	// finishes opening while they run. Nothing else uses the store until
	// RestoreLayers returns, so the order does not show.
	var stop atomic.Bool
	dropped := make(chan error, 1)
	go func() {
		err := b.waitOpen()
		for _, s := range srcs {
			if err != nil {
				break
			}
			if err = b.dropEntered(s.Scope); err != nil {
				err = fmt.Errorf("state: restore: emptying the scope of job %q operator %q: %w", s.Scope.Job, s.Scope.Operator, err)
			}
		}
		if err != nil {
			stop.Store(true)
		}
		dropped <- err
	}()
	made := make([]*layer, len(srcs))
	infos, firstErr := runSources(srcs, &stop, progress, func(i int, s RestoreSource, stop *atomic.Bool) (RestoreInfo, error) {
		meta := layerMeta{ID: first + uint64(i), Checksum: s.Checksum, Scope: toSnapScope(s.Scope)}
		meta.File = strconv.FormatUint(meta.ID, 10) + ".snap"
		l, info, err := b.downloadLayer(filepath.Join(dir, meta.File), meta, s, prefixes[i], now, stop)
		made[i] = l
		return info, err
	})
	if err := <-dropped; err != nil {
		// The scopes may hold what they held: return the store's error,
		// not a download's stop.
		firstErr = &RestoreError{Index: -1, Err: err}
	}
	var made2 []*layer
	for _, l := range made {
		if l != nil {
			made2 = append(made2, l)
		}
	}
	if firstErr == nil {
		b.layers.mu.Lock()
		ls := append(append([]*layer{}, b.currentLayers()...), made2...)
		err := b.writeLayersFile(ls)
		if err == nil {
			b.layers.cur.Store(&ls)
		}
		b.layers.mu.Unlock()
		if err == nil {
			for _, l := range made2 {
				go l.warm()
			}
			return infos, nil
		}
		firstErr = &RestoreError{Index: -1, Err: fmt.Errorf("state: restore: %w", err)}
	}
	for _, l := range made2 {
		l.remove.Store(true)
		l.release()
	}
	return infos, firstErr
}

// downloadLayer reads one source into a new layer file.
func (b *badgerBackend) downloadLayer(path string, meta layerMeta, s RestoreSource, prefix []byte, now int64, stop *atomic.Bool) (*layer, RestoreInfo, error) {
	fp, direct, err := createDirect(path)
	if err != nil {
		return nil, RestoreInfo{}, err
	}
	ok := false
	defer func() {
		fp.Close()
		if !ok {
			os.Remove(path)
		}
	}()
	rc, err := s.Open()
	if err != nil {
		return nil, RestoreInfo{}, fmt.Errorf("opening the snapshot: %w", err)
	}
	lw := &layerWriter{f: fp, direct: direct}
	ix, info, err := parseLayer(&stopReader{r: rc, stop: stop}, s, prefix, now, lw.write)
	rc.Close()
	if err != nil {
		return nil, info, err
	}
	meta.Size = info.Bytes
	if lw.n != meta.Size {
		return nil, info, fmt.Errorf("wrote %d bytes of %s, the snapshot has %d", lw.n, path, meta.Size)
	}
	if lw.padded {
		if err := fp.Truncate(meta.Size); err != nil {
			return nil, info, fmt.Errorf("truncating %s: %w", path, err)
		}
	}
	data, unmap, err := mapFile(fp, meta.Size)
	if err != nil {
		return nil, info, fmt.Errorf("mapping %s: %w", path, err)
	}
	ok = true
	return newLayer(meta, path, ix, data, unmap), info, nil
}

// parseLayer reads a layer's stream through stages (its file's write),
// checking it and indexing it. The checksum is computed in a stage of its
// own, beside the stages and the parser: with a CRC-64/NVME object
// checksum (what checkpoints record) that CRC covers every byte and no
// SHA-256 is computed; otherwise one SHA-256 pass checks both the
// trailer's hash and the object's checksum (s.Checksum, when set).
func parseLayer(r io.Reader, s RestoreSource, prefix []byte, now int64, stages ...func([]byte) error) (*layerIndexer, RestoreInfo, error) {
	var (
		sh  *splitHasher
		crc hash.Hash
		sum func([]byte) error
	)
	if strings.HasPrefix(s.Checksum, objsum.CRC64NVME) {
		crc = objsum.NewCRC64()
		sum = func(p []byte) error { crc.Write(p); return nil }
	} else {
		sh = &splitHasher{h: sha256.New()}
		sum = sh.write
	}
	ra := newReadAheadTo(r, layerChunk, layerChunks, append([]func([]byte) error{sum}, stages...)...)
	ix := &layerIndexer{}
	info, err := snapshotReadHash(ra, s.Scope, now, prefix, s.Checksum, ix, false)
	ra.close()
	if err != nil {
		return nil, info, err
	}
	if crc != nil {
		if got := objsum.Format(objsum.CRC64NVME, crc.Sum(nil)); got != s.Checksum {
			return nil, info, &corruptSnapError{fmt.Errorf("checksum mismatch: the stream (trailer included) has %s, its manifest entry says %s", got, s.Checksum)}
		}
		return ix, info, nil
	}
	body, object := sh.sums()
	if got := objsum.Format(objsum.SHA256, body); got != info.Checksum {
		return nil, info, &corruptSnapError{fmt.Errorf("checksum mismatch: the trailer has %s, the stream hashes to %s", info.Checksum, got)}
	}
	if got := objsum.Format(objsum.SHA256, object); s.Checksum != "" && got != s.Checksum {
		return nil, info, &corruptSnapError{fmt.Errorf("checksum mismatch: the stream (trailer included) hashes to %s, its manifest entry says %s", got, s.Checksum)}
	}
	return ix, info, nil
}

// layerWriter writes a layer file. With O_DIRECT (direct) the data goes
// to the disk without passing through the page cache: filling new page
// cache pages ran at a third of the disk's direct bandwidth on the
// benchmark machine (BENCHMARKS.md), and the layer is read once it is
// needed, not all at once. Every chunk but the last is a multiple of
// directAlign bytes in an aligned buffer (readAhead's); the last is
// written padded to directAlign and the file truncated after.
type layerWriter struct {
	f      *os.File
	direct bool
	n      int64
	pad    []byte
	padded bool
}

const directAlign = 4096

func (w *layerWriter) write(p []byte) error {
	_, err := w.Write(p)
	return err
}

func (w *layerWriter) Write(p []byte) (int, error) {
	if w.padded {
		return 0, errors.New("write after the last partial block")
	}
	if !w.direct || (len(p)%directAlign == 0 && aligned(p)) {
		n, err := w.f.Write(p)
		w.n += int64(n)
		return n, err
	}
	size := (len(p) + directAlign - 1) / directAlign * directAlign
	if cap(w.pad) < size {
		w.pad = alignedBuf(size)
	}
	buf := w.pad[:size]
	copy(buf, p)
	clear(buf[len(p):])
	if _, err := w.f.Write(buf); err != nil {
		return 0, err
	}
	w.n += int64(len(p))
	w.padded = true
	return len(p), nil
}

// alignedBuf returns n bytes starting at a directAlign boundary.
func alignedBuf(n int) []byte {
	raw := make([]byte, n+directAlign)
	off := directAlign - int(uintptr(unsafe.Pointer(&raw[0]))%directAlign)
	if off == directAlign {
		off = 0
	}
	return raw[off : off+n : off+n]
}

func aligned(p []byte) bool {
	return len(p) == 0 || uintptr(unsafe.Pointer(&p[0]))%directAlign == 0
}

// splitHasher hashes a snapshot stream holding back its last trailerLen
// bytes, so that it gives both the hash of the stream before the trailer
// (which the trailer records) and the hash of the whole object.
type splitHasher struct {
	h    hash.Hash
	tail []byte
}

func (s *splitHasher) write(p []byte) error {
	if len(s.tail)+len(p) <= trailerLen {
		s.tail = append(s.tail, p...)
		return nil
	}
	if len(p) >= trailerLen {
		s.h.Write(s.tail)
		s.h.Write(p[:len(p)-trailerLen])
		s.tail = append(s.tail[:0], p[len(p)-trailerLen:]...)
		return nil
	}
	// The held-back bytes and p, less the last trailerLen.
	n := len(s.tail) + len(p) - trailerLen
	s.h.Write(s.tail[:n])
	s.tail = append(s.tail[:0], s.tail[n:]...)
	s.tail = append(s.tail, p...)
	return nil
}

// sums returns the hash of everything but the held-back bytes, and of
// everything.
func (s *splitHasher) sums() (body, object []byte) {
	body = s.h.Sum(nil)
	s.h.Write(s.tail)
	return body, s.h.Sum(nil)
}

// stopReader fails reads once stop is set (another source failed).
type stopReader struct {
	r    io.Reader
	stop *atomic.Bool
}

func (s *stopReader) Read(p []byte) (int, error) {
	if s.stop.Load() {
		return 0, &snapIOError{errBulkStopped}
	}
	return s.r.Read(p)
}
