package durable

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/job"
)

// unrewindable is the fake as a source that cannot read its input again
// (a push source): the tests check that it is never sought back before
// what the WAL holds.
type unrewindable struct{ *fakeSource }

func (unrewindable) Unrewindable() {}

var _ connectors.Unrewindable = unrewindable{}

// held is a Job that takes checkpoints: the WAL of an unrewindable source
// is held.
var held = Job{Checkpoints: true}

// oneEntryPerSegment makes every WAL entry a segment of its own, so that
// what the WAL deletes is visible entry by entry.
func oneEntryPerSegment() *job.Durability {
	return &job.Durability{Sync: "group_commit", SegmentBytes: 1, DrainTimeoutMS: 50}
}

func openJob(t *testing.T, cfg *job.Durability, inner connectors.Source, dataDir string, job Job, lg *slog.Logger) *Source {
	t.Helper()
	in := info()
	if lg != nil {
		in.Logger = lg
	}
	s, err := Open(context.Background(), cfg, inner, dataDir, in, "src-0", job)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// stored returns the sequences of the entries the WAL still stores, from
// the first on.
func stored(t *testing.T, s *Source) []uint64 {
	t.Helper()
	r, err := s.Log().ReplayFrom(1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := []uint64{}
	for {
		e, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e.Seq)
	}
}

func seqs(from, to uint64) []uint64 {
	out := []uint64{}
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// checkNotSoughtBack fails if the source was ever sought before offset
// min of partition 0: it would have to read rows again.
func checkNotSoughtBack(t *testing.T, f *fakeSource, min int64) {
	t.Helper()
	for _, ps := range f.sought() {
		for _, p := range ps {
			if p.Partition == 0 && p.Offset < min {
				t.Fatalf("the unrewindable source was sought back to %v (the WAL holds everything before %d)", ps, min)
			}
		}
	}
}

// A checkpoint at offset 20 (after entry 2), the WAL
// cursor at entry 4 (offset 40), entries 5 and 6 read but not
// acknowledged, then a crash. The restart restores the checkpoint: the
// WAL replays entries 3..6 (offsets 20..59) exactly once, in order —
// those below the cursor too, which the state replaced by the restore no
// longer holds — and the source is sought past everything the WAL holds,
// never back. The positions pass the replayed entries only as they are
// acknowledged, in order, and the next checkpoint lets the WAL go of them.
func TestHeldEntriesReplayedAfterARestore(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{true, false} {
		name := "graceful stop"
		if crash {
			name = "crash"
		}
		t.Run(name, func(t *testing.T) {
			data := uniform(6, 10) // offsets 0-9, 10-19, …, 50-59
			dir := t.TempDir()
			cfg := oneEntryPerSegment()
			fake := newFake(data...)
			s := openJob(t, cfg, unrewindable{fake}, dir, held, nil)
			connect(t, s)
			var bs []connectors.Batch
			for _, sp := range data {
				bs = append(bs, read(t, s, sp))
			}
			bs[0].Ack(nil)
			bs[1].Ack(nil)
			ckpt := s.Positions()
			if want := []connectors.Position{pos(0, 20)}; !reflect.DeepEqual(ckpt, want) {
				t.Fatalf("positions at the cut %v, want %v", ckpt, want)
			}
			s.CheckpointCompleted(ckpt)
			if f := s.Log().Floor(); f != 3 {
				t.Fatalf("floor %d after a checkpoint holding entries 1 and 2, want 3", f)
			}
			bs[2].Ack(nil)
			bs[3].Ack(nil)
			if err := s.Log().Flush(); err != nil {
				t.Fatal(err)
			}
			if c := s.Log().Cursor(); c != 4 {
				t.Fatalf("cursor %d, want 4", c)
			}
			// The cursor has passed entries 3 and 4; the checkpoint holds
			// only 1 and 2, which the WAL deleted.
			if got := stored(t, s); !reflect.DeepEqual(got, seqs(3, 6)) {
				t.Fatalf("entries stored %v, want 3..6", got)
			}
			restartDir := dir
			if crash {
				restartDir = t.TempDir()
				copyDir(t, walDir(dir), walDir(restartDir))
				defer closeAll(t, s, nil)
			} else {
				closeAll(t, s, nil)
			}

			fake2 := newFake(data...)
			s2 := openJob(t, cfg, unrewindable{fake2}, restartDir, held, nil)
			if err := s2.Seek(ckpt); err != nil {
				t.Fatal(err)
			}
			connect(t, s2)
			if got, want := fake2.sought(), [][]connectors.Position{{pos(0, 60)}}; !reflect.DeepEqual(got, want) {
				t.Errorf("sought to %v, want %v (past everything the WAL holds)", got, want)
			}
			checkNotSoughtBack(t, fake2, 60)
			if got, want := s2.Positions(), []connectors.Position{pos(0, 20)}; !reflect.DeepEqual(got, want) {
				t.Errorf("positions after the restore %v, want the checkpoint's %v", got, want)
			}
			var replayed []connectors.Batch
			for _, sp := range data[2:] {
				replayed = append(replayed, read(t, s2, sp))
			}
			expectEnd(t, s2)
			if got := s2.Counters()["wal_replayed"]; got != 4 {
				t.Errorf("wal_replayed %d, want 4", got)
			}
			// Out of order: entry 4 (below the cursor) before entry 3.
			replayed[1].Ack(nil)
			if got, want := s2.Positions(), []connectors.Position{pos(0, 20)}; !reflect.DeepEqual(got, want) {
				t.Errorf("positions %v after entry 4 only, want %v", got, want)
			}
			replayed[0].Ack(nil)
			if got, want := s2.Positions(), []connectors.Position{pos(0, 40)}; !reflect.DeepEqual(got, want) {
				t.Errorf("positions %v after entries 3 and 4, want %v", got, want)
			}
			// The next checkpoint, cut now, holds entries 3 and 4.
			ckpt2 := s2.Positions()
			replayed[2].Ack(nil)
			replayed[3].Ack(nil)
			if c := s2.Log().Cursor(); c != 6 {
				t.Errorf("cursor %d after the replays, want 6", c)
			}
			if got, want := s2.Positions(), []connectors.Position{pos(0, 60)}; !reflect.DeepEqual(got, want) {
				t.Errorf("positions %v, want %v", got, want)
			}
			s2.CheckpointCompleted(ckpt2)
			if err := s2.Log().Flush(); err != nil {
				t.Fatal(err)
			}
			if got := stored(t, s2); !reflect.DeepEqual(got, seqs(5, 6)) {
				t.Errorf("entries stored %v after a checkpoint at 40, want 5 6", got)
			}
			s2.CheckpointCompleted(s2.Positions())
			if err := s2.Log().Flush(); err != nil {
				t.Fatal(err)
			}
			// Only the newest segment, which holds the last entry, stays.
			if got := stored(t, s2); !reflect.DeepEqual(got, seqs(6, 6)) {
				t.Errorf("entries stored %v after a checkpoint at 60, want 6 (the active segment)", got)
			}
			closeAll(t, s2, nil)
			if len(fake2.nativeAcks()) != 0 {
				t.Errorf("replayed entries reached the source's native ack: %v", fake2.nativeAcks())
			}
		})
	}
}

// A restart that restores nothing (no checkpoint completed yet) replays
// only what the cursor has not passed, as for any source: the local state
// holds the rest. The entries below the cursor stay held until a
// checkpoint holds them.
func TestHeldWithoutARestore(t *testing.T) {
	t.Parallel()
	data := uniform(4, 10)
	dir := t.TempDir()
	cfg := oneEntryPerSegment()
	s := openJob(t, cfg, unrewindable{newFake(data...)}, dir, held, nil)
	connect(t, s)
	for i, sp := range data {
		b := read(t, s, sp)
		if i < 2 {
			b.Ack(nil)
		}
	}
	closeAll(t, s, nil)

	fake2 := newFake(data...)
	s2 := openJob(t, cfg, unrewindable{fake2}, dir, held, nil)
	connect(t, s2)
	if got, want := fake2.sought(), [][]connectors.Position{{pos(0, 40)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("sought to %v, want %v", got, want)
	}
	read(t, s2, data[2]).Ack(nil)
	read(t, s2, data[3]).Ack(nil)
	expectEnd(t, s2)
	if err := s2.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s2); !reflect.DeepEqual(got, seqs(1, 4)) {
		t.Fatalf("entries stored %v, want 1..4 (no checkpoint holds them yet)", got)
	}
	s2.CheckpointCompleted([]connectors.Position{pos(0, 30)})
	if err := s2.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s2); !reflect.DeepEqual(got, seqs(4, 4)) {
		t.Fatalf("entries stored %v after a checkpoint at 30, want 4", got)
	}
	closeAll(t, s2, nil)
}

// A restore of a checkpoint older than what the WAL still holds (an old
// savepoint, after later checkpoints let the WAL delete entries) cannot
// replay the rows in between: a warning names them, the start does not
// fail, what the WAL holds is replayed, and the positions go on past the
// gap (else no later checkpoint would ever hold the entries after it).
func TestHeldGapIsWarned(t *testing.T) {
	t.Parallel()
	data := uniform(6, 10)
	dir := t.TempDir()
	cfg := oneEntryPerSegment()
	s := openJob(t, cfg, unrewindable{newFake(data...)}, dir, held, nil)
	connect(t, s)
	var bs []connectors.Batch
	for _, sp := range data {
		bs = append(bs, read(t, s, sp))
	}
	for _, b := range bs[:4] {
		b.Ack(nil)
	}
	s.CheckpointCompleted(s.Positions()) // at 40: entries 1..4 go
	if err := s.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	closeAll(t, s, nil)

	logs := &syncBuffer{}
	fake2 := newFake(data...)
	s2 := openJob(t, cfg, unrewindable{fake2}, dir, held, slog.New(slog.NewTextHandler(logs, nil)))
	if err := s2.Seek([]connectors.Position{pos(0, 5)}); err != nil { // the old savepoint
		t.Fatal(err)
	}
	connect(t, s2)
	line := logs.String()
	for _, want := range []string{"level=WARN", "cannot be replayed", `lost="partition 0 offsets 5 to 39"`} {
		if !strings.Contains(line, want) {
			t.Errorf("the log does not say %q:\n%s", want, line)
		}
	}
	checkNotSoughtBack(t, fake2, 60)
	if got, want := s2.Positions(), []connectors.Position{pos(0, 40)}; !reflect.DeepEqual(got, want) {
		t.Errorf("positions after the restore %v, want %v (past the gap)", got, want)
	}
	read(t, s2, data[4]).Ack(nil)
	read(t, s2, data[5]).Ack(nil)
	expectEnd(t, s2)
	if got, want := s2.Positions(), []connectors.Position{pos(0, 60)}; !reflect.DeepEqual(got, want) {
		t.Errorf("positions %v, want %v", got, want)
	}
	closeAll(t, s2, nil)
}

// Two partitions, the checkpoint between their entries: an entry is held
// until the checkpoint holds every one of its rows, the floor stops at the
// first entry it does not hold, and a restore replays exactly the entries
// it does not hold, in sequence order.
func TestHeldPerPartition(t *testing.T) {
	t.Parallel()
	data := []span{{0, 0, 5}, {1, 0, 5}, {0, 5, 5}, {1, 5, 5}, {0, 10, 5}}
	dir := t.TempDir()
	cfg := oneEntryPerSegment()
	s := openJob(t, cfg, unrewindable{newFake(data...)}, dir, held, nil)
	connect(t, s)
	var bs []connectors.Batch
	for _, sp := range data {
		bs = append(bs, read(t, s, sp))
	}
	for _, b := range bs {
		b.Ack(nil)
	}
	// A checkpoint holding partition 0 up to 10 and partition 1 up to 5:
	// entries 1, 2 and 3; not 4 (partition 1 from 5), nor 5.
	ckpt := []connectors.Position{pos(0, 10), pos(1, 5)}
	s.CheckpointCompleted(ckpt)
	if f := s.Log().Floor(); f != 4 {
		t.Fatalf("floor %d, want 4", f)
	}
	if err := s.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	closeAll(t, s, nil)

	fake2 := newFake(data...)
	s2 := openJob(t, cfg, unrewindable{fake2}, dir, held, nil)
	if err := s2.Seek(ckpt); err != nil {
		t.Fatal(err)
	}
	connect(t, s2)
	if got, want := fake2.sought(), [][]connectors.Position{{pos(0, 15), pos(1, 10)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("sought to %v, want %v", got, want)
	}
	read(t, s2, data[3]).Ack(nil)
	read(t, s2, data[4]).Ack(nil)
	expectEnd(t, s2)
	if got, want := s2.Positions(), []connectors.Position{pos(0, 15), pos(1, 10)}; !reflect.DeepEqual(got, want) {
		t.Errorf("positions %v, want %v", got, want)
	}
	closeAll(t, s2, nil)
}

// Without checkpoints in the job, or for a source that can read its input
// again, nothing changes: the WAL deletes what its cursor passed, the
// floor follows the cursor, CheckpointCompleted does nothing, and a
// checkpoint older than the cursor seeks the source back to it with no
// replay (the path of a source that can read its input again).
func TestNotHeld(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		inner func(*fakeSource) connectors.Source
		job   Job
	}{
		{"unrewindable without checkpoints", func(f *fakeSource) connectors.Source { return unrewindable{f} }, Job{}},
		{"rewindable with checkpoints", func(f *fakeSource) connectors.Source { return f }, held},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := uniform(4, 10)
			dir := t.TempDir()
			cfg := oneEntryPerSegment()
			s := openJob(t, cfg, tc.inner(newFake(data...)), dir, tc.job, nil)
			connect(t, s)
			for _, sp := range data {
				read(t, s, sp).Ack(nil)
			}
			s.CheckpointCompleted([]connectors.Position{pos(0, 10)})
			if err := s.Log().Flush(); err != nil {
				t.Fatal(err)
			}
			if f, c := s.Log().Floor(), s.Log().Cursor(); f != c+1 {
				t.Errorf("floor %d, want the cursor's successor %d", f, c+1)
			}
			if got := stored(t, s); !reflect.DeepEqual(got, seqs(4, 4)) {
				t.Errorf("entries stored %v, want 4 (the active segment)", got)
			}
			closeAll(t, s, nil)

			fake2 := newFake(data...)
			s2 := openJob(t, cfg, tc.inner(fake2), dir, tc.job, nil)
			if err := s2.Seek([]connectors.Position{pos(0, 10)}); err != nil {
				t.Fatal(err)
			}
			connect(t, s2)
			if got, want := fake2.sought(), [][]connectors.Position{{pos(0, 10)}}; !reflect.DeepEqual(got, want) {
				t.Errorf("sought to %v, want %v (back to the checkpoint)", got, want)
			}
			read(t, s2, data[1]).Ack(nil) // read again from the source
			if got := s2.Counters()["wal_replayed"]; got != 0 {
				t.Errorf("wal_replayed %d, want 0", got)
			}
			closeAll(t, s2, nil)
		})
	}
}

