package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
)

// Storage is a flat namespace of objects, in the shape of pebble's
// objstorage/remote.Storage: read (whole, or a byte range as a stream),
// write (in one request, or streamed), list, delete, and telling a
// missing object from other failures. Names are object keys,
// relative to whatever the implementation is rooted at (a bucket for
// S3Storage).
//
// Errors keep their cause: Classify sorts them (NotFound,
// PreconditionFailed, AccessDenied, ...) for every implementation, and
// Hint adds what to check. Implementations add no hints or context of
// their own; the caller knows what it was doing.
type Storage interface {
	// ReadObject returns the contents of the object and its ETag. A
	// missing object is an error for which IsNotExist holds.
	ReadObject(ctx context.Context, name string) (data []byte, etag string, err error)
	// PutObject writes the object in one request and returns its new
	// ETag. With opts.IfMatch or opts.IfNoneMatch set it is conditional,
	// and a condition that does not hold is an error whose Classify is
	// PreconditionFailed; nothing is written then.
	PutObject(ctx context.Context, name string, data []byte, opts PutOptions) (etag string, err error)
	// ReadRange opens the object for reading from byte off: n bytes, or
	// to its end if n is negative (n must not be 0). It returns the body
	// and the whole object's ETag and size (not the range's). A missing
	// object is an error for which IsNotExist holds; an off at or past
	// the end of a non-empty object, one whose Classify is InvalidRange.
	// The body is bounded by ctx; the caller must Close it.
	ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, ObjectInfo, error)
	// CreateObject returns a writer that streams a new version of the
	// object, which Close makes visible whole: until Close returns nil,
	// readers see the previous object (or none), never a part of the new
	// one. Its size need not be known; the writer holds a bounded amount
	// of it in memory. If ctx is done before Close, or a Write fails,
	// nothing is written and Close returns the error: to abandon the
	// object, cancel ctx, then Close. The writer must be closed, once,
	// whatever happened.
	CreateObject(ctx context.Context, name string) (io.WriteCloser, error)
	// List returns the names of the objects whose names begin with
	// prefix, at any depth, in ascending order.
	List(ctx context.Context, prefix string) ([]string, error)
	// Delete removes the object. Whether deleting a missing object is an
	// error is the implementation's (S3 says no).
	Delete(ctx context.Context, name string) error
	// IsNotExist reports whether err says an object does not exist.
	IsNotExist(err error) bool
}

// PutOptions are the conditions and metadata of Storage.PutObject.
type PutOptions struct {
	// ContentType is the object's media type (default: the store's).
	ContentType string
	// IfMatch, if set, writes only over an object whose ETag it is.
	IfMatch string
	// IfNoneMatch writes only if no object has the name (If-None-Match:
	// *): create, never replace.
	IfNoneMatch bool
}

// ObjectInfo is what a read tells of the whole object.
type ObjectInfo struct {
	// ETag is the object's entity tag: another ETag means other contents.
	ETag string
	// Size is the object's length in bytes.
	Size int64
}

// The errors of implementations that have no S3 response to return:
// Classify maps them to NotFound, PreconditionFailed and InvalidRange.
var (
	ErrNotExist           = errors.New("blob: object does not exist")
	ErrPreconditionFailed = errors.New("blob: precondition failed")
	ErrInvalidRange       = errors.New("blob: range begins past the object's end")
)

// S3Storage is the Storage of one bucket, over a minio-go client.
type S3Storage struct {
	c      *minio.Client
	bucket string
	up     UploadOptions
	free   chan []byte // part buffers kept between uploads
}

// NewS3Storage returns the Storage of bucket through c (see NewClient),
// with the default UploadOptions. c is borrowed, and bucket must exist:
// nothing is checked here (see BucketExists).
func NewS3Storage(c *minio.Client, bucket string) *S3Storage {
	return NewS3StorageUploads(c, bucket, UploadOptions{})
}

// NewS3StorageUploads is NewS3Storage with the streaming uploads of
// CreateObject tuned by u.
func NewS3StorageUploads(c *minio.Client, bucket string, u UploadOptions) *S3Storage {
	if u.PartSize == 0 {
		u.PartSize = DefaultPartSize
	}
	if u.Concurrency <= 0 {
		u.Concurrency = DefaultUploadConcurrency
	}
	return &S3Storage{c: c, bucket: bucket, up: u, free: make(chan []byte, u.Concurrency+1)}
}

