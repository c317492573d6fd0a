package statestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Badger backend.
//
// # Directory
//
// What a state directory holds and how Open checks it: badgerdir.go.
//
// # Options (badgerOptions)
//
//   - SyncWrites off: durability comes from the journal's WAL and from
//     checkpoints (snapshots), not from Badger; a synced write per epoch
//     would cost an fsync per batch for nothing.
//   - ValueThreshold 1 KiB: counters, sums and other small accumulators
//     stay in the LSM tree next to their keys (one read, no value-log
//     lookup, no value-log garbage); larger values (buffered window rows)
//     go to the value log, so compaction does not rewrite them.
//   - ValueLogFileSize 64 MiB (Badger's default is 1 GiB): value-log GC
//     rewrites whole files, and small files let it reclaim space from a
//     small state. A goroutine runs RunValueLogGC(0.5) every minute.
//   - MemTableSize 64 MiB × NumMemtables 3: bounds memory at ~192 MiB of
//     memtables; the largest transaction Badger accepts is ~15% of a
//     memtable (~9.6 MiB), which bounds an atomic Apply (see Apply).
//   - NumCompactors 2: the fewest Badger allows, one for L0 and one for
//     the other levels; on a 2-core box more would compete with the job.
//     NumLevelZeroTables 5 / NumLevelZeroTablesStall 15 (Badger's).
//   - BlockCacheSize 32 MiB, IndexCacheSize 0 (table indexes and bloom
//     filters stay in memory), Compression none: state values are small
//     binary accumulators that compress poorly and the keys of a block
//     are already prefix-compressed; without compression the tables are
//     read straight from mmap and the cache only saves block parsing.
//   - DetectConflicts off: Apply only writes, so Badger need not track
//     read sets. NumVersionsToKeep 1. MetricsEnabled off (expvar globals).
//   - Block checksums verified on every block read (OnBlockRead); at open
//     the SEAL's checksums (or verifyTable after a crash) have covered
//     every table already.
//   - Logging goes to Options.Logger, every Badger level at slog debug
//     (attribute badger_level keeps Badger's own level); discarded when
//     Logger is nil.
//   - InMemory: Badger's WithInMemory, no directory, no FORMAT or SEAL;
//     ValueThreshold 1 MiB, since in memory Badger refuses larger values.
//
// Limits Badger adds: an encoded key (key.go) of at most 65000 bytes, and
// a value of at most 64 MiB on disk (the value-log file size) or 1 MiB in
// memory; larger ones make Apply fail.
//
// # Costs
//
// Open duration (FORMAT check, SEAL verification — reading every file once
// for its CRC32C — and badger.Open) is kept in BadgerStats.Open: see
// BadgerStatsOf and OpenDuration. Close likewise reads every file once to
// write SEAL.
//
// Size is exact: a keys-only iteration over the job's or operator's key
// range summing the encoded key length and the stored value length
// (9-byte header + value) of every entry Badger still has (its TTL, i.e.
// the expiry rounded up to seconds, not passed by the wall clock). Values
// in the LSM tree cost nothing extra; a value in the value log has its
// exact length read from the (mmapped) log. Its cost is O(entries in the
// range) — like a Scan without copying values — so call it per checkpoint
// or metrics tick, not per record.

// vlogGCInterval is how often the value log is garbage-collected.
var vlogGCInterval = time.Minute

// BadgerStats describes how a Badger backend was opened.
type BadgerStats struct {
	// Open is the duration of Open: the FORMAT check, the SEAL
	// verification and badger.Open.
	Open time.Duration
	// Verify is the part of Open spent checking SEAL's checksums.
	Verify time.Duration
	// Sealed reports that the directory had been closed cleanly and its
	// files matched the seal. False for a new or in-memory store, or
	// after a crash.
	Sealed bool
	// Files and Bytes are the files and bytes verified against SEAL.
	Files int
	Bytes int64
}

