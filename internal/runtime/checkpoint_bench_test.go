package runtime

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/objsum"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/blob"
	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/memstat"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
)

// Checkpoint benchmarks. Every number is paired with a baseline
// measured in the same run:
//
//	# checkpoint and restore of 100 MB of keyed state through MinIO
//	# (ARKFLOW_TEST_S3_*; ARKFLOW_BENCH_LARGE=1 adds 1 GB)
//	go test -run '^$' -bench 'BenchmarkCheckpointS3/size=100MB' -benchtime=2x -count=5 ./internal/runtime/
//	ARKFLOW_BENCH_LARGE=1 go test -run '^$' -bench 'BenchmarkCheckpointS3/size=1GB' -benchtime=1x -count=3 -timeout=2h ./internal/runtime/
//	# pause of the pipeline per checkpoint at 100 k keys, input flowing
//	go test -run '^$' -bench 'BenchmarkCheckpointPause' -benchtime=50x -count=5 ./internal/runtime/
//
// BenchmarkCheckpointS3 runs a real job (memory source → keyed stateful
// udf → memory sink) on a Badger state directory that was filled, before
// the job starts, with N keys of 1000-byte values under the udf's scope
// (statestore.Backend.Apply, in the namespace and encoding the udf's
// state.Value[[]byte] reads), with the udf at parallelism p (p snapshots
// per round) and the s3 store's StoreOptions.UploadConcurrency at upload
// (1: one part in flight per snapshot; or 4, the default). Its
// sub-benchmarks:
//
//   - checkpoint: Runtime.Checkpoint (the whole round: next id, cut,
//     snapshots streamed from the frozen store into the catalog's
//     multipart uploads, manifest commit, retention) against raw minio-go
//     PutObject of objects of the same sizes (one per snapshot, concurrently
//     as the runtime uploads them; known size, minio-go's defaults);
//   - restore: a new Runtime on an empty state directory (a replacement
//     node), from Run to Running — catalog selection (manifests only),
//     opening Badger, the restore (each state object streamed into a
//     layer file, its manifest checksum checked on the way), operators
//     and connections — against raw
//     GetObject of the same objects to io.Discard, all at once (the
//     other two baselines, raw-sum and raw-file, one after the other).
//     B/key is what the restoring process allocates (the Go heap) per
//     key restored; heap-after-MB the live heap once the job stopped.
//     select-ms is Catalog.Select as the runtime calls it, timed apart;
//     verify-ms is Catalog.Select reading and hashing every state object
//     (what selection cost before the restore checked the objects
//     itself), for the breakdown. Only with the default upload
//     concurrency: the restore does not depend on it.
//
// ARKFLOW_BENCH_LOG=1 writes the jobs' logs, debug level, to stderr:
// their timestamps split a restore into its steps.
//
// Metrics: MB/s (engine), raw-MB/s (baseline), ratio (engine/raw);
// snapshot-MB/s is the production side of a round alone (the same
// snapshots from a frozen view to io.Discard), timed apart.

// benchGraph builds a spec with bound Go values.
func benchGraph(tb testing.TB, spec string, bindings map[string]any) *build.Graph {
	tb.Helper()
	s, err := job.Parse([]byte(spec))
	if err != nil {
		tb.Fatal(err)
	}
	g, err := build.Build(s, build.Env{Bindings: bindings, Connectors: testEnv})
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// benchS3 connects to ARKFLOW_TEST_S3_* and creates a bucket removed (with
// its objects) after the benchmark, or skips.
func benchS3(b *testing.B) (*minio.Client, string, ckptstore.StoreOptions) {
	b.Helper()
	endpoint := os.Getenv("ARKFLOW_TEST_S3_ENDPOINT")
	if endpoint == "" {
		b.Skip("ARKFLOW_TEST_S3_ENDPOINT is not set: start MinIO and set ARKFLOW_TEST_S3_ENDPOINT, ARKFLOW_TEST_S3_ACCESS_KEY, ARKFLOW_TEST_S3_SECRET_KEY")
	}
	access, secret := os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY")
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(access, secret, "")})
	if err != nil {
		b.Fatal(err)
	}
	var rnd [4]byte
	crand.Read(rnd[:])
	bucket := "ckpt-bench-" + hex.EncodeToString(rnd[:])
	ctx := context.Background()
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		b.Fatalf("creating bucket %s: %v", bucket, err)
	}
	b.Cleanup(func() {
		for obj := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err == nil {
				c.RemoveObject(ctx, bucket, obj.Key, minio.RemoveObjectOptions{})
			}
		}
		if err := c.RemoveBucket(ctx, bucket); err != nil {
			b.Logf("removing bucket %s: %v", bucket, err)
		}
	})
	return c, bucket, ckptstore.StoreOptions{Options: blob.Options{Endpoint: "http://" + endpoint, AccessKeyID: access, SecretAccessKey: secret}}
}