// Bucket is the bucket s reads and writes.
func (s *S3Storage) Bucket() string { return s.bucket }

// Endpoint is the host[:port] of the S3 API s talks to, for messages.
func (s *S3Storage) Endpoint() string { return s.c.EndpointURL().Host }

// BucketExists asks whether s's bucket exists.
func (s *S3Storage) BucketExists(ctx context.Context) (bool, error) {
	return s.c.BucketExists(ctx, s.bucket)
}

// ReadObject GETs the object.
func (s *S3Storage) ReadObject(ctx context.Context, name string) ([]byte, string, error) {
	obj, err := s.c.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, "", err
	}
	defer obj.Close()
	// Stat makes the request: a missing object is its error.
	info, err := obj.Stat()
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(obj)
	if err != nil {
		return nil, "", err
	}
	return b, info.ETag, nil
}

// PutObject PUTs the object in one request (never multipart, which
// would ignore the conditions).
func (s *S3Storage) PutObject(ctx context.Context, name string, data []byte, opts PutOptions) (string, error) {
	o := minio.PutObjectOptions{ContentType: opts.ContentType, DisableMultipart: true}
	if opts.IfMatch != "" {
		o.SetMatchETag(opts.IfMatch)
	}
	if opts.IfNoneMatch {
		o.SetMatchETagExcept("*")
	}
	info, err := s.c.PutObject(ctx, s.bucket, name, bytes.NewReader(data), int64(len(data)), o)
	if err != nil {
		return "", err
	}
	return info.ETag, nil
}

// ReadRange sends one GET (with a Range header unless the whole object
// is asked for), whose body is read as it arrives. minio.Client.GetObject
// would send a HEAD first when asked for the object's attributes, and
// hand every Read to a goroutine of its own over channels: both cost a
// checkpoint restore time against the bare GET it is measured against
// (docs/benchmarks/checkpoints.md).
func (s *S3Storage) ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, ObjectInfo, error) {
	if n == 0 || off < 0 {
		return nil, ObjectInfo{}, fmt.Errorf("blob: read %s: bad range (%d, %d)", name, off, n)
	}
	opts := minio.GetObjectOptions{}
	ranged := off > 0 || n > 0
	if ranged {
		end := int64(0) // minio-go: "bytes=off-"
		if n > 0 {
			end = off + n - 1
		}
		if err := opts.SetRange(off, end); err != nil {
			return nil, ObjectInfo{}, err
		}
	}
	body, info, hdr, err := minio.Core{Client: s.c}.GetObject(ctx, s.bucket, name, opts)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	size := info.Size
	if ranged {
		total, ok := contentRangeTotal(hdr.Get("Content-Range"))
		if !ok {
			body.Close()
			return nil, ObjectInfo{}, fmt.Errorf("blob: read %s from byte %d: the response has no Content-Range total (%q)", name, off, hdr.Get("Content-Range"))
		}
		size = total
	}
	return body, ObjectInfo{ETag: info.ETag, Size: size}, nil
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

// List LISTs the objects under prefix, recursively.
func (s *S3Storage) List(ctx context.Context, prefix string) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	objs := s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true})
	// Returning early stops the lister, which then sends the context's
	// error on its channel: drain it until it closes, or the lister's
	// goroutine blocks on that send forever (minio-go's documented rule).
	defer func() {
		cancel()
		for range objs {
		}
	}()
	var names []string
	for obj := range objs {
		if obj.Err != nil {
			return nil, obj.Err
		}
		names = append(names, obj.Key)
	}
	return names, nil
}

// Delete DELETEs the object; S3 answers a missing one with success.
func (s *S3Storage) Delete(ctx context.Context, name string) error {
	return s.c.RemoveObject(ctx, s.bucket, name, minio.RemoveObjectOptions{})
}

// IsNotExist is the package's IsNotExist.
func (s *S3Storage) IsNotExist(err error) bool { return IsNotExist(err) }

var _ Storage = (*S3Storage)(nil)
