package ckptstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/blob"
	"github.com/minio/minio-go/v7"
)

// TestStoreConformance checks the Store contract on every backend
// (a local directory or S3-compatible storage).
func TestStoreConformance(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()

		_, err := s.Get(ctx, "a/missing")
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
		}
		if !strings.Contains(err.Error(), "a/missing") {
			t.Errorf("the error does not name the key: %v", err)
		}

		putObject(t, s, "a/b/one", []byte("1"))
		putObject(t, s, "a/b/two", []byte("22"))
		putObject(t, s, "a/bc", []byte("3"))
		putObject(t, s, "z", nil)
		if got := string(getObject(t, s, "a/b/two")); got != "22" {
			t.Fatalf("Get = %q", got)
		}
		if got := getObject(t, s, "z"); len(got) != 0 {
			t.Fatalf("empty object = %q", got)
		}
		putObject(t, s, "a/b/two", []byte("replaced"))
		if got := string(getObject(t, s, "a/b/two")); got != "replaced" {
			t.Fatalf("after replacing, Get = %q", got)
		}

		for prefix, want := range map[string][]string{
			"":      {"a/b/one", "a/b/two", "a/bc", "z"},
			"a/b":   {"a/b/one", "a/b/two", "a/bc"},
			"a/b/":  {"a/b/one", "a/b/two"},
			"a/b/t": {"a/b/two"},
			"nope/": nil,
		} {
			got, err := s.List(ctx, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("List(%q) = %q, want %q", prefix, got, want)
			}
		}

		// Unknown size, several parts on s3 (5 MiB parts).
		big := randomBytes(11<<20 + 123)
		if err := s.Put(ctx, "big/obj", io.MultiReader(bytes.NewReader(big[:1000]), bytes.NewReader(big[1000:])), -1); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(getObject(t, s, "big/obj"), big) {
			t.Fatal("the streamed object came back different")
		}
		// Known size, several parts.
		if err := s.Put(ctx, "big/known", io.MultiReader(bytes.NewReader(big)), int64(len(big))); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(getObject(t, s, "big/known"), big) {
			t.Fatal("the object of known size came back different")
		}

		// A wrong size writes nothing.
		if err := s.Put(ctx, "a/b/one", strings.NewReader("longer than announced"), 3); err == nil {
			t.Error("Put with too small a size succeeded")
		}
		if err := s.Put(ctx, "a/b/one", strings.NewReader("ab"), 3); err == nil {
			t.Error("Put with too large a size succeeded")
		}
		if got := string(getObject(t, s, "a/b/one")); got != "1" {
			t.Errorf("after failed Puts, Get = %q, want the old object", got)
		}
		// A failing reader writes nothing.
		boom := errors.New("boom")
		if err := s.Put(ctx, "a/b/one", io.MultiReader(strings.NewReader("partial"), errReader{boom}), -1); !errors.Is(err, boom) {
			t.Errorf("Put with a failing reader: %v, want boom", err)
		}
		if got := string(getObject(t, s, "a/b/one")); got != "1" {
			t.Errorf("after a failed Put, Get = %q, want the old object", got)
		}

		// Create refuses an existing key.
		if err := s.Create(ctx, "c/x", strings.NewReader("first"), 5); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, "c/x", strings.NewReader("second"), 6); !errors.Is(err, ErrExists) {
			t.Fatalf("second Create: %v, want ErrExists", err)
		}
		if got := string(getObject(t, s, "c/x")); got != "first" {
			t.Fatalf("after a refused Create, Get = %q", got)
		}

		// Delete, twice.
		for range 2 {
			if err := s.Delete(ctx, "a/b/one"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Get(ctx, "a/b/one"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get after Delete: %v", err)
		}
		if err := s.Delete(ctx, "never/was"); err != nil {
			t.Fatal(err)
		}

		// Keys cannot escape the root.
		for _, key := range []string{"", "/abs", "a/../b", "..", "a//b", "a/", "./a", "a\\b", "a/.arkflow-tmp-1"} {
			if err := s.Put(ctx, key, strings.NewReader("x"), 1); err == nil {
				t.Errorf("Put(%q) succeeded", key)
			}
			if _, err := s.Get(ctx, key); err == nil || errors.Is(err, ErrNotFound) {
				t.Errorf("Get(%q) = %v, want an invalid-key error", key, err)
			}
		}
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// tempFiles lists leftover temporary files under dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tmpPrefix) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// TestFileStorePutIsAtomic (a checkpoint is durable and whole or
// absent): concurrent readers only ever see a whole object, and
// no temporary file is left behind, whether the Put succeeded or failed.
func TestFileStorePutIsAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := OpenStore(context.Background(), "file://"+dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := bytes.Repeat([]byte("a"), 1<<20)
	b := bytes.Repeat([]byte("b"), 1<<20)
	putObject(t, s, "x/obj", a)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var bad error
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rc, err := s.Get(ctx, "x/obj")
			if err != nil {
				mu.Lock()
				bad = err
				mu.Unlock()
				return
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !(bytes.Equal(got, a) || bytes.Equal(got, b)) {
				mu.Lock()
				bad = errors.New("a reader saw a partial object")
				mu.Unlock()
				return
			}
		}
	}()
	for i := range 50 {
		next := a
		if i%2 == 0 {
			next = b
		}
		if err := s.Put(ctx, "x/obj", bytes.NewReader(next), -1); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if bad != nil {
		t.Fatal(bad)
	}
	// A failed Put (the reader fails half-way) leaves the old object and
	// no temporary file.
	if err := s.Put(ctx, "x/obj", io.MultiReader(bytes.NewReader(b[:1000]), errReader{io.ErrUnexpectedEOF}), -1); err == nil {
		t.Fatal("Put with a failing reader succeeded")
	}
	if err := s.Create(ctx, "x/obj", bytes.NewReader(b), int64(len(b))); !errors.Is(err, ErrExists) {
		t.Fatalf("Create over an existing object: %v", err)
	}
	if got := getObject(t, s, "x/obj"); !bytes.Equal(got, a) && !bytes.Equal(got, b) {
		t.Fatal("the object changed after failed writes")
	}
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Fatalf("temporary files left: %q", left)
	}
	// A crash between writing the temporary file and renaming it leaves
	// one behind: List and Get ignore it.
	if err := os.WriteFile(filepath.Join(dir, "x", tmpPrefix+"123"), []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"x/obj"}) {
		t.Fatalf("List = %q, want only x/obj", keys)
	}
	// Delete removes the directories it empties.
	os.Remove(filepath.Join(dir, "x", tmpPrefix+"123"))
	putObject(t, s, "d1/d2/d3/obj", []byte("x"))
	if err := s.Delete(ctx, "d1/d2/d3/obj"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "d1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty directories left after Delete: %v", err)
	}
}

