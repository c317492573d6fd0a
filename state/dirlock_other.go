//go:build !unix

package state

// lockDir is a no-op where flock is not available; Badger's own directory
// lock still refuses a second open.
func lockDir(string) (func() error, error) { return func() error { return nil }, nil }