// BadgerStatsOf returns the open statistics of a Badger backend; ok is
// false for other backends.
func BadgerStatsOf(b Backend) (stats BadgerStats, ok bool) {
	bb, ok := b.(*badgerBackend)
	if !ok {
		return BadgerStats{}, false
	}
	bb.waitOpen()
	return bb.stats, true
}

// OpenDuration is how long Open took for a Badger backend (0 for others).
func OpenDuration(b Backend) time.Duration {
	s, _ := BadgerStatsOf(b)
	return s.Open
}

// badgerOptions returns the Badger options of a job's state store; see the
// comment at the top of the file.
func badgerOptions(opts Options) badger.Options {
	dir := opts.Dir
	if opts.InMemory {
		dir = ""
	}
	threshold := int64(1 << 10)
	if opts.InMemory {
		// In memory Badger refuses values above the threshold; 1 MiB is
		// the most it allows.
		threshold = 1 << 20
	}
	return badger.DefaultOptions(dir).
		WithInMemory(opts.InMemory).
		WithSyncWrites(false).
		WithValueThreshold(threshold).
		WithValueLogFileSize(64 << 20).
		WithMemTableSize(64 << 20).
		WithNumMemtables(3).
		WithNumCompactors(2).
		WithNumLevelZeroTables(5).
		WithNumLevelZeroTablesStall(15).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(0).
		WithCompression(options.None).
		WithDetectConflicts(false).
		WithNumVersionsToKeep(1).
		WithMetricsEnabled(false).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithLogger(badgerLogger{l: opts.Logger})
}

// badgerLogger routes Badger's logs to slog at debug level.
type badgerLogger struct{ l *slog.Logger }

