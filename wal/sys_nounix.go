//go:build !unix

package wal

// lockDir is a no-op where flock is unavailable: the one-writer rule is
// then the caller's to keep.
func lockDir(string) (func() error, error) { return func() error { return nil }, nil }
