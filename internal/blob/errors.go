package blob

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/minio/minio-go/v7"
)

// Class is what an S3 error means to a caller that branches on it.
type Class int

// The classes of Classify.
const (
	// Other is any error not below, including nil and errors that are
	// not S3 responses (network, context).
	Other Class = iota
	// NotFound: the object does not exist (the bucket does).
	NotFound
	// PreconditionFailed: an If-Match or If-None-Match condition did not
	// hold (412).
	PreconditionFailed
	// AccessDenied: the credentials are wrong, or the policy refuses them.
	AccessDenied
	// NoSuchBucket: the bucket does not exist.
	NoSuchBucket
	// InvalidRange: a ranged GET began past the object's end (416).
	InvalidRange
)

var classNames = [...]string{"other", "not found", "precondition failed", "access denied", "no such bucket", "invalid range"}

func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return fmt.Sprintf("Class(%d)", int(c))
	}
	return classNames[c]
}

// Classify returns the class of err, looking through wrapping for
// ErrNotExist, ErrPreconditionFailed, ErrInvalidRange or a minio-go
// error response. The S3 code decides where there is one; the
// HTTP status decides otherwise (a HEAD's or a 412's body is empty).
func Classify(err error) Class {
	switch {
	case err == nil:
		return Other
	case errors.Is(err, ErrNotExist):
		return NotFound
	case errors.Is(err, ErrPreconditionFailed):
		return PreconditionFailed
	case errors.Is(err, ErrInvalidRange):
		return InvalidRange
	}
	var r minio.ErrorResponse
	if !errors.As(err, &r) {
		return Other
	}
	switch r.Code {
	case "NoSuchBucket":
		return NoSuchBucket
	case "NoSuchKey":
		return NotFound
	case "PreconditionFailed":
		return PreconditionFailed
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return AccessDenied
	case "InvalidRange":
		return InvalidRange
	}
	switch r.StatusCode {
	case http.StatusNotFound:
		return NotFound
	case http.StatusPreconditionFailed:
		return PreconditionFailed
	case http.StatusForbidden:
		return AccessDenied
	case http.StatusRequestedRangeNotSatisfiable:
		return InvalidRange
	}
	return Other
}

// IsNotExist reports whether err says the object does not exist (and not
// that its bucket does not).
func IsNotExist(err error) bool { return Classify(err) == NotFound }

// Keys names the configuration behind a client, so that hints say what
// to change. Each is text for a message, not a lookup key.
type Keys struct {
	// Bucket is where the bucket is named.
	Bucket string
	// Credentials is where the access key id and secret key are set,
	// including the environment variables read when they are empty.
	Credentials string
}

// The keys of the two users. A spec key and the Go field behind it are
// both named: the same code serves `arkflow run` and the Go API.
var (
	// CheckpointKeys are the s3:// checkpoint store's: the spec's
	// checkpoint.object_store_uri (or OpenStore's uri), and
	// checkpoint.StoreOptions, set through arkflow.WithCheckpointStore.
	CheckpointKeys = Keys{
		Bucket:      "checkpoint.object_store_uri",
		Credentials: "checkpoint.StoreOptions.AccessKeyID and SecretAccessKey (arkflow.WithCheckpointStore), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY when they are empty",
	}
	// WALKeys are the WAL object backend's: the spec's durability.backend.s3
	// block (job.WALObjectStore in Go).
	WALKeys = Keys{
		Bucket:      "durability.backend.s3.bucket (job.WALObjectStore.Bucket)",
		Credentials: "durability.backend.s3.access_key_id and secret_access_key (job.WALObjectStore.AccessKeyID and SecretAccessKey), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY when they are empty",
	}
)

// Hint wraps err with what to check when its cause is one an operator
// can fix (a missing bucket, refused credentials), naming the keys k;
// other errors are returned as they are. err stays matchable with
// errors.Is and errors.As.
func Hint(err error, bucket string, k Keys) error {
	switch Classify(err) {
	case NoSuchBucket:
		return fmt.Errorf("%w (bucket %q does not exist: create it first, or correct %s)", err, bucket, k.Bucket)
	case AccessDenied:
		return fmt.Errorf("%w (check %s, and the policy on bucket %q)", err, k.Credentials, bucket)
	}
	return err
}
