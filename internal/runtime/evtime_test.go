package runtime

// Event time beyond the seeds: the warning about
// dropped rows, all_idle advance and per_row advance, end to end on a
// fake clock.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/logtest"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// timedNull is a batch of key "a" whose event times are null.
func timedNull(n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, eventSchema)
	defer b.Release()
	for range n {
		b.Field(0).(*array.StringBuilder).Append("a")
		b.Field(1).(*array.Int64Builder).AppendNull()
	}
	return b.NewRecordBatch()
}

// evSpec is a keyed tumbling window of 1 s over an event-time memory
// source whose watermark block is {"out_of_orderness_ms":0 + wm}.
func evSpec(wm string) string {
	return `{"id":"ev","operators":[{"id":"in","kind":"source"},{"id":"w","kind":"window","stateful":true,"key_field":"k",
	  "config":{"window":{"type":"tumbling","size_ms":1000},"aggregates":[{"function":"count","as":"n"}]}},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"w","partitioned":true},{"id":"b","from":"w","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory","time":{"mode":"event_time","timestamp_field":"ts",
	    "watermark":{"strategy":"bounded_out_of_orderness","out_of_orderness_ms":0` + wm + `}}}],
	  "sinks":[{"operator_id":"out","output_type":"memory"}]}`
}

// evRun is one run of evSpec on a fake clock.
type evRun struct {
	t     *testing.T
	rt    *Runtime
	src   *mem.Source
	sink  *mem.Sink
	clock *fakeClock
	done  chan error
	rows  int64 // rows appended
}

func startEv(t *testing.T, wm string, log *slog.Logger) *evRun {
	t.Helper()
	r := &evRun{t: t, src: mem.NewSource(eventSchema, 1), sink: mem.NewSink(), clock: &fakeClock{now: time.UnixMilli(1_000_000)}, done: make(chan error, 1)}
	r.rt = New(mustBuild(t, evSpec(wm), map[string]any{"in": r.src, "out": r.sink}), Options{Clock: r.clock, Logger: log})
	go func() { r.done <- r.rt.Run(context.Background()) }()
	polltest.Eventually(t, "running", func() bool { return r.rt.State() == Running })
	return r
}

// add appends a batch and waits until the window operator has taken it
// in: its Process has begun, and every earlier batch's has returned.
func (r *evRun) add(b arrow.RecordBatch) {
	r.t.Helper()
	r.rows += b.NumRows()
	if err := r.src.Append(0, b); err != nil {
		r.t.Fatal(err)
	}
	polltest.Eventually(r.t, fmt.Sprintf("%d rows in the window", r.rows), func() bool { return windowRowsIn(r.rt) == r.rows })
}

func (r *evRun) end() {
	r.t.Helper()
	r.src.Close()
	if err := <-r.done; err != nil {
		r.t.Fatal(err)
	}
}

