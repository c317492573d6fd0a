package runtime

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// fakeClock is a Clock the test moves by hand: Advance sets the time and
// delivers one tick to every ticker.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*fakeTicker
}

type fakeTicker struct{ c chan time.Time }

func (t *fakeTicker) C() <-chan time.Time { return t.c }
func (t *fakeTicker) Stop()               {}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTicker(time.Duration) Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTicker{c: make(chan time.Time, 1)}
	c.tickers = append(c.tickers, t)
	return t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now, ts := c.now, append([]*fakeTicker(nil), c.tickers...)
	c.mu.Unlock()
	for _, t := range ts {
		t.c <- now // blocks until the source head took the previous tick
	}
}

var eventSchema = arrow.NewSchema([]arrow.Field{
	{Name: "k", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func timed(ts ...int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, eventSchema)
	defer b.Release()
	for _, t := range ts {
		b.Field(0).(*array.StringBuilder).Append("a")
		b.Field(1).(*array.Int64Builder).Append(t)
	}
	return b.NewRecordBatch()
}

func windowCounter(rt *Runtime, name string) int64 {
	for _, m := range rt.Metrics() {
		if m.Operator == "w" {
			return m.Counters[name]
		}
	}
	return -1
}

func windowRowsIn(rt *Runtime) int64 {
	for _, m := range rt.Metrics() {
		if m.Operator == "w" {
			return m.RowsIn
		}
	}
	return -1
}

// Idle partitions end to end, with an injected clock and no sleeps: a partition
// that has not delivered data holds the watermark back; once it is silent
// for idle_timeout_ms it stops holding it back, and the window fires; when
// it delivers again it rejoins (the watermark does not move back, so its
// old row is late).
func TestIdlePartitionReleasesWatermark(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.UnixMilli(1_000_000)}
	src := mem.NewSource(eventSchema, 2)
	sink := mem.NewSink()
	spec := `{"id":"idle","operators":[{"id":"in","kind":"source"},{"id":"w","kind":"window","stateful":true,"key_field":"k",
	  "config":{"window":{"type":"tumbling","size_ms":1000},"aggregates":[{"function":"count","as":"n"}]}},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"w","partitioned":true},{"id":"b","from":"w","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory","time":{"mode":"event_time","timestamp_field":"ts",
	    "watermark":{"strategy":"bounded_out_of_orderness","out_of_orderness_ms":0,"idle_timeout_ms":1000}}}],
	  "sinks":[{"operator_id":"out","output_type":"memory"}]}`
	rt := New(mustBuild(t, spec, map[string]any{"in": src, "out": sink}), Options{Clock: clock})
	done := make(chan error, 1)
	go func() { done <- rt.Run(context.Background()) }()
	polltest.Eventually(t, "running", func() bool { return rt.State() == Running })

	if err := src.Append(0, timed(100, 200, 1500)); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the window to receive 3 rows", func() bool { return windowRowsIn(rt) == 3 })
	if sink.NumRows() != 0 {
		t.Fatal("a window fired while partition 1, which never delivered, holds the watermark back")
	}
	// Partition 0 keeps delivering; partition 1 stays silent. After 1000 ms
	// of silence partition 1 turns idle, the watermark becomes partition
	// 0's (1600) and window [0, 1000) fires.
	clock.Advance(600 * time.Millisecond)
	if err := src.Append(0, timed(1600)); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the window to receive 4 rows", func() bool { return windowRowsIn(rt) == 4 })
	clock.Advance(399 * time.Millisecond)
	if sink.NumRows() != 0 {
		t.Fatal("fired before partition 1 was silent for idle_timeout_ms")
	}
	clock.Advance(time.Millisecond)
	polltest.Eventually(t, "the window to fire", func() bool { return sink.NumRows() == 1 })
	if n := sink.Records()[0].Column(3).(*array.Int64).Value(0); n != 2 {
		t.Fatalf("window [0,1000) counted %d rows, want 2", n)
	}
	// Partition 1 rejoins with an old row: the watermark does not go back,
	// so the row is late and dropped.
	if err := src.Append(1, timed(50)); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the late row to be dropped", func() bool { return windowCounter(rt, "late_dropped") == 1 })
	src.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// End of input: window [1000, 2000) fires too.
	if sink.NumRows() != 2 {
		t.Fatalf("got %d window rows, want 2", sink.NumRows())
	}
}

// Processing time: a window fed by a processing-time source puts every row
// in the window of the clock's time when it arrives, and fires when the
// clock passes the window's end (the source advances the watermark on
// every batch and every tick).
func TestProcessingTimeWindows(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.UnixMilli(10_000)}
	src := mem.NewSource(eventSchema, 1)
	sink := mem.NewSink()
	spec := `{"id":"pt","operators":[{"id":"in","kind":"source"},{"id":"w","kind":"window","stateful":true,"key_field":"k",
	  "config":{"window":{"type":"tumbling","size_ms":1000},"aggregates":[{"function":"count","as":"n"}]}},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"w","partitioned":true},{"id":"b","from":"w","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory"}],"sinks":[{"operator_id":"out","output_type":"memory"}]}`
	rt := New(mustBuild(t, spec, map[string]any{"in": src, "out": sink}), Options{Clock: clock})
	done := make(chan error, 1)
	go func() { done <- rt.Run(context.Background()) }()
	polltest.Eventually(t, "running", func() bool { return rt.State() == Running })
	// The ts column is ignored: processing time.
	if err := src.Append(0, timed(1, 2)); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "2 rows in the window", func() bool { return windowRowsIn(rt) == 2 })
	clock.Advance(500 * time.Millisecond)
	if err := src.Append(0, timed(3)); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "3 rows in the window", func() bool { return windowRowsIn(rt) == 3 })
	if sink.NumRows() != 0 {
		t.Fatal("fired before the clock passed the window's end")
	}
	clock.Advance(500 * time.Millisecond) // 11,000: window [10,000, 11,000) ends
	polltest.Eventually(t, "the window to fire", func() bool { return sink.NumRows() == 1 })
	rec := sink.Records()[0]
	if start := rec.Column(1).(*array.Timestamp).Value(0); start != 10_000 {
		t.Fatalf("window starts at %d, want 10000", start)
	}
	if n := rec.Column(3).(*array.Int64).Value(0); n != 3 {
		t.Fatalf("count %d, want 3", n)
	}
	if err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
