package ckptstore

import (
	"context"
	"fmt"
	"github.com/arkflow-rs/arkflow-go/internal/objsum"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Benchmarks of the state object path on MinIO (ARKFLOW_TEST_S3_*): the
// catalog (PutState: a stream of unknown size hashed on the way;
// OpenState: a stream verified on the way) against raw minio-go
// (PutObject of the same bytes with their size known; GetObject copied to
// io.Discard). Each iteration runs both, interleaved, so that the ratio
// compares like with like on a noisy machine:
//
//	go test -run XXX -bench 'State(Up|Down)load' -count 5 ./internal/ckptstore/
//
// Metrics: MB/s (catalog), raw-MB/s (baseline) and ratio (catalog/raw).
// ARKFLOW_BENCH_LARGE=1 adds 1 GB objects.

func benchSizes() []int64 {
	sizes := []int64{100 << 20}
	if os.Getenv("ARKFLOW_BENCH_LARGE") == "1" {
		sizes = append(sizes, 1<<30)
	}
	return sizes
}

func sizeName(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("size=%dGB", n>>30)
	}
	return fmt.Sprintf("size=%dMB", n>>20)
}

// benchData is n bytes of a 16 MiB random block repeated, readable many
// times without holding n bytes.
type benchData struct {
	block []byte
	n     int64
}

func newBenchData(n int64) *benchData { return &benchData{block: randomBytes(16 << 20), n: n} }

// reader returns a fresh reader of the data. It implements io.ReaderAt
// too, as a bytes.Reader would (minio-go then uploads parts in parallel).
func (d *benchData) reader() *benchReader { return &benchReader{d: d} }

type benchReader struct {
	d   *benchData
	off int64
}

func (r *benchReader) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.off)
	r.off += int64(n)
	return n, err
}

func (r *benchReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.d.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.d.n-off)]
	n := 0
	for n < len(p) {
		k := copy(p[n:], r.d.block[(off+int64(n))%int64(len(r.d.block)):])
		n += k
	}
	return n, nil
}

func (d *benchData) crc64() string {
	h := objsum.NewCRC64()
	io.Copy(h, d.reader())
	return objsum.Format(objsum.CRC64NVME, h.Sum(nil))
}

// onlyReader hides every method but Read: a state snapshot is a stream
// of unknown size.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func benchCatalog(b *testing.B, uploadConcurrency int) (*minio.Client, string, *Catalog) {
	c, bucket := testBucket(b)
	s, err := OpenStore(context.Background(), "s3://"+bucket+"/bench", StoreOptions{Client: c, UploadConcurrency: uploadConcurrency})
	if err != nil {
		b.Fatal(err)
	}
	cat, err := NewCatalog(s, "bench", Options{})
	if err != nil {
		b.Fatal(err)
	}
	return c, bucket, cat
}

func report(b *testing.B, size int64, catalog, raw time.Duration) {
	mb := float64(size) * float64(b.N) / 1e6
	b.ReportMetric(mb/catalog.Seconds(), "MB/s")
	b.ReportMetric(mb/raw.Seconds(), "raw-MB/s")
	b.ReportMetric(raw.Seconds()/catalog.Seconds(), "ratio")
}

// BenchmarkStateUpload runs with one 16 MiB part in flight
// (StoreOptions.UploadConcurrency 1) and with 4 (the default, and
// minio-go's default for uploads of known size, which the baseline
// gets).
func BenchmarkStateUpload(b *testing.B) {
	for _, size := range benchSizes() {
		for _, conc := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/concurrency=%d", sizeName(size), conc), func(b *testing.B) { benchUpload(b, size, conc) })
		}
	}
}

func benchUpload(b *testing.B, size int64, conc int) {
	c, bucket, cat := benchCatalog(b, conc)
	ctx := context.Background()
	data := newBenchData(size)
	want := data.crc64()
	id := ID(1).String()
	b.ReportAllocs()
	b.ResetTimer()
	var catalogT, rawT time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := c.PutObject(ctx, bucket, "raw/state.snap", data.reader(), size, minio.PutObjectOptions{ContentType: "application/octet-stream"}); err != nil {
			b.Fatal(err)
		}
		rawT += time.Since(start)

		start = time.Now()
		e, err := cat.PutState(ctx, KindCheckpoint, id, fmt.Sprintf("task-%d", i), onlyReader{data.reader()})
		if err != nil {
			b.Fatal(err)
		}
		catalogT += time.Since(start)
		if e.Bytes != size || e.Checksum != want {
			b.Fatalf("PutState returned %+v, want %d bytes, %s", e, size, want)
		}
		b.StopTimer()
		cat.Store().Delete(ctx, e.URI) // keep the disk from filling
		b.StartTimer()
	}
	report(b, size, catalogT, rawT)
}

