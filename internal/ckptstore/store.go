package ckptstore

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/arkflow-rs/arkflow-go/internal/blob"
)

// Store is where checkpoints live: a flat namespace of immutable objects
// named by '/'-separated keys, relative to the store's root (the URI given
// to OpenStore). Implementations are safe for concurrent use. Every method
// takes the ctx that bounds its I/O; a reader returned by Get is bounded by
// the ctx of the Get that opened it.
//
// Keys are validated by every implementation (see ValidKey): no empty,
// "." or ".." segment, no leading or trailing '/', no NUL or backslash, so
// a key can never escape the root.
type Store interface {
	// Put writes the object atomically: readers see the previous object
	// (or none) until the whole new one is durable, never a part of it.
	// size is the number of bytes r yields, or -1 when unknown (then the
	// object is streamed; it is never held in memory as a whole). A size
	// that r does not match is an error and nothing is written.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Create is Put that fails with ErrExists (wrapped) if the key already
	// holds an object, atomically with respect to other Creates of the
	// key. It is meant for small objects (manifests): size must be known,
	// and the s3 store takes at most one part (StoreOptions.PartSize).
	Create(ctx context.Context, key string, r io.Reader, size int64) error
	// Get opens the object for reading. The error wraps ErrNotFound when
	// it does not exist. The caller must Close the reader.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// List returns the keys that begin with prefix (a plain string prefix,
	// not necessarily ending in '/'), sorted.
	List(ctx context.Context, prefix string) ([]string, error)
	// Delete removes the object; deleting an absent key is not an error.
	Delete(ctx context.Context, key string) error
	// URI is the store's location, as given to OpenStore (normalized). It
	// contains no credentials.
	URI() string
}

// DefaultPartSize is the multipart part size of the s3 store for objects
// of unknown or large size, and the most it buffers per upload.
const DefaultPartSize = blob.DefaultPartSize

// StoreOptions configure OpenStore's s3:// backend; the file:// backend
// ignores them. The zero value takes everything from the environment.
type StoreOptions struct {
	// Options are the endpoint, region, credentials and TLS (the module's
	// one S3 options type; see checkpoint.StoreOptions for the defaults).
	blob.Options
	// Client, if set, is used instead of one built from the fields above.
	// It is borrowed: the store never closes it.
	Client *minio.Client
	// PartSize is the multipart part size (default DefaultPartSize, 16
	// MiB; S3 requires at least 5 MiB). An upload of unknown size buffers
	// UploadConcurrency parts at a time, and can be at most 10,000 parts
	// long.
	PartSize uint64
	// UploadConcurrency is how many parts of a multipart upload (an
	// object larger than PartSize, e.g. a snapshot from
	// Catalog.PutState) are in flight at once (default
	// DefaultUploadConcurrency, 4; 1 sends one part after the other, and
	// the producer of the stream waits while each is sent). Each holds a
	// PartSize buffer while the next is read, so an upload takes up to
	// PartSize×(UploadConcurrency+1) bytes of memory (80 MiB at 4): weigh
	// it against the number of tasks that snapshot at the same time (a
	// checkpoint uploads up to 4 at once). The store keeps
	// UploadConcurrency+1 of these buffers between uploads, so that
	// periodic checkpoints do not allocate them again every round.
	UploadConcurrency int
	// DownloadConcurrency is how many byte ranges of a state object a
	// restore reads at once (default 1: one GET per object). Above 1 an
	// object of at least 16 MiB is read in ranges of 8 MiB, each holding
	// a buffer, and a range whose connection drops is read again (see
	// ranged.go). S3 serves each connection at a fraction of
	// its bandwidth, so against a remote store 4 to 8 can make a restore
	// of few large objects that many times faster; against a MinIO on
	// the job's own two cores, ranges were slower than one GET
	// (docs/benchmarks/checkpoints.md), hence the default. When 0, the
	// environment variable ARKFLOW_S3_DOWNLOAD_CONCURRENCY sets it (for
	// arkflow run).
	DownloadConcurrency int
}

