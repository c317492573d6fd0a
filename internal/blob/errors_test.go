package blob

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestClassify(t *testing.T) {
	resp := func(code string, status int) error {
		return fmt.Errorf("get x: %w", minio.ErrorResponse{Code: code, StatusCode: status})
	}
	for _, c := range []struct {
		err  error
		want Class
	}{
		{nil, Other},
		{errors.New("connection refused"), Other},
		{resp("NoSuchKey", 404), NotFound},
		{resp("", 404), NotFound}, // a HEAD's 404 has no body
		{resp("NoSuchBucket", 404), NoSuchBucket},
		{resp("PreconditionFailed", 412), PreconditionFailed},
		{resp("", http.StatusPreconditionFailed), PreconditionFailed},
		{resp("AccessDenied", 403), AccessDenied},
		{resp("InvalidAccessKeyId", 403), AccessDenied},
		{resp("SignatureDoesNotMatch", 403), AccessDenied},
		{resp("", 403), AccessDenied},
		{resp("InvalidRange", 416), InvalidRange},
		{resp("", 416), InvalidRange},
		{resp("InternalError", 500), Other},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if !IsNotExist(resp("NoSuchKey", 404)) || IsNotExist(resp("NoSuchBucket", 404)) {
		t.Error("IsNotExist must hold for a missing object and not for a missing bucket")
	}
}

// The hints name keys that exist: the spec's and the Go fields, never
// the "object_store.access_key" of older specs.
func TestHint(t *testing.T) {
	denied := minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403, Message: "Access Denied."}
	noBucket := minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404, Message: "The specified bucket does not exist"}
	for _, c := range []struct {
		name string
		err  error
		k    Keys
		want []string
	}{
		{"wal denied", denied, WALKeys, []string{"durability.backend.s3.access_key_id and secret_access_key", "job.WALObjectStore.AccessKeyID and SecretAccessKey", "AWS_ACCESS_KEY_ID", `policy on bucket "b"`}},
		{"wal bucket", noBucket, WALKeys, []string{`bucket "b" does not exist: create it first`, "durability.backend.s3.bucket", "job.WALObjectStore.Bucket"}},
		{"checkpoint denied", denied, CheckpointKeys, []string{"checkpoint.StoreOptions.AccessKeyID and SecretAccessKey", "arkflow.WithCheckpointStore", "AWS_SECRET_ACCESS_KEY", `policy on bucket "b"`}},
		{"checkpoint bucket", noBucket, CheckpointKeys, []string{`bucket "b" does not exist: create it first`, "checkpoint.object_store_uri"}},
	} {
		got := Hint(c.err, "b", c.k)
		for _, w := range c.want {
			if !strings.Contains(got.Error(), w) {
				t.Errorf("%s: %q does not name %q", c.name, got, w)
			}
		}
		if strings.Contains(got.Error(), "object_store.access_key") {
			t.Errorf("%s: %q names a key that exists nowhere", c.name, got)
		}
		var r minio.ErrorResponse
		if !errors.As(got, &r) {
			t.Errorf("%s: the hint hides the minio error", c.name)
		}
	}
	other := errors.New("boom")
	if Hint(other, "b", WALKeys) != other {
		t.Error("an error no one can fix by configuration must come back as it is")
	}
}
