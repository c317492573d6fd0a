package statestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/arkflow-rs/arkflow-go/internal/corruption"
	"github.com/arkflow-rs/arkflow-go/internal/fsutil"
)

// Badger backend.
//
// # Directory
//
// A state directory holds Badger's files, the directory layers/ of the
// checkpoints restored into it (layer.go: checked by Open, not by SEAL),
// and files of ours (besides CarryFileName and LayoutFileName, which the
// runtime keeps there):
//
//   - FORMAT: {"format_version":N,"store":"badger","created_by":"arkflow-go"},
//     written (temp file, fsync, rename, fsync of the directory) when the
//     directory is created or found empty. Open reads it before Badger
//     touches anything: another format version is ErrFormat, a non-empty
//     directory without it (or with an unreadable one) is ErrNotState, and
//     in both cases nothing on disk has changed. While a backend has the
//     directory open it holds an flock on FORMAT, so a second Open fails
//     at once ("in use") before reading anything Badger is writing.
//   - SEAL: written by Close after Badger has closed: the name, size and
//     CRC32C of every file in the directory. Open verifies it (every listed
//     file present with its size and checksum, no other Badger file) and
//     removes it before opening Badger; any difference is ErrCorrupt.
//     Badger by itself opens a truncated MANIFEST by truncating it further,
//     deletes tables the MANIFEST does not list, truncates a damaged value
//     log tail and does not read table blocks at open, so a damaged
//     directory could otherwise open as a silently smaller (or empty)
//     state. A directory without SEAL was not closed cleanly (the process
//     died): it is opened with Badger's own recovery, every table's block
//     checksums verified at open (by verifyTable: Badger's own
//     OnTableRead check can crash the process on some damage), after a
//     read-only check of what Badger would repair silently
//     (checkUnsealed): tables or logs without a MANIFEST, a MANIFEST with a
//     damaged tail, a listed table missing — each ErrCorrupt. A damaged
//     tail of the value log or of a memtable log is indistinguishable
//     from a write cut short by the crash and is truncated by Badger. Its contents are whatever the last writes left
//     (writes are not synced): the runtime recovers from the WAL and
//     checkpoints, not from it — BadgerStatsOf reports Sealed == false.
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

// ErrCorrupt is returned (wrapped) by Open for a state directory whose
// files do not match the SEAL written by the last clean Close, or whose
// Badger files are inconsistent, and by a restored layer that no longer
// matches what was restored. It is narrower than the module's one
// corruption marker (checkpoint.ErrCorrupt, wal.ErrCorrupt,
// arkflow.ErrCorrupt), which it matches: errors.Is(err, ErrCorrupt) says
// the local directory is at fault, not a snapshot (ErrCorruptSnapshot).
var ErrCorrupt = corruption.Sentinel("state: corrupt state directory")

const (
	formatFileName = "FORMAT"
	sealFileName   = "SEAL"
	lockFileName   = "LOCK" // Badger's
	formatStore    = "badger"
	formatCreator  = "arkflow-go"
	// tmpSuffix ends the temporary files fsutil.WriteFile stages ours in.
	tmpSuffix = fsutil.TempSuffix
)

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

type formatFile struct {
	FormatVersion int    `json:"format_version"`
	Store         string `json:"store"`
	CreatedBy     string `json:"created_by"`
}

type sealFile struct {
	SealedAtMS int64      `json:"sealed_at_ms"`
	Files      []sealItem `json:"files"`
}

type sealItem struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
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

// badgerPrepareDir checks (or creates) the FORMAT stamp and verifies and
// removes the SEAL. It changes nothing on disk before FORMAT has been
// found to match. fresh reports a directory it created or found empty.
func badgerPrepareDir(dir string, version int) (stats BadgerStats, release func() error, fresh bool, err error) {
	release, err = badgerCheckDir(dir, version, &stats, &fresh)
	return stats, release, fresh, err
}