func (a badgerLogger) log(level, format string, args []any) {
	if a.l == nil || !a.l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	a.l.Debug(strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger", "badger_level", level)
}

func (a badgerLogger) Errorf(f string, v ...any)   { a.log("error", f, v) }
func (a badgerLogger) Warningf(f string, v ...any) { a.log("warning", f, v) }
func (a badgerLogger) Infof(f string, v ...any)    { a.log("info", f, v) }
func (a badgerLogger) Debugf(f string, v ...any)   { a.log("debug", f, v) }

type badgerBackend struct {
	db       *badger.DB
	dir      string
	inMemory bool
	stats    BadgerStats
	unlock   func() error // releases lockDir

	// opened is closed when a background open (Options.OpenInBackground)
	// has finished, with its error in openErr; nil when Open opened
	// Badger itself. db is not used before then.
	opened  chan struct{}
	openErr error

	mu       sync.Mutex
	idle     *sync.Cond // signalled when inflight drops to 0
	closed   bool
	inflight int

	stopGC chan struct{}
	gcDone chan struct{}
	// gcMu is held by a value-log GC round and by RestoreEmpty, whose
	// StreamWriter must have the store to itself.
	gcMu sync.Mutex
	// bulkMu is held by RestoreEmpty and RestoreLayers, and for reading
	// by Size.
	bulkMu sync.RWMutex

	layers layerSet // restored layers (layer.go)
	// behind counts the restored layers whose files are still being
	// written (finishLayer); behindErr (under mu) collects their
	// failures, for Close.
	behind    sync.WaitGroup
	behindErr error
	log       *slog.Logger
}

func openBadger(opts Options) (Backend, error) {
	t0 := time.Now()
	if opts.FormatVersion == 0 {
		opts.FormatVersion = 1
	}
	b := &badgerBackend{dir: opts.Dir, inMemory: opts.InMemory, log: opts.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.idle = sync.NewCond(&b.mu)
	fresh := false
	if !opts.InMemory {
		if opts.Dir == "" {
			return nil, errors.New("state: the badger backend needs a directory (or InMemory)")
		}
		var err error
		if b.stats, b.unlock, fresh, err = badgerPrepareDir(opts.Dir, opts.FormatVersion); err != nil {
			return nil, err
		}
	}
	if opts.OpenInBackground && fresh {
		// A new directory holds no layers: nothing for openDB to load,
		// so a restore may write its layer files while Badger opens.
		b.opened = make(chan struct{})
		go func() {
			defer close(b.opened)
			if testBeforeBackgroundOpen != nil {
				testBeforeBackgroundOpen(opts.Dir)
			}
			b.openErr = b.openDB(opts, t0, false)
		}()
		return b, nil
	}
	if err := b.openDB(opts, t0, true); err != nil {
		return nil, err
	}
	return b, nil
}

// testBeforeBackgroundOpen, set by tests only, runs in a background open
// before Badger opens.
var testBeforeBackgroundOpen func(dir string)

// openDB opens Badger in b's directory (which badgerPrepareDir locked),
// then the restored layers (when loadLayers), and starts the value-log GC.
// On failure it releases the directory's lock.
func (b *badgerBackend) openDB(opts Options, t0 time.Time, loadLayers bool) error {
	fail := func(err error) error {
		if b.unlock != nil {
			b.unlock()
			b.unlock = nil
		}
		return err
	}
	if !opts.InMemory {
		if err := removeEmptyMemtables(opts.Dir); err != nil {
			return fail(fmt.Errorf("state: opening badger in %s: %w", opts.Dir, err))
		}
	}
	db, err := badger.Open(badgerOptions(opts))
	if err != nil {
		if opts.InMemory {
			return fail(fmt.Errorf("state: opening in-memory badger: %w", err))
		}
		return fail(fmt.Errorf("state: opening badger in %s: %w", opts.Dir, err))
	}
	b.db = db
	b.stats.Open = time.Since(t0)
	if opts.InMemory {
		return nil
	}
	if loadLayers {
		if err := b.loadLayers(); err != nil {
			db.Close()
			return fail(err)
		}
	}
	b.stopGC, b.gcDone = make(chan struct{}), make(chan struct{})
	go b.vlogGC()
	return nil
}

// waitOpen waits for a background open (Options.OpenInBackground) and
// returns its error.
func (b *badgerBackend) waitOpen() error {
	if b.opened != nil {
		<-b.opened
		return b.openErr
	}
	return nil
}

// vlogGC garbage-collects the value log until Close.
func (b *badgerBackend) vlogGC() {
	defer close(b.gcDone)
	t := time.NewTicker(vlogGCInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stopGC:
			return
		case <-t.C:
			if !b.gcMu.TryLock() {
				continue // a restore is running
			}
			for b.db.RunValueLogGC(0.5) == nil {
				select {
				case <-b.stopGC:
					b.gcMu.Unlock()
					return
				default:
				}
			}
			b.gcMu.Unlock()
		}
	}
}

// enter registers a call; false after Close.
// enter registers a call in flight, once Badger is open; it fails with
// ErrClosed after Close began, or with the error of a background open.
func (b *badgerBackend) enter() error {
	if err := b.waitOpen(); err != nil {
		return err
	}
	return b.enterOpening()
}

// enterOpening is enter without waiting for a background open: for a
// caller that waits for it itself (RestoreLayers).
func (b *badgerBackend) enterOpening() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	b.inflight++
	return nil
}

func (b *badgerBackend) exit() {
	b.mu.Lock()
	b.inflight--
	if b.inflight == 0 {
		b.idle.Broadcast()
	}
	b.mu.Unlock()
}