// DownloadConcurrencyEnv sets StoreOptions.DownloadConcurrency when the
// options leave it 0.
const DownloadConcurrencyEnv = "ARKFLOW_S3_DOWNLOAD_CONCURRENCY"

// DefaultUploadConcurrency is StoreOptions.UploadConcurrency's default.
// With one part in flight a checkpoint's snapshot production and its
// upload take turns (0.40–0.57 of raw PutObject's MB/s against MinIO in
// docs/benchmarks/checkpoints.md); with 4 they overlap and parts go up in parallel, as
// minio-go does for uploads of known size.
const DefaultUploadConcurrency = blob.DefaultUploadConcurrency

// OpenStore opens the store at uri, choosing the backend by its scheme:
//
//   - file:///abs/dir — a local directory, created if missing. Objects are
//     files; Put writes a temporary file next to the target, fsyncs it,
//     renames it into place and fsyncs the directory.
//   - s3://bucket/prefix — an S3-compatible bucket (AWS, MinIO) through
//     internal/blob (its client, Storage, error classes and hints);
//     objects are keys under prefix. The bucket must exist.
//
// ctx bounds only opening (for s3, the bucket check), not the store's
// lifetime. The store holds no resources that need closing.
func OpenStore(ctx context.Context, uri string, opts StoreOptions) (Store, error) {
	u, err := parseStoreURI(uri)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "file":
		return openFileStore(uri, u)
	default:
		return openS3Store(ctx, uri, u, opts)
	}
}

// CheckStore reports why OpenStore would refuse uri and opts before any
// I/O (a malformed or relative URI, a bucket name missing, options out of
// range), or nil. It reads the environment as OpenStore does, and touches
// nothing: validation calls it, so a job that validates does not fail to
// start for these reasons. OpenStore can still fail for what only I/O
// tells (an unreachable endpoint, a missing bucket, a directory that cannot
// be created).
func CheckStore(uri string, opts StoreOptions) error {
	u, err := parseStoreURI(uri)
	if err != nil {
		return err
	}
	if u.Scheme == "file" {
		_, err = fileRoot(uri, u)
		return err
	}
	s, err := s3Settings(uri, u, opts)
	if err != nil {
		return err
	}
	if opts.Client == nil {
		if err := blob.Check(opts.Options); err != nil {
			return fmt.Errorf("checkpoint: object store %q: %w", s.uri, err)
		}
	}
	return nil
}

func parseStoreURI(uri string) (*url.URL, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: object store URI %q: %w", uri, err)
	}
	if u.Scheme != "file" && u.Scheme != "s3" {
		return nil, fmt.Errorf("checkpoint: object store URI %q: unsupported scheme %q (use file:///absolute/dir or s3://bucket/prefix)", uri, u.Scheme)
	}
	return u, nil
}

// tmpPrefix begins the names of the file store's temporary files; keys
// may not have a segment that begins with it.
const tmpPrefix = ".arkflow-tmp-"

// ValidKey reports why key cannot name an object, or nil if it can.
func ValidKey(key string) error {
	if key == "" {
		return fmt.Errorf("empty key")
	}
	if strings.ContainsAny(key, "\x00\\") {
		return fmt.Errorf("key %q contains a NUL or a backslash", key)
	}
	for _, seg := range strings.Split(key, "/") {
		switch {
		case seg == "":
			return fmt.Errorf("key %q has an empty segment (a leading, trailing or doubled '/')", key)
		case seg == "." || seg == "..":
			return fmt.Errorf("key %q has a %q segment (keys cannot leave the store's root)", key, seg)
		case strings.HasPrefix(seg, tmpPrefix):
			return fmt.Errorf("key %q has a segment beginning with %q, reserved for temporary files", key, tmpPrefix)
		}
	}
	return nil
}

// ctxReader makes a long copy stop when its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