// Rows dropped as late, or for a null event time, are counted
// (late_dropped, null_timestamp_dropped) and warned about: at once the
// first time, then at most once per 10 s of the runtime's clock, with the
// count since the previous warning; what is left when the operator closes
// is reported then. The warning names the source, the window and the fix.
func TestDroppedRowsWarning(t *testing.T) {
	t.Parallel()
	logs := logtest.New()
	r := startEv(t, "", slog.New(logs))
	// sync makes sure the window has finished the batches before: an
	// on-time row of an open window, which drops nothing, taken in.
	next := int64(2100)
	sync := func() { next += 10; r.add(timed(next)) }

	r.add(timed(2100, 100)) // 100 is late at once: the watermark moved first
	sync()
	ws := logs.Warnings()
	if len(ws) != 1 {
		t.Fatalf("warnings after the first drop: %+v", ws)
	}
	w := ws[0]
	if w.Attrs["operator"] != "w" || w.Attrs["subtask"] != "0" || w.Attrs["source"] != "in" || w.Attrs["dropped"] != "1" || w.Attrs["job"] != "ev" {
		t.Errorf("warning attributes: %v", w.Attrs)
	}
	for _, fix := range []string{"out_of_orderness_ms (0)", "advance to per_row", "late_event_policy route"} {
		if !strings.Contains(w.Attrs["fix"], fix) {
			t.Errorf("the fix does not say %q: %s", fix, w.Attrs["fix"])
		}
	}
	r.add(timed(50))
	sync()
	r.clock.Advance(9999 * time.Millisecond)
	r.add(timed(60))
	sync()
	r.add(timedNull(2))
	sync()
	if n := len(logs.Warnings()); n != 1 {
		t.Fatalf("%d warnings within 10 s of the first, want 1", n)
	}
	r.clock.Advance(time.Millisecond)
	r.add(timed(70))
	sync()
	ws = logs.Warnings()
	if len(ws) != 3 || ws[1].Attrs["dropped"] != "3" || ws[2].Attrs["dropped"] != "2" || !strings.Contains(ws[2].Msg, "without an event time") {
		t.Fatalf("warnings 10 s after the first: %+v", ws[1:])
	}
	r.add(timed(80))
	sync()
	if n := len(logs.Warnings()); n != 3 {
		t.Fatalf("%d warnings, want 3", n)
	}
	r.end()
	ws = logs.Warnings()
	if len(ws) != 4 || ws[3].Attrs["dropped"] != "1" {
		t.Fatalf("at the close, the drop not yet reported: %+v", ws[3:])
	}
	if got := windowCounter(r.rt, "late_dropped"); got != 5 {
		t.Errorf("late_dropped %d, want 5", got)
	}
	if got := windowCounter(r.rt, "null_timestamp_dropped"); got != 2 {
		t.Errorf("null_timestamp_dropped %d, want 2", got)
	}
}

// With all_idle advance, a source whose every partition is idle
// moves its watermark with the clock (now - all_idle_delay_ms -
// out_of_orderness_ms), so the last window of a quiet input fires without
// new rows; with hold (the default) it waits for the end of the input.
func TestAllIdleAdvanceFiresWindowsOfAQuietSource(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		wm      string
		advance bool
	}{
		{"hold", `,"idle_timeout_ms":1000`, false},
		{"hold said explicitly", `,"idle_timeout_ms":1000,"all_idle":"hold"`, false},
		{"advance", `,"idle_timeout_ms":1000,"all_idle":"advance","all_idle_delay_ms":5000`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := startEv(t, c.wm, nil)
			// settle returns once the head has handled every tick sent so
			// far: each Advance waits until the tick before it was taken,
			// and the head handles one tick before it takes the next.
			settle := func() { r.clock.Advance(0); r.clock.Advance(0) }
			wmOf := func() int64 {
				for _, m := range r.rt.Metrics() {
					if m.Task == "w-0" {
						return m.Watermark
					}
				}
				return -1
			}
			// Wall-clock-ish event times: the clock is at 1,000,000.
			r.add(timed(1_000_100, 1_000_200))
			r.clock.Advance(1000 * time.Millisecond) // idle now; 1,001,000 - 5,000 is behind
			settle()
			if wm := wmOf(); wm != 1_000_200 {
				t.Fatalf("watermark %d, want 1000200 (the data's)", wm)
			}
			r.clock.Advance(4999 * time.Millisecond) // 1,005,999 - 5,000 = 1,000,999
			settle()
			if c.advance {
				polltest.Eventually(t, "the watermark to follow the clock", func() bool { return wmOf() == 1_000_999 })
			} else if wm := wmOf(); wm != 1_000_200 {
				t.Fatalf("hold: the watermark moved to %d", wm)
			}
			if r.sink.NumRows() != 0 {
				t.Fatal("the window fired before the watermark reached its end")
			}
			r.clock.Advance(time.Millisecond) // 1,001,000: the window's end
			settle()
			if c.advance {
				polltest.Eventually(t, "the window to fire", func() bool { return r.sink.NumRows() == 1 })
			} else if r.sink.NumRows() != 0 || wmOf() != 1_000_200 {
				t.Fatalf("hold: fired (%d rows) or moved (%d) without new rows", r.sink.NumRows(), wmOf())
			}
			// A row older than the clock's watermark is late.
			r.add(timed(1_000_500))
			if c.advance {
				polltest.Eventually(t, "the late row to be dropped", func() bool { return windowCounter(r.rt, "late_dropped") == 1 })
			}
			r.end()
			if r.sink.NumRows() != 1 {
				t.Fatalf("%d windows at the end, want 1", r.sink.NumRows())
			}
			if n := r.sink.Records()[len(r.sink.Records())-1].Column(3).(*array.Int64).Value(0); c.advance && n != 2 || !c.advance && n != 3 {
				t.Fatalf("count %d", n)
			}
		})
	}
}