func benchStateSizes() []int64 {
	sizes := []int64{100 << 20}
	if os.Getenv("ARKFLOW_BENCH_LARGE") == "1" {
		sizes = append(sizes, 1<<30)
	}
	return sizes
}

func benchSizeName(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("size=%dGB", n>>30)
	}
	return fmt.Sprintf("size=%dMB", n>>20)
}

// blobValueSize is the value of each key; N = size/1024 keys, so that a
// snapshot (key, value, record framing) is close to size.
const blobValueSize = 1000

var blobState = state.NewValue[[]byte]("blob")

// blobs holds the values of the filled state: value i is a window of a
// random block, so the state does not compress and each value is known.
type blobs struct{ block []byte }

func newBlobs() *blobs {
	b := make([]byte, 16<<20)
	crand.Read(b)
	return &blobs{block: b}
}

func blobUser(i int) string { return fmt.Sprintf("u%08d", i) }

func (bl *blobs) value(i int) []byte {
	off := (i * 7919 * 13) % (len(bl.block) - blobValueSize)
	return bl.block[off : off+blobValueSize]
}

// fill writes n keys under the udf's scope, before any job runs.
func (bl *blobs) fill(tb testing.TB, dir, jobID, op string, maxPar, n int) {
	tb.Helper()
	st, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	muts := make([]statestore.Mutation, 0, 1000)
	flush := func() {
		if err := st.Apply(muts); err != nil {
			tb.Fatal(err)
		}
		muts = muts[:0]
	}
	for i := 0; i < n; i++ {
		user := []byte(blobUser(i))
		muts = append(muts, statestore.Mutation{Key: statestore.Key{Job: jobID, Operator: op, Namespace: "value:blob", KeyGroup: keys.GroupOfBytes(user, maxPar), User: user}, Value: bl.value(i)})
		if len(muts) == cap(muts) {
			flush()
		}
	}
	if len(muts) > 0 {
		flush()
	}
	if err := st.Close(); err != nil {
		tb.Fatal(err)
	}
}

// keepUDF is the stateful udf: for every row it reads the key's blob and,
// when there is one, checks it against the value the fill wrote (a
// restored state that differs fails the job); rows pass through.
func (bl *blobs) keepUDF() ops.ProcessBinding {
	return ops.ProcessBinding{Name: "keep", Fn: func(ctx context.Context, keyed func(int) (*statestore.Keyed, error), rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		for r := 0; r < int(rec.NumRows()); r++ {
			ek, err := keyed(r)
			if err != nil {
				return nil, err
			}
			k := statestore.Public(ek).(*state.Keyed)
			v, ok, err := blobState.Get(k)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			i, err := strconv.Atoi(strings.TrimPrefix(string(k.Key()), "u"))
			if err != nil || !bytes.Equal(v, bl.value(i)) {
				return nil, fmt.Errorf("key %s: the restored value differs from the one written", k.Key())
			}
		}
		rec.Retain()
		return rec, nil
	}}
}

