package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Send delivers rows to the sources of an input that were connected when
// it is called (an HTTP POST, a published message, a WebSocket frame per
// row), in order, and returns once they were sent.
type Send func(t *testing.T, rows []Row)

// UnrewindableHarness makes inputs for TestUnrewindableSource.
type UnrewindableHarness struct {
	Features SourceFeatures
	// New returns an input, fresh for every call, and how to send rows to
	// its connected sources. Its sources read one partition each.
	New func(t *testing.T, batchSize int) (connectors.Input, Send)
}

// TestUnrewindableSource runs the suite of a source that cannot read
// again (connectors.Unrewindable: rows pushed at it while it runs, kept
// by nobody else). Its subtests: ReadAll, OutOfOrderAcks, Seek (offsets
// go on above the sought position and nothing is read again), Close and
// CancelUnblocksRead, as TestSource's (the package doc says what each
// checks).
func TestUnrewindableSource(t *testing.T, h UnrewindableHarness) {
	timeout := h.Features.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	t.Run("ReadAll", func(t *testing.T) { pushedReadAll(t, h, timeout) })
	t.Run("OutOfOrderAcks", func(t *testing.T) { pushedOutOfOrderAcks(t, h, timeout) })
	t.Run("Seek", func(t *testing.T) { pushedSeek(t, h, timeout) })
	t.Run("Close", func(t *testing.T) {
		sourceClose(t, SourceHarness{Features: h.Features, New: func(t *testing.T, _ [][]Row, n int) connectors.Input {
			in, _ := h.New(t, n)
			return in
		}}, timeout)
	})
	t.Run("CancelUnblocksRead", func(t *testing.T) { pushedCancelUnblocksRead(t, h, timeout) })
}

func checkUnrewindable(t *testing.T, src connectors.Source) {
	t.Helper()
	if _, ok := src.(connectors.Unrewindable); !ok {
		t.Error("the source does not implement connectors.Unrewindable")
	}
}

// onePartition checks that every batch came from one partition and
// returns it, with the rows in read order as data[part].
func onePartition(t *testing.T, got []batchRows, rows []Row) (int, [][]Row) {
	t.Helper()
	part := got[0].part
	for _, b := range got {
		if b.part != part {
			t.Fatalf("batches of partitions %d and %d; the source reads one", part, b.part)
		}
	}
	data := make([][]Row, part+1)
	data[part] = rows
	return part, data
}

// pushedReadAll is TestUnrewindableSource's subtest ReadAll.
func pushedReadAll(t *testing.T, h UnrewindableHarness, timeout time.Duration) {
	in, send := h.New(t, 2)
	checkInputSchema(t, in, h.Features)
	src := connect(t, in, 0, 1, nil)
	checkUnrewindable(t, src)
	rows := Data(1, 21)[0]
	send(t, rows)
	got := readRows(t, src, in, h.Features, len(rows), 2, timeout)
	part, data := onePartition(t, got, rows)
	checkOrder(t, got, data, nil)
	ackAll(got)
	checkPositions(t, src, map[int]int64{part: lastPlusOne(got)[part]})
	expectNoMore(t, src, SourceFeatures{})
}

// pushedOutOfOrderAcks is TestUnrewindableSource's subtest OutOfOrderAcks.
func pushedOutOfOrderAcks(t *testing.T, h UnrewindableHarness, timeout time.Duration) {
	in, send := h.New(t, 2)
	src := connect(t, in, 0, 1, nil)
	rows := Data(1, 12)[0]
	send(t, rows[:6])
	first := readRows(t, src, in, h.Features, 6, 2, timeout)
	part, _ := onePartition(t, first, rows)
	if len(first) < 3 {
		t.Fatalf("6 rows came in %d batch(es); batch size 2 should give 3", len(first))
	}
	for i := len(first) - 1; i >= 1; i-- {
		first[i].b.Ack(nil)
	}
	if pos, ok := positionOf(src, part); !ok || pos > first[0].offs[0] {
		t.Errorf("position %d (known %v) after acknowledging all batches but the first, which starts at offset %d: the position skipped a gap", pos, ok, first[0].offs[0])
	}
	first[0].b.Ack(nil)
	waitPosition(t, src, part, lastPlusOne(first)[part])
	send(t, rows[6:])
	second := readRows(t, src, in, h.Features, 6, 2, timeout)
	second[0].b.Ack(errors.New("conformance: injected failure"))
	for _, b := range second[1:] {
		b.b.Ack(nil)
	}
	if pos, ok := positionOf(src, part); !ok || pos > second[0].offs[0] {
		t.Errorf("position %d (known %v) after the first batch failed (it starts at offset %d): the position skipped a failed batch", pos, ok, second[0].offs[0])
	}
}

// pushedSeek is TestUnrewindableSource's subtest Seek: a source sought
// to a position reads only rows sent after it connected, numbered above
// the position, which is its position until they are acknowledged.
func pushedSeek(t *testing.T, h UnrewindableHarness, timeout time.Duration) {
	in, send := h.New(t, 2)
	first := connect(t, in, 0, 1, nil)
	rows := Data(1, 10)[0]
	send(t, rows[:4])
	got := readRows(t, first, in, h.Features, 4, 2, timeout)
	part, _ := onePartition(t, got, rows)
	ackAll(got)
	end := lastPlusOne(got)[part]
	waitPosition(t, first, part, end)
	template := first.(connectors.Positioner).Positions()
	if err := first.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// A position far above the clock (offsets often start from it) and
	// far above what was read: the new offsets must go on above it.
	sought := max(end, time.Now().UnixNano()) + 1<<40
	var seek []connectors.Position
	for _, p := range template {
		if int(p.Partition) == part {
			p.Offset = sought
			seek = append(seek, p)
		}
	}
	if len(seek) != 1 {
		t.Fatalf("positions after reading partition %d: %v", part, template)
	}
	second := connect(t, in, 0, 1, seek)
	if pos, ok := positionOf(second, part); !ok || pos != sought {
		t.Errorf("position %d (known %v) before any row, want the sought %d", pos, ok, sought)
	}
	send(t, rows[4:])
	got2 := readRows(t, second, in, h.Features, 6, 2, timeout)
	_, data := onePartition(t, got2, rows[4:])
	checkOrder(t, got2, data, nil)
	if got2[0].part != part {
		t.Errorf("read partition %d after the seek, %d before", got2[0].part, part)
	}
	if off := got2[0].offs[0]; off < sought {
		t.Errorf("first offset %d after seeking to %d: offsets must go on above a restored position", off, sought)
	}
	if pos, ok := positionOf(second, part); !ok || pos != sought {
		t.Errorf("position %d (known %v) before any acknowledgement, want the sought %d", pos, ok, sought)
	}
	ackAll(got2)
	waitPosition(t, second, part, lastPlusOne(got2)[part])
	expectNoMore(t, second, SourceFeatures{})
}

// pushedCancelUnblocksRead is TestUnrewindableSource's subtest
// CancelUnblocksRead.
func pushedCancelUnblocksRead(t *testing.T, h UnrewindableHarness, timeout time.Duration) {
	in, send := h.New(t, 2)
	src := connect(t, in, 0, 1, nil)
	send(t, Data(1, 2)[0])
	ackAll(readRows(t, src, in, h.Features, 2, 2, timeout))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := src.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Read returned %v after it was cancelled", d)
	}
	if _, err := src.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with a cancelled ctx: %v", err)
	}
}