func badgerCheckDir(dir string, version int, stats *BadgerStats, fresh *bool) (release func() error, err error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("state: creating %s: %w", dir, err)
		}
		*fresh = true
		return badgerNewDir(dir, version)
	case err != nil:
		return nil, fmt.Errorf("state: %w", err)
	case !fi.IsDir():
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNotState, dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if len(ents) == 0 {
		*fresh = true
		return badgerNewDir(dir, version)
	}
	formatPath := filepath.Join(dir, formatFileName)
	data, err := os.ReadFile(formatPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s is not empty and has no %s file", ErrNotState, dir, formatFileName)
	}
	if err != nil {
		return nil, fmt.Errorf("state: reading %s: %w", formatPath, err)
	}
	var f formatFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %s has an unreadable %s file: %v", ErrNotState, dir, formatFileName, err)
	}
	if f.Store != formatStore {
		return nil, fmt.Errorf("%w: %s holds a %q store, not %q", ErrNotState, dir, f.Store, formatStore)
	}
	if f.FormatVersion != version {
		return nil, fmt.Errorf("%w: %s has state format version %d, this program uses version %d; the directory was not changed",
			ErrFormat, dir, f.FormatVersion, version)
	}

	// The directory is ours and of our version.
	if release, err = lockDir(formatPath); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			release()
			release = nil
		}
	}()
	sealPath := filepath.Join(dir, sealFileName)
	sealData, err := os.ReadFile(sealPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := checkUnsealed(dir, ents); err != nil {
			return release, err
		}
		return release, removeUnbornLogs(dir, ents)
	case err != nil:
		return release, fmt.Errorf("state: reading %s: %w", sealPath, err)
	}
	t := time.Now()
	if err := verifySeal(dir, sealData, ents, stats); err != nil {
		return release, err
	}
	stats.Verify = time.Since(t)
	stats.Sealed = true
	// From here on Badger changes the files: the seal no longer holds.
	if err := os.Remove(sealPath); err != nil {
		return release, fmt.Errorf("state: %w", err)
	}
	return release, fsutil.SyncDir(dir)
}

// badgerNewDir stamps an empty directory and locks it.
func badgerNewDir(dir string, version int) (func() error, error) {
	if err := writeFormat(dir, version); err != nil {
		return nil, err
	}
	return lockDir(filepath.Join(dir, formatFileName))
}

// ours reports whether a directory entry is one of our files (not
// Badger's): FORMAT, SEAL, CarryFileName, LayoutFileName, their temp
// files, and Badger's LOCK.
func ours(name string) bool {
	return name == formatFileName || name == sealFileName || name == lockFileName || name == CarryFileName || name == layersDirName || name == LayoutFileName ||
		name == formatFileName+tmpSuffix || name == sealFileName+tmpSuffix || name == CarryFileName+tmpSuffix || name == LayoutFileName+tmpSuffix
}

// LayoutFileName is a small file the runtime keeps in a Badger state
// directory: how it laid the keyed state out (the number of key groups,
// the subtasks of each stateful operator). It reads it before it opens
// the store, so that a start that would read the state with another
// layout is refused with the directory untouched (internal/runtime:
// checkLayout). SEAL and the directory checks ignore it.
const LayoutFileName = "LAYOUT"

// WriteLayout writes dir/LayoutFileName atomically (temp file, fsync,
// rename, fsync of the directory).
func WriteLayout(dir string, data []byte) error {
	return fsutil.WriteFile(dir, LayoutFileName, data)
}

