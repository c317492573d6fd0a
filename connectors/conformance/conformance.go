// Package conformance is the test suite every connector runs: TestSource
// checks a source and TestSink a sink against the contracts of package
// connectors, through a harness that the connector's own tests provide
// (in the spirit of watermill's pubsub tests). A connector opts out of what
// it cannot do with its Features.
//
// # Usage
//
// In the connector's _test.go file:
//
//	func TestConformance(t *testing.T) {
//		conformance.TestSource(t, conformance.SourceHarness{
//			Features: conformance.SourceFeatures{Bounded: true},
//			New: func(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
//				// an input whose partition p holds data[p], in order,
//				// with at most batchSize rows per batch
//			},
//		})
//		conformance.TestSink(t, conformance.SinkHarness{
//			New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
//				// an output for rows of schema, and how to read back what it wrote
//			},
//		})
//	}
//
// The rows are Row values (an int64 "id" and a string "name"); Schema,
// Declared, Row.JSON and NewRecord give them in the forms connectors need.
//
// # What the suites check
//
// TestSource runs one subtest per contract of a source:
//
//   - ReadAll: every row is read once, in partition order, with
//     __meta_source = the operator ID, __meta_partition = the batch's
//     partition, increasing __meta_offset, batches of at most batch size;
//     acknowledging everything moves each partition's position to its
//     last offset + 1; bounded sources end.
//   - Subtasks: with parallelism 2, subtask s reads exactly the partitions
//     p with p % 2 == s.
//   - OutOfOrderAcks: acknowledging later batches first never moves the
//     position past an unacknowledged one; a failed acknowledgement keeps
//     it there.
//   - Seek: a new source sought to positions resumes exactly there;
//     partitions without a position start from the beginning; the sought
//     positions are the positions until rows are acknowledged. (An
//     Unrewindable source's positions must only never go back.)
//   - Close: without Connect, and twice, returns nil.
//   - CancelUnblocksRead: a Read waiting for rows returns once ctx is
//     cancelled.
//
// TestSink runs one subtest per contract of a sink:
//
//   - WriteReadBack: the rows of several writes (with __meta_* columns) are
//     readable back after Write returned, without the metadata columns.
//   - EmptyWrite: a batch without rows writes nothing and succeeds.
//   - CloseFlushes: rows written before Close are readable after it.
//   - Close: without Connect, and twice, returns nil.
//   - AsyncWriteReadBack (sinks that implement connectors.AsyncSink):
//     several WriteAsync calls in flight, the record released as soon as
//     each returns; every done is called exactly once, with nil, and the
//     rows of all of them read back.
//
// # Sources that cannot read again
//
// TestUnrewindableSource is the source suite of a connectors.Unrewindable
// source whose rows are pushed at it while it runs (a WebSocket, core
// NATS, an MQTT subscription): the harness sends rows to the connected
// source instead of preparing them. ReadAll, OutOfOrderAcks, Close and
// CancelUnblocksRead are TestSource's on one partition; Seek checks that
// a source sought to a position reads only rows sent after it connected,
// with offsets above the position, which stays its position until they
// are acknowledged.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Row is one record of the suite's data.
type Row struct {
	ID   int64
	Name string
}

// JSON returns the row as one JSON object: {"id":1,"name":"…"}.
func (r Row) JSON() []byte {
	b := []byte(`{"id":`)
	b = strconv.AppendInt(b, r.ID, 10)
	b = append(b, `,"name":`...)
	b = strconv.AppendQuote(b, r.Name)
	return append(b, '}')
}

// Schema is the schema of the suite's rows: id (int64, not null) and name
// (string).
func Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
}

// Declared is Schema as a spec declaration.
func Declared() connectors.Schema {
	no := false
	return connectors.Schema{{Name: "id", Type: "int64", Nullable: &no}, {Name: "name", Type: "string"}}
}

// NewRecord returns rows as a record of Schema. The caller releases it.
func NewRecord(rows []Row) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, Schema())
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.ID)
		b.Field(1).(*array.StringBuilder).Append(r.Name)
	}
	return b.NewRecordBatch()
}

