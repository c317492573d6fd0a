//go:build !linux

package walog

import "os"

func datasync(f *os.File) error { return f.Sync() }

// pwritev writes every byte of bufs to f at off, one write per buffer.
func pwritev(f *os.File, bufs [][]byte, off int64) (n int, err error) {
	for _, b := range bufs {
		w, err := f.WriteAt(b, off+int64(n))
		n += w
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
