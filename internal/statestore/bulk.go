package statestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/ristretto/v2/z"
)

// RestoreSource is one snapshot of a RestoreEmpty.
type RestoreSource struct {
	// Scope is where the snapshot's entries go, as for Backend.Restore.
	// The scopes of one RestoreEmpty must not overlap.
	Scope Scope
	// Open opens the snapshot stream. It is called once; the stream is
	// read to its end (so that a reader that checks the object at EOF
	// does) and closed.
	Open func() (io.ReadCloser, error)
	// Checksum, if not empty, is the checksum of the whole stream,
	// trailer included (a manifest's): "crc64nvme:" and the hex
	// CRC-64/NVME, or "sha256:" and the hex SHA-256 (internal/objsum); a
	// stream that sums otherwise fails as corrupt. A checksum of the
	// trailer's algorithm (CRC-64 for snapshot format 2, SHA-256 for 1)
	// costs nothing more: the pass that checks the trailer computes it.
	// RestoreLayers checks a CRC-64 in a stage of its own, which covers
	// the trailer too, and computes nothing else.
	Checksum string
}

// RestoreError is the error of RestoreEmpty: it names the source that
// failed (Index into the sources). Err wraps ErrCorruptSnapshot when the
// snapshot's bytes are at fault.
type RestoreError struct {
	Index int
	Err   error
}

// Error returns Err's message.
func (e *RestoreError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RestoreError) Unwrap() error { return e.Err }

// ErrRestoring is returned by Size while RestoreEmpty runs.
var ErrRestoring = errors.New("state: a restore is in progress")

// ErrNotEmpty is returned by RestoreEmpty when the store holds a live
// entry: use Backend.Restore per snapshot instead.
var ErrNotEmpty = errors.New("state: the store is not empty")

// BulkRestorer is implemented by backends that can fill an empty store
// from several snapshots much faster than Restore can (the Badger
// backend builds its tables directly, without the write path).
type BulkRestorer interface {
	// RestoreEmpty restores every source into a store that holds no live
	// entry at all (of any job); otherwise it returns ErrNotEmpty and
	// changes nothing. Entries outside a source's scope or expired at now
	// are skipped, as by Restore. Nothing may use the store while it
	// runs. On any failure (a *RestoreError) the store is emptied again
	// and holds nothing. progress, if not nil, is called (one call at a
	// time) as each source completes.
	RestoreEmpty(srcs []RestoreSource, now int64, progress func(i int, info RestoreInfo)) ([]RestoreInfo, error)
}

const (
	// bulkConcurrency is how many sources RestoreEmpty reads at once.
	bulkConcurrency = 4
	// bulkBatch is how many bytes of entries go to the StreamWriter at
	// once.
	bulkBatch = 4 << 20
	// readAheadChunk × readAheadChunks is what is read ahead of the
	// parser per source.
	readAheadChunk  = 1 << 20
	readAheadChunks = 8
	// layerChunk × layerChunks is what RestoreLayers reads ahead per
	// source: the direct writes of its file ran 15–20 % faster in 4 MiB
	// than in 1 MiB writes.
	layerChunk  = 4 << 20
	layerChunks = 8
)

var errBulkStopped = errors.New("state: restore stopped: another snapshot failed")

// scopesOverlap reports whether two scopes can hold a common key.
func scopesOverlap(a, b Scope) bool {
	if a.Job != b.Job || (a.Operator != "" && b.Operator != "" && a.Operator != b.Operator) {
		return false
	}
	as, ae, aok := scopeGroups(a.Groups)
	bs, be, bok := scopeGroups(b.Groups)
	return aok && bok && as <= be && bs <= ae
}

// empty reports whether the store holds no live entry at all. The
// caller has entered.
func (b *badgerBackend) empty() (bool, error) {
	if len(b.currentLayers()) > 0 {
		return false, nil
	}
	txn := b.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false})
	defer it.Close()
	it.Rewind()
	return !it.Valid(), nil
}

// checkSources checks the sources of a bulk restore and returns their
// jobs' key prefixes.
func checkSources(srcs []RestoreSource) ([][]byte, error) {
	prefixes := make([][]byte, len(srcs))
	for i, s := range srcs {
		p, err := keyJobPrefix(s.Scope.Job)
		if err != nil {
			return nil, err
		}
		if s.Scope.Operator != "" {
			if _, err := keyOperatorPrefix(s.Scope.Job, s.Scope.Operator); err != nil {
				return nil, err
			}
		}
		if s.Open == nil {
			return nil, fmt.Errorf("state: restore: source %d has no Open", i)
		}
		prefixes[i] = p
		for j := range i {
			if scopesOverlap(srcs[j].Scope, s.Scope) {
				return nil, fmt.Errorf("state: restore: the scopes of sources %d and %d overlap", j, i)
			}
		}
	}
	return prefixes, nil
}

