package wal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/wal"
)

func batchPayload(t *testing.T, source string, rows int) []byte {
	t.Helper()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range rows {
		b.Append(int64(i))
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{col}, int64(rows))
	defer rec.Release()
	p, err := walog.EncodeBatch(nil, source, rec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A log the log's own writer wrote, with an acknowledgement gap: Inspect
// reports every entry as written, the cursor below the gap, the entries a
// restart replays, and the segments; the writer still has the log open.
func TestInspectWhatTheWriterWrote(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "in", "0")
	l, err := walog.OpenDir(dir, walog.LocalOptions{SegmentBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var written []wal.Entry
	for i := range 12 {
		p := batchPayload(t, "in", 1+i)
		seq, err := l.Append(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		written = append(written, wal.Entry{Seq: seq, Source: "in", Bytes: len(p)})
	}
	for seq := uint64(1); seq <= 12; seq++ {
		if seq != 6 { // 6 stays unacknowledged: the cursor stops at 5
			l.Ack(seq)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	infos, err := wal.Inspect(context.Background(), dir, wal.InspectOptions{Entries: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 {
		t.Fatalf("%d logs, want 1", len(infos))
	}
	in := infos[0]
	if in.Location != dir || in.Source != "in" || in.Subtask != 0 {
		t.Fatalf("location %q, source %q, subtask %d", in.Location, in.Source, in.Subtask)
	}
	if in.Cursor != 5 || in.Pending != 7 || in.Last != 12 || in.Torn != "" {
		t.Fatalf("cursor %d, pending %d, last %d, torn %q; want 5, 7, 12", in.Cursor, in.Pending, in.Last, in.Torn)
	}
	// Segments the cursor passed are gone (or kept for reuse); the entries
	// still stored are exactly those written, from the oldest kept on.
	if i := slices.IndexFunc(written, func(e wal.Entry) bool { return e.Seq == in.First }); i < 0 || !slices.Equal(in.Entries, written[i:]) {
		t.Fatalf("entries\n%v\nwant those from %d of\n%v", in.Entries, in.First, written)
	}
	n, next := 0, in.First
	for _, g := range in.Segments {
		if g.First != next || g.Entries != int(g.Last-g.First+1) || g.Bytes <= 0 {
			t.Fatalf("segment %+v after sequence %d", g, next-1)
		}
		n += g.Entries
		next = g.Last + 1
	}
	if len(in.Segments) < 2 || n != len(in.Entries) {
		t.Fatalf("segments %+v hold %d entries, want %d in 2 or more", in.Segments, n, len(in.Entries))
	}
}

// The logs of a real job: a run whose sink fails leaves entries after the
// cursor; Inspect (from the job's WAL directory) counts them, and the
// next run replays exactly those and then reads the rest of the input.
func TestInspectJobLogs(t *testing.T) {
	dir := t.TempDir()
	run := func(sink arkflow.SinkComponent) error {
		j, err := arkflow.NewJob("durable").
			Durability(job.Durability{Path: dir, Sync: job.SyncGroupCommit}).
			Source("in", generate.Config{Count: 100, BatchSize: 10, Fields: []generate.Field{{Name: "n", Type: "int64"}}}).
			Sink("out", sink).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		return j.Run(context.Background())
	}
	var calls atomic.Int64
	failing := funcsink.RecordFunc(func(_ context.Context, rec arrow.RecordBatch) error {
		if calls.Add(1) > 3 {
			return errors.New("the sink is down")
		}
		return nil
	})
	if err := run(failing); err == nil {
		t.Fatal("the first run should fail")
	}
	infos, err := wal.Inspect(context.Background(), dir, wal.InspectOptions{Entries: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Source != "in" || infos[0].Subtask != 0 || infos[0].Location != filepath.Join(dir, "in", "0") {
		t.Fatalf("logs %+v", infos)
	}
	in := infos[0]
	if in.Cursor < 3 || in.Pending != int(in.Last-in.Cursor) || len(in.Entries) != int(in.Last-in.First+1) {
		t.Fatalf("cursor %d, pending %d, entries %d..%d (%d listed)", in.Cursor, in.Pending, in.First, in.Last, len(in.Entries))
	}
	if len(in.Positions) != 1 || in.Positions[0].Offset != int64(in.Cursor)*10 {
		t.Fatalf("positions %v; want the offset after the %d acknowledged batches", in.Positions, in.Cursor)
	}
	for _, e := range in.Entries {
		if e.Source != "in" || e.Bytes <= 0 {
			t.Fatalf("entry %+v", e)
		}
	}

	t.Logf("after the failed run: cursor %d, entries %d..%d, %d pending", in.Cursor, in.First, in.Last, in.Pending)
	out := mem.NewSink()
	if err := run(out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.NumRows(), int64(100-10*in.Cursor); got != want {
		t.Fatalf("the second run wrote %d rows; after cursor %d there are %d", got, in.Cursor, want)
	}
	infos, err = wal.Inspect(context.Background(), "file://"+filepath.Join(dir, "in"), wal.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if in := infos[0]; in.Cursor != 10 || in.Pending != 0 || in.Entries != nil || in.Positions[0].Offset != 100 {
		t.Fatalf("after the second run: %+v", in)
	}
}

// Damage a restart refuses fails Inspect with the restart's error, which
// matches ErrCorrupt; bad locations are errors naming them.
func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	l, err := walog.OpenDir(dir, walog.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Append(context.Background(), batchPayload(t, "in", 2)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	seg := filepath.Join(dir, fmt.Sprintf("%020d.wal", 1))
	b, _ := os.ReadFile(seg)
	b[20] ^= 0xff // inside entry 1; entries 2 and 3 follow
	os.WriteFile(seg, b, 0o644)
	_, err = wal.Inspect(context.Background(), dir, wal.InspectOptions{})
	if !errors.Is(err, wal.ErrCorrupt) || !errors.Is(err, arkflow.ErrCorrupt) || !strings.Contains(err.Error(), "00000000000000000001.wal is corrupt at offset 0") {
		t.Fatalf("damaged log: %v", err)
	}

	for _, c := range []struct{ location, want string }{
		{"", "location is empty"},
		{t.TempDir(), "no write-ahead log in"},
		{filepath.Join(dir, "nope"), "no such file"},
		{seg, "is not a directory"},
		{"file://relative/dir", "absolute directory"},
		{"ftp://host/x", `unsupported scheme "ftp"`},
		{"s3:///prefix", "has no bucket"},
	} {
		if _, err := wal.Inspect(context.Background(), c.location, wal.InspectOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Inspect(%q): %v; want %q", c.location, err, c.want)
		}
	}
	if _, err := wal.Inspect(context.Background(), "s3://b/p", wal.InspectOptions{Endpoint: "127.0.0.1:1", SecretAccessKey: "x"}); err == nil || !strings.Contains(err.Error(), "InspectOptions") {
		t.Errorf("a secret without its key id: %v", err)
	}
}

// An object-store log a real job wrote, in MinIO (ARKFLOW_TEST_S3_ENDPOINT,
// _ACCESS_KEY, _SECRET_KEY): Inspect finds it from the bucket's prefix and
// reports what it holds, writing nothing.
func TestInspectObjectStoreJob(t *testing.T) {
	endpoint := os.Getenv("ARKFLOW_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("ARKFLOW_TEST_S3_ENDPOINT is not set")
	}
	access, secret := os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY")
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(access, secret, "")})
	if err != nil {
		t.Fatal(err)
	}
	bucket := fmt.Sprintf("wal-inspect-%d", time.Now().UnixNano())
	if err := c.MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	j, err := arkflow.NewJob("durable").
		Durability(job.Durability{Backend: &job.WALBackend{Type: job.WALBackendObjectStore, NodeID: "node-0",
			S3: &job.WALObjectStore{Bucket: bucket, Endpoint: "http://" + endpoint, AllowHTTP: true, AccessKeyID: access, SecretAccessKey: secret}}}).
		Source("in", generate.Config{Count: 50, BatchSize: 10, Fields: []generate.Field{{Name: "n", Type: "int64"}}}).
		Sink("out", mem.NewSink()).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	opts := wal.InspectOptions{Endpoint: "http://" + endpoint, AccessKeyID: access, SecretAccessKey: secret, Entries: true}
	infos, err := wal.Inspect(context.Background(), "s3://"+bucket+"/arkflow", opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Location != "s3://"+bucket+"/arkflow/wal/node-0/durable.in.0" {
		t.Fatalf("logs %+v", infos)
	}
	if in := infos[0]; in.Cursor != 5 || in.Pending != 0 || in.Positions[0].Offset != 50 {
		t.Fatalf("log %+v", in)
	}
}
