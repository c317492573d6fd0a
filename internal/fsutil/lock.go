package fsutil

import "errors"

// ErrLocked is wrapped by the error of Lock when another open handle, in
// this process or another, holds the lock.
var ErrLocked = errors.New("held by another writer")

// Lock takes an exclusive, non-blocking lock on the file at path,
// creating it (FileMode) if it does not exist, and returns the function
// that releases it. The lock is held for as long as a storage directory is
// open, so that a second opener fails at once with a clear error instead
// of writing files the first is using.
//
// On unix it is flock(2) on a descriptor of its own: a second Lock of the
// same path fails even within one process, and the kernel drops the lock
// when the process dies, so a crash never leaves a stale one. A held lock
// gives an error that names path and wraps ErrLocked; callers add what
// holds such a lock. Elsewhere (no flock) Lock neither creates nor locks
// anything: the one-opener rule is then the caller's to keep.
//
// release unlocks and closes the file and returns the first error; call it
// once.
func Lock(path string) (release func() error, err error) { return lock(path) }
