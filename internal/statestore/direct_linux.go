//go:build linux

package statestore

import (
	"errors"
	"os"
	"syscall"
)

// createDirect creates a file for writing with O_DIRECT (and reading, for
// the mapping after), or without it where the file system refuses it
// (tmpfs); direct reports which.
func createDirect(path string) (f *os.File, direct bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC|syscall.O_DIRECT, 0o644)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, syscall.EINVAL) {
		return nil, false, err
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	return f, false, err
}