// ReadLayout returns dir/LayoutFileName's contents, or nil when there is
// none.
func ReadLayout(dir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, LayoutFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// CarryFileName is a small file the runtime keeps in a Badger state
// directory while it restores a checkpoint into the store: what it
// carries across the restore, which empties the store first
// (internal/runtime: carriedFloors). SEAL and the directory checks ignore
// it.
const CarryFileName = "RESTORE_CARRY"

// WriteCarry writes dir/CarryFileName atomically (temp file, fsync,
// rename, fsync of the directory).
func WriteCarry(dir string, data []byte) error {
	return fsutil.WriteFile(dir, CarryFileName, data)
}

// checkUnsealed checks a directory that was not closed cleanly, read only,
// for the damage Badger would repair silently: tables or logs without a
// MANIFEST (Badger would start an empty one and delete the tables), a
// MANIFEST with a damaged tail (Badger would truncate it and then delete
// the tables it no longer lists), and tables the MANIFEST lists that are
// missing.
func checkUnsealed(dir string, ents []os.DirEntry) error {
	var hasManifest, hasData bool
	files := make(map[string]bool, len(ents))
	for _, e := range ents {
		n := e.Name()
		files[n] = true
		switch {
		case n == badger.ManifestFilename:
			hasManifest = true
		case strings.HasSuffix(n, ".sst"), strings.HasSuffix(n, ".vlog"), strings.HasSuffix(n, ".mem"):
			hasData = true
		}
	}
	if !hasManifest {
		if hasData {
			return fmt.Errorf("%w: %s has tables or logs but no %s", ErrCorrupt, dir, badger.ManifestFilename)
		}
		return nil
	}
	path := filepath.Join(dir, badger.ManifestFilename)
	fp, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	defer fp.Close()
	fi, err := fp.Stat()
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	m, end, err := badger.ReplayManifestFile(fp, 0, badger.DefaultOptions("").WithLogger(nil))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	if end != fi.Size() {
		return fmt.Errorf("%w: %s is damaged after byte %d of %d", ErrCorrupt, path, end, fi.Size())
	}
	for id := range m.Tables {
		name := table.IDToFilename(id)
		if !files[name] {
			return fmt.Errorf("%w: %s: table %s listed in %s is missing", ErrCorrupt, dir, name, badger.ManifestFilename)
		}
		if err := verifyTable(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("%w: %s: table %s: %w", ErrCorrupt, dir, name, err)
		}
	}
	return nil
}

// removeUnbornLogs removes empty value log files from a directory that was
// not closed cleanly. Badger creates a value log at every open (and when
// one fills) with O_CREATE, then sizes it and writes its header; a process
// killed in between leaves an empty file, which Badger then refuses to
// open ("Open existing file: …: Create a new file"). An empty file holds
// no entry and no value pointer can refer into it.
func removeUnbornLogs(dir string, ents []os.DirEntry) error {
	removed := false
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".vlog") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return fmt.Errorf("state: %w", err)
		}
		if fi.Size() != 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("state: removing the empty value log %s: %w", e.Name(), err)
		}
		removed = true
	}
	if removed {
		return fsutil.SyncDir(dir)
	}
	return nil
}

// verifyTable checks the index and every block checksum of a table, read
// only. Badger's own check at open (ChecksumVerificationMode OnTableRead)
// runs in its goroutines and dereferences nil on some damaged blocks,
// which would crash the process; here a panic is an error.
func verifyTable(path string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("damaged: %v", r)
		}
	}()
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	// OpenTable owns mf from here and closes it on error.
	t, err := table.OpenTable(mf, table.Options{ReadOnly: true, ChkMode: options.NoVerification, Compression: options.None, BlockSize: 4 << 10})
	if err != nil {
		return err
	}
	defer mf.Close(-1) // not t.DecrRef, which deletes the file
	return t.VerifyChecksum()
}

