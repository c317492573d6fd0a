package durable_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
)

// The object-store WAL end to end: a job whose source keeps its WAL in a
// real MinIO bucket writes every row once, and a second run of the same
// job resumes after what the bucket's WAL holds. The namespace is
// {prefix}/{node_id}/{job}.{source}.{subtask}/.
func TestObjectStoreDurableJob(t *testing.T) {
	t.Parallel()
	endpoint := os.Getenv("ARKFLOW_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("ARKFLOW_TEST_S3_ENDPOINT is not set: bash .ci/test.sh starts MinIO and sets ARKFLOW_TEST_S3_*")
	}
	access, secret := os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY")
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(access, secret, "")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bucket := fmt.Sprintf("durable-%d", time.Now().UnixNano())
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	src := generate.Config{Seed: 3, Count: 500, Partitions: 2, BatchSize: 50,
		Fields: []generate.Field{{Name: "user", Type: "string", Cardinality: 10}}}
	run := func() int64 {
		out := mem.NewSink()
		j, err := arkflow.NewJob("s3wal").
			Durability(job.Durability{Backend: &job.WALBackend{Type: job.WALBackendObjectStore, NodeID: "node-a",
				S3: &job.WALObjectStore{Bucket: bucket, Endpoint: "http://" + endpoint, AllowHTTP: true,
					AccessKeyID: access, SecretAccessKey: secret}}}).
			Source("in", src).
			Sink("out", out).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Run(ctx); err != nil {
			t.Fatal(err)
		}
		return out.NumRows()
	}
	if n := run(); n != 1000 {
		t.Fatalf("first run wrote %d rows, want 1000", n)
	}
	var keys []string
	for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "arkflow/wal/node-a/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	if !strings.Contains(strings.Join(keys, " "), "arkflow/wal/node-a/s3wal.in.0/manifest.json") {
		t.Fatalf("no manifest in the bucket: %v", keys)
	}
	if n := run(); n != 0 {
		t.Fatalf("second run re-read %d rows; it should resume after the WAL", n)
	}
}

// Plain HTTP needs allow_http, and the error names the call and the field.
func TestObjectStoreEndpointNeedsAllowHTTP(t *testing.T) {
	t.Parallel()
	_, err := arkflow.NewJob("s3wal").
		Durability(job.Durability{Backend: &job.WALBackend{Type: job.WALBackendObjectStore, NodeID: "n",
			S3: &job.WALObjectStore{Bucket: "b", Endpoint: "http://127.0.0.1:9"}}}).
		Source("in", generate.Config{Count: 1, Fields: []generate.Field{{Name: "x", Type: "int64"}}}).
		Sink("out", mem.NewSink()).
		Build()
	if err == nil || !strings.Contains(err.Error(), ".Durability(job.Durability{...}): backend.s3.endpoint: ") || !strings.Contains(err.Error(), "allow_http") {
		t.Fatalf("got %v", err)
	}
}
