//go:build unix

package statestore

import (
	"os"
	"syscall"
)

// mapFile maps a file read-only; unmap releases it. An empty file maps to
// nil.
func mapFile(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}

// mapsFile: mapFile maps the file, so that bytes written to it after the
// mapping was made are read through it (a layer's write-behind).
const mapsFile = true
