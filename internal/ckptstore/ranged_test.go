package ckptstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// memRanges serves an object's ranges from memory, with faults.
type memRanges struct {
	ahead int // rangesAtOnce; 0: 3
	data  []byte
	etag  string
	// failBody(off, attempt) makes the body fail after half its bytes.
	failBody func(off int64, attempt int) bool
	// reqErr(off) fails the request itself.
	reqErr func(off int64) error
	// block makes requests wait for the context.
	block bool
	// etagOf, if set, gives each response's ETag.
	etagOf func() string

	mu       sync.Mutex
	attempts map[int64]int
	inFlight int
	maxIn    int
}

func (m *memRanges) rangesAtOnce() int {
	if m.ahead == 0 {
		return 3
	}
	return m.ahead
}

func (m *memRanges) getRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, rangeInfo, error) {
	m.mu.Lock()
	if m.attempts == nil {
		m.attempts = map[int64]int{}
	}
	attempt := m.attempts[off]
	m.attempts[off]++
	m.inFlight++
	m.maxIn = max(m.maxIn, m.inFlight)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.inFlight--
		m.mu.Unlock()
	}()
	if m.block {
		<-ctx.Done()
		return nil, rangeInfo{}, ctx.Err()
	}
	if m.reqErr != nil {
		if err := m.reqErr(off); err != nil {
			return nil, rangeInfo{}, err
		}
	}
	etag := m.etag
	if m.etagOf != nil {
		etag = m.etagOf()
	}
	end := min(off+n, int64(len(m.data)))
	var body io.Reader = bytes.NewReader(m.data[off:end])
	if m.failBody != nil && m.failBody(off, attempt) {
		body = io.MultiReader(bytes.NewReader(m.data[off:off+(end-off)/2]), errReader{errors.New("connection reset")})
	}
	return io.NopCloser(body), rangeInfo{etag: etag, size: int64(len(m.data))}, nil
}

// readOdd reads r to its end in reads of varying sizes.
func readOdd(r io.Reader) ([]byte, error) {
	var out []byte
	buf := make([]byte, 1<<20+7)
	for i := 0; ; i++ {
		n, err := r.Read(buf[:1+(i*7919)%len(buf)])
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// The ranged reader gives the object's bytes in order for every size
// around the range boundaries, with at most rangeAhead ranges in flight.
func TestRangedReaderSizes(t *testing.T) {
	t.Parallel()
	data := randomBytes(5*rangeChunk + 7)
	for _, size := range []int{rangeMin, rangeMin + 1, 3*rangeChunk - 1, 3 * rangeChunk, 5*rangeChunk + 7} {
		m := &memRanges{data: data[:size], etag: "e"}
		r := openRanged(context.Background(), m, "k", int64(size))
		got, err := readOdd(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data[:size]) {
			t.Fatalf("size %d: %d bytes back, equal %v, err %v", size, len(got), bytes.Equal(got, data[:size]), err)
		}
		if m.maxIn > m.rangesAtOnce() {
			t.Fatalf("size %d: %d ranges in flight, want at most %d", size, m.maxIn, m.rangesAtOnce())
		}
	}
}

// A range whose body breaks is fetched again; one that keeps breaking,
// a missing object, a size other than the manifest's and a changed ETag
// fail the read, each with its own error.
func TestRangedReaderFaults(t *testing.T) {
	t.Parallel()
	data := randomBytes(4*rangeChunk + 100)
	size := int64(len(data))
	read := func(m *memRanges, size int64) ([]byte, error) {
		r := openRanged(context.Background(), m, "k", size)
		defer r.Close()
		return readOdd(r)
	}
	// Broken bodies, each range's first attempt: retried.
	m := &memRanges{data: data, etag: "e", failBody: func(off int64, attempt int) bool { return attempt == 0 }}
	if got, err := read(m, size); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("retried ranges: %d bytes, %v", len(got), err)
	}
	// A range that always breaks: an error naming the bytes, after
	// rangeAttempts tries.
	m = &memRanges{data: data, etag: "e", failBody: func(off int64, _ int) bool { return off == 2*rangeChunk }}
	_, err := read(m, size)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("bytes %d-", 2*rangeChunk)) || IsCorruption(err) {
		t.Fatalf("a range that always breaks: %v", err)
	}
	if n := m.attempts[2*rangeChunk]; n != rangeAttempts {
		t.Fatalf("%d attempts, want %d", n, rangeAttempts)
	}
	// Missing: ErrNotFound, not retried.
	m = &memRanges{data: data, reqErr: func(int64) error { return fmt.Errorf("get k: %w", ErrNotFound) }}
	if _, err := read(m, size); !errors.Is(err, ErrNotFound) || m.attempts[0] != 1 {
		t.Fatalf("missing object: %v after %d attempts", err, m.attempts[0])
	}
	// The manifest says another size: corrupt, either way.
	for _, want := range []int64{size - 1, size + 1} {
		m = &memRanges{data: data, etag: "e"}
		if _, err := read(m, want); !IsCorruption(err) {
			t.Fatalf("manifest size %d, object %d: %v", want, size, err)
		}
	}
	// The ETag changes between ranges.
	var n int
	var mu sync.Mutex
	m = &memRanges{data: data, etagOf: func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprint("e", n/2)
	}}
	if _, err := read(m, size); err == nil || !strings.Contains(err.Error(), "changed while it was read") {
		t.Fatalf("changed ETag: %v", err)
	}
}

