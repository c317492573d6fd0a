package walog

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/arkflow-rs/arkflow-go/internal/blob"
)

// objBucket connects to the MinIO server named by ARKFLOW_TEST_S3_* and
// creates a bucket for the test, removed with its objects afterwards.
func objBucket(t *testing.T) (*minio.Client, string) {
	t.Helper()
	endpoint := os.Getenv("ARKFLOW_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("ARKFLOW_TEST_S3_ENDPOINT is not set: bash .ci/test.sh starts MinIO and sets ARKFLOW_TEST_S3_*")
	}
	c, err := minio.New(endpoint, &minio.Options{
		Creds: credentials.NewStaticV4(os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY"), ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	name := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	name = strings.TrimSuffix(strings.TrimPrefix(name, "testobjectstore"), "-")
	if len(name) > 40 {
		name = strings.TrimSuffix(name[:40], "-")
	}
	bucket := "walt-" + name + "-" + hex.EncodeToString(rnd[:])
	ctx := context.Background()
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("creating bucket %s at %s: %v", bucket, endpoint, err)
	}
	t.Cleanup(func() {
		for obj := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err == nil {
				c.RemoveObject(ctx, bucket, obj.Key, minio.RemoveObjectOptions{})
			}
		}
		if err := c.RemoveBucket(ctx, bucket); err != nil {
			t.Logf("removing bucket %s: %v", bucket, err)
		}
	})
	return c, bucket
}

const objNS = "arkflow/wal/node-0/orders/"

func objOpts(c *minio.Client, bucket string) ObjectStoreOptions {
	return ObjectStoreOptions{
		Options: Options{Logger: slog.New(slog.DiscardHandler)},
		Client:  c,
		Bucket:  bucket,
		NodeID:  "node-0",
		Stream:  "orders",
	}
}

func objOpen(t *testing.T, opts ObjectStoreOptions) *Log {
	t.Helper()
	l, err := OpenObjectStore(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func objAppend(t *testing.T, l *Log, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		seq, err := l.Append(context.Background(), fmt.Appendf(nil, "e%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i) {
			t.Fatalf("Append returned sequence %d, want %d", seq, i)
		}
	}
}

// objReplay returns the replayed entries as "seq:payload".
func objReplay(t *testing.T, l *Log) []string {
	t.Helper()
	r, err := l.Replay()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for {
		e, err := r.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%s", e.Seq, e.Payload))
	}
}

func objEntries(from, to int) []string {
	var s []string
	for i := from; i <= to; i++ {
		s = append(s, fmt.Sprintf("%d:e%d", i, i))
	}
	return s
}

// objSegments LISTs the namespace's segments/.
func objSegments(t *testing.T, c *minio.Client, bucket string) []string {
	t.Helper()
	var names []string
	for obj := range c.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: objNS + "segments/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		names = append(names, strings.TrimPrefix(obj.Key, objNS+"segments/"))
	}
	return names
}

func objGet(t *testing.T, c *minio.Client, bucket, key string) []byte {
	t.Helper()
	obj, err := c.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return b
}

func objPut(t *testing.T, c *minio.Client, bucket, key string, b []byte) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

func objManifest(t *testing.T, c *minio.Client, bucket string) *Manifest {
	t.Helper()
	m, err := DecodeManifest(objGet(t, c, bucket, objNS+"manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func objClose(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func objSegNames(idx ...int) []string {
	var s []string
	for _, i := range idx {
		s = append(s, objectSegmentName(uint64(i)))
	}
	return s
}

// Validation needs no server.
func TestObjectStoreOptionsValidation(t *testing.T) {
	t.Parallel()
	ok := ObjectStoreOptions{S3: blob.Options{Endpoint: "127.0.0.1:1"}, Bucket: "b", NodeID: "n", Stream: "s"}
	for _, c := range []struct {
		name   string
		change func(*ObjectStoreOptions)
		want   []string
	}{
		{"node_id missing", func(o *ObjectStoreOptions) { o.NodeID = "" },
			[]string{"wal: ObjectStoreOptions.NodeID is required and must be non-empty (it names the WAL namespace in the bucket and must survive restarts)"}},
		{"node_id with slash", func(o *ObjectStoreOptions) { o.NodeID = "a/b" }, []string{"ObjectStoreOptions.NodeID \"a/b\""}},
		{"stream missing", func(o *ObjectStoreOptions) { o.Stream = "" }, []string{"ObjectStoreOptions.Stream is required"}},
		{"stream dot-dot", func(o *ObjectStoreOptions) { o.Stream = ".." }, []string{"ObjectStoreOptions.Stream \"..\""}},
		{"bucket missing", func(o *ObjectStoreOptions) { o.Bucket = "" }, []string{"ObjectStoreOptions.Bucket is required"}},
		{"endpoint of another scheme", func(o *ObjectStoreOptions) { o.S3.Endpoint = "ftp://h:1" }, []string{"ObjectStoreOptions.S3.Endpoint", "the scheme must be http or https"}},
		{"secret without access key", func(o *ObjectStoreOptions) { o.S3.SecretAccessKey = "x" }, []string{"ObjectStoreOptions.S3.SecretAccessKey is set but ObjectStoreOptions.S3.AccessKeyID is empty"}},
		{"bad sync mode", func(o *ObjectStoreOptions) { o.Sync = "fsync" }, []string{`sync "fsync"`}},
		{"all at once", func(o *ObjectStoreOptions) { o.NodeID, o.Stream, o.Bucket = "", "", "" },
			[]string{"ObjectStoreOptions.NodeID", "ObjectStoreOptions.Stream", "ObjectStoreOptions.Bucket"}},
	} {
		o := ok
		c.change(&o)
		l, err := OpenObjectStore(context.Background(), o)
		if err == nil {
			l.Close()
			t.Errorf("%s: OpenObjectStore succeeded", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
		// Every field the message names is one a caller can set.
		for _, path := range regexp.MustCompile(`ObjectStoreOptions((?:\.[A-Z]\w*)+)`).FindAllStringSubmatch(err.Error(), -1) {
			typ := reflect.TypeFor[ObjectStoreOptions]()
			for _, name := range strings.Split(path[1][1:], ".") {
				f, ok := typ.FieldByName(name)
				if !ok {
					t.Errorf("%s: error %q names %s, which ObjectStoreOptions does not have", c.name, err, path[0])
					break
				}
				typ = f.Type
			}
		}
	}
}

// The server must honour conditional PUTs, which the manifest's
// compare-and-swap and the segments' create-only PUTs rely on.
func TestObjectStoreServerHonoursConditionalPut(t *testing.T) {
	t.Parallel()
	c, bucket := objBucket(t)
	ctx := context.Background()
	put := func(body string, cond func(*minio.PutObjectOptions)) (string, error) {
		o := minio.PutObjectOptions{DisableMultipart: true}
		cond(&o)
		info, err := c.PutObject(ctx, bucket, "k", strings.NewReader(body), int64(len(body)), o)
		return info.ETag, err
	}
	createOnly := func(o *minio.PutObjectOptions) { o.SetMatchETagExcept("*") }
	etag, err := put("one", createOnly)
	if err != nil {
		t.Fatalf("If-None-Match: * on a new key: %v", err)
	}
	if _, err := put("two", createOnly); blob.Classify(err) != blob.PreconditionFailed {
		t.Fatalf("If-None-Match: * on an existing key: err = %v, want 412", err)
	}
	if _, err := put("two", func(o *minio.PutObjectOptions) { o.SetMatchETag("0123456789abcdef0123456789abcdef") }); blob.Classify(err) != blob.PreconditionFailed {
		t.Fatalf("If-Match with a wrong ETag: err = %v, want 412", err)
	}
	if _, err := put("three", func(o *minio.PutObjectOptions) { o.SetMatchETag(etag) }); err != nil {
		t.Fatalf("If-Match with the current ETag: %v", err)
	}
	if _, err := put("four", func(o *minio.PutObjectOptions) { o.SetMatchETag(etag) }); blob.Classify(err) != blob.PreconditionFailed {
		t.Fatalf("If-Match with a stale ETag: err = %v, want 412", err)
	}
	if got := objGet(t, c, bucket, "k"); string(got) != "three" {
		t.Fatalf("object holds %q, want the last successful PUT %q", got, "three")
	}
}

func TestObjectStoreAppendAckReopen(t *testing.T) {
	t.Parallel()
	c, bucket := objBucket(t)
	opts := objOpts(c, bucket)
	opts.CursorMeta = func(cursor uint64) []byte { return fmt.Appendf(nil, "pos-%d", cursor) }
	l := objOpen(t, opts)
	if got := objReplay(t, l); len(got) != 0 {
		t.Fatalf("a new log replays %v", got)
	}
	objAppend(t, l, 1, 10)
	for _, s := range []uint64{1, 2, 3, 4, 6, 8} {
		if err := l.Ack(s); err != nil {
			t.Fatal(err)
		}
	}
	objClose(t, l)

	m := objManifest(t, c, bucket)
	if m.Version != 2 || m.NodeID != "node-0" || m.StreamID != "orders" || m.Cursor != 4 || m.MaxSealedSeq != 10 || string(m.CursorMeta) != "pos-4" {
		t.Fatalf("manifest %+v", m)
	}

	l = objOpen(t, opts)
	defer objClose(t, l)
	if l.Cursor() != 4 || l.Last() != 10 || string(l.CursorMeta()) != "pos-4" {
		t.Fatalf("reopened: cursor %d, last %d, meta %q; want 4, 10, pos-4", l.Cursor(), l.Last(), l.CursorMeta())
	}
	// 6 and 8 were acknowledged behind the gap at 5: replayed too.
	if got, want := objReplay(t, l), objEntries(5, 10); !slices.Equal(got, want) {
		t.Fatalf("replay = %v, want %v", got, want)
	}
	objAppend(t, l, 11, 11)
}

func TestObjectStoreCursorDeletesSegments(t *testing.T) {
	t.Parallel()
	for _, retain := range []bool{false, true} {
		t.Run(fmt.Sprintf("retain=%v", retain), func(t *testing.T) {
			c, bucket := objBucket(t)
			opts := objOpts(c, bucket)
			opts.Sync = SyncAlways // one segment per entry
			opts.Retain = retain
			l := objOpen(t, opts)
			objAppend(t, l, 1, 5)
			if got, want := objSegments(t, c, bucket), objSegNames(1, 2, 3, 4, 5); !slices.Equal(got, want) {
				t.Fatalf("segments = %v, want %v", got, want)
			}
			for s := uint64(1); s <= 3; s++ {
				l.Ack(s)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			want := objSegNames(4, 5)
			if retain {
				want = objSegNames(1, 2, 3, 4, 5)
			}
			if got := objSegments(t, c, bucket); !slices.Equal(got, want) {
				t.Fatalf("after the cursor reached 3: segments = %v, want %v", got, want)
			}
			m := objManifest(t, c, bucket)
			if m.Cursor != 3 || m.ActiveSegment != objectSegmentName(5) || !slices.Equal(m.SealedSegments, want[:len(want)-1]) {
				t.Fatalf("manifest %+v, want cursor 3, active %s, sealed %v", m, objectSegmentName(5), want[:len(want)-1])
			}
			if r := m.SegmentSeqs[objectSegmentName(4)]; r != (SeqRange{4, 4}) {
				t.Fatalf("segment_seqs[4] = %+v", r)
			}

			// Everything acknowledged: the newest segment stays.
			l.Ack(4)
			l.Ack(5)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			want = objSegNames(5)
			if retain {
				want = objSegNames(1, 2, 3, 4, 5)
			}
			if got := objSegments(t, c, bucket); !slices.Equal(got, want) {
				t.Fatalf("after the cursor reached 5: segments = %v, want %v", got, want)
			}
			objClose(t, l)

			l = objOpen(t, opts)
			defer objClose(t, l)
			if got := objReplay(t, l); len(got) != 0 {
				t.Fatalf("replay after everything was acknowledged = %v", got)
			}
			if l.Cursor() != 5 || l.Last() != 5 {
				t.Fatalf("cursor %d, last %d; want 5, 5", l.Cursor(), l.Last())
			}
			objAppend(t, l, 6, 6)
			if got := objSegments(t, c, bucket); got[len(got)-1] != objectSegmentName(6) {
				t.Fatalf("segments after one more append = %v, want the next index last", got)
			}
		})
	}
}

func TestObjectStoreGroupCommitConcurrent(t *testing.T) {
	t.Parallel()
	c, bucket := objBucket(t)
	opts := objOpts(c, bucket)
	opts.Sync = SyncGroupCommit
	l := objOpen(t, opts)
	defer l.Close()
	const writers, each = 16, 20
	var mu sync.Mutex
	want := map[uint64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				p := fmt.Sprintf("w%02d-%03d", w, i)
				seq, err := l.Append(context.Background(), []byte(p))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				want[seq] = p
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Every Append returned, so every entry is in the bucket: a second
	// log opened without closing the first (a crash) finds them all.
	l2 := objOpen(t, opts)
	defer objClose(t, l2)
	if l2.Last() != writers*each {
		t.Fatalf("reopened log's last = %d, want %d", l2.Last(), writers*each)
	}
	got := objReplay(t, l2)
	if len(got) != writers*each {
		t.Fatalf("replayed %d entries, want %d", len(got), writers*each)
	}
	for i, e := range got {
		if w := fmt.Sprintf("%d:%s", i+1, want[uint64(i+1)]); e != w {
			t.Fatalf("replayed %q, want %q", e, w)
		}
	}
	t.Logf("%d appends from %d goroutines took %d segment PUTs", writers*each, writers, len(objSegments(t, c, bucket)))
}

func TestObjectStoreConflict(t *testing.T) {
	t.Parallel()
	t.Run("manifest", func(t *testing.T) {
		c, bucket := objBucket(t)
		opts := objOpts(c, bucket)
		a := objOpen(t, opts)
		defer a.Close()
		objAppend(t, a, 1, 3)
		a.Ack(1)
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		// b uses the same namespace (a node_id collision).
		b := objOpen(t, opts)
		defer b.Close()
		a.Ack(2)
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		// b's compare-and-swap is against the manifest it read: refused.
		b.Ack(2)
		b.Ack(3)
		err := b.Flush()
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("stale writer's Flush: err = %v, want ErrConflict", err)
		}
		t.Log(err)
		if m := objManifest(t, c, bucket); m.Cursor != 2 {
			t.Fatalf("manifest cursor = %d after the refused update, want a's 2", m.Cursor)
		}
		// The refusal is sticky: b takes no more writes.
		if _, err := b.Append(context.Background(), []byte("x")); !errors.Is(err, ErrConflict) {
			t.Fatalf("stale writer's Append: err = %v, want ErrConflict", err)
		}
		// a is unaffected.
		a.Ack(3)
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		objAppend(t, a, 4, 4)
		if m := objManifest(t, c, bucket); m.Cursor != 3 {
			t.Fatalf("manifest cursor = %d, want 3", m.Cursor)
		}
	})
	t.Run("segment", func(t *testing.T) {
		c, bucket := objBucket(t)
		opts := objOpts(c, bucket)
		a := objOpen(t, opts)
		defer a.Close()
		b := objOpen(t, opts)
		defer b.Close()
		if _, err := a.Append(context.Background(), []byte("from a")); err != nil {
			t.Fatal(err)
		}
		// b would PUT the same segment index: refused, not overwritten.
		_, err := b.Append(context.Background(), []byte("from b"))
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("second writer's Append: err = %v, want ErrConflict", err)
		}
		t.Log(err)
		seg, err := DecodeSegment("1", objGet(t, c, bucket, objNS+"segments/"+objectSegmentName(1)), 1)
		if err != nil || len(seg.Entries) != 1 || string(seg.Entries[0].Payload) != "from a" {
			t.Fatalf("segment 1 = %+v, %v; want a's entry", seg.Entries, err)
		}
	})
}

// objThreeSegments writes entries 1-6 as segments 1-3 of two entries each.
func objThreeSegments(t *testing.T, opts ObjectStoreOptions) {
	t.Helper()
	opts.Sync = SyncNone
	l := objOpen(t, opts)
	for i := 1; i <= 6; i += 2 {
		objAppend(t, l, i, i+1)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	objClose(t, l)
}

func TestObjectStoreCorruptSegment(t *testing.T) {
	t.Parallel()
	key := objNS + "segments/" + objectSegmentName(2)
	for _, c := range []struct {
		name   string
		damage func([]byte) []byte
		offset int64
	}{
		// A bad first record followed by a good one is corruption anywhere.
		{"bad checksum", func(b []byte) []byte { b[headerSize] ^= 0xff; return b }, 0},
		// A cut-off record is a torn tail only in the newest segment.
		{"cut off", func(b []byte) []byte { return b[:len(b)-1] }, int64(RecordSize(2))},
	} {
		t.Run(c.name, func(t *testing.T) {
			mc, bucket := objBucket(t)
			opts := objOpts(mc, bucket)
			objThreeSegments(t, opts)
			damaged := c.damage(objGet(t, mc, bucket, key))
			objPut(t, mc, bucket, key, damaged)

			l, err := OpenObjectStore(context.Background(), opts)
			if err == nil {
				l.Close()
				t.Fatal("opened a log with a corrupt middle segment")
			}
			t.Log(err)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *CorruptError", err)
			}
			if want := "s3://" + bucket + "/" + key; ce.Segment != want || ce.Offset != c.offset {
				t.Fatalf("CorruptError names %s at offset %d, want %s at %d (%v)", ce.Segment, ce.Offset, want, c.offset, err)
			}
			if got := objGet(t, mc, bucket, key); !bytes.Equal(got, damaged) {
				t.Fatal("a failed open changed the corrupt segment")
			}
		})
	}
}

func TestObjectStoreMissingSegment(t *testing.T) {
	t.Parallel()
	c, bucket := objBucket(t)
	opts := objOpts(c, bucket)
	objThreeSegments(t, opts)
	l := objOpen(t, opts)
	l.Ack(1)
	if err := l.Flush(); err != nil { // the manifest now names segments 1-3
		t.Fatal(err)
	}
	objClose(t, l)
	key := objNS + "segments/" + objectSegmentName(2)
	if err := c.RemoveObject(context.Background(), bucket, key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := OpenObjectStore(context.Background(), opts)
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.HasSuffix(ce.Segment, key) || !strings.Contains(ce.Reason, "missing") {
		t.Fatalf("err = %v, want a *CorruptError saying %s is missing", err, key)
	}
}

// The client the log builds uses TLS unless AllowHTTP or an http://
// endpoint says otherwise, like the checkpoint store's (it used to
// default to plain HTTP).
func TestObjectStoreTLSByDefault(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		o      ObjectStoreOptions
		scheme string
	}{
		{ObjectStoreOptions{S3: blob.Options{Endpoint: "h:1"}}, "https"},
		{ObjectStoreOptions{S3: blob.Options{Endpoint: "h:1", AllowHTTP: true}}, "http"},
		{ObjectStoreOptions{S3: blob.Options{Endpoint: "http://h:1"}}, "http"},
		{ObjectStoreOptions{S3: blob.Options{Endpoint: "https://h:1", AllowHTTP: true}}, "https"},
	} {
		cl, err := blob.NewClient(c.o.S3)
		if err != nil {
			t.Fatal(err)
		}
		if u := cl.EndpointURL(); u.Scheme != c.scheme || u.Host != "h:1" {
			t.Errorf("Endpoint %q, AllowHTTP %v: client at %v, want %s://h:1", c.o.S3.Endpoint, c.o.S3.AllowHTTP, u, c.scheme)
		}
	}
}

// A log opened from an endpoint and keys (no Client) reaches MinIO over
// plain HTTP only with AllowHTTP.
func TestObjectStoreEndpointAllowHTTP(t *testing.T) {
	t.Parallel()
	_, bucket := objBucket(t)
	opts := ObjectStoreOptions{
		S3:      blob.Options{Endpoint: os.Getenv("ARKFLOW_TEST_S3_ENDPOINT"), AccessKeyID: os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), SecretAccessKey: os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY")},
		Options: Options{Logger: slog.New(slog.DiscardHandler)},
		Bucket:  bucket,
		NodeID:  "node-0",
		Stream:  "orders",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if l, err := OpenObjectStore(ctx, opts); err == nil {
		l.Close()
		t.Fatal("TLS to a plain-HTTP MinIO succeeded: is TLS not the default?")
	}
	opts.S3.AllowHTTP = true
	l, err := OpenObjectStore(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestObjectStoreMissingBucket(t *testing.T) {
	t.Parallel()
	c, bucket := objBucket(t)
	opts := objOpts(c, bucket+"-absent")
	_, err := OpenObjectStore(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), `bucket "`+bucket+`-absent" does not exist: create it first, or correct durability.backend.s3.bucket`) {
		t.Fatalf("err = %v, want one naming the missing bucket", err)
	}
	t.Log(err)
}

func TestObjectStoreTornNewestSegment(t *testing.T) {
	t.Parallel()
	c, bucket := objBucket(t)
	opts := objOpts(c, bucket)
	objThreeSegments(t, opts)
	key := objNS + "segments/" + objectSegmentName(3)
	b := objGet(t, c, bucket, key)
	objPut(t, c, bucket, key, b[:len(b)-3])

	l := objOpen(t, opts)
	if l.Last() != 5 {
		t.Fatalf("last = %d, want 5 (entry 6 was torn)", l.Last())
	}
	if got, want := objReplay(t, l), objEntries(1, 5); !slices.Equal(got, want) {
		t.Fatalf("replay = %v, want %v", got, want)
	}
	if got := objGet(t, c, bucket, key); len(got) != RecordSize(2) {
		t.Fatalf("the torn segment holds %d bytes after recovery, want its intact %d", len(got), RecordSize(2))
	}
	objAppend(t, l, 6, 6)
	objClose(t, l)

	// The cut segment is whole now that it is no longer the newest.
	l = objOpen(t, opts)
	defer objClose(t, l)
	if got, want := objReplay(t, l), objEntries(1, 6); !slices.Equal(got, want) {
		t.Fatalf("replay = %v, want %v", got, want)
	}
}

func TestObjectStoreBuffering(t *testing.T) {
	t.Parallel()
	t.Run("none waits for close", func(t *testing.T) {
		c, bucket := objBucket(t)
		opts := objOpts(c, bucket)
		opts.Sync = SyncNone
		l := objOpen(t, opts)
		objAppend(t, l, 1, 3)
		if got := objSegments(t, c, bucket); len(got) != 0 {
			t.Fatalf("segments before close = %v, want none", got)
		}
		objClose(t, l)
		if got := objSegments(t, c, bucket); !slices.Equal(got, objSegNames(1)) {
			t.Fatalf("segments after close = %v, want one", got)
		}
		l = objOpen(t, opts)
		defer objClose(t, l)
		if got, want := objReplay(t, l), objEntries(1, 3); !slices.Equal(got, want) {
			t.Fatalf("replay = %v, want %v", got, want)
		}
	})
	t.Run("a full buffer is PUT by the write", func(t *testing.T) {
		c, bucket := objBucket(t)
		opts := objOpts(c, bucket)
		opts.Sync = SyncNone
		opts.SegmentBytes = int64(2 * RecordSize(2)) // two entries
		l := objOpen(t, opts)
		defer objClose(t, l)
		objAppend(t, l, 1, 5)
		if got := objSegments(t, c, bucket); !slices.Equal(got, objSegNames(1, 2)) {
			t.Fatalf("segments = %v, want two full ones", got)
		}
		// Entry 5 is still buffered, and replayed from the buffer.
		if got, want := objReplay(t, l), objEntries(1, 5); !slices.Equal(got, want) {
			t.Fatalf("replay = %v, want %v", got, want)
		}
	})
}
