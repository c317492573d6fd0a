package statestore

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/arkflow-rs/arkflow-go/internal/fsutil"
	"github.com/arkflow-rs/arkflow-go/internal/objsum"
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
	// (one call at a time) as each source completes. The layers' files
	// may still be being written when it returns (the last chunks of each
	// download are read from memory meanwhile); Close waits for them.
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
		if !l.writing.Load() { // listed by finishLayer once written
			f.Layers = append(f.Layers, l.meta)
		}
	}
	data, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFile(b.layersDir(), layersFileName, append(data, '\n')); err != nil {
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
	// The checksums were checked by the restore that wrote the file;
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
// it), up to bulkConcurrency at once. Each file is written behind its
// parser: RestoreLayers returns once every stream is read, checked and
// indexed, the last chunks (up to layerChunks) still in memory as the
// layer's tail, and a layer is listed in LAYERS once its file is written
// (finishLayer; Close waits for it). An in-memory store has no directory
// for layers: it restores with RestoreEmpty (and ErrNotEmpty when it
// holds anything).
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
	writers := make([]*behindWriter, len(srcs))
	infos, firstErr := runSources(srcs, &stop, progress, func(i int, s RestoreSource, stop *atomic.Bool) (RestoreInfo, error) {
		meta := layerMeta{ID: first + uint64(i), Checksum: s.Checksum, Scope: toSnapScope(s.Scope)}
		meta.File = strconv.FormatUint(meta.ID, 10) + ".snap"
		l, w, info, err := b.downloadLayer(filepath.Join(dir, meta.File), meta, s, prefixes[i], now, stop)
		made[i], writers[i] = l, w
		return info, err
	})
	// Each layer's file is still being written (downloadLayer): the
	// writer holds a reference until finishLayer is done with it.
	finish := func() {
		for i, l := range made {
			if l != nil {
				l.acquire()
				b.behind.Add(1)
				go b.finishLayer(l, writers[i])
			}
		}
	}
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
		// LAYERS lists each layer once its file is written (finishLayer).
		b.layers.mu.Lock()
		ls := append(append([]*layer{}, b.currentLayers()...), made2...)
		b.layers.cur.Store(&ls)
		b.layers.mu.Unlock()
		finish()
		return infos, nil
	}
	for i, l := range made {
		if l != nil {
			writers[i].abort()
			writers[i].lw.f.Close()
			l.remove.Store(true) // the file goes with the last reference
			l.release()
		}
	}
	return infos, firstErr
}

// downloadLayer reads one source into a new layer file. The file is
// written behind the parser (behindWriter): the layer is returned once
// the stream has been read, checked and indexed, with the chunks not yet
// written as its tail, which finish (run after the layer is installed)
// writes before the layer's file stands alone.
func (b *badgerBackend) downloadLayer(path string, meta layerMeta, s RestoreSource, prefix []byte, now int64, stop *atomic.Bool) (*layer, *behindWriter, RestoreInfo, error) {
	fp, direct, err := createDirect(path)
	if err != nil {
		return nil, nil, RestoreInfo{}, err
	}
	w := newBehindWriter(&layerWriter{f: fp, direct: direct}, stop)
	go w.run()
	ok := false
	defer func() {
		if !ok {
			w.abort()
			fp.Close()
			os.Remove(path)
		}
	}()
	rc, err := s.Open()
	if err != nil {
		return nil, nil, RestoreInfo{}, fmt.Errorf("opening the snapshot: %w", err)
	}
	ix, info, err := parseLayer(&stopReader{r: rc, stop: stop}, s, prefix, now, w)
	rc.Close()
	w.end()
	if werr := w.failed(); werr != nil {
		// A failed write of the file fails the restore, not the
		// snapshot: the error is the disk's.
		return nil, nil, info, werr
	}
	if err != nil {
		return nil, nil, info, err
	}
	meta.Size = info.Bytes
	if !mapsFile {
		<-w.done // the copy mapFile makes must see every byte
	}
	// Mapped at its full size: the part not written yet is a hole, read
	// from the tail until it is written.
	if err := fp.Truncate(meta.Size); err != nil {
		return nil, nil, info, fmt.Errorf("sizing %s: %w", path, err)
	}
	data, unmap, err := mapFile(fp, meta.Size)
	if err != nil {
		return nil, nil, info, fmt.Errorf("mapping %s: %w", path, err)
	}
	ok = true
	l := newLayer(meta, path, ix, data, unmap)
	if off, chunks := w.pending(); len(chunks) > 0 {
		l.tail.Store(&layerTail{off: off, chunks: chunks})
	}
	l.writing.Store(true)
	return l, w, info, nil
}