// Close waits for the calls in flight, closes Badger and seals the
// directory. Calls that start after Close began return ErrClosed (also
// from inside a Scan callback, so a callback that calls Close does not
// deadlock — its own Scan is still in flight, though, so it must not).
func (b *badgerBackend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for b.inflight > 0 {
		b.idle.Wait()
	}
	b.mu.Unlock()
	if err := b.waitOpen(); err != nil {
		return err // openDB released the directory
	}
	if b.stopGC != nil {
		close(b.stopGC)
		<-b.gcDone
	}
	if b.unlock != nil {
		defer b.unlock()
	}
	b.behind.Wait() // every restored layer written, and listed
	b.closeLayers()
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("state: closing badger: %w", err)
	}
	if b.inMemory {
		return nil
	}
	if err := writeSeal(b.dir); err != nil {
		return fmt.Errorf("state: sealing %s: %w", b.dir, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.behindErr
}

func (b *badgerBackend) Get(k Key, now int64) ([]byte, int64, bool, error) {
	enc, err := keyEncode(nil, k)
	if err != nil {
		return nil, 0, false, err
	}
	if err := b.enter(); err != nil {
		return nil, 0, false, err
	}
	defer b.exit()
	txn := b.db.NewTransaction(false)
	defer txn.Discard()
	item, err := txn.Get(enc)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return b.layerGet(enc, now)
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("state: get: %w", err)
	}
	var (
		value []byte
		exp   int64
		ok    bool
	)
	err = item.Value(func(v []byte) error {
		val, e, err := storedValueDecode(v)
		if err != nil {
			return err
		}
		if liveAt(e, now, wallSeconds()) {
			value, exp, ok = append([]byte{}, val...), e, true
		}
		return nil
	})
	if err != nil {
		return nil, 0, false, fmt.Errorf("state: get: %w", err)
	}
	return value, exp, ok, nil
}

// layerGet looks enc up in the layer covering it (Badger does not hold
// it).
func (b *badgerBackend) layerGet(enc []byte, now int64) ([]byte, int64, bool, error) {
	l := b.coveringLayer(enc)
	if l == nil {
		return nil, 0, false, nil
	}
	defer l.release()
	v, exp, found, err := l.get(enc)
	if err != nil {
		return nil, 0, false, fmt.Errorf("state: get: %w", err)
	}
	if !found || !liveAt(exp, now, wallSeconds()) {
		return nil, 0, false, nil
	}
	return append([]byte{}, v...), exp, true, nil
}

// keyEncodedLen is the length of keyEncode(nil, k).
func keyEncodedLen(k *Key) int {
	return 1 + 2 + len(k.Job) + 2 + len(k.Operator) + 2 + 2 + len(k.Namespace) + len(k.User)
}

// Apply writes the mutations in one Badger transaction. Badger refuses a
// transaction larger than ~15% of a memtable (ErrTxnTooBig, ~9.6 MiB of
// keys and values here); Apply then commits what it has and goes on in a
// new transaction, so a batch that large is atomic per chunk only: a
// crash between chunks can leave a prefix of it applied. The journal's
// epochs are far below that size in practice, and recovery replays the
// WAL over a checkpoint, which is idempotent.
func (b *badgerBackend) Apply(muts []Mutation) error {
	if len(muts) == 0 {
		return nil
	}
	total := 0
	for i := range muts {
		total += keyEncodedLen(&muts[i].Key)
		if !muts[i].Delete {
			total += storedValueHeader + len(muts[i].Value)
		}
	}
	// One arena for every key and value; it never grows, so the slices
	// stay valid until the commit.
	arena := make([]byte, 0, total)
	entries := make([]badger.Entry, len(muts))
	for i := range muts {
		m := &muts[i]
		if err := mutationCheck(m); err != nil {
			return err
		}
		start := len(arena)
		var err error
		if arena, err = keyEncode(arena, m.Key); err != nil {
			return err
		}
		entries[i].Key = arena[start:len(arena):len(arena)]
		if !m.Delete {
			start = len(arena)
			arena = storedValueEncode(arena, m.Value, m.ExpiresAt)
			entries[i].Value = arena[start:len(arena):len(arena)]
			entries[i].ExpiresAt = expirySeconds(m.ExpiresAt)
		}
	}
	if err := b.enter(); err != nil {
		return err
	}
	defer b.exit()
	// Over a restored layer, a delete is a tombstone and a put keeps no
	// Badger TTL for keys the layer holds (see layer.go).
	var tomb []bool
	if len(b.currentLayers()) > 0 {
		for i := range muts {
			m := &muts[i]
			if !m.Delete && m.ExpiresAt == 0 {
				continue
			}
			holds, err := b.layerHolds(entries[i].Key)
			if err != nil {
				return fmt.Errorf("state: apply: %w", err)
			}
			if !holds {
				continue
			}
			if m.Delete {
				if tomb == nil {
					tomb = make([]bool, len(muts))
				}
				tomb[i] = true
				entries[i].Value = storedTombstoneValue()
			}
			entries[i].ExpiresAt = 0
		}
	}
	txn := b.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for i := range entries {
		set := func() error {
			if muts[i].Delete && (tomb == nil || !tomb[i]) {
				return txn.Delete(entries[i].Key)
			}
			return txn.SetEntry(&entries[i])
		}
		err := set()
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err := txn.Commit(); err != nil {
				return fmt.Errorf("state: apply: %w", err)
			}
			txn = b.db.NewTransaction(true)
			err = set()
		}
		if err != nil {
			return fmt.Errorf("state: apply: %w", err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("state: apply: %w", err)
	}
	return nil
}

// badgerCursor adapts a Badger iterator to kvCursor.
type badgerCursor struct{ it *badger.Iterator }

func (c badgerCursor) seek(k []byte) { c.it.Seek(k) }
func (c badgerCursor) valid() bool   { return c.it.Valid() }
func (c badgerCursor) key() []byte   { return c.it.Item().Key() }
func (c badgerCursor) next()         { c.it.Next() }

// view runs fn with an iterator over the scope's job in one read
// transaction (a consistent view).
func (b *badgerBackend) view(jobName string, fn func(c badgerCursor, layers []*layer) error) error {
	prefix, err := keyJobPrefix(jobName)
	if err != nil {
		return err
	}
	if err := b.enter(); err != nil {
		return err
	}
	defer b.exit()
	layers := b.pinLayers(jobName)
	defer unpinLayers(layers)
	return b.viewEntered(prefix, func(c badgerCursor) error { return fn(c, layers) })
}

// viewEntered is view for a caller that has entered already.
func (b *badgerBackend) viewEntered(prefix []byte, fn func(c badgerCursor) error) error {
	txn := b.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: prefix})
	defer it.Close()
	return fn(badgerCursor{it})
}