func blobSpec(stateDir, bucket string, par int) string {
	return fmt.Sprintf(`{"id":"ckb","parallelism":%d,"operators":[{"id":"in","kind":"source","parallelism":1},
	  {"id":"keep","kind":"udf","stateful":true,"key_field":"user","config":{"function":"keep"}},
	  {"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"keep","partitioned":true},{"id":"b","from":"keep","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory"}],"sinks":[{"operator_id":"out","output_type":"memory"}],
	  "state":{"backend":"badger","path":%q},
	  "checkpoint":{"interval_ms":3600000,"retention":2,"object_store_uri":"s3://%s/ckb"}}`, par, stateDir, bucket)
}

// benchJob is a running job of a benchmark.
type benchJob struct {
	rt   *Runtime
	src  *mem.Source
	sink *mem.Sink
	done chan error
}

// startBench starts a job and returns once it is Running, with the time
// that took.
func startBench(tb testing.TB, g *build.Graph, src *mem.Source, sink *mem.Sink, opts Options) (*benchJob, time.Duration) {
	tb.Helper()
	j := &benchJob{rt: New(g, opts), src: src, sink: sink, done: make(chan error, 1)}
	start := time.Now()
	go func() { j.done <- j.rt.Run(context.Background()) }()
	for {
		switch j.rt.State() {
		case Running:
			return j, time.Since(start)
		case Failed, Stopped:
			tb.Fatalf("the job did not start: %v", <-j.done)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func (j *benchJob) stop(tb testing.TB) {
	tb.Helper()
	j.src.Close()
	if err := <-j.done; err != nil {
		tb.Fatal(err)
	}
}

// settleDisk writes back what earlier steps left dirty (a baseline's
// file, MinIO's objects, a removed layer's discards) before a timed step,
// the engine's and each baseline's alike, so that none of them pays for
// another's writeback.
func settleDisk() { syscall.Sync() }

// rawData is n bytes of a random block repeated; its reader is an
// io.ReaderAt, as a bytes.Reader would be (minio-go then sends parts in
// parallel), without holding n bytes.
type rawData struct {
	block []byte
	n     int64
	off   int64
}

func (d *rawData) Read(p []byte) (int, error) {
	n, err := d.ReadAt(p, d.off)
	d.off += int64(n)
	return n, err
}

func (d *rawData) ReadAt(p []byte, off int64) (int, error) {
	if off >= d.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), d.n-off)]
	n := 0
	for n < len(p) {
		n += copy(p[n:], d.block[(off+int64(n))%int64(len(d.block)):])
	}
	return n, nil
}

