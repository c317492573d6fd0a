package ckptstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/arkflow-rs/arkflow-go/internal/blob"
)

// s3Store keeps objects under prefix in an S3 bucket.
type s3Store struct {
	c        *minio.Client
	bucket   string
	prefix   string // "" or "a/b/"
	uri      string
	partSize uint64
	threads  int
	free     chan []byte // part buffers kept between uploads
	ranges   int         // StoreOptions.DownloadConcurrency
}

// minPartSize is S3's smallest part (but the last).
const minPartSize = 5 << 20

func openS3Store(ctx context.Context, uri string, u *url.URL, opts StoreOptions) (*s3Store, error) {
	s, err := s3Settings(uri, u, opts)
	if err != nil {
		return nil, err
	}
	s.free = make(chan []byte, s.threads+1)
	s.c = opts.Client
	if s.c == nil {
		var err error
		if s.c, err = blob.NewClient(opts.blobOptions()); err != nil {
			return nil, fmt.Errorf("checkpoint: object store %q: %w", uri, err)
		}
	}
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: object store %q: checking bucket %q at %s: %w", uri, s.bucket, s.c.EndpointURL().Host, s.hint(err))
	}
	if !ok {
		return nil, fmt.Errorf("checkpoint: object store %q: bucket %q does not exist at %s (create it first)", uri, s.bucket, s.c.EndpointURL().Host)
	}
	return s, nil
}

// s3Settings checks an s3:// URI and the options that need no I/O, and
// returns the store without its client.
func s3Settings(uri string, u *url.URL, opts StoreOptions) (*s3Store, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("checkpoint: object store URI %q: no bucket (use s3://bucket/prefix)", uri)
	}
	if u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("checkpoint: object store URI %q: use s3://bucket/prefix, with the endpoint and credentials in the options or the environment", uri)
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := ValidKey(prefix); err != nil {
			return nil, fmt.Errorf("checkpoint: object store URI %q: prefix: %w", uri, err)
		}
	}
	if opts.UploadConcurrency < 0 {
		return nil, fmt.Errorf("checkpoint: object store %q: upload concurrency %d must not be negative", uri, opts.UploadConcurrency)
	}
	s := &s3Store{bucket: u.Host, partSize: opts.PartSize, threads: opts.UploadConcurrency}
	if s.threads == 0 {
		s.threads = DefaultUploadConcurrency
	}
	if s.partSize == 0 {
		s.partSize = DefaultPartSize
	}
	if s.partSize < minPartSize {
		return nil, fmt.Errorf("checkpoint: object store %q: part size %d is below S3's minimum of 5 MiB", uri, s.partSize)
	}
	if opts.DownloadConcurrency < 0 {
		return nil, fmt.Errorf("checkpoint: object store %q: download concurrency %d must not be negative", uri, opts.DownloadConcurrency)
	}
	s.ranges = opts.DownloadConcurrency
	if v := os.Getenv(DownloadConcurrencyEnv); s.ranges == 0 && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("checkpoint: object store %q: %s=%q: want a number of ranges, 0 or more", uri, DownloadConcurrencyEnv, v)
		}
		s.ranges = n
	}
	s.uri = "s3://" + s.bucket
	if prefix != "" {
		s.prefix = prefix + "/"
		s.uri += "/" + prefix
	}
	return s, nil
}

// blobOptions are the client settings of opts, for internal/blob.
func (opts StoreOptions) blobOptions() blob.Options {
	return blob.Options{
		Endpoint:        opts.Endpoint,
		Region:          opts.Region,
		AccessKeyID:     opts.AccessKeyID,
		SecretAccessKey: opts.SecretAccessKey,
		AllowHTTP:       opts.AllowHTTP,
	}
}

func (s *s3Store) URI() string { return s.uri }

func (s *s3Store) url(key string) string { return s.uri + "/" + key }

func (s *s3Store) object(key string) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", fmt.Errorf("checkpoint: %s: %w", s.uri, err)
	}
	return s.prefix + key, nil
}

