package statestore

// readAhead: a snapshot stream read a few chunks ahead of its parser, through
// optional stages (a hash, a layer file's write), each in a goroutine of its
// own, so that the download, the stages and the parsing overlap. Both bulk
// restores read through it (RestoreEmpty, RestoreLayers).

import (
	"io"
	"sync"
	"sync/atomic"
)

// readAhead reads a stream in a goroutine, a few chunks ahead of its
// consumer, so that the download and the parsing overlap.
type readAhead struct {
	full chan []byte
	free chan []byte
	done chan struct{}
	err  error // set before full is closed
	cur  []byte
	held []byte // the chunk cur is a part of
	exit chan struct{}
	// consumed, when set, takes each chunk the consumer has read to its
	// end, in order, instead of the read-ahead reusing it at once; it
	// hands the chunk back with recycle, from any goroutine.
	consumed func(buf []byte)
}

// recycle gives a chunk back for the reading goroutine to fill again.
// It never blocks: at most as many chunks exist as free holds.
func (ra *readAhead) recycle(buf []byte) { ra.free <- buf[:cap(buf)] }

func newReadAhead(r io.Reader) *readAhead {
	return newReadAheadTo(r, readAheadChunk, readAheadChunks)
}

// newReadAheadTo is newReadAhead with stages: every chunk passes through
// each stage in order (a hash, a layer file's write), each stage a
// goroutine of its own, before the consumer gets it, so that reading, the
// stages and parsing overlap. A failed stage ends the stream with its
// error.
func newReadAheadTo(r io.Reader, chunk, chunks int, stages ...func([]byte) error) *readAhead {
	ra := &readAhead{
		full: make(chan []byte, chunks),
		free: make(chan []byte, chunks),
		done: make(chan struct{}),
		exit: make(chan struct{}),
	}
	for range chunks {
		ra.free <- alignedBuf(chunk) // for O_DIRECT writes
	}
	// No send below blocks: at most chunks buffers exist and
	// every channel holds that many.
	errs := &readAheadErrs{}
	var wg sync.WaitGroup
	readDone := make(chan struct{})
	in := make(chan []byte, chunks)
	src := in
	for _, stage := range stages {
		out := make(chan []byte, chunks)
		wg.Add(1)
		go func(in <-chan []byte, out chan<- []byte) {
			defer wg.Done()
			ra.runStage(stage, errs, in, out)
		}(src, out)
		src = out
	}
	wg.Add(1)
	go func() { // the last stage's output to the consumer
		defer wg.Done()
		for buf := range src {
			ra.full <- buf
		}
	}()
	go func() {
		wg.Wait()
		<-readDone
		ra.err = errs.read
		if errs.stage != nil {
			ra.err = errs.stage
		}
		close(ra.full)
		close(ra.exit)
	}()
	go func() {
		defer close(readDone)
		ra.fill(r, errs, in)
	}()
	return ra
}

// readAheadErrs is what the goroutines of one read-ahead share about how
// it ends. The consumer sees the first stage's failure if there is one,
// else the reader's end.
type readAheadErrs struct {
	failed atomic.Bool // a stage failed: the reader stops, the stages pass nothing on
	mu     sync.Mutex
	stage  error // the first stage's failure
	read   error // io.EOF at the end
}

// set keeps err in *dst unless *dst already holds one.
func (e *readAheadErrs) set(dst *error, err error) {
	e.mu.Lock()
	if *dst == nil {
		*dst = err
	}
	e.mu.Unlock()
}

// runStage passes each chunk of in through stage to out, and closes out
// when in is closed. Once any stage has failed, chunks go back to the
// free list instead.
func (ra *readAhead) runStage(stage func([]byte) error, errs *readAheadErrs, in <-chan []byte, out chan<- []byte) {
	defer close(out)
	for buf := range in {
		if !errs.failed.Load() {
			if err := stage(buf); err != nil {
				errs.set(&errs.stage, err)
				errs.failed.Store(true)
			}
		}
		if errs.failed.Load() {
			ra.free <- buf[:cap(buf)]
			continue
		}
		out <- buf
	}
}

// fill reads r into free chunks and sends them to in until r ends (a
// short last chunk is the end: io.EOF), r fails, a stage fails or the
// consumer closes the read-ahead; then it closes in.
func (ra *readAhead) fill(r io.Reader, errs *readAheadErrs, in chan<- []byte) {
	defer close(in)
	for {
		if errs.failed.Load() {
			return
		}
		select {
		case <-ra.done:
			return
		default:
		}
		var buf []byte
		select {
		case buf = <-ra.free:
		case <-ra.done:
			return
		}
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			in <- buf[:n]
		}
		if err != nil {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			errs.set(&errs.read, err)
			return
		}
	}
}

func (ra *readAhead) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(ra.cur) == 0 {
		if ra.held != nil {
			if ra.consumed != nil {
				ra.consumed(ra.held)
			} else {
				ra.recycle(ra.held)
			}
			ra.held = nil
		}
		b, ok := <-ra.full
		if !ok {
			return 0, ra.err
		}
		ra.held, ra.cur = b, b
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// close stops the reading goroutine and waits for it; the caller then
// closes the underlying reader (a read in progress finishes first).
func (ra *readAhead) close() {
	close(ra.done)
	for range ra.full {
	}
	<-ra.exit
}
