package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
)

// The limits and defaults of S3Storage's streaming uploads.
const (
	// DefaultPartSize is UploadOptions.PartSize's default.
	DefaultPartSize = 16 << 20
	// MinPartSize is S3's smallest part (but the last).
	MinPartSize = 5 << 20
	// MaxParts is S3's limit on the parts of one upload.
	MaxParts = 10000
	// DefaultUploadConcurrency is UploadOptions.Concurrency's default.
	// With one part in flight the producer of a stream and its upload take
	// turns; with 4 they overlap and parts go up in parallel, as minio-go
	// does for uploads of known size.
	DefaultUploadConcurrency = 4
)

// UploadOptions tune S3Storage.CreateObject.
type UploadOptions struct {
	// PartSize is the multipart part size (default DefaultPartSize; S3
	// wants at least MinPartSize). An object of at most one part is sent
	// as one PUT; a longer one as a multipart upload of at most MaxParts.
	PartSize uint64
	// Concurrency is how many parts of one upload are in flight at once
	// (default DefaultUploadConcurrency). Each holds a PartSize buffer
	// while the next is written, so an upload takes up to
	// PartSize×(Concurrency+1) bytes of memory. The storage keeps
	// Concurrency+1 of these buffers between uploads, so that periodic
	// uploads do not allocate them again every round.
	Concurrency int
}

// CreateObject streams the object up through a writer that fills part
// buffers from the storage's free list. An object that fits one part is
// sent as one PUT on Close, which the client can retry; a longer one goes
// up as a multipart upload, Concurrency parts at once while the next is
// written, completed on Close. minio-go's own streaming upload allocated
// its part buffers (Concurrency × PartSize) for every object: 160 MB of
// new memory per 108 MB checkpoint at p=2 on the checkpoint benchmark,
// which the garbage collector then had to clear while the job ran. Each
// part is sent by minio-go, which retries it from its buffer. A failed
// part, a failed Write or a done ctx aborts the upload, leaving the name
// as it was.
//
// The request bodies are not signed (DisableContentSha256): minio-go
// signs no SHA-256 of a body on TLS anyway, and on plain HTTP that was a
// second SHA-256 pass over every byte, which its users checksum
// themselves (a checkpoint's manifest holds each state object's SHA-256,
// checked on every restore; docs/benchmarks/checkpoints.md).
func (s *S3Storage) CreateObject(ctx context.Context, name string) (io.WriteCloser, error) {
	pctx, cancel := context.WithCancel(ctx)
	return &s3Writer{s: s, ctx: ctx, pctx: pctx, cancel: cancel, name: name,
		slots: make(chan struct{}, s.up.Concurrency)}, nil
}

const contentType = "application/octet-stream"

type s3Writer struct {
	s      *S3Storage
	ctx    context.Context // the caller's
	pctx   context.Context // the parts', cancelled on the first failure
	cancel context.CancelFunc
	name   string
	buf    []byte // the part being filled (len: filled; cap: PartSize)
	num    int    // parts sent
	upload string // the multipart upload's id, once started
	slots  chan struct{}
	wg     sync.WaitGroup
	err    error // sticky: a failed Write
	done   bool

	mu      sync.Mutex
	parts   []minio.CompletePart
	sendErr error
}

func (w *s3Writer) failed() error {
	if w.err != nil {
		return w.err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sendErr != nil {
		return w.sendErr
	}
	return w.ctx.Err()
}

// space returns the unfilled rest of the current part, sending the
// current part first if it is full (there is more to come, so the
// object is multipart).
func (w *s3Writer) space() ([]byte, error) {
	if w.done {
		return nil, errors.New("blob: write after Close")
	}
	if err := w.failed(); err != nil {
		return nil, err
	}
	if w.buf == nil {
		w.buf = w.s.partBuf()[:0]
	}
	if len(w.buf) == cap(w.buf) {
		if err := w.send(); err != nil {
			w.err = err
			return nil, err
		}
		w.buf = w.s.partBuf()[:0]
	}
	return w.buf[len(w.buf):cap(w.buf)], nil
}

func (w *s3Writer) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		free, err := w.space()
		if err != nil {
			return written, err
		}
		n := copy(free, p)
		w.buf = w.buf[:len(w.buf)+n]
		p = p[n:]
		written += n
	}
	return written, nil
}