// Close stops requests in flight and returns; a cancelled context ends
// Read with its error.
func TestRangedReaderCloseAndCancel(t *testing.T) {
	t.Parallel()
	data := randomBytes(3 * rangeChunk)
	m := &memRanges{data: data, etag: "e", block: true}
	ctx, cancel := context.WithCancel(context.Background())
	r := openRanged(ctx, m, "k", int64(len(data)))
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel: %v", err)
	}
	closed := make(chan struct{})
	go func() {
		r.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	// Close before any Read.
	r = openRanged(context.Background(), &memRanges{data: data, etag: "e", block: true}, "k", int64(len(data)))
	r.Close()
	if _, err := r.Read(make([]byte, 1)); err == nil {
		t.Fatal("Read after Close succeeded")
	}
}

// Through a real s3 store (MinIO): a state object large enough to be read
// in ranges comes back whole and checked; one that was truncated,
// lengthened or had a byte changed reads as corrupt, and a
// removed one as missing.
func TestOpenStateRangedS3(t *testing.T) {
	t.Parallel()
	cl, bucket := testBucket(t)
	s, err := OpenStore(context.Background(), "s3://"+bucket+"/ranged", StoreOptions{Client: cl, DownloadConcurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := s.(rangeGetter); !ok || g.rangesAtOnce() != 3 {
		t.Fatal("the s3 store reads no ranges")
	}
	c := newCatalog(t, s, Options{})
	ctx := context.Background()
	data := randomBytes(rangeMin + 3*rangeChunk/2 + 11)
	e, err := c.PutState(ctx, KindCheckpoint, ID(1).String(), "op-0", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readState(t, c, e); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, equal %v: %v", len(got), bytes.Equal(got, data), err)
	}
	flipped := bytes.Clone(data)
	flipped[rangeChunk+5] ^= 1
	for name, body := range map[string][]byte{
		"truncated":                        data[:len(data)-1],
		"truncated within the first range": data[:rangeChunk/2],
		"lengthened":                       append(bytes.Clone(data), 'x'),
		"byte changed":                     flipped,
	} {
		putObject(t, s, e.URI, body)
		if _, err := readState(t, c, e); !IsCorruption(err) {
			t.Fatalf("%s: %v, want a corruption", name, err)
		}
	}
	if err := s.Delete(ctx, e.URI); err != nil {
		t.Fatal(err)
	}
	if _, err := readState(t, c, e); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed: %v, want ErrNotFound", err)
	}
}

// ARKFLOW_S3_DOWNLOAD_CONCURRENCY sets the ranges when the options do
// not; a bad value is refused, naming the variable.
func TestDownloadConcurrencyEnv(t *testing.T) {
	cl, bucket := testBucket(t)
	ctx := context.Background()
	for _, c := range []struct {
		env  string
		opt  int
		want int
		bad  bool
	}{{"", 0, 0, false}, {"6", 0, 6, false}, {"6", 2, 2, false}, {"x", 0, 0, true}, {"-1", 0, 0, true}} {
		t.Setenv(DownloadConcurrencyEnv, c.env)
		s, err := OpenStore(ctx, "s3://"+bucket+"/env", StoreOptions{Client: cl, DownloadConcurrency: c.opt})
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), DownloadConcurrencyEnv) {
				t.Fatalf("%q: %v, want an error naming the variable", c.env, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := s.(rangeGetter).rangesAtOnce(); got != c.want {
			t.Fatalf("env %q, option %d: %d ranges, want %d", c.env, c.opt, got, c.want)
		}
	}
	if _, err := OpenStore(ctx, "s3://"+bucket+"/env", StoreOptions{Client: cl, DownloadConcurrency: -2}); err == nil || !strings.Contains(err.Error(), "download concurrency") {
		t.Fatalf("negative option: %v", err)
	}
}
