package blob

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"testing"

	"github.com/minio/minio-go/v7"
)

// testStorage checks the contract of Storage on st, which must be empty
// under "t/".
func testStorage(t *testing.T, st Storage) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := st.ReadObject(ctx, "t/missing"); !st.IsNotExist(err) || Classify(err) != NotFound {
		t.Fatalf("reading a missing object: %v", err)
	}
	tag1, err := st.PutObject(ctx, "t/a", []byte("one"), PutOptions{IfNoneMatch: true, ContentType: "application/json"})
	if err != nil || tag1 == "" {
		t.Fatalf("create: %q, %v", tag1, err)
	}
	if _, err := st.PutObject(ctx, "t/a", []byte("two"), PutOptions{IfNoneMatch: true}); Classify(err) != PreconditionFailed {
		t.Fatalf("create over an existing object: %v, want precondition failed", err)
	}
	if _, err := st.PutObject(ctx, "t/a", []byte("two"), PutOptions{IfMatch: "0123456789abcdef0123456789abcdef"}); Classify(err) != PreconditionFailed {
		t.Fatalf("put with a wrong ETag: %v, want precondition failed", err)
	}
	if _, err := st.PutObject(ctx, "t/none", []byte("two"), PutOptions{IfMatch: tag1}); Classify(err) == Other {
		t.Fatalf("If-Match on a missing object must fail as not found or precondition failed: %v", err)
	}
	tag2, err := st.PutObject(ctx, "t/a", []byte("two"), PutOptions{IfMatch: tag1})
	if err != nil || tag2 == tag1 {
		t.Fatalf("swap: %q, %v", tag2, err)
	}
	b, tag, err := st.ReadObject(ctx, "t/a")
	if err != nil || string(b) != "two" || tag != tag2 {
		t.Fatalf("read: %q, %q, %v; want two, %q", b, tag, err, tag2)
	}
	for _, n := range []string{"t/d/2", "t/d/1", "t/e"} {
		if _, err := st.PutObject(ctx, n, nil, PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	names, err := st.List(ctx, "t/d/")
	if err != nil || !slices.Equal(names, []string{"t/d/1", "t/d/2"}) {
		t.Fatalf("list: %q, %v", names, err)
	}
	if err := st.Delete(ctx, "t/d/1"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "t/d/1"); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
	names, err = st.List(ctx, "t/")
	if err != nil || !slices.Equal(names, []string{"t/a", "t/d/2", "t/e"}) {
		t.Fatalf("list after delete: %q, %v", names, err)
	}
}

func TestMemStorage(t *testing.T) { testStorage(t, &MemStorage{}) }

func TestS3Storage(t *testing.T) {
	endpoint := os.Getenv("ARKFLOW_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("ARKFLOW_TEST_S3_ENDPOINT is not set: bash .ci/test.sh starts MinIO and sets ARKFLOW_TEST_S3_*")
	}
	c, err := NewClient(Options{Endpoint: endpoint, AllowHTTP: true,
		AccessKeyID: os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), SecretAccessKey: os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var rnd [4]byte
	rand.Read(rnd[:])
	bucket := "blob-storage-" + hex.EncodeToString(rnd[:])
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for obj := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err == nil {
				c.RemoveObject(ctx, bucket, obj.Key, minio.RemoveObjectOptions{})
			}
		}
		c.RemoveBucket(ctx, bucket)
	})
	st := NewS3Storage(c, bucket)
	testStorage(t, st)
	if _, _, err := NewS3Storage(c, bucket+"-none").ReadObject(ctx, "x"); Classify(err) != NoSuchBucket || st.IsNotExist(err) {
		t.Fatalf("a missing bucket: %v (%v)", err, Classify(err))
	}
}
