// Package fsutil holds the file-system steps the storage packages (wal,
// state, checkpoint and internal/durable) share, so each exists once: an
// atomic write of a small file, an fsync of a directory, creating
// directories durably, and the lock that keeps a directory to one opener.
//
// It imports only the standard library. Errors are the os package's
// (*PathError, *LinkError) or wrap ErrLocked; callers add their own
// package prefix and what to check next.
package fsutil
