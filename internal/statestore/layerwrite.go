package statestore

// Writing a restored layer's file: behindWriter writes each chunk once the
// parser has read it, layerWriter writes it with O_DIRECT where it can,
// in buffers aligned for it (alignedBuf).

import (
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// behindWriter writes a layer file's chunks in order, each once the
// parser has read it (readAhead.consumed), and gives it back to the
// read-ahead. The download runs at most the read-ahead's chunks ahead of
// the disk, as before, but the parser no longer waits for the disk: when
// the stream ends, the chunks still queued (up to layerChunks) are the
// layer's tail, written after the restore has returned.
type behindWriter struct {
	lw      *layerWriter
	stop    *atomic.Bool // set on a failed write: stops the download
	recycle func([]byte)

	mu      sync.Mutex
	cond    sync.Cond
	queue   [][]byte // handed over, not written yet (queue[0] may be being written)
	off     int64    // the file offset of queue[0]
	ended   bool
	aborted bool
	err     error
	done    chan struct{}
}

// testBeforeLayerWrite, set by tests only, runs before each chunk's
// write with the chunk's offset; an error fails the write.
var testBeforeLayerWrite func(off int64) error

func newBehindWriter(lw *layerWriter, stop *atomic.Bool) *behindWriter {
	w := &behindWriter{lw: lw, stop: stop, done: make(chan struct{})}
	w.cond.L = &w.mu
	return w
}

func (w *behindWriter) push(buf []byte) {
	w.mu.Lock()
	w.queue = append(w.queue, buf)
	w.mu.Unlock()
	w.cond.Signal()
}

// end says no chunk follows.
func (w *behindWriter) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
	w.cond.Signal()
}

// abort ends the writer without writing what is queued, and waits for
// it.
func (w *behindWriter) abort() {
	w.mu.Lock()
	w.ended, w.aborted = true, true
	w.mu.Unlock()
	w.cond.Signal()
	<-w.done
}

func (w *behindWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// pending returns the chunks not written yet and the offset of the first.
func (w *behindWriter) pending() (int64, [][]byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.off, slices.Clone(w.queue)
}

func (w *behindWriter) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.ended {
			w.cond.Wait()
		}
		if len(w.queue) == 0 || w.aborted {
			w.mu.Unlock()
			return
		}
		buf, skip := w.queue[0], w.err != nil
		w.mu.Unlock()
		var err error
		if !skip && testBeforeLayerWrite != nil {
			err = testBeforeLayerWrite(w.off)
		}
		if !skip && err == nil {
			err = w.lw.write(buf)
		}
		w.mu.Lock()
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.off += int64(len(buf))
		if err != nil && w.err == nil {
			w.err = err
			if w.stop != nil {
				w.stop.Store(true)
			}
		}
		w.mu.Unlock()
		if w.recycle != nil {
			w.recycle(buf)
		}
	}
}

// layerWriter writes a layer file. With O_DIRECT (direct) the data goes
// to the disk without passing through the page cache: filling new page
// cache pages ran at a third of the disk's direct bandwidth on the
// benchmark machine (docs/benchmarks/checkpoints.md), and the layer is read once it is
// needed, not all at once. Every chunk but the last is a multiple of
// directAlign bytes in an aligned buffer (readAhead's); the last is
// written padded to directAlign and the file truncated after.
type layerWriter struct {
	f      *os.File
	direct bool
	n      int64
	pad    []byte
	padded bool
}

const directAlign = 4096

func (w *layerWriter) write(p []byte) error {
	_, err := w.Write(p)
	return err
}

func (w *layerWriter) Write(p []byte) (int, error) {
	if w.padded {
		return 0, errors.New("write after the last partial block")
	}
	if !w.direct || (len(p)%directAlign == 0 && aligned(p)) {
		n, err := w.f.Write(p)
		w.n += int64(n)
		return n, err
	}
	size := (len(p) + directAlign - 1) / directAlign * directAlign
	if cap(w.pad) < size {
		w.pad = alignedBuf(size)
	}
	buf := w.pad[:size]
	copy(buf, p)
	clear(buf[len(p):])
	if _, err := w.f.Write(buf); err != nil {
		return 0, err
	}
	w.n += int64(len(p))
	w.padded = true
	return len(p), nil
}

// alignedBuf returns n bytes starting at a directAlign boundary.
func alignedBuf(n int) []byte {
	raw := make([]byte, n+directAlign)
	off := directAlign - int(uintptr(unsafe.Pointer(&raw[0]))%directAlign)
	if off == directAlign {
		off = 0
	}
	return raw[off : off+n : off+n]
}

func aligned(p []byte) bool {
	return len(p) == 0 || uintptr(unsafe.Pointer(&p[0]))%directAlign == 0
}
