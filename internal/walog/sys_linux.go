package walog

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// datasync flushes a file's data (not necessarily its metadata other than
// size) to stable storage.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// maxIOV is Linux's IOV_MAX.
const maxIOV = 1024

// pwritev writes every byte of bufs to f at off with pwritev(2),
// continuing after short writes; n is how many bytes were written.
func pwritev(f *os.File, bufs [][]byte, off int64) (n int, err error) {
	fd := int(f.Fd())
	for len(bufs) > 0 {
		batch := bufs[:min(len(bufs), maxIOV)]
		w, err := unix.Pwritev(fd, batch, off+int64(n))
		if w > 0 {
			n += w
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if w == 0 {
			return n, io.ErrShortWrite
		}
		for w > 0 && len(bufs) > 0 {
			if w >= len(bufs[0]) {
				w -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			bufs[0] = bufs[0][w:]
			w = 0
		}
	}
	return n, nil
}