// scanRaw calls fn with the raw key, the value and the expiry of every
// entry of the scope (continuing with sub, see scopeIter) live at now:
// Badger's, merged with the layers'.
func (b *badgerBackend) scanRaw(c badgerCursor, layers []*layer, scope Scope, sub []byte, now int64, fn func(key, value []byte, exp int64) error) error {
	wall := wallSeconds()
	if len(layers) > 0 {
		return walkMerged(c, layers, scope, sub, func(exp int64) bool { return liveAt(exp, now, wall) }, fn)
	}
	return walkScopeSub(c, scope, sub, func() error {
		item := c.it.Item()
		// fn runs inside Value's callback: a value read from the value
		// log is only valid there.
		return item.Value(func(v []byte) error {
			value, exp, err := storedValueDecode(v)
			if err != nil {
				return fmt.Errorf("%w (key %x)", err, item.Key())
			}
			if !liveAt(exp, now, wall) {
				return nil
			}
			return fn(item.Key(), value, exp)
		})
	})
}

func (b *badgerBackend) Scan(scope Scope, now int64, fn func(Entry) error) error {
	return b.scanSub(scope, nil, now, fn)
}

func (b *badgerBackend) scanSub(scope Scope, sub []byte, now int64, fn func(Entry) error) error {
	var ent Entry
	return b.view(scope.Job, func(c badgerCursor, layers []*layer) error {
		return b.scanRaw(c, layers, scope, sub, now, func(key, value []byte, exp int64) error {
			if err := keyDecode(key, &ent.Key); err != nil {
				return err
			}
			ent.Value, ent.ExpiresAt = value, exp
			return fn(ent)
		})
	})
}

func (b *badgerBackend) Snapshot(w io.Writer, scope Scope, now int64) (SnapshotInfo, error) {
	var info SnapshotInfo
	err := b.view(scope.Job, func(c badgerCursor, layers []*layer) error {
		var err error
		info, err = snapshotWrite(w, scope, now, func(scope Scope, now int64, fn func(key, value []byte, exp int64) error) error {
			return b.scanRaw(c, layers, scope, nil, now, fn)
		})
		return err
	})
	return info, err
}