// TestOpenStoreErrors checks the URI rules and that errors name what to
// fix.
func TestOpenStoreErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for uri, want := range map[string]string{
		"gs://bucket/x":         "file:///absolute/dir or s3://bucket/prefix",
		"/abs/dir":              "unsupported scheme",
		"file://relative/dir":   "absolute path",
		"file:relative":         "absolute path",
		"file:///a/../b":        "'..'",
		"s3:///prefix":          "no bucket",
		"s3://user:pw@bucket/p": "s3://bucket/prefix",
		"s3://bucket/a/../b":    "..",
	} {
		_, err := OpenStore(ctx, uri, StoreOptions{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenStore(%q) = %v, want an error containing %q", uri, err, want)
		}
	}
	// A file store creates its directory.
	dir := filepath.Join(t.TempDir(), "new", "dir")
	s, err := OpenStore(ctx, "file://"+dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.URI() != "file://"+dir {
		t.Errorf("URI() = %q", s.URI())
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("the directory was not created: %v", err)
	}
}

// TestOpenStoreS3 opens s3:// stores from options and from the
// environment, and names a missing bucket.
func TestOpenStoreS3(t *testing.T) {
	c, bucket := testBucket(t)
	ctx := context.Background()
	endpoint := os.Getenv("ARKFLOW_TEST_S3_ENDPOINT")
	_, err := OpenStore(ctx, "s3://no-such-bucket-ckpt/x", StoreOptions{Client: c})
	if err == nil || !strings.Contains(err.Error(), `"no-such-bucket-ckpt"`) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing bucket: %v", err)
	}
	// Explicit options, with an http:// endpoint.
	s, err := OpenStore(ctx, "s3://"+bucket+"/p/", StoreOptions{
		Options: blob.Options{Endpoint: "http://" + endpoint, AccessKeyID: os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), SecretAccessKey: os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.URI() != "s3://"+bucket+"/p" {
		t.Errorf("URI() = %q", s.URI())
	}
	putObject(t, s, "k", []byte("v"))
	if _, err := c.StatObject(ctx, bucket, "p/k", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("the object is not at p/k in the bucket: %v", err)
	}
	// The environment.
	t.Setenv("AWS_ENDPOINT_URL", "http://"+endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"))
	t.Setenv("AWS_SECRET_ACCESS_KEY", os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY"))
	s2, err := OpenStore(ctx, "s3://"+bucket+"/p", StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(getObject(t, s2, "k")); got != "v" {
		t.Fatalf("through the environment, Get = %q", got)
	}
	// A bare host:port means TLS unless AllowHTTP.
	if _, err := OpenStore(ctx, "s3://"+bucket, StoreOptions{Options: blob.Options{Endpoint: endpoint, AllowHTTP: true}}); err != nil {
		t.Fatalf("AllowHTTP: %v", err)
	}
}

// failAfter gives n bytes of r, then fails with err.
type failAfter struct {
	r   io.Reader
	n   int
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= n
	return n, err
}

// The s3 store's multipart uploads (putParts): objects of every length
// around the part boundaries come back whole, from uploads running at
// once (their part buffers come from one free list); an upload that fails
// part-way (the reader, a wrong announced size, a cancelled context)
// leaves the old object and no incomplete upload behind.
func TestS3PutParts(t *testing.T) {
	t.Parallel()
	c, bucket := testBucket(t)
	ctx := context.Background()
	s, err := OpenStore(ctx, "s3://"+bucket+"/mp", StoreOptions{Client: c, PartSize: minPartSize, UploadConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	const part = minPartSize
	sizes := []int{part - 1, part, part + 1, 2 * part, 2*part + 1, 3*part + 17, 7*part - 3}
	data := randomBytes(7 * part)
	var wg sync.WaitGroup
	errs := make([]error, 2*len(sizes))
	for i, n := range sizes {
		for j, size := range []int64{-1, int64(n)} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Reads of odd lengths, as a pipe gives them.
				r := io.MultiReader(bytes.NewReader(data[:n/3]), bytes.NewReader(data[n/3:n]))
				errs[2*i+j] = s.Put(ctx, fmt.Sprintf("obj/%d-%d", n, j), r, size)
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
			if got := getObject(t, s, fmt.Sprintf("obj/%d-%d", n, j)); !bytes.Equal(got, data[:n]) {
				t.Fatalf("object of %d bytes (known size: %v) came back as %d different bytes", n, j == 1, len(got))
			}
		}
	}

	old := []byte("the old object")
	putObject(t, s, "keep", old)
	boom := errors.New("boom")
	cctx, cancel := context.WithCancel(ctx)
	cancelled := &cancelAfter{r: bytes.NewReader(data), n: 3 * part, cancel: cancel}
	for name, put := range map[string]func() error{
		"failing reader after 3 parts": func() error {
			return s.Put(ctx, "keep", &failAfter{r: bytes.NewReader(data), n: 3*part + 5, err: boom}, -1)
		},
		"fewer bytes than announced": func() error { return s.Put(ctx, "keep", bytes.NewReader(data[:3*part]), 4*part) },
		"more bytes than announced":  func() error { return s.Put(ctx, "keep", bytes.NewReader(data[:4*part]), 3*part) },
		"cancelled":                  func() error { return s.Put(cctx, "keep", cancelled, -1) },
	} {
		if err := put(); err == nil {
			t.Fatalf("%s: Put succeeded", name)
		}
		if got := getObject(t, s, "keep"); !bytes.Equal(got, old) {
			t.Fatalf("%s: the key holds %d bytes, want the old object", name, len(got))
		}
	}
	if err := s.Put(ctx, "keep", &failAfter{r: bytes.NewReader(data), n: 2 * part, err: boom}, -1); !errors.Is(err, boom) {
		t.Fatalf("the reader's error is not wrapped: %v", err)
	}
	for u := range c.ListIncompleteUploads(ctx, bucket, "mp/", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("incomplete upload left behind: %s (%s)", u.Key, u.UploadID)
	}
}

// cancelAfter cancels after n bytes read.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n -= n
	if c.n <= 0 {
		c.cancel()
	}
	return n, err
}

// CheckStore refuses what OpenStore refuses before any I/O, with the
// same text, and creates nothing.
func TestCheckStoreMatchesOpenStore(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "not", "yet")
	cases := []struct {
		uri  string
		opts StoreOptions
		want string // "" = accepted
	}{
		{"file://" + dir, StoreOptions{}, ""},
		{"file://rel/dir", StoreOptions{}, "a file URI needs an absolute path"},
		{"file:///a/../b", StoreOptions{}, "must not contain '..'"},
		{"file:///a?x=1", StoreOptions{}, "takes no query or fragment"},
		{"ftp://host/x", StoreOptions{}, `unsupported scheme "ftp"`},
		{"s3:///prefix", StoreOptions{}, "no bucket"},
		{"s3://user@bucket/p", StoreOptions{}, "use s3://bucket/prefix"},
		{"s3://bucket/a//b", StoreOptions{}, "empty segment"},
		{"s3://bucket/p", StoreOptions{Options: blob.Options{Endpoint: "ftp://h:1"}}, "the scheme must be http or https"},
		{"s3://bucket/p", StoreOptions{Options: blob.Options{Endpoint: "http://h:1/path"}}, "give only scheme://host[:port]"},
		{"s3://bucket/p", StoreOptions{Options: blob.Options{Endpoint: "h:1", SecretAccessKey: "s"}}, "a secret access key is set without an access key id"},
		{"s3://bucket/p", StoreOptions{Options: blob.Options{Endpoint: "h:1"}, UploadConcurrency: -1}, "must not be negative"},
		{"s3://bucket/p", StoreOptions{Options: blob.Options{Endpoint: "h:1"}, PartSize: 1 << 20}, "below S3's minimum"},
	}
	for _, c := range cases {
		err := CheckStore(c.uri, c.opts)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.uri, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %+v: got %v, want %q", c.uri, c.opts, err, c.want)
		case c.want != "" && !strings.HasPrefix(c.uri, "s3://bucket/p"):
			// Refused without I/O: OpenStore says the same.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, oerr := OpenStore(ctx, c.uri, c.opts)
			cancel()
			if oerr == nil || oerr.Error() != err.Error() {
				t.Errorf("%s: OpenStore says %v, CheckStore %v", c.uri, oerr, err)
			}
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CheckStore created %s (%v)", dir, err)
	}
}
