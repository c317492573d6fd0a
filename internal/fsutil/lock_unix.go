//go:build unix

package fsutil

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

func lock(path string) (func() error, error) {
	// Read-only is enough for flock and works on a file the user made
	// read-only.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, FileMode)
	if err != nil {
		return nil, err
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is %w, in this process or another", path, ErrLocked)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() error {
		err := flock(f, syscall.LOCK_UN)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}

// flock retries EINTR, which a signal may cause even with LOCK_NB.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}