func BenchmarkStateDownload(b *testing.B) {
	for _, size := range benchSizes() {
		b.Run(sizeName(size), func(b *testing.B) {
			c, bucket, cat := benchCatalog(b, 0)
			ctx := context.Background()
			data := newBenchData(size)
			e, err := cat.PutState(ctx, KindCheckpoint, ID(1).String(), "task-0", onlyReader{data.reader()})
			if err != nil {
				b.Fatal(err)
			}
			rawKey := "bench/" + e.URI // the same object, read raw
			b.ReportAllocs()
			b.ResetTimer()
			var catalogT, rawT time.Duration
			for i := 0; i < b.N; i++ {
				rawT += timeRawGet(b, c, bucket, rawKey, size)
				catalogT += timeOpenState(b, cat, e)
			}
			report(b, size, catalogT, rawT)
		})
	}
}

// timeRawGet times GetObject of key copied to io.Discard.
func timeRawGet(b *testing.B, c *minio.Client, bucket, key string, size int64) time.Duration {
	start := time.Now()
	o, err := c.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, o)
	o.Close()
	if err != nil || n != size {
		b.Fatalf("raw GET: %d bytes, %v", n, err)
	}
	return time.Since(start)
}

// timeOpenState times OpenState of e read to its end (checked).
func timeOpenState(b *testing.B, cat *Catalog, e StateSnapshot) time.Duration {
	start := time.Now()
	rc, err := cat.OpenState(context.Background(), e)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	if err != nil || n != e.Bytes { // err is a *CorruptError on a checksum mismatch
		b.Fatalf("OpenState: %d bytes, %v", n, err)
	}
	return time.Since(start)
}

// BenchmarkStateDownloadThrottled reads a 128 MiB state object through a
// TCP proxy in front of MinIO that holds each connection to
// ARKFLOW_BENCH_CONN_MBPS (default 90) MB/s of response bytes at most
// (about 72 delivered on the benchmark machine: its sleeps overshoot;
// raw-MB/s says what it was), as S3 does
// (AWS documents about 85–90 MB/s per connection and advises byte-range
// fetches in parallel): OpenState with StoreOptions.DownloadConcurrency
// 1 (the default: one GET), 4 and 8, against raw GetObject to io.Discard
// through the same proxy, in the same iteration.
//
//	go test -run XXX -bench StateDownloadThrottled -benchtime 2x -count 3 ./internal/ckptstore/
func BenchmarkStateDownloadThrottled(b *testing.B) {
	mbps := 90.0
	if v, err := strconv.ParseFloat(os.Getenv("ARKFLOW_BENCH_CONN_MBPS"), 64); err == nil && v > 0 {
		mbps = v
	}
	c, bucket := testBucket(b)
	proxy := throttleProxy(b, os.Getenv("ARKFLOW_TEST_S3_ENDPOINT"), mbps*1e6)
	pc, err := minio.New(proxy, &minio.Options{Creds: credentials.NewStaticV4(os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY"), "")})
	if err != nil {
		b.Fatal(err)
	}
	const size = 128 << 20
	ctx := context.Background()
	s, err := OpenStore(ctx, "s3://"+bucket+"/bench", StoreOptions{Client: c})
	if err != nil {
		b.Fatal(err)
	}
	cat, err := NewCatalog(s, "bench", Options{})
	if err != nil {
		b.Fatal(err)
	}
	e, err := cat.PutState(ctx, KindCheckpoint, ID(1).String(), "task-0", onlyReader{newBenchData(size).reader()})
	if err != nil {
		b.Fatal(err)
	}
	for _, conc := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			ps, err := OpenStore(ctx, "s3://"+bucket+"/bench", StoreOptions{Client: pc, DownloadConcurrency: conc})
			if err != nil {
				b.Fatal(err)
			}
			pcat, err := NewCatalog(ps, "bench", Options{})
			if err != nil {
				b.Fatal(err)
			}
			var catalogT, rawT time.Duration
			for i := 0; i < b.N; i++ {
				rawT += timeRawGet(b, pc, bucket, "bench/"+e.URI, size)
				catalogT += timeOpenState(b, pcat, e)
			}
			report(b, size, catalogT, rawT)
		})
	}
}

// throttleProxy forwards 127.0.0.1 connections to target, each one's
// responses held to bytesPerSec; it returns its address.
func throttleProxy(b *testing.B, target string, bytesPerSec float64) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, conn)
				buf := make([]byte, 256<<10)
				// Each write is paid for after it, and an idle connection
				// earns no credit for later.
				var next time.Time
				for {
					n, err := up.Read(buf)
					if n > 0 {
						if _, werr := conn.Write(buf[:n]); werr != nil {
							return
						}
						if now := time.Now(); next.Before(now) {
							next = now
						}
						next = next.Add(time.Duration(float64(n) / bytesPerSec * 1e9))
						time.Sleep(time.Until(next))
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}
