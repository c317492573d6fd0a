package ckptstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Ranged reads. With StoreOptions.DownloadConcurrency above 1, a state
// object of known size (its manifest entry's) is read from an s3 store
// as byte ranges of rangeChunk, that many of them in flight, and handed
// to the reader in order: S3 serves each connection at a fraction of
// what it serves in parallel (AWS's advice for fast downloads is
// byte-range fetches). A range whose body fails
// part-way is fetched again (up to rangeAttempts times), which a single
// GET cannot do: a dropped connection no longer fails a restore that has
// read most of a large object. Every response must give the manifest's
// size as the object's total and the same ETag; otherwise the object is
// not the one the manifest describes (a *CorruptError, or an error if it
// changed while it was read).

const (
	rangeChunk    = 8 << 20
	rangeAttempts = 3
	// rangeMin is the smallest object read in ranges; a smaller one is
	// one GET.
	rangeMin = 2 * rangeChunk
)

// rangeGetter is a Store that reads part of an object (the s3 store).
type rangeGetter interface {
	// getRange returns the body of a read of n bytes of key from off,
	// with the object's ETag and total size.
	getRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, rangeInfo, error)
	// rangesAtOnce is how many ranges to read at once; 1 or less reads
	// an object with one Get.
	rangesAtOnce() int
}

type rangeInfo struct {
	etag string
	size int64
}

// rangedReader reads an object of known size as ranges (see above). The
// caller must Close it.
type rangedReader struct {
	ctx    context.Context
	cancel context.CancelFunc
	g      rangeGetter
	key    string
	size   int64
	chunks []chan rangedChunk // one per range, each filled once
	free   chan []byte        // buffers (nil until made) for ranges to fetch
	next   int                // the range Read takes next
	cur    []byte
	held   []byte // the buffer cur is part of
	err    error  // sticky
	wg     sync.WaitGroup

	mu   sync.Mutex
	etag string // the first response's
}

type rangedChunk struct {
	buf []byte
	err error
}

func openRanged(ctx context.Context, g rangeGetter, key string, size int64) *rangedReader {
	ctx, cancel := context.WithCancel(ctx)
	ahead := max(g.rangesAtOnce(), 1)
	r := &rangedReader{ctx: ctx, cancel: cancel, g: g, key: key, size: size,
		chunks: make([]chan rangedChunk, (size+rangeChunk-1)/rangeChunk), free: make(chan []byte, ahead)}
	for i := range r.chunks {
		r.chunks[i] = make(chan rangedChunk, 1)
	}
	for range ahead {
		r.free <- nil
	}
	r.wg.Add(1)
	go r.schedule()
	return r
}

// schedule starts each range's fetch, in order, as a buffer is free: at
// most rangesAtOnce ranges are fetched or waiting to be read.
func (r *rangedReader) schedule() {
	defer r.wg.Done()
	for i := range r.chunks {
		var buf []byte
		select {
		case buf = <-r.free:
		case <-r.ctx.Done():
			return
		}
		if buf == nil {
			buf = make([]byte, rangeChunk)
		}
		off := int64(i) * rangeChunk
		buf = buf[:min(rangeChunk, r.size-off)]
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			err := r.fetch(off, buf)
			r.chunks[i] <- rangedChunk{buf: buf, err: err}
		}()
	}
}

// fetch fills buf with the object's bytes from off.
func (r *rangedReader) fetch(off int64, buf []byte) error {
	var err error
	for range rangeAttempts {
		var body io.ReadCloser
		var info rangeInfo
		body, info, err = r.g.getRange(r.ctx, r.key, off, int64(len(buf)))
		if err != nil {
			if r.ctx.Err() != nil || errors.Is(err, ErrNotFound) || IsCorruption(err) {
				return err
			}
			continue // minio-go retried the request already; once more
		}
		if info.size != r.size {
			body.Close()
			return &CorruptError{Key: r.key, Reason: fmt.Sprintf("the object has %d bytes, its manifest entry says %d", info.size, r.size)}
		}
		r.mu.Lock()
		if r.etag == "" {
			r.etag = info.etag
		}
		same := r.etag == info.etag
		r.mu.Unlock()
		if !same {
			body.Close()
			return fmt.Errorf("checkpoint: get %s: the object changed while it was read (ETag %s, then %s)", r.key, r.etag, info.etag)
		}
		_, err = io.ReadFull(body, buf)
		body.Close()
		if err == nil {
			return nil
		}
		if r.ctx.Err() != nil {
			return r.ctx.Err()
		}
		err = fmt.Errorf("checkpoint: get %s: reading bytes %d-%d: %w", r.key, off, off+int64(len(buf))-1, err)
	}
	return err
}

func (r *rangedReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for len(r.cur) == 0 {
		if r.held != nil {
			r.free <- r.held[:cap(r.held)]
			r.held = nil
		}
		if r.next == len(r.chunks) {
			return 0, io.EOF
		}
		var c rangedChunk
		select {
		case c = <-r.chunks[r.next]:
		case <-r.ctx.Done():
			r.err = r.ctx.Err()
			return 0, r.err
		}
		r.next++
		if c.err != nil {
			r.err = c.err
			return 0, r.err
		}
		r.held, r.cur = c.buf, c.buf
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// Close stops the fetches and waits for them.
func (r *rangedReader) Close() error {
	r.cancel()
	r.wg.Wait()
	if r.err == nil {
		r.err = errors.New("checkpoint: read after Close")
	}
	return nil
}