// hint adds what to check to errors an operator can fix.
func (s *s3Store) hint(err error) error { return blob.Hint(err, s.bucket, blob.CheckpointKeys) }

// Put uploads the object. A single PUT and a completed multipart upload are
// both atomic in S3: the key shows the old object until the new one is
// whole. An object of at most one part (known size, or unknown size that
// turns out small) is read into memory and sent as one PUT that the client
// can retry; a larger one goes up as a multipart upload (putParts).
func (s *s3Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	if size > int64(s.partSize) {
		r = &exactReader{r: r, left: size}
	}
	buf := s.partBuf()
	defer func() { s.freePart(buf) }()
	if size >= 0 && size <= int64(s.partSize) {
		buf = buf[:size]
	}
	n, rerr := io.ReadFull(r, buf)
	switch {
	case size >= 0 && size <= int64(s.partSize):
		if rerr != nil {
			return fmt.Errorf("checkpoint: put %s: reading the %d bytes announced: %w", s.url(key), size, rerr)
		}
		var one [1]byte
		if n, _ := io.ReadFull(r, one[:]); n > 0 {
			return fmt.Errorf("checkpoint: put %s: the reader gave more than the %d bytes announced", s.url(key), size)
		}
	case rerr == nil: // a full part, and maybe more: multipart
		first := buf
		buf = nil // putParts frees it
		return s.putParts(ctx, key, obj, first, r)
	case rerr == io.EOF || (rerr == io.ErrUnexpectedEOF && n > 0): // ReadFull's, not the reader's
		buf = buf[:n]
	default:
		return fmt.Errorf("checkpoint: put %s: reading: %w", s.url(key), rerr)
	}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true, DisableContentSha256: true}
	if _, err := s.c.PutObject(ctx, s.bucket, obj, bytes.NewReader(buf), int64(len(buf)), opts); err != nil {
		return fmt.Errorf("checkpoint: put %s: %w", s.url(key), s.hint(err))
	}
	return nil
}

// maxParts is S3's limit on the parts of one upload.
const maxParts = 10000

