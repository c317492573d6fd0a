package durable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
	"github.com/arkflow-rs/arkflow-go/job"
)

// ---------------------------------------------------------------------------
// A fake connector source.

// span is one pre-built batch of the fake: n rows of partition part with
// offsets start, start+1, ….
type span struct {
	part  int32
	start int64
	n     int
}

func (s span) end() int64 { return s.start + int64(s.n) }

// value is the v column of the row at offset off of partition part.
func value(part int32, off int64) int64 { return int64(part)*1_000_000 + 1000 + off }

var fakeSchema = arrow.NewSchema([]arrow.Field{
	{Name: "v", Type: arrow.PrimitiveTypes.Int64},
	{Name: connectors.MetaSource, Type: arrow.BinaryTypes.String},
	{Name: connectors.MetaPartition, Type: arrow.PrimitiveTypes.Int32},
	{Name: connectors.MetaOffset, Type: arrow.PrimitiveTypes.Int64},
}, nil)

func (s span) record() arrow.RecordBatch {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := 0; i < s.n; i++ {
		b.Append(value(s.part, s.start+int64(i)))
	}
	v := b.NewArray()
	cols := append([]arrow.Array{v}, connectors.MetaArrays("src", s.part, s.start, s.n)...)
	rec := array.NewRecordBatch(fakeSchema, cols, int64(s.n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// nativeAck is one call of a batch's native acknowledgement.
type nativeAck struct {
	part  int32
	start int64 // first offset of the acknowledged batch
	err   error
}

// fakeSource returns its spans in order, starting in each partition at the
// offset it was last sought to; it records every Seek and every native
// acknowledgement.
type fakeSource struct {
	spans []span

	// start is where a partition without a sought position starts (the
	// configured start; for Kafka, the group's committed offset).
	start map[int32]int64

	mu       sync.Mutex
	seeks    [][]connectors.Position
	resume   map[int32]int64
	next     int
	acks     []nativeAck
	connects int
	closes   int
}

func newFake(spans ...span) *fakeSource { return &fakeSource{spans: spans} }

// uniform returns n spans of size rows each in partition 0, from offset 0.
func uniform(n, size int) []span {
	out := make([]span, n)
	for i := range out {
		out[i] = span{part: 0, start: int64(i * size), n: size}
	}
	return out
}

func (f *fakeSource) Connect(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connects++
	return nil
}

func (f *fakeSource) Read(ctx context.Context) (connectors.Batch, error) {
	if err := ctx.Err(); err != nil {
		return connectors.Batch{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.next < len(f.spans) {
		sp := f.spans[f.next]
		f.next++
		from, ok := f.resume[sp.part]
		if !ok {
			from = f.start[sp.part]
		}
		if sp.start < from {
			continue
		}
		return connectors.Batch{
			Record:    sp.record(),
			Partition: int(sp.part),
			Ack: func(err error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				f.acks = append(f.acks, nativeAck{part: sp.part, start: sp.start, err: err})
			},
		}, nil
	}
	return connectors.Batch{}, connectors.ErrEndOfInput
}

func (f *fakeSource) Close(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closes++
	return nil
}

func (f *fakeSource) Positions() []connectors.Position {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []connectors.Position
	for p, o := range f.resume {
		out = append(out, connectors.Position{Partition: p, Offset: o})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

func (f *fakeSource) Seek(ps []connectors.Position) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seeks = append(f.seeks, append([]connectors.Position(nil), ps...))
	f.resume = map[int32]int64{}
	for _, p := range ps {
		f.resume[p.Partition] = p.Offset
	}
	return nil
}

func (f *fakeSource) nativeAcks() []nativeAck {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]nativeAck(nil), f.acks...)
}

func (f *fakeSource) sought() [][]connectors.Position {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]connectors.Position(nil), f.seeks...)
}

// ackStarts lists the first offsets of the natively acknowledged batches.
func ackStarts(acks []nativeAck) []int64 {
	out := []int64{}
	for _, a := range acks {
		out = append(out, a.start)
	}
	return out
}

// ---------------------------------------------------------------------------
// Helpers.

func info() connectors.TaskInfo {
	return connectors.TaskInfo{JobID: "j", OperatorID: "src", Subtask: 0, Parallelism: 1,
		Logger: slog.New(slog.DiscardHandler)}
}

func walDir(dataDir string) string { return filepath.Join(dataDir, "j", "wal", "src", "0") }

func openSource(t *testing.T, cfg *job.Durability, inner connectors.Source, dataDir string) *Source {
	t.Helper()
	s, err := Open(context.Background(), cfg, inner, dataDir, info(), "src-0", Job{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func connect(t *testing.T, s *Source) {
	t.Helper()
	if err := s.Connect(context.Background()); err != nil {
		t.Fatalf("Connect: %v", err)
	}
}

// closeAll closes the source (expecting want from Close, matched with
// errors.Is; nil means no error) and then the WAL.
func closeAll(t *testing.T, s *Source, want error) {
	t.Helper()
	err := s.Close(context.Background())
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("Close: %v, want %v", err, want)
	}
	if err := s.CloseWAL(); err != nil {
		t.Fatalf("CloseWAL: %v", err)
	}
}

// read reads one batch and checks that it holds exactly the rows of sp.
func read(t *testing.T, s *Source, sp span) connectors.Batch {
	t.Helper()
	b, err := s.Read(context.Background())
	if err != nil {
		t.Fatalf("Read (want offsets %d..%d): %v", sp.start, sp.end()-1, err)
	}
	checkRows(t, b.Record, sp)
	if b.Partition != int(sp.part) {
		t.Errorf("batch partition %d, want %d", b.Partition, sp.part)
	}
	if b.Ack == nil {
		t.Fatal("batch without an acknowledgement")
	}
	return b
}

func checkRows(t *testing.T, rec arrow.RecordBatch, sp span) {
	t.Helper()
	if rec == nil {
		t.Fatal("batch without a record")
	}
	defer rec.Release()
	if !rec.Schema().Equal(fakeSchema) {
		t.Fatalf("schema %v, want %v", rec.Schema(), fakeSchema)
	}
	if rec.NumRows() != int64(sp.n) {
		t.Fatalf("%d rows, want %d (offsets %d..%d)", rec.NumRows(), sp.n, sp.start, sp.end()-1)
	}
	v := rec.Column(0).(*array.Int64)
	src := rec.Column(1).(*array.String)
	part := rec.Column(2).(*array.Int32)
	off := rec.Column(3).(*array.Int64)
	for i := 0; i < sp.n; i++ {
		o := sp.start + int64(i)
		if off.Value(i) != o || part.Value(i) != sp.part || v.Value(i) != value(sp.part, o) || src.Value(i) != "src" {
			t.Fatalf("row %d: v=%d source=%q partition=%d offset=%d, want v=%d source=src partition=%d offset=%d",
				i, v.Value(i), src.Value(i), part.Value(i), off.Value(i), value(sp.part, o), sp.part, o)
		}
	}
}

func expectEnd(t *testing.T, s *Source) {
	t.Helper()
	b, err := s.Read(context.Background())
	if !errors.Is(err, connectors.ErrEndOfInput) {
		if b.Record != nil {
			t.Fatalf("Read returned %d more rows (first offset %d), want end of input", b.Record.NumRows(), firstOffset(b.Record))
		}
		t.Fatalf("Read: %v, want end of input", err)
	}
}

func firstOffset(rec arrow.RecordBatch) int64 {
	return rec.Column(3).(*array.Int64).Value(0)
}

// settleBriefly gives background goroutines a chance to do what they must
// not do, before a negative check.
func settleBriefly() { time.Sleep(50 * time.Millisecond) }

func pos(part int32, off int64) connectors.Position {
	return connectors.Position{Partition: part, Offset: off}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ---------------------------------------------------------------------------
// Tests.

// Every batch is in the WAL when Read returns it; after a
// restart, every entry after the cursor is replayed, in order, before new
// input, and the wrapped source resumes after what the WAL holds.
func TestAppendBeforeReturnAndReplay(t *testing.T) {
	t.Parallel()
	data := uniform(5, 3) // offsets 0-2, 3-5, 6-8, 9-11, 12-14
	cfg := &job.Durability{Sync: "group_commit", DrainTimeoutMS: 50}
	dir := t.TempDir()

	fake := newFake(data...)
	s := openSource(t, cfg, fake, dir)
	connect(t, s)
	if got := fake.sought(); len(got) != 0 {
		t.Errorf("an empty WAL sought the source to %v", got)
	}
	var batches []connectors.Batch
	for i, sp := range data {
		batches = append(batches, read(t, s, sp))
		// Appended before Read returned.
		if last := s.Log().Last(); last != uint64(i+1) {
			t.Fatalf("after Read %d the WAL's last sequence is %d", i+1, last)
		}
	}
	batches[0].Ack(nil)
	batches[1].Ack(nil)
	batches[3].Ack(nil)
	if c := s.Log().Cursor(); c != 2 {
		t.Fatalf("cursor %d after acks of 1, 2 and 4, want 2", c)
	}
	if got, want := s.Positions(), []connectors.Position{pos(0, 6)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Positions() = %v, want %v (through batch 2 only)", got, want)
	}
	polltest.Eventually(t, "native acks of batches 1 and 2", func() bool { return len(fake.nativeAcks()) == 2 })
	// Entry 4's native ack waits on entry 3, which never comes: Close's
	// drain window runs out and entry 4 is never committed.
	closeAll(t, s, walog.ErrClosedPending)
	if got := ackStarts(fake.nativeAcks()); !reflect.DeepEqual(got, []int64{0, 3}) {
		t.Errorf("native acks of batches starting at %v, want [0 3]", got)
	}
	for _, a := range fake.nativeAcks() {
		if a.err != nil {
			t.Errorf("native ack of batch at %d failed: %v", a.start, a.err)
		}
	}
	if fake.closes != 1 {
		t.Errorf("wrapped source closed %d times, want 1", fake.closes)
	}

	// Restart over the same input.
	fake2 := newFake(data...)
	s2 := openSource(t, cfg, fake2, dir)
	if got, want := s2.Positions(), []connectors.Position{pos(0, 6)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Positions() after restart = %v, want %v (stored with the cursor)", got, want)
	}
	connect(t, s2)
	if got, want := fake2.sought(), [][]connectors.Position{{pos(0, 15)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("restarted source sought to %v, want %v (after everything the WAL holds)", got, want)
	}
	// Entry 4 was acknowledged, but after the gap: everything after the
	// cursor (2) is replayed (at-least-once), in order.
	var replayed []connectors.Batch
	for _, sp := range data[2:] {
		replayed = append(replayed, read(t, s2, sp))
	}
	expectEnd(t, s2)
	c, g := s2.Counters(), s2.Gauges()
	if c["wal_replayed"] != 3 || g["wal_cursor"] != 2 || g["wal_last"] != 5 {
		t.Errorf("counters %v, gauges %v, want wal_replayed 3, wal_cursor 2, wal_last 5", c, g)
	}
	for _, b := range replayed {
		b.Ack(nil)
	}
	if c := s2.Log().Cursor(); c != 5 {
		t.Errorf("cursor %d after acking the replay, want 5", c)
	}
	if got, want := s2.Positions(), []connectors.Position{pos(0, 15)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Positions() = %v, want %v", got, want)
	}
	closeAll(t, s2, nil)
	if len(fake2.nativeAcks()) != 0 {
		t.Errorf("replayed entries reached the restarted source's native ack: %v", fake2.nativeAcks())
	}
}

// A native acknowledgement waits until the WAL cursor has passed
// its entry; out-of-order acks never skip the gap, and the native
// acknowledgements run in sequence order.
func TestNativeAcksWaitForTheCursor(t *testing.T) {
	t.Parallel()
	fake := newFake(uniform(2, 4)...)
	s := openSource(t, &job.Durability{Sync: "group_commit"}, fake, t.TempDir())
	connect(t, s)
	b1 := read(t, s, span{0, 0, 4})
	b2 := read(t, s, span{0, 4, 4})

	b2.Ack(nil)
	settleBriefly()
	if acks := fake.nativeAcks(); len(acks) != 0 {
		t.Fatalf("native ack ran before the gap closed: %+v", acks)
	}
	if c := s.Log().Cursor(); c != 0 {
		t.Fatalf("cursor %d skipped the gap at 1", c)
	}
	// Nothing contiguous is acknowledged: the partition is at the first
	// offset read from it, not left out (a restore must not fall back to
	// the source's configured start).
	if got, want := s.Positions(), []connectors.Position{pos(0, 0)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Positions() = %v with nothing contiguous acknowledged, want %v", got, want)
	}

	b1.Ack(nil)
	polltest.Eventually(t, "native acks of both batches", func() bool { return len(fake.nativeAcks()) == 2 })
	acks := fake.nativeAcks()
	if got := ackStarts(acks); !reflect.DeepEqual(got, []int64{0, 4}) {
		t.Errorf("native acks in the order %v, want [0 4]", got)
	}
	for _, a := range acks {
		if a.err != nil {
			t.Errorf("native ack of batch at %d: %v", a.start, a.err)
		}
	}
	if c := s.Log().Cursor(); c != 2 {
		t.Errorf("cursor %d, want 2", c)
	}
	closeAll(t, s, nil)
}

// Native acknowledgements run in sequence order even when the
// committer, parked on a later entry, races the acknowledgement that closes
// the gap. ackFunc moves the WAL cursor (Log.Ack) before it registers its
// native acknowledgement, so a committer that wakes in between settles the
// later entry first. The window is small, so the test repeats the race;
// under -race it is wide enough to be hit every run.
func TestNativeAcksInOrderUnderRace(t *testing.T) {
	t.Parallel()
	const pairs = 300
	fake := newFake(uniform(2*pairs, 1)...)
	s := openSource(t, &job.Durability{Sync: "none"}, fake, t.TempDir())
	connect(t, s)
	inverted := 0
	for i := 0; i < pairs; i++ {
		first := read(t, s, span{0, int64(2 * i), 1})
		second := read(t, s, span{0, int64(2*i + 1), 1})
		second.Ack(nil)
		time.Sleep(time.Millisecond) // let the committer park on the later entry
		first.Ack(nil)
		polltest.Eventually(t, "native acks of the pair", func() bool { return len(fake.nativeAcks()) == 2*i+2 })
		if acks := fake.nativeAcks(); acks[2*i].start > acks[2*i+1].start {
			inverted++
		}
	}
	if inverted > 0 {
		t.Errorf("in %d of %d pairs the later batch was committed natively before the earlier one", inverted, pairs)
	}
	closeAll(t, s, nil)
}

// A failed delivery abandons its entry: its native ack gets the error, the
// cursor stays before it, and entries after it are reported to their
// native acks as abandoned (never committed in this run) and replayed on
// restart.
func TestFailedDeliveryAbandons(t *testing.T) {
	t.Parallel()
	data := uniform(3, 2)
	dir := t.TempDir()
	fake := newFake(data...)
	s := openSource(t, &job.Durability{Sync: "group_commit"}, fake, dir)
	connect(t, s)
	b1 := read(t, s, data[0])
	b2 := read(t, s, data[1])

	boom := errors.New("sink failed")
	b1.Ack(boom)
	polltest.Eventually(t, "native ack of batch 1", func() bool { return len(fake.nativeAcks()) == 1 })
	if a := fake.nativeAcks()[0]; a.start != 0 || a.err != boom {
		t.Fatalf("native ack %+v, want batch at 0 with %v", a, boom)
	}
	if c := s.Log().Cursor(); c != 0 {
		t.Fatalf("cursor %d after a failed delivery of entry 1, want 0", c)
	}

	b2.Ack(nil)
	polltest.Eventually(t, "native ack of batch 2", func() bool { return len(fake.nativeAcks()) == 2 })
	a := fake.nativeAcks()[1]
	var abandoned *walog.AbandonedError
	if a.start != 2 || !errors.As(a.err, &abandoned) {
		t.Fatalf("native ack %+v, want batch at 2 with a *walog.AbandonedError", a)
	}
	if abandoned.Seq != 1 {
		t.Errorf("AbandonedError names sequence %d, want 1", abandoned.Seq)
	}
	if c := s.Log().Cursor(); c != 0 {
		t.Errorf("cursor %d, want 0", c)
	}
	if got, want := s.Positions(), []connectors.Position{pos(0, 0)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Positions() = %v, want %v (nothing covered: the first offset read)", got, want)
	}
	closeAll(t, s, nil)

	// Both are replayed after a restart, then the unread batch 3.
	fake2 := newFake(data...)
	s2 := openSource(t, &job.Durability{Sync: "group_commit"}, fake2, dir)
	connect(t, s2)
	read(t, s2, data[0])
	read(t, s2, data[1])
	read(t, s2, data[2])
	expectEnd(t, s2)
	if got := s2.Counters()["wal_replayed"]; got != 2 {
		t.Errorf("wal_replayed %d, want 2", got)
	}
	closeAll(t, s2, nil)
}

// An ack parked behind a stalled earlier one reports the gap when
// its lease runs out, with the exact message, and retries; once the gap
// closes both native acks go through.
func TestParkedLease(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	fake := newFake(uniform(2, 1)...)
	in := info()
	in.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s, err := Open(context.Background(), &job.Durability{Sync: "group_commit", ParkLeaseMS: 20}, fake, t.TempDir(), in, "src-0", Job{})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, s)
	b1 := read(t, s, span{0, 0, 1})
	b2 := read(t, s, span{0, 1, 1})

	b2.Ack(nil)
	polltest.Eventually(t, "a parked timeout", func() bool { return s.Counters()["wal_parked_timeouts"] >= 1 })
	polltest.Eventually(t, "a second parked timeout (the retry)", func() bool { return s.Counters()["wal_parked_timeouts"] >= 2 })
	const msg = "WAL acknowledgement parked for >20ms waiting for sequence 1; the gap owner appears stalled"
	if !strings.Contains(logs.String(), msg) {
		t.Errorf("log does not contain %q:\n%s", msg, logs.String())
	}
	if acks := fake.nativeAcks(); len(acks) != 0 {
		t.Fatalf("native acks while parked: %+v", acks)
	}

	b1.Ack(nil)
	polltest.Eventually(t, "native acks of both batches", func() bool { return len(fake.nativeAcks()) == 2 })
	got := ackStarts(fake.nativeAcks())
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if !reflect.DeepEqual(got, []int64{0, 1}) {
		t.Errorf("native acks of batches %v, want [0 1]", got)
	}
	for _, a := range fake.nativeAcks() {
		if a.err != nil {
			t.Errorf("native ack of batch at %d: %v", a.start, a.err)
		}
	}
	closeAll(t, s, nil)
}

// A graceful stop gives an ack blocked behind an unacknowledged
// entry the drain window, then fails with exactly "WAL closed while
// acknowledgement was pending"; a restart replays both entries.
func TestDrainWindow(t *testing.T) {
	t.Parallel()
	data := uniform(2, 2)
	dir := t.TempDir()
	cfg := &job.Durability{Sync: "group_commit", DrainTimeoutMS: 50}
	fake := newFake(data...)
	s := openSource(t, cfg, fake, dir)
	connect(t, s)
	read(t, s, data[0]) // never acknowledged
	b2 := read(t, s, data[1])
	b2.Ack(nil)

	err := s.Close(context.Background())
	if !errors.Is(err, walog.ErrClosedPending) {
		t.Fatalf("Close: %v, want walog.ErrClosedPending", err)
	}
	if !strings.Contains(err.Error(), "WAL closed while acknowledgement was pending") {
		t.Errorf("Close error %q does not contain the exact message", err)
	}
	if acks := fake.nativeAcks(); len(acks) != 0 {
		t.Errorf("native acks despite the gap: %+v", acks)
	}
	if fake.closes != 1 {
		t.Errorf("wrapped source closed %d times, want 1", fake.closes)
	}
	if err := s.CloseWAL(); err != nil {
		t.Fatalf("CloseWAL: %v", err)
	}

	fake2 := newFake(data...)
	s2 := openSource(t, cfg, fake2, dir)
	connect(t, s2)
	read(t, s2, data[0])
	read(t, s2, data[1])
	expectEnd(t, s2)
	closeAll(t, s2, nil)
}

// The drain's counterpart: with everything acknowledged, Close drains the
// native acks and returns nil.
func TestDrainAllAcked(t *testing.T) {
	t.Parallel()
	data := uniform(3, 2)
	fake := newFake(data...)
	s := openSource(t, &job.Durability{Sync: "group_commit", DrainTimeoutMS: 50}, fake, t.TempDir())
	connect(t, s)
	var bs []connectors.Batch
	for _, sp := range data {
		bs = append(bs, read(t, s, sp))
	}
	for i := len(bs) - 1; i >= 0; i-- {
		bs[i].Ack(nil)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The order of native acks is checked by TestNativeAcksWaitForTheCursor
	// and TestNativeAcksInOrderWhenTheCommitterWinsTheRace.
	got := ackStarts(fake.nativeAcks())
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if !reflect.DeepEqual(got, []int64{0, 2, 4}) {
		t.Errorf("native acks of batches %v, want [0 2 4]", got)
	}
	if err := s.CloseWAL(); err != nil {
		t.Fatalf("CloseWAL: %v", err)
	}
}

// Entries covered by a restored checkpoint are acknowledged, not
// replayed, and the cursor moves past them; the rest are replayed. A
// checkpoint older than the cursor makes the source resume from it, with no
// replay.
func TestCheckpointReconciliation(t *testing.T) {
	t.Parallel()
	data := uniform(4, 10) // offsets 0-9, 10-19, 20-29, 30-39
	dir := t.TempDir()
	cfg := &job.Durability{Sync: "group_commit"}

	fake := newFake(data...)
	s := openSource(t, cfg, fake, dir)
	connect(t, s)
	for _, sp := range data {
		read(t, s, sp) // none acknowledged
	}
	closeAll(t, s, nil)

	// A checkpoint at offset 20 covers entries 1 and 2.
	fake2 := newFake(data...)
	s2 := openSource(t, cfg, fake2, dir)
	if err := s2.Seek([]connectors.Position{pos(0, 20)}); err != nil {
		t.Fatal(err)
	}
	connect(t, s2)
	if c := s2.Log().Cursor(); c != 2 {
		t.Errorf("cursor %d after reconciling with a checkpoint at 20, want 2", c)
	}
	if got, want := fake2.sought(), [][]connectors.Position{{pos(0, 40)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("sought to %v, want %v", got, want)
	}
	if got, want := s2.Positions(), []connectors.Position{pos(0, 20)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Positions() = %v, want %v", got, want)
	}
	b3 := read(t, s2, data[2])
	b4 := read(t, s2, data[3])
	expectEnd(t, s2)
	if got := s2.Counters()["wal_replayed"]; got != 2 {
		t.Errorf("wal_replayed %d, want 2", got)
	}
	b3.Ack(nil)
	b4.Ack(nil)
	if c := s2.Log().Cursor(); c != 4 {
		t.Fatalf("cursor %d, want 4", c)
	}
	if got, want := s2.Positions(), []connectors.Position{pos(0, 40)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Positions() = %v, want %v", got, want)
	}
	if err := s2.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	closeAll(t, s2, nil)

	// A checkpoint older than the cursor (at 10, cursor at 40): the source
	// resumes from the checkpoint and nothing is replayed.
	fake3 := newFake(data...)
	logs := &syncBuffer{}
	in := info()
	in.Logger = slog.New(slog.NewTextHandler(logs, nil)).With("operator", "src", "subtask", 0) // as the runtime gives it
	s3, err := Open(context.Background(), cfg, fake3, dir, in, "src-0", Job{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.Seek([]connectors.Position{pos(0, 10)}); err != nil {
		t.Fatal(err)
	}
	connect(t, s3)
	// The log says what happens in the user's terms, each key once.
	line := logs.String()
	for _, want := range []string{"level=INFO", "reads its input again from the checkpoint's positions", "nothing is lost", `resume_at="partition 0 at offset 10"`, "wal_cursor="} {
		if !strings.Contains(line, want) {
			t.Errorf("the log does not say %q:\n%s", want, line)
		}
	}
	for _, key := range []string{"operator=", "subtask="} {
		if n := strings.Count(line, key); n != 1 {
			t.Errorf("%s appears %d times in:\n%s", key, n, line)
		}
	}
	if got, want := fake3.sought(), [][]connectors.Position{{pos(0, 10)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("sought to %v, want %v", got, want)
	}
	b := read(t, s3, data[1]) // read anew from the source, not replayed
	if got := s3.Counters()["wal_replayed"]; got != 0 {
		t.Errorf("wal_replayed %d, want 0", got)
	}
	if last := s3.Log().Last(); last != 5 {
		t.Errorf("the re-read batch is WAL entry %d, want 5", last)
	}
	b.Ack(nil)
	closeAll(t, s3, nil)
}

// Replay with an older checkpoint: after resuming from a checkpoint at
// offset 10, the positions the source reports (which the next checkpoint
// records, and which are stored with the WAL cursor) must not run ahead of
// what has been acknowledged since. Otherwise a checkpoint taken while rows
// 10..39 are being processed again records offset 40, and restoring it
// skips rows 20..39.
func TestOlderCheckpointResetsPositions(t *testing.T) {
	t.Parallel()
	data := uniform(4, 10)
	dir := t.TempDir()
	cfg := &job.Durability{Sync: "group_commit"}

	fake := newFake(data...)
	s := openSource(t, cfg, fake, dir)
	connect(t, s)
	var bs []connectors.Batch
	for _, sp := range data {
		bs = append(bs, read(t, s, sp))
	}
	for _, b := range bs {
		b.Ack(nil)
	}
	if err := s.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	closeAll(t, s, nil)

	fake2 := newFake(data...)
	s2 := openSource(t, cfg, fake2, dir)
	if err := s2.Seek([]connectors.Position{pos(0, 10)}); err != nil {
		t.Fatal(err)
	}
	connect(t, s2)
	if got, want := s2.Positions(), []connectors.Position{pos(0, 10)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Positions() right after resuming from a checkpoint at 10 = %v, want %v", got, want)
	}
	b := read(t, s2, data[1])
	b.Ack(nil)
	if got, want := s2.Positions(), []connectors.Position{pos(0, 20)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Positions() after re-reading and acknowledging offsets 10..19 = %v, want %v", got, want)
	}
	closeAll(t, s2, nil)
}

// A checkpoint taken while the cursor covers nothing of a
// partition yet (its rows were read after another partition's backlog, and
// wait in open windows) must still record that partition, at the first
// offset read from it. Otherwise restoring the checkpoint once the WAL has
// moved on ("older than the cursor") resumes the partition at the source's
// configured start — for Kafka the group's committed offset, which the
// native commits moved past the checkpoint when the cursor passed those
// rows — and the rows in between are never read again (the keyed-window
// SIGKILL proof saw windows fire with the rows of one or two partitions
// missing).
func TestCheckpointRecordsPartitionsTheCursorDoesNotCoverYet(t *testing.T) {
	t.Parallel()
	data := []span{{0, 0, 10}, {0, 10, 10}, {1, 0, 10}, {1, 10, 10}}
	dir := t.TempDir()
	cfg := &job.Durability{Sync: "group_commit"}

	fake := newFake(data...)
	s := openSource(t, cfg, fake, dir)
	connect(t, s)
	var bs []connectors.Batch
	for _, sp := range data {
		bs = append(bs, read(t, s, sp))
	}
	// Partition 0's entries are acknowledged, partition 1's are not yet:
	// the checkpoint is cut now.
	bs[0].Ack(nil)
	bs[1].Ack(nil)
	polltest.Eventually(t, "the cursor past partition 0's entries", func() bool { return s.Log().Cursor() == 2 })
	ckpt := s.Positions()
	if want := []connectors.Position{pos(0, 20), pos(1, 0)}; !reflect.DeepEqual(ckpt, want) {
		t.Errorf("Positions() at the cut = %v, want %v (partition 1 was read from offset 0)", ckpt, want)
	}
	// Then partition 1's: the cursor passes them and their native
	// acknowledgements commit offset 20 of partition 1.
	bs[2].Ack(nil)
	bs[3].Ack(nil)
	polltest.Eventually(t, "native acks of every batch", func() bool { return len(fake.nativeAcks()) == 4 })
	if err := s.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	closeAll(t, s, nil)

	// Restart from the checkpoint: the WAL has moved on, so the source
	// resumes from the checkpoint's positions; a partition without one
	// would start at its committed offset, 20.
	fake2 := newFake(data...)
	fake2.start = map[int32]int64{1: 20}
	s2 := openSource(t, cfg, fake2, dir)
	if err := s2.Seek(ckpt); err != nil {
		t.Fatal(err)
	}
	connect(t, s2)
	b := read(t, s2, data[2]) // partition 1 from offset 0: nothing skipped
	b.Ack(nil)
	b = read(t, s2, data[3])
	b.Ack(nil)
	closeAll(t, s2, nil)
}

// Positions are tracked per partition; the cursor's positions cover only
// entries up to the cursor.
func TestPositionsPerPartition(t *testing.T) {
	t.Parallel()
	data := []span{{0, 0, 3}, {1, 100, 2}, {0, 3, 3}, {1, 102, 2}}
	dir := t.TempDir()
	fake := newFake(data...)
	s := openSource(t, &job.Durability{Sync: "group_commit"}, fake, dir)
	connect(t, s)
	var bs []connectors.Batch
	for _, sp := range data {
		bs = append(bs, read(t, s, sp))
	}
	bs[0].Ack(nil)
	bs[1].Ack(nil)
	bs[3].Ack(nil)
	if got, want := s.Positions(), []connectors.Position{pos(0, 3), pos(1, 102)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Positions() = %v, want %v", got, want)
	}
	bs[2].Ack(nil)
	if got, want := s.Positions(), []connectors.Position{pos(0, 6), pos(1, 104)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Positions() = %v, want %v", got, want)
	}
	closeAll(t, s, nil)

	// Stored with the cursor: a restart resumes both partitions after them.
	fake2 := newFake(data...)
	s2 := openSource(t, &job.Durability{Sync: "group_commit"}, fake2, dir)
	connect(t, s2)
	if got, want := fake2.sought(), [][]connectors.Position{{pos(0, 6), pos(1, 104)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("sought to %v, want %v", got, want)
	}
	expectEnd(t, s2)
	closeAll(t, s2, nil)
}

// copyDir copies the regular files of src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A crash (no Close) loses nothing Read returned: a copy
// of the WAL directory taken while the log is open replays every entry
// after the last persisted cursor.
func TestCrashWithoutClose(t *testing.T) {
	t.Parallel()
	data := uniform(3, 5)
	cases := []struct {
		name   string
		flush  bool // ack entry 1 and persist the cursor before the crash
		replay []span
		seek   int64
	}{
		{name: "nothing acknowledged", replay: data, seek: 15},
		{name: "cursor persisted at 1", flush: true, replay: data[1:], seek: 15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fake := newFake(data...)
			s := openSource(t, &job.Durability{Sync: "group_commit", DrainTimeoutMS: 50}, fake, dir)
			connect(t, s)
			var bs []connectors.Batch
			for _, sp := range data {
				bs = append(bs, read(t, s, sp))
			}
			if tc.flush {
				bs[0].Ack(nil)
				if err := s.Log().Flush(); err != nil {
					t.Fatal(err)
				}
			}
			// The crash: what is on disk now is all a restart sees.
			crashed := t.TempDir()
			copyDir(t, walDir(dir), walDir(crashed))
			defer closeAll(t, s, nil)

			fake2 := newFake(data...)
			s2 := openSource(t, &job.Durability{Sync: "group_commit"}, fake2, crashed)
			connect(t, s2)
			if got, want := fake2.sought(), [][]connectors.Position{{pos(0, tc.seek)}}; !reflect.DeepEqual(got, want) {
				t.Errorf("sought to %v, want %v", got, want)
			}
			for _, sp := range tc.replay {
				read(t, s2, sp).Ack(nil)
			}
			expectEnd(t, s2)
			if got := s2.Counters()["wal_replayed"]; got != int64(len(tc.replay)) {
				t.Errorf("wal_replayed %d, want %d", got, len(tc.replay))
			}
			closeAll(t, s2, nil)
		})
	}
}

// A dry run closes the WAL, so the real start opens it at once;
// while a Source holds the directory, another Open (or dry run) fails
// naming the lock.
func TestDryRunThenOpenAndLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := &job.Durability{Sync: "group_commit"}
	if err := DryRun(context.Background(), cfg, dir, info()); err != nil {
		t.Fatalf("DryRun: %v", err)
	}
	s := openSource(t, cfg, newFake(), dir)

	_, err := Open(context.Background(), cfg, newFake(), dir, info(), "src-0", Job{})
	if err == nil {
		t.Fatal("a second Open of a held WAL succeeded")
	}
	for _, want := range []string{"src-0", "LOCK", "another writer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second Open: %q does not mention %q", err, want)
		}
	}
	if err := DryRun(context.Background(), cfg, dir, info()); err == nil || !strings.Contains(err.Error(), "another writer") {
		t.Errorf("DryRun of a held WAL: %v, want an error naming the other writer", err)
	}
	closeAll(t, s, nil)

	// Released: it opens again.
	s2 := openSource(t, cfg, newFake(), dir)
	closeAll(t, s2, nil)
}

func TestOpenWithoutWALPath(t *testing.T) {
	t.Parallel()
	_, err := Open(context.Background(), &job.Durability{}, newFake(), "", info(), "src-0", Job{})
	if err == nil || !strings.Contains(err.Error(), "durability.path") {
		t.Fatalf("Open with no path and no data dir: %v, want an error naming durability.path", err)
	}
	if err := DryRun(context.Background(), &job.Durability{}, "", info()); err == nil || !strings.Contains(err.Error(), "durability.path") {
		t.Fatalf("DryRun with no path and no data dir: %v, want an error naming durability.path", err)
	}
}

// An explicit path puts the WAL at {path}/{source}/{subtask}.
func TestOpenWithPath(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	s := openSource(t, &job.Durability{Path: base}, newFake(span{0, 0, 1}), "")
	connect(t, s)
	read(t, s, span{0, 0, 1}).Ack(nil)
	closeAll(t, s, nil)
	ents, err := os.ReadDir(filepath.Join(base, "src", "0"))
	if err != nil || len(ents) == 0 {
		t.Fatalf("no WAL in %s: %v", filepath.Join(base, "src", "0"), err)
	}
}

// notPositioner hides the fake's Positioner.
type notPositioner struct{ connectors.Source }

func TestSeekNeedsAPositioner(t *testing.T) {
	t.Parallel()
	s := openSource(t, &job.Durability{}, notPositioner{newFake()}, t.TempDir())
	err := s.Seek([]connectors.Position{pos(0, 1)})
	if err == nil || !strings.Contains(err.Error(), "connectors.Positioner") {
		t.Errorf("Seek: %v, want an error naming connectors.Positioner", err)
	}
	closeAll(t, s, nil)
}

// Compile-time check: the durable Source is a Positioner.
var _ connectors.Positioner = (*Source)(nil)

func TestFakeSourceSeek(t *testing.T) {
	t.Parallel()
	// The fake's own Positions reflect its last Seek (sanity of the fake).
	f := newFake()
	_ = f.Seek([]connectors.Position{pos(1, 5), pos(0, 2)})
	if got := fmt.Sprint(f.Positions()); got != "[{ 0 2} { 1 5}]" {
		t.Errorf("fake positions %s", got)
	}
}

// A checkpoint taken before this task consumed anything records no
// positions for it; that is the configured start. A WAL that has moved on
// since (its entries acknowledged and committed into state the restore
// replaced) must not be trusted over it: the source rewinds to the start
// and nothing is replayed. The SIGKILL proof with checkpoints
// found this under load, as half-filled windows.
func TestEmptyCheckpointPositionsRewind(t *testing.T) {
	t.Parallel()
	data := uniform(3, 10)
	dir := t.TempDir()
	cfg := &job.Durability{Sync: "group_commit"}
	fake := newFake(data...)
	s := openSource(t, cfg, fake, dir)
	connect(t, s)
	// The first batch is acknowledged and the cursor persisted past it;
	// the other two stay after the cursor.
	for i, sp := range data {
		b := read(t, s, sp)
		if i == 0 {
			b.Ack(nil)
		}
	}
	if err := s.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	closeAll(t, s, nil)

	fake2 := newFake(data...)
	s2 := openSource(t, cfg, fake2, dir)
	if err := s2.Seek([]connectors.Position{}); err != nil {
		t.Fatal(err)
	}
	connect(t, s2)
	for _, ps := range fake2.sought() {
		if len(ps) != 0 {
			t.Fatalf("the source was sought to %v, want the configured start", ps)
		}
	}
	if got := s2.Positions(); len(got) != 0 {
		t.Fatalf("positions right after the restore: %v, want none (the start)", got)
	}
	b := read(t, s2, data[0]) // offsets 0..9 again, from the source, not the WAL's tail
	b.Ack(nil)
	if got, want := s2.Positions(), []connectors.Position{pos(0, 10)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("positions after re-reading the first batch: %v, want %v", got, want)
	}
	closeAll(t, s2, nil)
}
