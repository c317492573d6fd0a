package wal

import (
	"os"
	"syscall"
)

// datasync flushes a file's data (not necessarily its metadata other than
// size) to stable storage.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
