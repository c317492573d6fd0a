//go:build !linux

package statestore

import "os"

// createDirect creates a file for writing and reading; direct I/O is only
// used on Linux.
func createDirect(path string) (f *os.File, direct bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	return f, false, err
}