// The same batches, one of them straddling a window
// boundary; under advance batch its in-order rows before the boundary are
// late (the seeds' rule), under per_row they are not. A row out of order
// by more than out_of_orderness is late in both.
func TestPerRowAdvanceKeepsInOrderRows(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		wm   string
		late int64
		want []int64 // counts of windows [0,1000), [1000,2000), [2000,3000)
	}{
		{"batch", "", 3, []int64{1, 2, 1}},
		{"per_row", `,"advance":"per_row"`, 1, []int64{3, 2, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := startEv(t, c.wm, nil)
			r.add(timed(100))
			r.add(timed(800, 900, 1100, 1200)) // in order, across 1000
			r.add(timed(2500, 1500))           // 1500 out of order: late in both
			polltest.Eventually(t, "[0,1000) and [1000, 2000) to fire", func() bool { return r.sink.NumRows() == int64(len(c.want))-1 })
			r.end()
			var got []int64
			for _, rec := range r.sink.Records() {
				for i := 0; i < int(rec.NumRows()); i++ {
					got = append(got, rec.Column(3).(*array.Int64).Value(i))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) || windowCounter(r.rt, "late_dropped") != c.late {
				t.Fatalf("window counts %v late %d, want %v late %d", got, windowCounter(r.rt, "late_dropped"), c.want, c.late)
			}
		})
	}
}

// A partition that never had a row holds the watermark back, and
// without an idle timeout no window ever fires. The source says so, once,
// after 10 s of the clock, naming the partition and the fix; with an idle
// timeout it does not.
func TestStarvedPartitionIsWarnedOnce(t *testing.T) {
	t.Parallel()
	for _, idle := range []bool{false, true} {
		logs := logtest.New()
		clock := &fakeClock{now: time.UnixMilli(1_000_000)}
		src, sink := mem.NewSource(eventSchema, 2), mem.NewSink()
		wm := ""
		if idle {
			wm = `,"idle_timeout_ms":60000`
		}
		rt := New(mustBuild(t, evSpec(wm), map[string]any{"in": src, "out": sink}), Options{Clock: clock, Logger: slog.New(logs)})
		done := make(chan error, 1)
		go func() { done <- rt.Run(context.Background()) }()
		polltest.Eventually(t, "running", func() bool { return rt.State() == Running })
		rows := int64(0)
		add := func(ts ...int64) {
			rows += int64(len(ts))
			if err := src.Append(0, timed(ts...)); err != nil {
				t.Fatal(err)
			}
			polltest.Eventually(t, "the window to take the rows", func() bool { return windowRowsIn(rt) == rows })
		}
		starved := func() int {
			n := 0
			for _, w := range logs.Warnings() {
				if strings.Contains(w.Msg, "have had no row yet") {
					n++
					if w.Attrs["partitions"] != "[1]" || !strings.Contains(w.Msg, "IdleTimeout") {
						t.Errorf("warning %q %v: want partition 1 and the fix named", w.Msg, w.Attrs)
					}
				}
			}
			return n
		}
		add(100, 1500)
		clock.Advance(9 * time.Second)
		add(2500)
		if n := starved(); n != 0 {
			t.Fatalf("idle=%v: warned after 9 s: %d", idle, n)
		}
		clock.Advance(time.Second)
		add(3500)
		add(4500)
		want := 1
		if idle {
			want = 0
		}
		if n := starved(); n != want {
			t.Fatalf("idle=%v: %d warnings of the partition without rows, want %d", idle, n, want)
		}
		if sink.NumRows() != 0 {
			t.Fatalf("idle=%v: a window fired while partition 1 holds the watermark back", idle)
		}
		src.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
