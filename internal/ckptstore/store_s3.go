package ckptstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/blob"
)

// s3Store keeps objects under prefix in a bucket, through blob.Storage
// (an S3Storage; a MemStorage in tests).
type s3Store struct {
	st       blob.Storage
	bucket   string
	prefix   string // "" or "a/b/"
	uri      string
	partSize uint64
	threads  int
	ranges   int // StoreOptions.DownloadConcurrency
}

// minPartSize is S3's smallest part (but the last).
const minPartSize = blob.MinPartSize

func openS3Store(ctx context.Context, uri string, u *url.URL, opts StoreOptions) (*s3Store, error) {
	s, err := s3Settings(uri, u, opts)
	if err != nil {
		return nil, err
	}
	c := opts.Client
	if c == nil {
		if c, err = blob.NewClient(opts.Options); err != nil {
			return nil, fmt.Errorf("checkpoint: object store %q: %w", uri, err)
		}
	}
	st := blob.NewS3StorageUploads(c, s.bucket, blob.UploadOptions{PartSize: s.partSize, Concurrency: s.threads})
	ok, err := st.BucketExists(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: object store %q: checking bucket %q at %s: %w", uri, s.bucket, st.Endpoint(), s.hint(err))
	}
	if !ok {
		return nil, fmt.Errorf("checkpoint: object store %q: bucket %q does not exist at %s (create it first)", uri, s.bucket, st.Endpoint())
	}
	s.st = st
	return s, nil
}

// openS3StoreOn is the s3:// store at uri over st, which stands for the
// bucket (tests run the store over a blob.MemStorage).
func openS3StoreOn(st blob.Storage, uri string, opts StoreOptions) (*s3Store, error) {
	u, err := parseStoreURI(uri)
	if err != nil {
		return nil, err
	}
	s, err := s3Settings(uri, u, opts)
	if err != nil {
		return nil, err
	}
	s.st = st
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

// Put streams the object up through blob.Storage.CreateObject: one PUT
// for an object of at most one part (StoreOptions.PartSize), else a
// multipart upload whose parts go up while the next is read (see
// blob.S3Storage.CreateObject). A single PUT and a completed multipart
// upload are both atomic in S3: the key shows the old object until the
// new one is whole. A failed read, a size that r does not match, or a
// done ctx abandons the upload.
func (s *s3Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	if size >= 0 {
		r = &exactReader{r: r, left: size}
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.st.CreateObject(cctx, obj)
	if err != nil {
		return fmt.Errorf("checkpoint: put %s: %w", s.url(key), s.hint(err))
	}
	rr := &readErrs{r: r}
	if _, err := io.Copy(w, rr); err != nil {
		cancel() // abandons the object
		w.Close()
		if rr.err != nil {
			return fmt.Errorf("checkpoint: put %s: reading: %w", s.url(key), rr.err)
		}
		return fmt.Errorf("checkpoint: put %s: %w", s.url(key), s.hint(err))
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("checkpoint: put %s: %w", s.url(key), s.hint(err))
	}
	return nil
}

// readErrs remembers its reader's error, to tell it from the writer's.
type readErrs struct {
	r   io.Reader
	err error
}

func (e *readErrs) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
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
	_, err = s.st.PutObject(ctx, obj, buf, blob.PutOptions{ContentType: "application/octet-stream", IfNoneMatch: true})
	if blob.Classify(err) == blob.PreconditionFailed {
		return fmt.Errorf("checkpoint: create %s: %w", s.url(key), ErrExists)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: create %s: %w", s.url(key), s.hint(err))
	}
	return nil
}

// Get is one GET, whose body is read as it arrives (blob's ReadRange of
// the whole object).
func (s *s3Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, err
	}
	body, _, err := s.st.ReadRange(ctx, obj, 0, -1)
	if s.st.IsNotExist(err) {
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
	body, info, err := s.st.ReadRange(ctx, obj, off, n)
	switch {
	case err == nil:
		return body, rangeInfo{etag: info.ETag, size: info.Size}, nil
	case s.st.IsNotExist(err):
		return nil, rangeInfo{}, fmt.Errorf("checkpoint: get %s: %w", s.url(key), ErrNotFound)
	case blob.Classify(err) == blob.InvalidRange:
		return nil, rangeInfo{}, &CorruptError{Key: key, Reason: fmt.Sprintf("the object ends before byte %d, which its manifest entry says it holds", off)}
	default:
		return nil, rangeInfo{}, fmt.Errorf("checkpoint: get %s (bytes %d-%d): %w", s.url(key), off, off+n-1, s.hint(err))
	}
}

func (s *s3Store) List(ctx context.Context, prefix string) ([]string, error) {
	names, err := s.st.List(ctx, s.prefix+prefix)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %s: %w", s.url(prefix), s.hint(err))
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = strings.TrimPrefix(n, s.prefix)
	}
	sort.Strings(keys)
	return keys, nil
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	if err := s.st.Delete(ctx, obj); err != nil && !s.st.IsNotExist(err) {
		return fmt.Errorf("checkpoint: delete %s: %w", s.url(key), s.hint(err))
	}
	return nil
}

// exactReader gives the size bytes announced for an upload, and fails
// instead of ending if the underlying reader has fewer or more, so that
// an upload of a wrongly announced size is abandoned, not completed.
type exactReader struct {
	r       io.Reader
	left    int64
	checked bool // whether the byte after size was looked for
	err     error
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left == 0 {
		if !e.checked {
			e.checked = true
			var one [1]byte
			if m, _ := io.ReadFull(e.r, one[:]); m > 0 {
				e.err = errLongBody
			}
		}
		if e.err != nil {
			return 0, e.err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF {
		if e.left > 0 {
			return n, errShortBody
		}
		err = nil // the next Read looks for a byte too many
	}
	return n, err
}

var (
	errShortBody = errors.New("the reader gave fewer bytes than the size announced")
	errLongBody  = errors.New("the reader gave more bytes than the size announced")
)