// An unrewindable source in a job with checkpoints must report positions:
// they are how the WAL knows which entries a checkpoint holds.
type unrewindableNotPositioner struct{ notPositioner }

func (unrewindableNotPositioner) Unrewindable() {}

func TestHeldNeedsAPositioner(t *testing.T) {
	t.Parallel()
	_, err := Open(context.Background(), &job.Durability{}, unrewindableNotPositioner{notPositioner{newFake()}}, t.TempDir(), info(), "src-0", held)
	if err == nil || !strings.Contains(err.Error(), "connectors.Positioner") || !strings.Contains(err.Error(), "connectors.Unrewindable") {
		t.Fatalf("Open: %v, want an error naming connectors.Unrewindable and connectors.Positioner", err)
	}
}

// A held log redistributed for a new parallelism keeps its held entries:
// those below the cursor move with the others, and a restore of the
// checkpoint replays, in the subtask that now reads their partition, the
// ones the checkpoint does not hold.
func TestHeldEntriesSurviveAReshard(t *testing.T) {
	t.Parallel()
	cfg := &job.Durability{Sync: "always", DrainTimeoutMS: 20}
	dir := t.TempDir()
	spans := partitionSpans(2, 3, 5) // partitions 0 and 1, offsets 0-14
	if err := Reshard(context.Background(), cfg, dir, "j", "src", 2, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	ckpt := []connectors.Position{}
	for sub := range 2 {
		p := int32(sub)
		s, err := Open(context.Background(), cfg, unrewindable{newFake(spans[p]...)}, dir, infoOf(sub, 2), fmt.Sprintf("src-%d", sub), held)
		if err != nil {
			t.Fatal(err)
		}
		connect(t, s)
		for _, sp := range spans[p] {
			read(t, s, sp).Ack(nil)
		}
		// A checkpoint that holds each partition's first batch only.
		s.CheckpointCompleted([]connectors.Position{pos(p, 5)})
		ckpt = append(ckpt, pos(p, 5))
		closeAll(t, s, nil)
	}
	if err := Reshard(context.Background(), cfg, dir, "j", "src", 1, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	fake := newFake()
	s, err := Open(context.Background(), cfg, unrewindable{fake}, dir, infoOf(0, 1), "src-0", held)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Seek(ckpt); err != nil {
		t.Fatal(err)
	}
	connect(t, s)
	if got, want := fake.sought(), [][]connectors.Position{{pos(0, 15), pos(1, 15)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("sought to %v, want %v", got, want)
	}
	got := map[int32][]int64{}
	for {
		b, err := s.Read(context.Background())
		if err == connectors.ErrEndOfInput {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sp := span{part: int32(b.Partition), start: firstOffset(b.Record), n: int(b.Record.NumRows())}
		got[sp.part] = append(got[sp.part], offsetsOf([]span{sp})...)
		b.Record.Release()
		b.Ack(nil)
	}
	want := map[int32][]int64{0: offsetsOf(spans[0][1:]), 1: offsetsOf(spans[1][1:])}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replayed %v, want %v (what the checkpoint does not hold)", got, want)
	}
	if got, want := s.Positions(), []connectors.Position{pos(0, 15), pos(1, 15)}; !reflect.DeepEqual(got, want) {
		t.Errorf("positions %v, want %v", got, want)
	}
	closeAll(t, s, nil)
}

// The object-store backend holds entries the same way: the
// restore of a checkpoint older than the cursor replays what it does not
// hold from the bucket.
func TestHeldObjectStore(t *testing.T) {
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
	ctx := context.Background()
	bucket := fmt.Sprintf("held-%d", time.Now().UnixNano())
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := &job.Durability{Sync: "always", DrainTimeoutMS: 50, Backend: &job.WALBackend{Type: job.WALBackendObjectStore, NodeID: "node-a",
		S3: &job.WALObjectStore{Bucket: bucket, Endpoint: "http://" + endpoint, AllowHTTP: true, AccessKeyID: access, SecretAccessKey: secret}}}
	data := uniform(6, 10)
	s := openJob(t, cfg, unrewindable{newFake(data...)}, "", held, nil)
	connect(t, s)
	var bs []connectors.Batch
	for _, sp := range data {
		bs = append(bs, read(t, s, sp))
	}
	bs[0].Ack(nil)
	bs[1].Ack(nil)
	ckpt := s.Positions()
	s.CheckpointCompleted(ckpt)
	bs[2].Ack(nil)
	bs[3].Ack(nil)
	if err := s.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s); !reflect.DeepEqual(got, seqs(3, 6)) {
		t.Fatalf("entries stored %v, want 3..6", got)
	}
	closeAll(t, s, nil)

	fake2 := newFake(data...)
	s2 := openJob(t, cfg, unrewindable{fake2}, "", held, nil)
	if err := s2.Seek(ckpt); err != nil {
		t.Fatal(err)
	}
	connect(t, s2)
	if got, want := fake2.sought(), [][]connectors.Position{{pos(0, 60)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("sought to %v, want %v", got, want)
	}
	for _, sp := range data[2:] {
		read(t, s2, sp).Ack(nil)
	}
	expectEnd(t, s2)
	if got, want := s2.Positions(), []connectors.Position{pos(0, 60)}; !reflect.DeepEqual(got, want) {
		t.Errorf("positions %v, want %v", got, want)
	}
	s2.CheckpointCompleted(s2.Positions())
	if err := s2.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s2); !reflect.DeepEqual(got, seqs(6, 6)) {
		t.Errorf("entries stored %v after a checkpoint at 60, want 6 (the newest segment)", got)
	}
	closeAll(t, s2, nil)
}

// A run that replayed entries below the cursor and was stopped before all
// of them were acknowledged stores positions behind its cursor. A restart
// that restores no checkpoint (the local state is kept) replays the
// entries those positions do not cover, below the cursor too: otherwise
// the one never acknowledged would be lost.
func TestHeldRestartAfterAnUnfinishedReplay(t *testing.T) {
	t.Parallel()
	data := uniform(6, 10)
	dir := t.TempDir()
	cfg := oneEntryPerSegment()
	s := openJob(t, cfg, unrewindable{newFake(data...)}, dir, held, nil)
	connect(t, s)
	var bs []connectors.Batch
	for _, sp := range data {
		bs = append(bs, read(t, s, sp))
	}
	for _, b := range bs[:4] {
		b.Ack(nil)
	}
	ckpt := []connectors.Position{pos(0, 20)}
	s.CheckpointCompleted(ckpt)
	closeAll(t, s, nil)

	// The restore of the checkpoint at 20 replays entries 3..6; entry 4
	// is never acknowledged.
	s2 := openJob(t, cfg, unrewindable{newFake(data...)}, dir, held, nil)
	if err := s2.Seek(ckpt); err != nil {
		t.Fatal(err)
	}
	connect(t, s2)
	read(t, s2, data[2]).Ack(nil)
	read(t, s2, data[3])
	read(t, s2, data[4]).Ack(nil)
	read(t, s2, data[5]).Ack(nil)
	if err := s2.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := s2.Positions(), []connectors.Position{pos(0, 30)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("positions %v with entry 4 unacknowledged, want %v", got, want)
	}
	if c := s2.Log().Cursor(); c != 6 {
		t.Fatalf("cursor %d, want 6", c)
	}
	closeAll(t, s2, nil)

	// No checkpoint restored: entries 4..6 are replayed (5 and 6 are in
	// the local state already; the stateful operators drop them).
	fake3 := newFake(data...)
	s3 := openJob(t, cfg, unrewindable{fake3}, dir, held, nil)
	connect(t, s3)
	checkNotSoughtBack(t, fake3, 60)
	for _, sp := range data[3:] {
		read(t, s3, sp).Ack(nil)
	}
	expectEnd(t, s3)
	if got, want := s3.Positions(), []connectors.Position{pos(0, 60)}; !reflect.DeepEqual(got, want) {
		t.Errorf("positions %v, want %v", got, want)
	}
	closeAll(t, s3, nil)
}