// Data returns rows for partitions partitions of n rows each, with IDs
// unique across partitions.
func Data(partitions, n int) [][]Row {
	out := make([][]Row, partitions)
	for p := range out {
		for i := 0; i < n; i++ {
			id := int64(p*1000 + i)
			out[p] = append(out[p], Row{ID: id, Name: fmt.Sprintf("p%d-r%d \"é\"", p, i)})
		}
	}
	return out
}

// SourceFeatures says what a source does beyond the common contract.
type SourceFeatures struct {
	// Bounded sources return connectors.ErrEndOfInput after their last
	// row; others block in Read until more rows arrive or ctx is done.
	Bounded bool
	// Unrewindable sources (connectors.Unrewindable) cannot read rows
	// again: Seek checks instead that a source sought to positions never
	// reports positions before them (a WAL replays the rows after them).
	Unrewindable bool
	// Meta lists metadata columns the rows carry besides __meta_source,
	// __meta_partition and __meta_offset.
	Meta []string
	// CheckRow, when set, checks connector-specific columns of row i of
	// rec, which holds want (read from partition).
	CheckRow func(t testing.TB, want Row, partition int, rec arrow.RecordBatch, i int)
	// Timeout bounds reading the rows of one subtest (default 30 s).
	Timeout time.Duration
}

// SourceHarness makes inputs for TestSource.
type SourceHarness struct {
	Features SourceFeatures
	// New returns an input whose partition p holds data[p], in order, cut
	// into batches of at most batchSize rows. Every call gets fresh data
	// and a fresh input (a new topic or file).
	New func(t *testing.T, data [][]Row, batchSize int) connectors.Input
}

const opID = "conformance-src"

// TestSource runs the source suite on inputs h makes, one subtest per
// contract: ReadAll, Subtasks, OutOfOrderAcks, Seek, Close and
// CancelUnblocksRead (the package doc says what each checks).
func TestSource(t *testing.T, h SourceHarness) {
	timeout := h.Features.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	t.Run("ReadAll", func(t *testing.T) { sourceReadAll(t, h, timeout) })
	t.Run("Subtasks", func(t *testing.T) { sourceSubtasks(t, h, timeout) })
	t.Run("OutOfOrderAcks", func(t *testing.T) { sourceOutOfOrderAcks(t, h, timeout) })
	t.Run("Seek", func(t *testing.T) { sourceSeek(t, h, timeout) })
	t.Run("Close", func(t *testing.T) { sourceClose(t, h, timeout) })
	t.Run("CancelUnblocksRead", func(t *testing.T) { sourceCancelUnblocksRead(t, h, timeout) })
}

// sourceReadAll is TestSource's subtest ReadAll (see there).
func sourceReadAll(t *testing.T, h SourceHarness, timeout time.Duration) {
	data := Data(3, 7)
	in := h.New(t, data, 2)
	checkInputSchema(t, in, h.Features)
	src := connect(t, in, 0, 1, nil)
	got := readRows(t, src, in, h.Features, 21, 2, timeout)
	checkOrder(t, got, data, nil)
	ackAll(got)
	checkPositions(t, src, lastPlusOne(got))
	expectEnd(t, src, h.Features)
}

// sourceSubtasks is TestSource's subtest Subtasks (see there).
func sourceSubtasks(t *testing.T, h SourceHarness, timeout time.Duration) {
	data := Data(3, 4)
	in := h.New(t, data, 2)
	s0 := connect(t, in, 0, 2, nil)
	s1 := connect(t, in, 1, 2, nil)
	got0 := readRows(t, s0, in, h.Features, 8, 2, timeout)
	got1 := readRows(t, s1, in, h.Features, 4, 2, timeout)
	for s, got := range [][]batchRows{got0, got1} {
		for _, b := range got {
			if b.part%2 != s {
				t.Errorf("subtask %d of 2 read partition %d", s, b.part)
			}
		}
	}
	checkOrder(t, append(got0, got1...), data, nil)
	expectEnd(t, s0, h.Features)
	expectEnd(t, s1, h.Features)
}