// putParts uploads first and the rest of r as a multipart upload: parts
// of partSize read one after the other, up to threads of them sent at
// once (the next is read while they go), each from a buffer of the
// store's free list. minio-go's own streaming upload allocated its
// part buffers (threads × partSize) for every object: 160 MB of new
// memory per 108 MB checkpoint at p=2 on the issue 6 benchmark, which the
// garbage collector then had to clear while the job ran. Each part is
// sent by minio-go, which retries it from its buffer. A failed part, a
// failed read or a cancelled ctx aborts the upload, leaving the key as
// it was.
//
// The request bodies are not signed (DisableContentSha256): minio-go
// signs no SHA-256 of a body on TLS anyway, and on plain HTTP that was a
// second SHA-256 pass over every state byte, whose own checksum is in
// the manifest and checked on every restore (R-CKPT-8): a body damaged
// on the way makes that checkpoint unusable, and the restore falls back
// to the previous one (BENCHMARKS.md, "Checkpoints").
func (s *s3Store) putParts(ctx context.Context, key, obj string, first []byte, r io.Reader) error {
	core := minio.Core{Client: s.c}
	uploadID, err := core.NewMultipartUpload(ctx, s.bucket, obj, minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		s.freePart(first)
		return fmt.Errorf("checkpoint: put %s: starting the upload: %w", s.url(key), s.hint(err))
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		parts   []minio.CompletePart
		sendErr error
		wg      sync.WaitGroup
	)
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return sendErr != nil
	}
	slots := make(chan struct{}, s.threads)
	send := func(num int, part []byte) {
		defer wg.Done()
		defer func() { <-slots }()
		p, err := core.PutObjectPart(pctx, s.bucket, obj, uploadID, num, bytes.NewReader(part), int64(len(part)), minio.PutObjectPartOptions{DisableContentSha256: true})
		s.freePart(part)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if sendErr == nil {
				sendErr = fmt.Errorf("part %d: %w", num, s.hint(err))
				cancel()
			}
			return
		}
		parts = append(parts, minio.CompletePart{PartNumber: num, ETag: p.ETag})
	}
	var readErr error
	part := first
	for num := 1; ; num++ {
		if num > maxParts {
			s.freePart(part)
			readErr = fmt.Errorf("the object is longer than %d parts of %d bytes (raise StoreOptions.PartSize)", maxParts, s.partSize)
			break
		}
		slots <- struct{}{}
		wg.Add(1)
		go send(num, part)
		if len(part) < int(s.partSize) || failed() {
			break // the last part, or no use reading on
		}
		next := s.partBuf()
		n, rerr := io.ReadFull(r, next)
		if rerr == io.EOF {
			s.freePart(next)
			break
		}
		// ReadFull's own ErrUnexpectedEOF comes with bytes; the
		// reader's own does not.
		if rerr != nil && (rerr != io.ErrUnexpectedEOF || n == 0) {
			s.freePart(next)
			readErr = fmt.Errorf("reading: %w", rerr)
			break
		}
		part = next[:n]
	}
	wg.Wait()
	err = readErr
	if err == nil {
		err = sendErr
	}
	if err == nil {
		if err = ctx.Err(); err == nil {
			sort.Slice(parts, func(i, j int) bool { return parts[i].PartNumber < parts[j].PartNumber })
			_, err = core.CompleteMultipartUpload(ctx, s.bucket, obj, uploadID, parts, minio.PutObjectOptions{ContentType: "application/octet-stream"})
			if err != nil {
				err = fmt.Errorf("completing the upload: %w", s.hint(err))
			}
		}
	}
	if err != nil {
		// Best effort, and not under ctx, which may be what ended it;
		// a bucket lifecycle rule can expire what is left.
		actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
		core.AbortMultipartUpload(actx, s.bucket, obj, uploadID)
		acancel()
		return fmt.Errorf("checkpoint: put %s: %w", s.url(key), err)
	}
	return nil
}

// partBuf returns a buffer of partSize bytes from the free list, or a new
// one.
func (s *s3Store) partBuf() []byte {
	select {
	case b := <-s.free:
		return b
	default:
		return make([]byte, s.partSize)
	}
}

// freePart gives a part buffer back to the free list, which keeps up to
// threads+1 of them between uploads (an upload's parts in flight and the
// one being read), and drops the rest.
func (s *s3Store) freePart(b []byte) {
	if cap(b) != int(s.partSize) {
		return
	}
	select {
	case s.free <- b[:cap(b)]:
	default:
	}
}

// Create is a single PUT with If-None-Match: *.
func (s *s3Store) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("checkpoint: create %s: the size must be known", s.url(key))
	}
	if size > int64(s.partSize) {
		return fmt.Errorf("checkpoint: create %s: %d bytes is more than one part (%d); Create is for small objects", s.url(key), size, s.partSize)
	}
	// In memory, so the client can retry the PUT. A retry of a PUT that
	// was applied gets 412 as well: the caller compares the contents.
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("checkpoint: create %s: reading the %d bytes announced: %w", s.url(key), size, err)
	}
	var one [1]byte
	if n, _ := io.ReadFull(r, one[:]); n > 0 {
		return fmt.Errorf("checkpoint: create %s: the reader gave more than the %d bytes announced", s.url(key), size)
	}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
	opts.SetMatchETagExcept("*")
	if _, err := s.c.PutObject(ctx, s.bucket, obj, bytes.NewReader(buf), size, opts); err != nil {
		if blob.Classify(err) == blob.PreconditionFailed {
			return fmt.Errorf("checkpoint: create %s: %w", s.url(key), ErrExists)
		}
		return fmt.Errorf("checkpoint: create %s: %w", s.url(key), s.hint(err))
	}
	return nil
}

