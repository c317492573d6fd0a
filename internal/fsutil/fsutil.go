package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// TempSuffix ends the name of the file WriteFile stages dir/name in:
// dir/name+TempSuffix. The name is fixed, not random, so a leftover of a
// crash is recognisable by a caller that checks its directory for foreign
// files (state does) and is overwritten by the next WriteFile of the same
// name rather than piling up. It follows that two WriteFile calls of the
// same dir/name must not run at once; every caller holds its directory's
// Lock or is its only writer.
const TempSuffix = ".tmp"

// FileMode is the permission of the files WriteFile creates, before the
// umask.
const FileMode fs.FileMode = 0o644

// DirMode is the permission of the directories MkdirAllSync creates,
// before the umask.
const DirMode fs.FileMode = 0o755

// WriteFile makes dir/name hold data atomically: a reader, or a restart
// after a crash at any point, sees the old file (or none) or the new one
// whole, never part of it.
//
// It writes dir/name+TempSuffix (truncating a leftover), fsyncs it, renames
// it over dir/name and fsyncs dir, so the new name is durable when it
// returns nil. On an error the temporary file is removed and dir/name is
// as it was, unless the rename happened and only the directory fsync
// failed (then the new content is visible but may not survive a crash).
func WriteFile(dir, name string, data []byte) (err error) {
	tmp := filepath.Join(dir, name+TempSuffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, FileMode)
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			f.Close() // may already be closed; the first error is the one to report
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	// Sync, not fdatasync: the file is new, and its size and name are
	// metadata that must reach the disk with it.
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	renamed = true
	return SyncDir(dir)
}

// SyncDir fsyncs the directory dir, so that entries created, renamed or
// removed in it survive a crash. Every error is returned, the close's
// included: a file system that cannot sync a directory cannot give that
// guarantee, and callers report durability they rely on.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// MkdirAllSync creates dir and its missing parents (DirMode), fsyncing
// the parent of each directory it creates, so that the new entries survive
// a crash. A directory created concurrently counts as created; an existing
// non-directory at dir is an error.
func MkdirAllSync(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAllSync(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, DirMode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // created concurrently
		}
		return err
	}
	return SyncDir(parent)
}
