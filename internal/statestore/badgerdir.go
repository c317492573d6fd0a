package statestore

// The Badger backend's state directory: the FORMAT stamp, the SEAL and the
// checks Open makes before Badger touches anything, the lock, and the
// small files the runtime keeps there (LAYOUT, RESTORE_CARRY).
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

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/arkflow-rs/arkflow-go/internal/corruption"
	"github.com/arkflow-rs/arkflow-go/internal/fsutil"
)

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

// removeEmptyMemtables deletes the memtable files of dir that have no
// bytes. Badger creates a memtable's file and then extends it; a process
// killed between the two leaves an empty file, on which Badger's Open fails
// with "while opening memtables ... Create a new file"
// (dgraph-io/badger#2207). An empty file holds no entry, so removing it
// loses nothing.
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
