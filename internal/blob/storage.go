package blob

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/minio/minio-go/v7"
)

// Storage is a flat namespace of whole objects, in the shape of pebble's
// objstorage/remote.Storage: read, write, list, delete, and telling a
// missing object from other failures (issue 18). Names are object keys,
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

// The errors of implementations that have no S3 response to return:
// Classify maps them to NotFound and PreconditionFailed.
var (
	ErrNotExist           = errors.New("blob: object does not exist")
	ErrPreconditionFailed = errors.New("blob: precondition failed")
)

// S3Storage is the Storage of one bucket, over a minio-go client.
type S3Storage struct {
	c      *minio.Client
	bucket string
}

// NewS3Storage returns the Storage of bucket through c (see NewClient).
// c is borrowed, and bucket must exist: nothing is checked here.
func NewS3Storage(c *minio.Client, bucket string) *S3Storage {
	return &S3Storage{c: c, bucket: bucket}
}

// Bucket is the bucket s reads and writes.
func (s *S3Storage) Bucket() string { return s.bucket }

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

// List LISTs the objects under prefix, recursively.
func (s *S3Storage) List(ctx context.Context, prefix string) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the lister if we return early
	var names []string
	for obj := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
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