// runSources runs restore for every source, bulkConcurrency at once. The
// first failure (a stop caused by another failure never replaces it)
// sets stop, which restore passes to what it reads, and is returned;
// sources not started by then are not. The caller may set stop too.
// progress is called, one call at a time, as each source completes.
func runSources(srcs []RestoreSource, stop *atomic.Bool, progress func(i int, info RestoreInfo),
	restore func(i int, s RestoreSource, stop *atomic.Bool) (RestoreInfo, error)) ([]RestoreInfo, *RestoreError) {
	infos := make([]RestoreInfo, len(srcs))
	var (
		mu       sync.Mutex
		firstErr *RestoreError
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, bulkConcurrency)
	for i := range srcs {
		if stop.Load() {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			s := srcs[i]
			info, err := restore(i, s, stop)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil || errors.Is(firstErr.Err, errBulkStopped) {
					firstErr = &RestoreError{Index: i, Err: fmt.Errorf("state: restore of job %q: %w", s.Scope.Job, err)}
				}
				stop.Store(true)
				return
			}
			infos[i] = info
			if progress != nil {
				progress(i, info)
			}
		}()
	}
	wg.Wait()
	return infos, firstErr
}

// RestoreEmpty writes the snapshots with Badger's StreamWriter: each
// source (already in strictly increasing key order, which the snapshot
// reader checks) is one stream of sorted keys, and the scopes do not
// overlap, so the streams build non-overlapping tables at the bottom
// level directly — no memtables, no L0, no compactions. The StreamWriter
// drops whatever the store held when it starts, which is why the store
// must hold nothing. Each source is read ahead of its parser, and up to
// bulkConcurrency sources at once.
func (b *badgerBackend) RestoreEmpty(srcs []RestoreSource, now int64, progress func(i int, info RestoreInfo)) ([]RestoreInfo, error) {
	prefixes, err := checkSources(srcs)
	if err != nil {
		return nil, err
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.exit()
	b.gcMu.Lock() // no value-log GC while the StreamWriter owns the store
	defer b.gcMu.Unlock()
	b.bulkMu.Lock() // nor a Size
	defer b.bulkMu.Unlock()
	ok, err := b.empty()
	if err != nil {
		return nil, fmt.Errorf("state: restore: %w", err)
	}
	if !ok {
		return nil, ErrNotEmpty
	}
	sw, version, err := b.prepareStream()
	if err != nil {
		return nil, fmt.Errorf("state: restore: preparing the stream writer: %w", err)
	}
	infos, firstErr := runSources(srcs, new(atomic.Bool), progress, func(i int, s RestoreSource, stop *atomic.Bool) (RestoreInfo, error) {
		rc, err := s.Open()
		if err != nil {
			return RestoreInfo{}, fmt.Errorf("opening the snapshot: %w", err)
		}
		ra := newReadAhead(rc)
		sink := &streamSink{sw: sw, id: uint32(i + 1), version: version, stop: stop}
		info, err := snapshotRead(ra, s.Scope, now, prefixes[i], s.Checksum, sink)
		if err == nil {
			if err = sink.flush(); err != nil {
				err = fmt.Errorf("writing restored entries: %w", err)
			}
		}
		sink.abort()
		ra.close()
		rc.Close()
		return info, err
	})
	if firstErr == nil {
		if err := sw.Flush(); err != nil {
			firstErr = &RestoreError{Index: -1, Err: fmt.Errorf("state: restore: finishing the tables: %w", err)}
		}
	} else {
		sw.Cancel()
	}
	if firstErr != nil {
		// The store was empty: empty it again (tables the stream writer
		// already placed stay until dropped).
		if derr := b.db.DropAll(); derr != nil {
			firstErr.Err = errors.Join(firstErr.Err, fmt.Errorf("state: restore: deleting the partly restored entries: %w", derr))
		}
		return infos, firstErr
	}
	return infos, nil
}

// prepareStream returns a prepared StreamWriter and the version its
// entries get. A store that has never had a table (a new directory) takes
// PrepareIncremental, which writes at the bottom level like Prepare but
// without Prepare's DropAll (which recreates the value log and the
// memtable: 10–80 ms here); any other store, which holds nothing live
// but may hold deleted or expired entries, is dropped by Prepare. The
// version is above every version in the store, so that nothing left in
// it could shadow a restored entry.
func (b *badgerBackend) prepareStream() (*badger.StreamWriter, uint64, error) {
	fresh := true
	for _, l := range b.db.Levels() {
		if l.NumTables > 0 {
			fresh = false
			break
		}
	}
	if fresh {
		version := b.db.MaxVersion() + 1
		sw := b.db.NewStreamWriter()
		if err := sw.PrepareIncremental(); err == nil {
			return sw, version, nil
		}
		sw.Cancel() // a memtable holds (dead) entries: drop them below
	}
	sw := b.db.NewStreamWriter()
	if err := sw.Prepare(); err != nil {
		sw.Cancel()
		return nil, 0, err
	}
	return sw, 1, nil
}

// streamSink hands one source's entries to the StreamWriter as one
// stream, in batches, from a goroutine of its own (the StreamWriter
// decodes each batch again before its table builder gets it; that runs
// beside the parsing instead of after it).
type streamSink struct {
	sw      *badger.StreamWriter
	id      uint32
	version uint64
	stop    *atomic.Bool
	buf     *z.Buffer

	started bool
	full    chan *z.Buffer
	free    chan *z.Buffer
	done    chan error
}

const sinkBuffers = 2

func (s *streamSink) start() {
	s.started = true
	s.full = make(chan *z.Buffer, sinkBuffers)
	s.free = make(chan *z.Buffer, sinkBuffers)
	s.done = make(chan error, 1)
	for range sinkBuffers {
		s.free <- z.NewBuffer(bulkBatch+(1<<20), "arkflow.restore")
	}
	go func() {
		var err error
		for buf := range s.full {
			if err == nil {
				if err = s.sw.Write(buf); err != nil {
					s.stop.Store(true)
				}
			}
			buf.Reset()
			s.free <- buf
		}
		s.done <- err
	}()
}

func (s *streamSink) put(key, value []byte, exp int64) error {
	if s.stop.Load() {
		return errBulkStopped
	}
	if !s.started {
		s.start()
	}
	if s.buf == nil {
		s.buf = <-s.free
	}
	appendKV(s.buf, s.id, s.version, key, value, exp)
	if s.buf.LenNoPadding() >= bulkBatch {
		s.full <- s.buf
		s.buf = nil
	}
	return nil
}

// appendKV appends what badger.KVToBuffer would for
// pb.KV{Key: key, Value: storedValueEncode(value, exp), Version: version,
// ExpiresAt: expirySeconds(exp), StreamId: id}, encoding the protobuf by
// hand: no reflection, and the value is copied once, straight into the
// buffer. version must not be 0.
func appendKV(buf *z.Buffer, id uint32, version uint64, key, value []byte, exp int64) {
	const (
		tagKey       = 1<<3 | 2
		tagValue     = 2<<3 | 2
		tagVersion   = 4<<3 | 0
		tagExpiresAt = 5<<3 | 0
		tagStreamID  = 10<<3 | 0
	)
	vlen := storedValueHeader + len(value)
	ttl := expirySeconds(exp)
	size := 1 + uvarintLen(uint64(len(key))) + len(key) + 1 + uvarintLen(uint64(vlen)) + vlen + 1 + uvarintLen(version) + 1 + uvarintLen(uint64(id))
	if ttl != 0 {
		size += 1 + uvarintLen(ttl)
	}
	dst := buf.SliceAllocate(size)[:0]
	dst = append(dst, tagKey)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = append(dst, tagValue)
	dst = binary.AppendUvarint(dst, uint64(vlen))
	dst = storedValueEncode(dst, value, exp)
	dst = append(dst, tagVersion)
	dst = binary.AppendUvarint(dst, version)
	if ttl != 0 {
		dst = append(dst, tagExpiresAt)
		dst = binary.AppendUvarint(dst, ttl)
	}
	dst = append(dst, tagStreamID)
	dst = binary.AppendUvarint(dst, uint64(id))
	if len(dst) != size {
		panic(fmt.Sprintf("state: appendKV: encoded %d bytes, computed %d", len(dst), size))
	}
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// finish hands over the last batch (unless abort) and waits for the
// writer; it returns the writer's error.
func (s *streamSink) finish(abort bool) error {
	if !s.started {
		return nil
	}
	if s.buf != nil {
		if !abort && s.buf.LenNoPadding() > 0 {
			s.full <- s.buf
		} else {
			s.free <- s.buf
		}
		s.buf = nil
	}
	close(s.full)
	err := <-s.done
	for range sinkBuffers {
		(<-s.free).Release()
	}
	s.started = false
	return err
}

func (s *streamSink) flush() error { return s.finish(false) }

func (s *streamSink) abort() { s.finish(true) }