// sourceOutOfOrderAcks is TestSource's subtest OutOfOrderAcks (see there).
func sourceOutOfOrderAcks(t *testing.T, h SourceHarness, timeout time.Duration) {
	data := Data(2, 6)
	in := h.New(t, data, 2)
	src := connect(t, in, 0, 1, nil)
	got := readRows(t, src, in, h.Features, 12, 2, timeout)
	byPart := map[int][]batchRows{}
	for _, b := range got {
		byPart[b.part] = append(byPart[b.part], b)
	}
	for p := 0; p < 2; p++ {
		if len(byPart[p]) < 2 {
			t.Fatalf("partition %d came in %d batch(es); batch size 2 should give at least 3", p, len(byPart[p]))
		}
	}
	// Partition 0: acknowledge every batch but the first, last first.
	bs := byPart[0]
	for i := len(bs) - 1; i >= 1; i-- {
		bs[i].b.Ack(nil)
	}
	if pos, ok := positionOf(src, 0); !ok || pos > bs[0].offs[0] {
		t.Errorf("partition 0: position %d (known %v) after acknowledging all batches but the first, which starts at offset %d: the position skipped a gap", pos, ok, bs[0].offs[0])
	}
	bs[0].b.Ack(nil)
	want := bs[len(bs)-1].offs[len(bs[len(bs)-1].offs)-1] + 1
	waitPosition(t, src, 0, want)
	// Partition 1: the first batch fails, the others succeed.
	bs = byPart[1]
	bs[0].b.Ack(errors.New("conformance: injected failure"))
	for i := 1; i < len(bs); i++ {
		bs[i].b.Ack(nil)
	}
	if pos, ok := positionOf(src, 1); !ok || pos > bs[0].offs[0] {
		t.Errorf("partition 1: position %d (known %v) after the first batch failed (it starts at offset %d): the position skipped a failed batch", pos, ok, bs[0].offs[0])
	}
}

// sourceSeek is TestSource's subtest Seek (see there).
func sourceSeek(t *testing.T, h SourceHarness, timeout time.Duration) {
	data := Data(3, 6)
	in := h.New(t, data, 2)
	first := connect(t, in, 0, 1, nil)
	got := readRows(t, first, in, h.Features, 18, 2, timeout)
	offs := map[int][]int64{}
	for _, b := range got {
		offs[b.part] = append(offs[b.part], b.offs...)
	}
	template := first.(connectors.Positioner).Positions()
	if err := first.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var seek []connectors.Position
	want := map[int32]int64{0: offs[0][2], 1: offs[1][5] + 1}
	for _, p := range template {
		if off, ok := want[p.Partition]; ok {
			p.Offset = off
			seek = append(seek, p)
		}
	}
	if len(seek) != 2 {
		t.Fatalf("positions after reading every partition: %v", template)
	}
	if h.Features.Unrewindable {
		second := connect(t, in, 0, 1, seek)
		for p, off := range want {
			if pos, ok := positionOf(second, int(p)); !ok || pos < off {
				t.Errorf("partition %d: position %d (known %v) after seeking to %d: an unrewindable source went back", p, pos, ok, off)
			}
		}
		return
	}
	second := connect(t, in, 0, 1, seek)
	got2 := readRows(t, second, in, h.Features, 4+6, 2, timeout)
	checkOrder(t, got2, data, map[int]int{0: 2, 1: 6, 2: 0})
	for p, off := range want {
		if pos, ok := positionOf(second, int(p)); !ok || pos != off {
			t.Errorf("partition %d: position %d (known %v) before any acknowledgement, want the sought %d", p, pos, ok, off)
		}
	}
	expectNoMore(t, second, h.Features)
	ackAll(got2)
	waitPosition(t, second, 0, offs[0][5]+1)
	waitPosition(t, second, 2, offs[2][5]+1)
}