func verifySeal(dir string, data []byte, ents []os.DirEntry, stats *BadgerStats) error {
	var s sealFile
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("%w: %s: unreadable %s: %v", ErrCorrupt, dir, sealFileName, err)
	}
	listed := make(map[string]bool, len(s.Files))
	for _, f := range s.Files {
		listed[f.Name] = true
	}
	for _, e := range ents {
		if n := e.Name(); !ours(n) && !listed[n] {
			return fmt.Errorf("%w: %s: file %s appeared after the last clean close", ErrCorrupt, dir, n)
		}
	}
	buf := make([]byte, 1<<20)
	for _, f := range s.Files {
		if f.Name != filepath.Base(f.Name) || ours(f.Name) {
			return fmt.Errorf("%w: %s: bad file name %q in %s", ErrCorrupt, dir, f.Name, sealFileName)
		}
		size, crc, err := fileCRC(filepath.Join(dir, f.Name), buf)
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %s: file %s is missing", ErrCorrupt, dir, f.Name)
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrCorrupt, dir, err)
		}
		if size != f.Size {
			return fmt.Errorf("%w: %s: file %s has %d bytes, %d when the store was closed", ErrCorrupt, dir, f.Name, size, f.Size)
		}
		if crc != f.CRC32C {
			return fmt.Errorf("%w: %s: file %s has CRC32C %08x, %08x when the store was closed", ErrCorrupt, dir, f.Name, crc, f.CRC32C)
		}
		stats.Files++
		stats.Bytes += size
	}
	return nil
}

func fileCRC(path string, buf []byte) (int64, uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var (
		n   int64
		crc uint32
	)
	for {
		m, err := f.Read(buf)
		crc = crc32.Update(crc, crc32c, buf[:m])
		n += int64(m)
		if err == io.EOF {
			return n, crc, nil
		}
		if err != nil {
			return n, crc, err
		}
	}
}

// writeSeal records every file of the closed store in SEAL.
func writeSeal(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	s := sealFile{SealedAtMS: time.Now().UnixMilli(), Files: []sealItem{}}
	buf := make([]byte, 1<<20)
	for _, e := range ents {
		if ours(e.Name()) {
			continue
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("unexpected non-regular file %s", e.Name())
		}
		size, crc, err := fileCRC(filepath.Join(dir, e.Name()), buf)
		if err != nil {
			return err
		}
		s.Files = append(s.Files, sealItem{Name: e.Name(), Size: size, CRC32C: crc})
	}
	sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Name < s.Files[j].Name })
	data, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	return fsutil.WriteFile(dir, sealFileName, data)
}

func writeFormat(dir string, version int) error {
	data, err := json.Marshal(formatFile{FormatVersion: version, Store: formatStore, CreatedBy: formatCreator})
	if err != nil {
		return err
	}
	if err := fsutil.WriteFile(dir, formatFileName, append(data, '\n')); err != nil {
		return fmt.Errorf("state: writing %s: %w", filepath.Join(dir, formatFileName), err)
	}
	return nil
}

// lockDir takes fsutil.Lock on path (the FORMAT file) for as long as a
// backend has the directory open, so a second Open — in this process or
// another — fails at once with a clear error instead of reading files
// Badger is writing. Badger takes its own lock later. Where flock is
// unavailable it locks nothing, and Badger's lock still refuses a second
// open.
func lockDir(path string) (release func() error, err error) {
	release, err = fsutil.Lock(path)
	if errors.Is(err, fsutil.ErrLocked) {
		return nil, fmt.Errorf("state: %w: the directory is in use by another open backend (only one may have it open)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return release, nil
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

// removeEmptyMemtables deletes the memtable files of dir that have no
// bytes. Badger creates a memtable's file and then extends it; a process
// killed between the two leaves an empty file, on which Badger's Open fails
// with "while opening memtables ... Create a new file" (dgraph-io/badger
// issue 2207). An empty file holds no entry, so removing it loses nothing.
func removeEmptyMemtables(dir string) error {
	mems, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		return err
	}
	removed := false
	for _, m := range mems {
		fi, err := os.Stat(m)
		if err != nil || fi.Size() != 0 {
			continue
		}
		if err := os.Remove(m); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		return fsutil.SyncDir(dir)
	}
	return nil
}