func (s *s3Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, err
	}
	// One GET, whose body is read as it arrives. minio.Client.GetObject
	// would send a HEAD first when asked for the object's presence, and
	// hand every Read to a goroutine of its own over channels: both cost
	// a restore time against the bare GET it is measured against
	// (BENCHMARKS.md).
	body, _, _, err := minio.Core{Client: s.c}.GetObject(ctx, s.bucket, obj, minio.GetObjectOptions{})
	if blob.IsNotExist(err) {
		return nil, fmt.Errorf("checkpoint: get %s: %w", s.url(key), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: get %s: %w", s.url(key), s.hint(err))
	}
	return body, nil
}

func (s *s3Store) rangesAtOnce() int { return s.ranges }

// getRange is one GET of n bytes of key from off (see rangedReader).
func (s *s3Store) getRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, rangeInfo, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, rangeInfo{}, err
	}
	opts := minio.GetObjectOptions{}
	if err := opts.SetRange(off, off+n-1); err != nil {
		return nil, rangeInfo{}, err
	}
	body, info, hdr, err := minio.Core{Client: s.c}.GetObject(ctx, s.bucket, obj, opts)
	switch {
	case err == nil:
	case blob.IsNotExist(err):
		return nil, rangeInfo{}, fmt.Errorf("checkpoint: get %s: %w", s.url(key), ErrNotFound)
	case blob.Classify(err) == blob.InvalidRange:
		return nil, rangeInfo{}, &CorruptError{Key: key, Reason: fmt.Sprintf("the object ends before byte %d, which its manifest entry says it holds", off)}
	default:
		return nil, rangeInfo{}, fmt.Errorf("checkpoint: get %s (bytes %d-%d): %w", s.url(key), off, off+n-1, s.hint(err))
	}
	total, ok := contentRangeTotal(hdr.Get("Content-Range"))
	if !ok {
		body.Close()
		return nil, rangeInfo{}, fmt.Errorf("checkpoint: get %s (bytes %d-%d): the response has no Content-Range total (%q)", s.url(key), off, off+n-1, hdr.Get("Content-Range"))
	}
	return body, rangeInfo{etag: info.ETag, size: total}, nil
}

// contentRangeTotal returns the complete length of a Content-Range
// header of a 206 response ("bytes first-last/total", RFC 9110 14.4);
// false if it is not one, or the length is unknown ("*").
func contentRangeTotal(cr string) (int64, bool) {
	unit, rest, ok := strings.Cut(cr, " ")
	if !ok || unit != "bytes" {
		return 0, false
	}
	rng, total, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, false
	}
	first, last, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, false
	}
	f, err1 := strconv.ParseUint(first, 10, 63)
	l, err2 := strconv.ParseUint(last, 10, 63)
	t, err3 := strconv.ParseUint(total, 10, 63)
	if err1 != nil || err2 != nil || err3 != nil || f > l || l >= t {
		return 0, false
	}
	return int64(t), true
}

func (s *s3Store) List(ctx context.Context, prefix string) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the lister if we return early
	var keys []string
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("checkpoint: list %s: %w", s.url(prefix), s.hint(o.Err))
		}
		keys = append(keys, strings.TrimPrefix(o.Key, s.prefix))
	}
	sort.Strings(keys)
	return keys, nil
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	if err := s.c.RemoveObject(ctx, s.bucket, obj, minio.RemoveObjectOptions{}); err != nil && !blob.IsNotExist(err) {
		return fmt.Errorf("checkpoint: delete %s: %w", s.url(key), s.hint(err))
	}
	return nil
}

// exactReader fails the read that would complete size bytes if the
// underlying reader has more, so that an upload of a wrongly announced
// size fails before it is completed (minio-go stops reading at size).
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if e.left == 0 {
		var one [1]byte
		if m, _ := io.ReadFull(e.r, one[:]); m > 0 {
			return 0, errors.New("the reader gave more bytes than the size announced")
		}
		return n, io.EOF
	}
	if err == io.EOF {
		return n, errShortBody
	}
	return n, err
}

var errShortBody = errors.New("the reader gave fewer bytes than the size announced")