// sourceClose is TestSource's subtest Close (see there).
func sourceClose(t *testing.T, h SourceHarness, timeout time.Duration) {
	in := h.New(t, Data(1, 1), 2)
	src, err := in.NewSource(connectors.TaskInfo{OperatorID: opID, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Errorf("Close without Connect: %v", err)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	src2, err := in.NewSource(connectors.TaskInfo{OperatorID: opID, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := src2.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := src2.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := src2.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// sourceCancelUnblocksRead is TestSource's subtest CancelUnblocksRead (see there).
func sourceCancelUnblocksRead(t *testing.T, h SourceHarness, timeout time.Duration) {
	in := h.New(t, Data(1, 2), 2)
	src := connect(t, in, 0, 1, nil)
	got := readRows(t, src, in, h.Features, 2, 2, timeout)
	ackAll(got)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := src.Read(ctx)
	if h.Features.Bounded && errors.Is(err, connectors.ErrEndOfInput) {
		return
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Read returned %v after it was cancelled", d)
	}
	start = time.Now()
	if _, err := src.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with a cancelled ctx: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Read with a cancelled ctx took %v", d)
	}
}

// batchRows is one batch read, with its rows.
type batchRows struct {
	b    connectors.Batch
	part int
	rows []Row
	offs []int64
}

func connect(t *testing.T, in connectors.Input, subtask, par int, seek []connectors.Position) connectors.Source {
	t.Helper()
	src, err := in.NewSource(connectors.TaskInfo{JobID: "conformance", OperatorID: opID, Subtask: subtask, Parallelism: par})
	if err != nil {
		t.Fatal(err)
	}
	if seek != nil {
		p, ok := src.(connectors.Positioner)
		if !ok {
			t.Fatal("the source does not implement connectors.Positioner")
		}
		if err := p.Seek(seek); err != nil {
			t.Fatalf("Seek(%v): %v", seek, err)
		}
	}
	if err := src.Connect(context.Background()); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() {
		if err := src.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return src
}

func checkInputSchema(t *testing.T, in connectors.Input, f SourceFeatures) {
	t.Helper()
	s := in.Schema()
	for _, name := range append([]string{"id", "name", connectors.MetaSource, connectors.MetaPartition, connectors.MetaOffset}, f.Meta...) {
		if len(s.FieldIndices(name)) != 1 {
			t.Errorf("the input's schema has no column %q: %s", name, s)
		}
	}
}

func col[T arrow.Array](t testing.TB, rec arrow.RecordBatch, name string) T {
	t.Helper()
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("batch has no column %q: %s", name, rec.Schema())
	}
	c, ok := rec.Column(idx[0]).(T)
	if !ok {
		t.Fatalf("column %q has type %s", name, rec.Column(idx[0]).DataType())
	}
	return c
}

// readRows reads until n rows arrived, checking every batch.
func readRows(t *testing.T, src connectors.Source, in connectors.Input, f SourceFeatures, n, batchSize int, timeout time.Duration) []batchRows {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var out []batchRows
	total := 0
	t.Cleanup(func() {
		for _, b := range out {
			if b.b.Record != nil {
				b.b.Record.Release()
			}
		}
	})
	for total < n {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		b, err := src.Read(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Read after %d of %d rows: %v", total, n, err)
		}
		rec := b.Record
		if rec == nil || rec.NumRows() == 0 {
			if b.Ack != nil {
				b.Ack(nil)
			}
			continue
		}
		if !rec.Schema().Equal(in.Schema()) {
			t.Fatalf("batch schema %s differs from the input's %s", rec.Schema(), in.Schema())
		}
		if rec.NumRows() > int64(batchSize) {
			t.Errorf("batch of %d rows, batch size %d", rec.NumRows(), batchSize)
		}
		ids := col[*array.Int64](t, rec, "id")
		names := col[*array.String](t, rec, "name")
		srcs := col[*array.String](t, rec, connectors.MetaSource)
		parts := col[*array.Int32](t, rec, connectors.MetaPartition)
		offs := col[*array.Int64](t, rec, connectors.MetaOffset)
		br := batchRows{b: b, part: b.Partition}
		for i := 0; i < int(rec.NumRows()); i++ {
			if srcs.Value(i) != opID {
				t.Errorf("__meta_source %q, want the operator ID %q", srcs.Value(i), opID)
			}
			if int(parts.Value(i)) != b.Partition {
				t.Errorf("__meta_partition %d in a batch of partition %d", parts.Value(i), b.Partition)
			}
			if i > 0 && offs.Value(i) <= offs.Value(i-1) {
				t.Errorf("partition %d: offsets %d then %d within a batch", b.Partition, offs.Value(i-1), offs.Value(i))
			}
			r := Row{ID: ids.Value(i), Name: names.Value(i)}
			br.rows = append(br.rows, r)
			br.offs = append(br.offs, offs.Value(i))
			if f.CheckRow != nil {
				f.CheckRow(t, r, b.Partition, rec, i)
			}
		}
		out = append(out, br)
		total += len(br.rows)
	}
	if total > n {
		t.Errorf("read %d rows, want %d", total, n)
	}
	return out
}

// checkOrder checks that the rows of every partition p are data[p][from[p]:]
// in order, each once, with increasing offsets (from nil: all rows).
func checkOrder(t *testing.T, got []batchRows, data [][]Row, from map[int]int) {
	t.Helper()
	byPart := map[int][]Row{}
	lastOff := map[int]int64{}
	for _, b := range got {
		if b.part < 0 || b.part >= len(data) {
			t.Errorf("batch of partition %d; the data has %d", b.part, len(data))
			continue
		}
		for i, r := range b.rows {
			if prev, ok := lastOff[b.part]; ok && b.offs[i] <= prev {
				t.Errorf("partition %d: offset %d after %d", b.part, b.offs[i], prev)
			}
			lastOff[b.part] = b.offs[i]
			byPart[b.part] = append(byPart[b.part], r)
		}
	}
	for p, rows := range data {
		start := 0
		if from != nil {
			start = from[p]
		}
		want := rows[start:]
		if fmt.Sprint(byPart[p]) != fmt.Sprint(want) && !(len(want) == 0 && len(byPart[p]) == 0) {
			t.Errorf("partition %d: read %v, want %v", p, byPart[p], want)
		}
	}
}

func ackAll(got []batchRows) {
	for _, b := range got {
		if b.b.Ack != nil {
			b.b.Ack(nil)
		}
	}
}

// lastPlusOne is, per partition read, the offset after its last row.
func lastPlusOne(got []batchRows) map[int]int64 {
	out := map[int]int64{}
	for _, b := range got {
		out[b.part] = max(out[b.part], b.offs[len(b.offs)-1]+1)
	}
	return out
}

func positionOf(src connectors.Source, part int) (int64, bool) {
	p, ok := src.(connectors.Positioner)
	if !ok {
		return 0, false
	}
	for _, pos := range p.Positions() {
		if int(pos.Partition) == part {
			return pos.Offset, true
		}
	}
	return 0, false
}

func checkPositions(t *testing.T, src connectors.Source, want map[int]int64) {
	t.Helper()
	for p, off := range want {
		waitPosition(t, src, p, off)
	}
}

// waitPosition waits briefly for a partition's position to become want
// (acknowledgements may be applied asynchronously).
func waitPosition(t *testing.T, src connectors.Source, part int, want int64) {
	t.Helper()
	if _, ok := src.(connectors.Positioner); !ok {
		t.Fatal("the source does not implement connectors.Positioner")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pos, ok := positionOf(src, part)
		if ok && pos == want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("partition %d: position %d (known %v), want %d", part, pos, ok, want)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expectEnd checks that a bounded source ends after its rows.
func expectEnd(t *testing.T, src connectors.Source, f SourceFeatures) {
	t.Helper()
	if !f.Bounded {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := src.Read(ctx)
	if b.Record != nil {
		b.Record.Release()
		t.Fatalf("a batch of %d rows after the last row", b.Record.NumRows())
	}
	if !errors.Is(err, connectors.ErrEndOfInput) {
		t.Fatalf("Read after the last row: %v, want ErrEndOfInput", err)
	}
}

// expectNoMore checks that no row follows: a bounded source ends, an
// unbounded one delivers nothing for a while.
func expectNoMore(t *testing.T, src connectors.Source, f SourceFeatures) {
	t.Helper()
	if f.Bounded {
		expectEnd(t, src, f)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	b, err := src.Read(ctx)
	if b.Record != nil {
		defer b.Record.Release()
		t.Fatalf("%d more rows (partition %d) after the expected ones", b.Record.NumRows(), b.Partition)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read with nothing left: %v, want the context's deadline", err)
	}
}

// ReadBack returns every row an output wrote so far, as JSON objects,
// waiting until at least n are readable (or its own timeout).
type ReadBack func(t *testing.T, n int) []map[string]any

// SinkFeatures says what a sink does beyond the common contract.
type SinkFeatures struct {
	// Ordered sinks read back the rows of one subtask in write order
	// (otherwise they are compared as a set).
	Ordered bool
}

// SinkHarness makes outputs for TestSink.
type SinkHarness struct {
	Features SinkFeatures
	// New returns an output for rows of schema, writing somewhere fresh,
	// and the function that reads back what it wrote.
	New func(t *testing.T, schema *arrow.Schema) (connectors.Output, ReadBack)
}

// TestSink runs the sink suite on outputs h makes, one subtest per
// contract: WriteReadBack, EmptyWrite, CloseFlushes, Close and, for sinks
// that implement connectors.AsyncSink, AsyncWriteReadBack (the package doc
// says what each checks).
func TestSink(t *testing.T, h SinkHarness) {
	schema := withMeta(Schema())
	t.Run("WriteReadBack", func(t *testing.T) { sinkWriteReadBack(t, h, schema) })
	t.Run("EmptyWrite", func(t *testing.T) { sinkEmptyWrite(t, h, schema) })
	t.Run("CloseFlushes", func(t *testing.T) { sinkCloseFlushes(t, h, schema) })
	t.Run("AsyncWriteReadBack", func(t *testing.T) { sinkAsyncWriteReadBack(t, h, schema) })
	t.Run("Close", func(t *testing.T) { sinkClose(t, h, schema) })
}

// sinkWriteReadBack is TestSink's subtest WriteReadBack (see there).
func sinkWriteReadBack(t *testing.T, h SinkHarness, schema *arrow.Schema) {
	out, read := h.New(t, schema)
	snk := connectSink(t, out)
	var want []Row
	id := int64(0)
	for _, n := range []int{5, 1, 10} {
		var rows []Row
		for i := 0; i < n; i++ {
			rows = append(rows, Row{ID: id, Name: fmt.Sprintf("row %d ✓", id)})
			id++
		}
		writeRows(t, snk, rows)
		want = append(want, rows...)
	}
	checkReadBack(t, read(t, len(want)), want, h.Features)
	if err := snk.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// sinkEmptyWrite is TestSink's subtest EmptyWrite (see there).
func sinkEmptyWrite(t *testing.T, h SinkHarness, schema *arrow.Schema) {
	out, read := h.New(t, schema)
	snk := connectSink(t, out)
	writeRows(t, snk, nil)
	writeRows(t, snk, []Row{{ID: 7, Name: "seven"}})
	checkReadBack(t, read(t, 1), []Row{{ID: 7, Name: "seven"}}, h.Features)
	if err := snk.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// sinkCloseFlushes is TestSink's subtest CloseFlushes (see there).
func sinkCloseFlushes(t *testing.T, h SinkHarness, schema *arrow.Schema) {
	out, read := h.New(t, schema)
	snk := connectSink(t, out)
	rows := []Row{{1, "a"}, {2, "b"}, {3, "c"}, {4, "d"}}
	writeRows(t, snk, rows)
	if err := snk.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkReadBack(t, read(t, len(rows)), rows, h.Features)
}

// sinkAsyncWriteReadBack is TestSink's subtest AsyncWriteReadBack (see there).
func sinkAsyncWriteReadBack(t *testing.T, h SinkHarness, schema *arrow.Schema) {
	out, read := h.New(t, schema)
	snk := connectSink(t, out)
	async, ok := snk.(connectors.AsyncSink)
	if !ok {
		t.Skip("the sink does not implement connectors.AsyncSink")
	}
	var want []Row
	var calls [4]atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, len(calls))
	for w := range calls {
		var rows []Row
		for i := 0; i < 20; i++ {
			id := int64(w*100 + i)
			rows = append(rows, Row{ID: id, Name: fmt.Sprintf("async %d", id)})
		}
		want = append(want, rows...)
		full := metaRecord(rows)
		wg.Add(1)
		err := async.WriteAsync(context.Background(), full, func(err error) {
			if calls[w].Add(1) == 1 {
				if err != nil {
					errs <- err
				}
				wg.Done()
			}
		})
		full.Release()
		if err != nil {
			t.Fatalf("WriteAsync %d: %v", w, err)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("WriteAsync: done was not called within 30 s")
	}
	close(errs)
	for err := range errs {
		t.Errorf("WriteAsync reported %v", err)
	}
	checkReadBack(t, read(t, len(want)), want, SinkFeatures{Ordered: false})
	if err := snk.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	for w := range calls {
		if n := calls[w].Load(); n != 1 {
			t.Errorf("write %d: done called %d times", w, n)
		}
	}
}

// sinkClose is TestSink's subtest Close (see there).
func sinkClose(t *testing.T, h SinkHarness, schema *arrow.Schema) {
	out, _ := h.New(t, schema)
	snk, err := out.NewSink(connectors.TaskInfo{OperatorID: "conformance-sink", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := snk.Close(context.Background()); err != nil {
		t.Errorf("Close without Connect: %v", err)
	}
	if err := snk.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	snk2 := connectSink(t, out)
	if err := snk2.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := snk2.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func withMeta(s *arrow.Schema) *arrow.Schema { return connectors.WithMeta(s) }

func connectSink(t *testing.T, out connectors.Output) connectors.Sink {
	t.Helper()
	snk, err := out.NewSink(connectors.TaskInfo{JobID: "conformance", OperatorID: "conformance-sink", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := snk.Connect(context.Background()); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = snk.Close(context.Background()) })
	return snk
}

// metaRecord is rows with metadata columns (as a source would deliver
// them).
func metaRecord(rows []Row) arrow.RecordBatch {
	rec := NewRecord(rows)
	defer rec.Release()
	meta := connectors.MetaArrays("conformance-src", 0, 100, len(rows))
	cols := append(append([]arrow.Array(nil), rec.Columns()...), meta...)
	full := array.NewRecordBatch(withMeta(Schema()), cols, int64(len(rows)))
	for _, c := range meta {
		c.Release()
	}
	return full
}

// writeRows writes rows with metadata columns (as a source would deliver
// them).
func writeRows(t *testing.T, snk connectors.Sink, rows []Row) {
	t.Helper()
	full := metaRecord(rows)
	defer full.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := snk.Write(ctx, full); err != nil {
		t.Fatalf("Write of %d rows: %v", len(rows), err)
	}
}

func checkReadBack(t *testing.T, got []map[string]any, want []Row, f SinkFeatures) {
	t.Helper()
	rows := make([]Row, 0, len(got))
	for _, m := range got {
		for k := range m {
			if k != "id" && k != "name" {
				t.Errorf("read back column %q (metadata columns must be dropped): %v", k, m)
			}
		}
		id, err := toInt(m["id"])
		if err != nil {
			t.Errorf("read back id: %v in %v", err, m)
		}
		name, _ := m["name"].(string)
		rows = append(rows, Row{ID: id, Name: name})
	}
	if !f.Ordered {
		sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
		want = append([]Row(nil), want...)
		sort.Slice(want, func(i, j int) bool { return want[i].ID < want[j].ID })
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("read back %v, want %v", rows, want)
	}
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case float64:
		return int64(x), nil
	case json.Number:
		return x.Int64()
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	}
	return 0, fmt.Errorf("not a number: %T %v", v, v)
}

// DecodeLines decodes JSON lines (one object per line, blank lines
// skipped), for ReadBack functions of line-oriented sinks.
func DecodeLines(t testing.TB, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	start := 0
	for i := 0; i <= len(data); i++ {
		if i < len(data) && data[i] != '\n' {
			continue
		}
		line := data[start:i]
		start = i + 1
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("read back %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}