// finishLayer waits for the write of l's file to end, then lets the file
// stand alone: the tail is dropped, LAYERS lists the layer (unless it was
// dropped meanwhile) and the file is warmed. A failed write keeps the
// tail, so reads stay right, and fails Close: the layer is not listed,
// and the next open removes its file (the runtime restores again from
// its checkpoint).
func (b *badgerBackend) finishLayer(l *layer, w *behindWriter) {
	defer b.behind.Done()
	defer l.release() // the writer's reference
	<-w.done
	err := w.failed()
	lw := w.lw
	if err == nil && lw.n != l.meta.Size {
		err = fmt.Errorf("wrote %d bytes of %s, the snapshot has %d", lw.n, l.path, l.meta.Size)
	}
	if err == nil && lw.padded {
		if err = lw.f.Truncate(l.meta.Size); err != nil {
			err = fmt.Errorf("truncating %s: %w", l.path, err)
		}
	}
	if cerr := lw.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", l.path, cerr)
	}
	if err != nil {
		b.layerFailed(fmt.Errorf("state: writing restored layer %s: %w", l.path, err))
		return
	}
	l.tail.Store(nil)
	b.layers.mu.Lock()
	l.writing.Store(false)
	listed := slices.Contains(b.currentLayers(), l)
	if listed {
		err = b.writeLayersFile(b.currentLayers())
	}
	b.layers.mu.Unlock()
	if err != nil {
		b.layerFailed(err)
		return
	}
	if listed {
		go l.warm()
	}
}

// layerFailed records a failure of a layer's write-behind for Close.
func (b *badgerBackend) layerFailed(err error) {
	b.mu.Lock()
	b.behindErr = errors.Join(b.behindErr, err)
	b.mu.Unlock()
	b.log.Error("restored layer not written; the next open drops it", "error", err)
}

// parseLayer reads a layer's stream through stages (its file's write),
// checking it and indexing it. The checksum is computed in a stage of its
// own, beside the stages and the parser: with a CRC-64/NVME object
// checksum (what checkpoints record) that CRC covers every byte and no
// other is computed; otherwise (a SHA-256 object checksum, or none) the
// stage computes, holding back the trailer, both trailer checksums a
// stream may carry (SHA-256 for format version 1, CRC-64/NVME for 2) and
// checks the one of the stream's version and the object's checksum.
//
// w, when set, takes every chunk once the parser has read it.
func parseLayer(r io.Reader, s RestoreSource, prefix []byte, now int64, w *behindWriter) (*layerIndexer, RestoreInfo, error) {
	var (
		v1, v2 *splitHasher
		crc    hash.Hash
		sum    func([]byte) error
	)
	if strings.HasPrefix(s.Checksum, objsum.CRC64NVME) {
		crc = objsum.NewCRC64()
		sum = func(p []byte) error { crc.Write(p); return nil }
	} else {
		v1, v2 = &splitHasher{h: sha256.New(), n: trailerLenV1}, &splitHasher{h: objsum.NewCRC64(), n: trailerLenV2}
		sum = func(p []byte) error { v1.write(p); v2.write(p); return nil }
	}
	ra := newReadAheadTo(r, layerChunk, layerChunks, sum)
	if w != nil {
		w.recycle, ra.consumed = ra.recycle, w.push
	}
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
	sh, alg := v2, objsum.CRC64NVME
	if strings.HasPrefix(info.Checksum, objsum.SHA256) {
		sh, alg = v1, objsum.SHA256
	}
	if body, _ := sh.sums(); objsum.Format(alg, body) != info.Checksum {
		got := objsum.Format(alg, body)
		return nil, info, &corruptSnapError{fmt.Errorf("checksum mismatch: the trailer has %s, the stream hashes to %s", info.Checksum, got)}
	}
	if s.Checksum == "" {
		return ix, info, nil
	}
	if !strings.HasPrefix(s.Checksum, objsum.SHA256) {
		return nil, info, &corruptSnapError{fmt.Errorf("the manifest's checksum %q names no known algorithm", s.Checksum)}
	}
	if _, object := v1.sums(); objsum.Format(objsum.SHA256, object) != s.Checksum {
		got := objsum.Format(objsum.SHA256, object)
		return nil, info, &corruptSnapError{fmt.Errorf("checksum mismatch: the stream (trailer included) hashes to %s, its manifest entry says %s", got, s.Checksum)}
	}
	return ix, info, nil
}

// splitHasher hashes a snapshot stream holding back its last n bytes (a
// trailer's length), so that it gives both the hash of the stream before
// the trailer (which the trailer records) and the hash of the whole
// object.
type splitHasher struct {
	h    hash.Hash
	n    int
	tail []byte

	done         bool
	body, object []byte
}

func (s *splitHasher) write(p []byte) error {
	if len(s.tail)+len(p) <= s.n {
		s.tail = append(s.tail, p...)
		return nil
	}
	if len(p) >= s.n {
		s.h.Write(s.tail)
		s.h.Write(p[:len(p)-s.n])
		s.tail = append(s.tail[:0], p[len(p)-s.n:]...)
		return nil
	}
	// The held-back bytes and p, less the last n.
	n := len(s.tail) + len(p) - s.n
	s.h.Write(s.tail[:n])
	s.tail = append(s.tail[:0], s.tail[n:]...)
	s.tail = append(s.tail, p...)
	return nil
}

// sums returns the hash of everything but the held-back bytes, and of
// everything. Later calls return the same.
func (s *splitHasher) sums() (body, object []byte) {
	if !s.done {
		s.body = s.h.Sum(nil)
		s.h.Write(s.tail)
		s.object = s.h.Sum(nil)
		s.done = true
	}
	return s.body, s.object
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