func (b *badgerBackend) Restore(r io.Reader, scope Scope, now int64) (RestoreInfo, error) {
	prefix, err := keyJobPrefix(scope.Job)
	if err != nil {
		return RestoreInfo{}, err
	}
	if err := b.enter(); err != nil {
		return RestoreInfo{}, err
	}
	defer b.exit()
	empty := func(scope Scope, now int64) (bool, error) {
		found := false
		errFound := errors.New("found")
		layers := b.pinLayers(scope.Job)
		defer unpinLayers(layers)
		err := b.viewEntered(prefix, func(c badgerCursor) error {
			return b.scanRaw(c, layers, scope, nil, now, func([]byte, []byte, int64) error {
				found = true
				return errFound
			})
		})
		if err != nil && !errors.Is(err, errFound) {
			return false, err
		}
		return !found, nil
	}
	return snapshotRestore(r, scope, now, empty, &badgerSink{b: b}, b.dropScope)
}

// dropScope deletes every entry of the scope, in write batches. The
// caller has entered.
func (b *badgerBackend) dropScope(scope Scope) error {
	prefix, err := keyJobPrefix(scope.Job)
	if err != nil {
		return err
	}
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	err = b.viewEntered(prefix, func(c badgerCursor) error {
		return walkScope(c, scope, func() error {
			return wb.Delete(c.it.Item().KeyCopy(nil))
		})
	})
	if err != nil {
		return err
	}
	return wb.Flush()
}

// badgerSink writes restored entries through a WriteBatch, which commits
// them in transactions of Badger's maximum size as they come.
type badgerSink struct {
	b  *badgerBackend
	wb *badger.WriteBatch
}

func (s *badgerSink) put(key, value []byte, exp int64) error {
	if s.wb == nil {
		s.wb = s.b.db.NewWriteBatch()
	}
	buf := make([]byte, 0, len(key)+storedValueHeader+len(value))
	buf = append(buf, key...)
	buf = storedValueEncode(buf, value, exp)
	return s.wb.SetEntry(&badger.Entry{Key: buf[:len(key)], Value: buf[len(key):], ExpiresAt: expirySeconds(exp)})
}

func (s *badgerSink) flush() error {
	if s.wb == nil {
		return nil
	}
	err := s.wb.Flush()
	s.wb = nil
	return err
}

func (s *badgerSink) abort() {
	if s.wb != nil {
		s.wb.Cancel()
		s.wb = nil
	}
}

func (b *badgerBackend) Size(jobName, operator string) (int64, error) {
	n, _, err := b.Measure(jobName, operator)
	return n, err
}

func (b *badgerBackend) Measure(jobName, operator string) (bytes, keys int64, err error) {
	// Size is what a metrics reader calls at any time; while RestoreEmpty
	// runs, Badger may be dropping its tables (DropAll does not tolerate
	// concurrent reads), so Size declines instead of reading.
	if !b.bulkMu.TryRLock() {
		return 0, 0, ErrRestoring
	}
	defer b.bulkMu.RUnlock()
	var n int64
	err = b.view(jobName, func(c badgerCursor, layers []*layer) error {
		scope := Scope{Job: jobName, Operator: operator, Groups: AllKeyGroups}
		if len(layers) > 0 {
			wall := wallSeconds()
			return walkMerged(c, layers, scope, nil, func(exp int64) bool { return notCollected(exp, wall) }, func(key, value []byte, _ int64) error {
				n += int64(len(key) + storedValueHeader + len(value))
				keys++
				return nil
			})
		}
		return walkScope(c, scope, func() error {
			item := c.it.Item()
			vs := item.ValueSize()
			if item.EstimatedSize()-vs != item.KeySize() {
				// The value is in the value log and ValueSize is an
				// estimate; read the exact length.
				if err := item.Value(func(v []byte) error { vs = int64(len(v)); return nil }); err != nil {
					return err
				}
			}
			n += item.KeySize() + vs
			keys++
			return nil
		})
	})
	return n, keys, err
}
