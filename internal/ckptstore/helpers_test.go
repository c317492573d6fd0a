package ckptstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/arkflow-rs/arkflow-go/internal/blob"
)

const skipS3 = "ARKFLOW_TEST_S3_ENDPOINT is not set: bash .ci/test.sh starts MinIO and sets ARKFLOW_TEST_S3_*"

// testClient connects to the MinIO server named by ARKFLOW_TEST_S3_*, or
// skips the test.
func testClient(tb testing.TB) *minio.Client {
	tb.Helper()
	endpoint := os.Getenv("ARKFLOW_TEST_S3_ENDPOINT")
	if endpoint == "" {
		tb.Skip(skipS3)
	}
	c, err := blob.NewClient(blob.Options{Endpoint: endpoint, AllowHTTP: true,
		AccessKeyID: os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), SecretAccessKey: os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY")})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// testBucket creates a bucket for the test, removed with its objects
// afterwards.
func testBucket(tb testing.TB) (*minio.Client, string) {
	tb.Helper()
	c := testClient(tb)
	var rnd [4]byte
	rand.Read(rnd[:])
	name := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(tb.Name()), "-"), "-")
	name = strings.TrimPrefix(name, "test")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	name = strings.Trim(name, "-")
	bucket := "ckpt-" + name + "-" + hex.EncodeToString(rnd[:])
	ctx := context.Background()
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		tb.Fatalf("creating bucket %s: %v", bucket, err)
	}
	tb.Cleanup(func() {
		for obj := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err == nil {
				c.RemoveObject(ctx, bucket, obj.Key, minio.RemoveObjectOptions{})
			}
		}
		if err := c.RemoveBucket(ctx, bucket); err != nil {
			tb.Logf("removing bucket %s: %v", bucket, err)
		}
	})
	return c, bucket
}

func openFile(tb testing.TB) Store {
	tb.Helper()
	s, err := OpenStore(context.Background(), "file://"+tb.TempDir(), StoreOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func openS3(tb testing.TB) Store {
	tb.Helper()
	c, bucket := testBucket(tb)
	// The smallest part size, so multipart uploads are exercised with
	// small objects.
	s, err := OpenStore(context.Background(), "s3://"+bucket+"/arkflow/ckpt", StoreOptions{Client: c, PartSize: minPartSize})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// openS3Mem is the s3 store over a blob.MemStorage: its own code (keys,
// sizes, errors) without MinIO.
func openS3Mem(tb testing.TB) Store {
	tb.Helper()
	s, err := openS3StoreOn(&blob.MemStorage{}, "s3://bucket/arkflow/ckpt", StoreOptions{PartSize: minPartSize})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// stores is the table every store-agnostic test runs over.
var stores = []struct {
	name string
	open func(testing.TB) Store
}{
	{"file", openFile},
	{"s3", openS3},
	{"s3-mem", openS3Mem},
}

// forEachStore runs fn once per store, each in a subtest with its own
// store (the s3 one skips unless MinIO is configured).
func forEachStore(t *testing.T, fn func(t *testing.T, s Store)) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			fn(t, st.open(t))
		})
	}
}

// snapshotStore returns every object's bytes, by key.
func snapshotStore(t *testing.T, s Store) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		out[k] = string(getObject(t, s, k))
	}
	return out
}

func getObject(t *testing.T, s Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func putObject(t *testing.T, s Store, key string, b []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
