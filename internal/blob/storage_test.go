package blob

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
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

	// Ranged reads: the body is the range; the info is the whole object's.
	data := []byte("0123456789")
	etag, err := st.PutObject(ctx, "t/r", data, PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off, n int64
		want   string
	}{{0, -1, "0123456789"}, {0, 10, "0123456789"}, {0, 3, "012"}, {4, 2, "45"}, {7, -1, "789"}, {8, 100, "89"}, {9, 1, "9"}} {
		if got, info := readRange(t, st, "t/r", c.off, c.n); got != c.want || info != (ObjectInfo{ETag: etag, Size: 10}) {
			t.Errorf("ReadRange(%d, %d) = %q, %+v; want %q, {%s 10}", c.off, c.n, got, info, c.want, etag)
		}
	}
	if _, _, err := st.ReadRange(ctx, "t/r", 10, 1); Classify(err) != InvalidRange {
		t.Errorf("a range past the end: %v (%v), want invalid range", err, Classify(err))
	}
	if _, _, err := st.ReadRange(ctx, "t/missing", 0, -1); !st.IsNotExist(err) {
		t.Errorf("ReadRange of a missing object: %v", err)
	}
	if _, _, err := st.ReadRange(ctx, "t/missing", 5, 1); !st.IsNotExist(err) {
		t.Errorf("ReadRange of a missing object from byte 5: %v", err)
	}
	if got, info := readRange(t, st, "t/e", 0, -1); got != "" || info.Size != 0 {
		t.Errorf("reading an empty object: %q, %+v", got, info)
	}

	// Streaming creation: nothing shows before Close; a done ctx abandons
	// the object and leaves the previous one.
	w, err := st.CreateObject(ctx, "t/s")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"str", "eam", "ed"} {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := st.ReadObject(ctx, "t/s"); !st.IsNotExist(err) {
		t.Fatalf("the object shows before Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _, err := st.ReadObject(ctx, "t/s"); err != nil || string(b) != "streamed" {
		t.Fatalf("after Close: %q, %v", b, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	w, err = st.CreateObject(cctx, "t/s")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("abandoned"))
	cancel()
	if err := w.Close(); err == nil {
		t.Fatal("Close after the ctx was cancelled succeeded")
	}
	if b, _, err := st.ReadObject(ctx, "t/s"); err != nil || string(b) != "streamed" {
		t.Fatalf("after an abandoned create: %q, %v; want the previous object", b, err)
	}
	w, err = st.CreateObject(ctx, "t/empty")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _, err := st.ReadObject(ctx, "t/empty"); err != nil || len(b) != 0 {
		t.Fatalf("an empty streamed object: %q, %v", b, err)
	}
}

func readRange(t *testing.T, st Storage, name string, off, n int64) (string, ObjectInfo) {
	t.Helper()
	body, info, err := st.ReadRange(context.Background(), name, off, n)
	if err != nil {
		t.Fatalf("ReadRange(%s, %d, %d): %v", name, off, n, err)
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), info
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
	if ok, err := st.BucketExists(ctx); !ok || err != nil {
		t.Fatalf("BucketExists: %v, %v", ok, err)
	}
	if ok, err := NewS3Storage(c, bucket+"-none").BucketExists(ctx); ok || err != nil {
		t.Fatalf("BucketExists of a missing bucket: %v, %v", ok, err)
	}
	testS3Uploads(t, c, bucket)
}

// S3Storage's streaming uploads: objects of every length around the part
// boundaries come back whole, from uploads running at once (their part
// buffers come from one free list); an upload that fails part-way (a
// failed read, a cancelled ctx) leaves the old object and no incomplete
// upload behind.
func testS3Uploads(t *testing.T, c *minio.Client, bucket string) {
	ctx := context.Background()
	st := NewS3StorageUploads(c, bucket, UploadOptions{PartSize: MinPartSize, Concurrency: 2})
	const part = MinPartSize
	data := make([]byte, 4*part)
	rand.Read(data)
	sizes := []int{part - 1, part, part + 1, 2 * part, 3*part + 17}
	var wg sync.WaitGroup
	errs := make([]error, 2*len(sizes))
	for i, n := range sizes {
		for j := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w, err := st.CreateObject(ctx, fmt.Sprintf("up/%d-%d", n, j))
				if err != nil {
					errs[2*i+j] = err
					return
				}
				r := io.MultiReader(bytes.NewReader(data[:n/3]), bytes.NewReader(data[n/3:n]))
				if j == 0 {
					_, err = io.Copy(w, r) // ReadFrom
				} else {
					_, err = io.Copy(struct{ io.Writer }{w}, r) // Write, 32 KiB at a time
				}
				if cerr := w.Close(); err == nil {
					err = cerr
				}
				errs[2*i+j] = err
			}()
		}
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	for _, n := range sizes {
		for j := range 2 {
			b, _, err := st.ReadObject(ctx, fmt.Sprintf("up/%d-%d", n, j))
			if err != nil || !bytes.Equal(b, data[:n]) {
				t.Fatalf("object of %d bytes (%d) came back as %d different bytes: %v", n, j, len(b), err)
			}
		}
	}
	if _, err := st.PutObject(ctx, "up/keep", []byte("old"), PutOptions{}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	w, _ := st.CreateObject(ctx, "up/keep")
	if _, err := io.Copy(w, io.MultiReader(bytes.NewReader(data[:3*part+5]), errReader{boom})); !errors.Is(err, boom) {
		t.Fatalf("a failed read: %v", err)
	}
	if err := w.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close after a failed read: %v, want boom", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	w, _ = st.CreateObject(cctx, "up/keep")
	w.Write(data[:3*part])
	cancel()
	if err := w.Close(); err == nil {
		t.Fatal("Close after a cancelled ctx succeeded")
	}
	if b, _, err := st.ReadObject(ctx, "up/keep"); err != nil || string(b) != "old" {
		t.Fatalf("after failed uploads: %d bytes, %v; want the old object", len(b), err)
	}
	for u := range c.ListIncompleteUploads(ctx, bucket, "up/", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("incomplete upload left behind: %s (%s)", u.Key, u.UploadID)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestContentRangeTotal(t *testing.T) {
	for in, want := range map[string]int64{
		"bytes 0-99/100":             100,
		"bytes 8388608-16777215/3e7": -1,
		"bytes 5-5/6":                6,
		"bytes 0-99/*":               -1,
		"bytes */100":                -1,
		"bytes 10-5/100":             -1,
		"bytes 0-100/100":            -1,
		"items 0-99/100":             -1,
		"bytes 0-99":                 -1,
		"":                           -1,
		"bytes -1-99/100":            -1,
		"bytes 0-99/+100":            -1,
	} {
		got, ok := contentRangeTotal(in)
		if (want < 0) == ok || (ok && got != want) {
			t.Errorf("contentRangeTotal(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
}

// FuzzContentRangeTotal: any header either parses to a total past its
// range or is refused, and never panics.
func FuzzContentRangeTotal(f *testing.F) {
	for _, s := range []string{"bytes 0-99/100", "bytes 0-0/1", "bytes */5", "bytes 1-2/3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		total, ok := contentRangeTotal(s)
		if ok && total <= 0 {
			t.Fatalf("%q: total %d", s, total)
		}
	})
}
