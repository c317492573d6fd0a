//go:build unix

package state

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive, non-blocking flock on path (the FORMAT file)
// for as long as a backend has the directory open, so a second Open — in
// this process or another — fails at once with a clear error instead of
// reading files Badger is writing. Badger takes its own lock later.
func lockDir(path string) (release func() error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state: %s is in use by another open backend", path)
		}
		return nil, fmt.Errorf("state: locking %s: %w", path, err)
	}
	return func() error {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}