// ReadFrom reads r into the part buffers directly (io.Copy uses it), one
// copy fewer than Write. A read error is the writer's too: Close then
// aborts.
func (w *s3Writer) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for {
		free, err := w.space()
		if err != nil {
			return total, err
		}
		n, rerr := r.Read(free)
		w.buf = w.buf[:len(w.buf)+n]
		total += int64(n)
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			w.err = rerr
			return total, rerr
		}
	}
}

// send starts the multipart upload if needed and sends w.buf as the next
// part, once a slot is free.
func (w *s3Writer) send() error {
	if w.num == MaxParts {
		return fmt.Errorf("blob: %s is longer than %d parts of %d bytes (raise the part size)", w.name, MaxParts, w.s.up.PartSize)
	}
	core := minio.Core{Client: w.s.c}
	if w.upload == "" {
		id, err := core.NewMultipartUpload(w.ctx, w.s.bucket, w.name, minio.PutObjectOptions{ContentType: contentType})
		if err != nil {
			return fmt.Errorf("starting the upload: %w", err)
		}
		w.upload = id
	}
	select {
	case w.slots <- struct{}{}:
	case <-w.pctx.Done():
		if err := w.failed(); err != nil {
			return err
		}
		return w.pctx.Err()
	}
	w.num++
	num, part := w.num, w.buf
	w.buf = nil
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { <-w.slots }()
		p, err := core.PutObjectPart(w.pctx, w.s.bucket, w.name, w.upload, num, bytes.NewReader(part), int64(len(part)), minio.PutObjectPartOptions{DisableContentSha256: true})
		w.s.freePart(part)
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			if w.sendErr == nil {
				w.sendErr = fmt.Errorf("part %d: %w", num, err)
				w.cancel()
			}
			return
		}
		w.parts = append(w.parts, minio.CompletePart{PartNumber: num, ETag: p.ETag})
	}()
	return nil
}

// Close sends what is left: as one PUT if nothing was sent yet, else as
// the last part, and completes the upload; or aborts it after a failure.
func (w *s3Writer) Close() error {
	if w.done {
		return errors.New("blob: Close called twice")
	}
	w.done = true
	defer w.cancel()
	err := w.failed()
	if err == nil && w.upload == "" {
		buf := w.buf
		if buf == nil {
			buf = []byte{}
		}
		opts := minio.PutObjectOptions{ContentType: contentType, DisableMultipart: true, DisableContentSha256: true}
		_, err = w.s.c.PutObject(w.ctx, w.s.bucket, w.name, bytes.NewReader(buf), int64(len(buf)), opts)
		w.s.freePart(w.buf)
		w.buf = nil
		return err
	}
	if err == nil && len(w.buf) > 0 {
		err = w.send()
	}
	w.s.freePart(w.buf)
	w.buf = nil
	w.wg.Wait()
	if err == nil {
		err = w.failed()
	}
	if err == nil {
		sort.Slice(w.parts, func(i, j int) bool { return w.parts[i].PartNumber < w.parts[j].PartNumber })
		_, err = minio.Core{Client: w.s.c}.CompleteMultipartUpload(w.ctx, w.s.bucket, w.name, w.upload, w.parts, minio.PutObjectOptions{ContentType: contentType})
		if err != nil {
			err = fmt.Errorf("completing the upload: %w", err)
		}
	}
	if err != nil && w.upload != "" {
		// Best effort, and not under ctx, which may be what ended it;
		// a bucket lifecycle rule can expire what is left.
		actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
		minio.Core{Client: w.s.c}.AbortMultipartUpload(actx, w.s.bucket, w.name, w.upload)
		acancel()
	}
	return err
}

// partBuf returns a buffer of PartSize bytes from the free list, or a new
// one.
func (s *S3Storage) partBuf() []byte {
	select {
	case b := <-s.free:
		return b
	default:
		return make([]byte, s.up.PartSize)
	}
}

// freePart gives a part buffer back to the free list, which keeps up to
// Concurrency+1 of them between uploads (an upload's parts in flight and
// the one being written), and drops the rest.
func (s *S3Storage) freePart(b []byte) {
	if b == nil || uint64(cap(b)) != s.up.PartSize {
		return
	}
	select {
	case s.free <- b[:cap(b)]:
	default:
	}
}