// latestManifest reads the manifest LATEST points to, raw.
func latestManifest(b *testing.B, c *minio.Client, bucket, prefix, jobID string) *ckptstore.Manifest {
	b.Helper()
	ctx := context.Background()
	get := func(key string) []byte {
		o, err := c.GetObject(ctx, bucket, prefix+"/"+key, minio.GetObjectOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer o.Close()
		body, err := io.ReadAll(o)
		if err != nil {
			b.Fatalf("reading %s: %v", key, err)
		}
		return body
	}
	latest := strings.TrimSpace(string(get(jobID + "/checkpoints/LATEST")))
	id, err := ckptstore.ParseID(latest)
	if err != nil {
		b.Fatalf("LATEST holds %q: %v", latest, err)
	}
	m, err := ckptstore.DecodeManifest(get(jobID + "/checkpoints/" + id.String() + "/manifest.json"))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func reportMBs(b *testing.B, bytes int64, engine, raw time.Duration) {
	mb := float64(bytes) / 1e6
	b.ReportMetric(mb/engine.Seconds(), "MB/s")
	b.ReportMetric(mb/raw.Seconds(), "raw-MB/s")
	b.ReportMetric(raw.Seconds()/engine.Seconds(), "ratio")
}

func BenchmarkCheckpointS3(b *testing.B) {
	for _, size := range benchStateSizes() {
		for _, par := range []int{1, 2} {
			for _, up := range []int{1, 4} {
				b.Run(fmt.Sprintf("%s/p=%d/upload=%d", benchSizeName(size), par, up), func(b *testing.B) { benchCheckpointS3(b, size, par, up) })
			}
		}
	}
}

func benchCheckpointS3(b *testing.B, size int64, par, upload int) {
	c, bucket, storeOpts := benchS3(b)
	storeOpts.UploadConcurrency = upload
	ctx := context.Background()
	n := int(size / 1024)
	bl := newBlobs()
	dir := filepath.Join(b.TempDir(), "state")
	bindings := func(src *mem.Source, sink *mem.Sink) map[string]any {
		return map[string]any{"in": src, "out": sink, "keep": bl.keepUDF()}
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "user", Type: arrow.BinaryTypes.String}}, nil)
	g := benchGraph(b, blobSpec(dir, bucket, par), bindings(mem.NewSource(schema, 1), mem.NewSink()))
	bl.fill(b, dir, "ckb", "keep", g.Spec.MaxParallelism, n)
	syscall.Sync() // the fill's writeback must not land in the timed rounds
	opts := Options{CheckpointStore: storeOpts}
	if os.Getenv("ARKFLOW_BENCH_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	src, sink := mem.NewSource(schema, 1), mem.NewSink()
	j, _ := startBench(b, benchGraph(b, blobSpec(dir, bucket, par), bindings(src, sink)), src, sink, opts)
	// One round first: the restore needs a checkpoint, and the timed
	// rounds then run on a warm store and connection.
	if _, err := j.rt.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	wantBytes := j.rt.CheckpointStatus().LastBytes
	if wantBytes < size*9/10 {
		b.Fatalf("the checkpoint holds %d bytes, want about %d", wantBytes, size)
	}
	b.Logf("%d keys of %d-byte values; snapshots hold %d bytes", n, blobValueSize, wantBytes)

	b.Run("checkpoint", func(b *testing.B) {
		b.ReportAllocs()
		var engine, raw, rawCRC, produce time.Duration
		var bytes int64
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			settleDisk()
			b.StartTimer()
			start := time.Now()
			id, err := j.rt.Checkpoint(ctx)
			if err != nil {
				b.Fatal(err)
			}
			engine += time.Since(start)
			st := j.rt.CheckpointStatus()
			if st.LastID != id || st.LastBytes != wantBytes {
				b.Fatalf("round %s: status %+v, want %d bytes", id, st, wantBytes)
			}
			bytes += st.LastBytes
			b.StopTimer()
			m := latestManifest(b, c, bucket, "ckb", "ckb")
			if m.CheckpointID != id {
				b.Fatalf("LATEST is %s, want %s", m.CheckpointID, id)
			}

			// The production side alone: the same snapshots from a frozen
			// view to io.Discard, one after the other.
			start = time.Now()
			if k := discardSnapshots(b, j.rt); k != st.LastBytes {
				b.Fatalf("snapshots to io.Discard: %d bytes, the checkpoint has %d", k, st.LastBytes)
			}
			produce += time.Since(start)

			// The baseline: one PutObject per snapshot, of its size, all at
			// once.
			settleDisk()
			b.StartTimer()
			start = time.Now()
			var wg sync.WaitGroup
			errs := make([]error, len(m.StateSnapshots))
			for k, s := range m.StateSnapshots {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[k] = c.PutObject(ctx, bucket, fmt.Sprintf("raw/%d.snap", k), &rawData{block: bl.block, n: s.Bytes}, s.Bytes, minio.PutObjectOptions{ContentType: "application/octet-stream"})
				}()
			}
			wg.Wait()
			raw += time.Since(start)
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}

			// The second baseline: the same PutObjects with
			// DisableContentSha256, as the engine uploads (a CRC32C
			// trailer per request instead of a SHA-256 signature of the
			// body).
			b.StopTimer()
			settleDisk()
			start = time.Now()
			for k, s := range m.StateSnapshots {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[k] = c.PutObject(ctx, bucket, fmt.Sprintf("raw/%d.snap", k), &rawData{block: bl.block, n: s.Bytes}, s.Bytes,
						minio.PutObjectOptions{ContentType: "application/octet-stream", DisableContentSha256: true})
				}()
			}
			wg.Wait()
			rawCRC += time.Since(start)
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
		reportMBs(b, bytes, engine, raw)
		b.ReportMetric(float64(bytes)/1e6/rawCRC.Seconds(), "raw-crc-MB/s")
		b.ReportMetric(rawCRC.Seconds()/engine.Seconds(), "ratio-crc")
		b.ReportMetric(float64(bytes)/1e6/produce.Seconds(), "snapshot-MB/s")
	})
	j.stop(b)
	if upload != ckptstore.DefaultUploadConcurrency {
		return // the restore does not depend on the upload concurrency
	}

	b.Run("restore", func(b *testing.B) {
		m := latestManifest(b, c, bucket, "ckb", "ckb")
		var total int64
		for _, s := range m.StateSnapshots {
			total += s.Bytes
		}
		b.ReportAllocs()
		var engine, raw, rawSum, rawFile, sel, verify time.Duration
		var peak int64
		var alloc, heapAfter uint64
		var bytes int64
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			fresh := filepath.Join(b.TempDir(), "state")
			src, sink := mem.NewSource(schema, 1), mem.NewSink()
			g := benchGraph(b, blobSpec(fresh, bucket, par), bindings(src, sink))
			anon := memstat.Start()
			settleDisk()
			var ms0, ms1 goruntime.MemStats
			goruntime.ReadMemStats(&ms0)
			b.StartTimer()
			j, took := startBench(b, g, src, sink, opts)
			engine += took
			b.StopTimer()
			goruntime.ReadMemStats(&ms1)
			alloc += ms1.TotalAlloc - ms0.TotalAlloc
			peak = max(peak, anon.Stop())
			st := j.rt.CheckpointStatus()
			p := st.Recovery
			if st.Restored != "checkpoint "+m.CheckpointID || !p.Done || p.BytesTotal != total || p.BytesRestored != total || p.KeysRestored != int64(n) {
				b.Fatalf("after the restore: %+v (want checkpoint %s, %d bytes, %d keys)", st, m.CheckpointID, total, n)
			}
			bytes += p.BytesRestored
			if i == 0 {
				// Read back a few keys through the udf, which checks their
				// values.
				users := []string{blobUser(0), blobUser(n / 2), blobUser(n - 1)}
				rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
				rb.Field(0).(*array.StringBuilder).AppendValues(users, nil)
				rec := rb.NewRecordBatch()
				rb.Release()
				src.Append(0, rec)
				rec.Release()
				for sink.NumRows() < int64(len(users)) {
					if s := j.rt.State(); s != Running {
						b.Fatalf("the restored job stopped (%v): %v", s, <-j.done)
					}
					time.Sleep(time.Millisecond)
				}
			}
			j.stop(b)
			os.RemoveAll(fresh)
			goruntime.GC()
			goruntime.ReadMemStats(&ms1)
			heapAfter = max(heapAfter, ms1.HeapAlloc)

			// Catalog.Select alone (the runtime's first step), for the
			// breakdown.
			store, err := ckptstore.OpenStore(ctx, "s3://"+bucket+"/ckb", storeOpts)
			if err != nil {
				b.Fatal(err)
			}
			cat, err := ckptstore.NewCatalog(store, "ckb", ckptstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			want := ckptstore.Want{Target: ckptstore.LatestCheckpoint, JobVersion: m.JobVersion, FormatVersion: m.FormatVersion, PlannedTasks: m.PlannedTasks, DeferStateChecks: true}
			start := time.Now()
			got, _, err := cat.Select(ctx, want)
			if err != nil || got == nil || got.CheckpointID != m.CheckpointID {
				b.Fatalf("select: %v, %v", got, err)
			}
			sel += time.Since(start)
			want.DeferStateChecks = false
			start = time.Now()
			got, _, err = cat.Select(ctx, want)
			if err != nil || got == nil || got.CheckpointID != m.CheckpointID {
				b.Fatalf("select: %v, %v", got, err)
			}
			verify += time.Since(start)

			// The baseline: GET every state object, all at once.
			settleDisk()
			start = time.Now()
			var wg sync.WaitGroup
			errs := make([]error, len(m.StateSnapshots))
			for i, s := range m.StateSnapshots {
				wg.Add(1)
				go func() {
					defer wg.Done()
					o, err := c.GetObject(ctx, bucket, "ckb/"+s.URI, minio.GetObjectOptions{})
					if err != nil {
						errs[i] = err
						return
					}
					k, err := io.Copy(io.Discard, o)
					o.Close()
					if err == nil && k != s.Bytes {
						err = fmt.Errorf("%d bytes of %d", k, s.Bytes)
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			raw += time.Since(start)
			for i, err := range errs {
				if err != nil {
					b.Fatalf("raw GET of %s: %v", m.StateSnapshots[i].URI, err)
				}
			}

			// The second baseline: GET every state object, in turn,
			// through its manifest checksum (CRC-64/NVME for checkpoints
			// written now): what checking it costs by itself, which a
			// restore must do before it reports Running.
			settleDisk()
			start = time.Now()
			for _, s := range m.StateSnapshots {
				o, err := c.GetObject(ctx, bucket, "ckb/"+s.URI, minio.GetObjectOptions{})
				if err != nil {
					b.Fatal(err)
				}
				h, prefix, ok := objsum.New(s.Checksum)
				if !ok {
					b.Fatalf("state entry checksum %q", s.Checksum)
				}
				k, err := io.Copy(h, o)
				o.Close()
				if err != nil || k != s.Bytes || objsum.Format(prefix, h.Sum(nil)) != s.Checksum {
					b.Fatalf("raw GET of %s through its checksum: %d bytes, %v", s.URI, k, err)
				}
			}
			rawSum += time.Since(start)

			// The third baseline: GET every state object, in turn, into a
			// local file (what a restore must do at the least: the state
			// ends up on the node's disk).
			fileDir := b.TempDir()
			settleDisk()
			start = time.Now()
			for k, s := range m.StateSnapshots {
				o, err := c.GetObject(ctx, bucket, "ckb/"+s.URI, minio.GetObjectOptions{})
				if err != nil {
					b.Fatal(err)
				}
				f, err := os.Create(filepath.Join(fileDir, fmt.Sprint(k)))
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(f, o)
				o.Close()
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil || n != s.Bytes {
					b.Fatalf("raw GET of %s to a file: %d bytes, %v", s.URI, n, err)
				}
			}
			rawFile += time.Since(start)
			os.RemoveAll(fileDir)
			b.StartTimer()
		}
		reportMBs(b, bytes, engine, raw)
		b.ReportMetric(float64(bytes)/1e6/rawSum.Seconds(), "raw-sum-MB/s")
		b.ReportMetric(rawSum.Seconds()/engine.Seconds(), "ratio-sum")
		b.ReportMetric(float64(bytes)/1e6/rawFile.Seconds(), "raw-file-MB/s")
		b.ReportMetric(rawFile.Seconds()/engine.Seconds(), "ratio-file")
		b.ReportMetric(float64(engine.Milliseconds())/float64(b.N), "ms-to-running")
		b.ReportMetric(float64(alloc)/float64(int64(n)*int64(b.N)), "B/key")
		b.ReportMetric(float64(heapAfter)/1e6, "heap-after-MB")
		b.ReportMetric(float64(sel.Milliseconds())/float64(b.N), "select-ms")
		b.ReportMetric(float64(verify.Milliseconds())/float64(b.N), "verify-ms")
		if peak > 0 {
			b.ReportMetric(float64(peak)/(1<<20), "peak-anon-MiB")
		}
	})
}

// BenchmarkCheckpointPause measures how long a checkpoint holds the
// sources (CheckpointStatus().LastPause) while input flows: a memory
// source fed at a steady rate (pauseRows rows every pauseEvery, users
// uniform over the keys) → keyed running aggregate (count, sum, max of
// the time each batch was appended) on Badger → memory sink; checkpoints
// to file://. Each iteration is one round (Runtime.Checkpoint); rounds
// are pauseGap apart (the default interval is 30 s; a round here takes
// 0.1–0.3 s, so the pipeline has drained what a round held up before the
// next one starts). The input rate is about half of what this pipeline
// sustains on 2 cores: at twice the rate the queues grow without bound as
// soon as a round's upload competes for the CPU.
//
// The baseline is the end-to-end latency of a batch through the same
// pipeline in the same run: from Append at the source to Write at the
// sink, for batches that arrive while no round is in progress. A cut
// must wait for the barrier to travel behind the batches in flight to
// every sink and for their acknowledgements (which commit the state
// journal), so one batch's trip is the floor of the pause; the ratio
// says how many such trips a checkpoint costs the pipeline. e2e-p99-ckpt
// is the batch latency during rounds (the cut and the upload after it),
// what a consumer of the output sees.
func BenchmarkCheckpointPause(b *testing.B) {
	b.Run("keys=100k", func(b *testing.B) { benchPause(b, 100_000) })
}

const (
	pauseRows  = 256
	pauseEvery = 5 * time.Millisecond
	pauseGap   = time.Second
)

var pauseSchema = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	{Name: "sent", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func pauseBatch(users []string, sent int64) arrow.RecordBatch {
	rb := array.NewRecordBuilder(memory.DefaultAllocator, pauseSchema)
	defer rb.Release()
	rb.Field(0).(*array.StringBuilder).AppendValues(users, nil)
	am := rb.Field(1).(*array.Int64Builder)
	se := rb.Field(2).(*array.Int64Builder)
	for range users {
		am.Append(1)
		se.Append(sent)
	}
	return rb.NewRecordBatch()
}

// arrival is one output batch at the sink.
type arrival struct{ at, latency time.Duration }

func benchPause(b *testing.B, nkeys int) {
	ctx := context.Background()
	dir := b.TempDir()
	spec := fmt.Sprintf(`{"id":"pause","parallelism":2,"operators":[{"id":"in","kind":"source","parallelism":1},
	  {"id":"sum","kind":"aggregate","stateful":true,"key_field":"user","config":{"aggregates":[{"function":"count","as":"n"},{"function":"sum","field":"amount","as":"total"},{"function":"max","field":"sent","as":"sent"}]}},
	  {"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"sum","partitioned":true},{"id":"b","from":"sum","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory"}],"sinks":[{"operator_id":"out","output_type":"memory"}],
	  "state":{"backend":"badger","path":%q},
	  "checkpoint":{"interval_ms":3600000,"retention":2,"object_store_uri":"file://%s"}}`, filepath.Join(dir, "state"), filepath.Join(dir, "ckpt"))
	src, sink := mem.NewSource(pauseSchema, 1), mem.NewSink()
	epoch := time.Now()
	var mu sync.Mutex
	var arrivals []arrival
	sink.OnWrite = func(_ context.Context, rec arrow.RecordBatch) error {
		now := time.Now()
		idx := rec.Schema().FieldIndices("sent")
		if len(idx) == 0 || rec.NumRows() == 0 {
			return nil
		}
		sent := rec.Column(idx[0]).(*array.Int64)
		lat := now.Sub(epoch) - time.Duration(sent.Value(0))
		mu.Lock()
		arrivals = append(arrivals, arrival{at: now.Sub(epoch), latency: lat})
		mu.Unlock()
		return nil
	}
	j, _ := startBench(b, benchGraph(b, spec, map[string]any{"in": src, "out": sink}), src, sink, Options{})
	defer func() {
		j.stop(b)
	}()

	// Every key once, then the steady input.
	users := make([]string, nkeys)
	for i := range users {
		users[i] = fmt.Sprintf("user-%07d", i)
	}
	for i := 0; i < nkeys; i += 4096 {
		rec := pauseBatch(users[i:min(i+4096, nkeys)], int64(time.Since(epoch)))
		src.Append(0, rec)
		rec.Release()
	}
	for sink.NumRows() < int64(nkeys) {
		time.Sleep(time.Millisecond)
	}
	sink.Reset()
	stopFeed := make(chan struct{})
	fed := make(chan int)
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		t := time.NewTicker(pauseEvery)
		defer t.Stop()
		batch := make([]string, pauseRows)
		n := 0
		for {
			select {
			case <-stopFeed:
				fed <- n
				return
			case <-t.C:
			}
			for i := range batch {
				batch[i] = users[rng.IntN(nkeys)]
			}
			rec := pauseBatch(batch, int64(time.Since(epoch)))
			src.Append(0, rec)
			rec.Release()
			n++
			if n%200 == 0 {
				sink.Reset() // keep memory flat; OnWrite has the latencies
			}
		}
	}()
	time.Sleep(time.Second) // warm up
	mu.Lock()
	arrivals = arrivals[:0]
	mu.Unlock()

	type window struct{ from, to time.Duration }
	var rounds []window
	var pauses []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		time.Sleep(pauseGap)
		b.StartTimer()
		from := time.Since(epoch)
		id, err := j.rt.Checkpoint(ctx)
		if err != nil {
			b.Fatal(err)
		}
		to := time.Since(epoch)
		st := j.rt.CheckpointStatus()
		if st.LastID != id {
			b.Fatalf("status %+v after round %s", st, id)
		}
		rounds = append(rounds, window{from, to})
		pauses = append(pauses, st.LastPause)
	}
	b.StopTimer()
	time.Sleep(pauseGap)
	close(stopFeed)
	batches := <-fed
	st := j.rt.CheckpointStatus()
	if st.Failures != 0 || st.Completed != int64(b.N) {
		b.Fatalf("checkpoint status after %d rounds: %+v", b.N, st)
	}

	mu.Lock()
	var base, during []time.Duration
	for _, a := range arrivals {
		in := false
		for _, w := range rounds {
			// A batch sent before a round ends and arriving after it
			// starts was in flight during it.
			if a.at >= w.from && a.at-a.latency <= w.to {
				in = true
				break
			}
		}
		if in {
			during = append(during, a.latency)
		} else {
			base = append(base, a.latency)
		}
	}
	mu.Unlock()
	if len(base) < 10 || len(during) == 0 {
		b.Fatalf("too few samples: %d between rounds, %d during", len(base), len(during))
	}
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))]) / 1e6
	}
	pp50, pp99 := pct(pauses, 0.5), pct(pauses, 0.99)
	bp50, bp99 := pct(base, 0.5), pct(base, 0.99)
	b.ReportMetric(pp50, "pause-p50-ms")
	b.ReportMetric(pp99, "pause-p99-ms")
	b.ReportMetric(bp50, "e2e-p50-ms")
	b.ReportMetric(bp99, "e2e-p99-ms")
	b.ReportMetric(pct(during, 0.99), "e2e-p99-ckpt-ms")
	b.ReportMetric(pp50/bp50, "pause/e2e-p50")
	b.ReportMetric(pp99/bp99, "pause/e2e-p99")
	b.ReportMetric(float64(st.LastBytes)/1e6, "snapshot-MB")
	b.Logf("%d rounds, %d input batches; %d output batches between rounds, %d during", b.N, batches, len(base), len(during))
}

// discardSnapshots streams every stateful task's snapshot from a frozen
// view of the job's store to io.Discard, as a checkpoint round would, and
// returns the bytes.
func discardSnapshots(b *testing.B, r *Runtime) int64 {
	r.mu.Lock()
	st := r.store
	r.mu.Unlock()
	fr, err := st.(statestore.Freezer).Freeze()
	if err != nil {
		b.Fatal(err)
	}
	defer fr.Close()
	spec := r.g.Spec
	var n int64
	for _, t := range r.g.Plan.Tasks {
		if op, _ := spec.Operator(t.OperatorID); op == nil || !r.statefulOp(op) {
			continue
		}
		info, err := fr.Snapshot(io.Discard, statestore.Scope{Job: stateJob(spec), Operator: t.OperatorID, Groups: keys.RangeFor(spec.MaxParallelism, t.Parallelism, t.Subtask)}, r.opts.Clock.Now().UnixMilli())
		if err != nil {
			b.Fatal(err)
		}
		n += info.Bytes
	}
	return n
}
