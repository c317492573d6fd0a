package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// windowCounts returns "start:count" for every row the sink received
// (evSpec's and floorSpec's output: window_start, then n in column 3).
func windowCounts(t *testing.T, sink *mem.Sink) []string {
	t.Helper()
	var out []string
	for _, rec := range sink.Records() {
		starts := rec.Column(1).(*array.Timestamp)
		ns := rec.Column(3).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, fmt.Sprintf("%d:%d", starts.Value(i), ns.Value(i)))
		}
	}
	return out
}

// Drain ends an unbounded input as if it ended now: every open
// window fires and is written, the positions move past every row read, and
// Run returns nil. Drain is idempotent; before Run it is ErrNotRunning.
func TestDrainFiresOpenWindows(t *testing.T) {
	t.Parallel()
	r := startEv(t, "", nil)
	if err := New(mustBuild(t, evSpec(""), map[string]any{"in": mem.NewSource(eventSchema, 1), "out": mem.NewSink()}), Options{}).Drain(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Drain before Run: %v", err)
	}
	r.add(timed(100, 200))
	r.add(timed(1100))
	polltest.Eventually(t, "[0,1000) to fire", func() bool { return r.sink.NumRows() == 1 })
	for range 2 {
		if err := r.rt.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-r.done; err != nil {
		t.Fatalf("Run after Drain: %v", err)
	}
	if got := windowCounts(t, r.sink); !slices.Equal(got, []string{"0:2", "1000:1"}) {
		t.Fatalf("windows %v, want [0:2 1000:1]", got)
	}
	if r.rt.State() != Stopped {
		t.Fatalf("state %v after a drain", r.rt.State())
	}
	if ps := r.rt.Positions()["in-0"]; len(ps) != 1 || ps[0].Offset != 3 {
		t.Fatalf("positions after the drain: %v, want offset 3 (every row read)", ps)
	}
	if err := r.rt.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after a drain: %v", err)
	}
}

// Stop, unlike Drain, leaves the open windows unfired.
func TestStopDoesNotFireOpenWindows(t *testing.T) {
	t.Parallel()
	r := startEv(t, "", nil)
	r.add(timed(100))
	r.add(timed(1100))
	polltest.Eventually(t, "[0,1000) to fire", func() bool { return r.sink.NumRows() == 1 })
	if err := r.rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
	if got := windowCounts(t, r.sink); !slices.Equal(got, []string{"0:1"}) {
		t.Fatalf("windows %v after Stop, want [0:1]", got)
	}
}

// A drain of a checkpointed job takes a final
// checkpoint after its windows fired. A restart from it reads on after
// the last row read before the drain, fires none of the drained windows
// again (a row for one of them is late), and its own windows fire as
// usual: the drain's +∞ is neither the restored watermark nor a window
// floor.
func TestRestartAfterDrainFiresNothingTwice(t *testing.T) {
	t.Parallel()
	t.Run("tumbling", func(t *testing.T) { restartAfterDrain(t, "", []string{"0:2", "100:3"}, []string{"200:2", "300:1"}) })
	// Sessions with a gap of 50: [10,70) fires at 160; the drain fires
	// [150,220); after the restart 180 would have joined it and is late.
	t.Run("session", func(t *testing.T) {
		restartAfterDrain(t, `"type":"session","gap_ms":50`, []string{"10:2", "150:3"}, []string{"250:2", "370:1"})
	})
}

// restartAfterDrain runs floorSpec, with window config window when not
// empty, through a drain and a restart, and checks what each run wrote.
func restartAfterDrain(t *testing.T, window string, run1, run2 []string) {
	store, dir := t.TempDir(), t.TempDir()
	spec := floorSpec(store, dir, "")
	if window != "" {
		spec = strings.Replace(spec, `"type":"tumbling","size_ms":100`, window, 1)
	}
	add := func(r *floorRun, ts ...int64) {
		b := timed(ts...)
		if err := r.src.Append(0, b); err != nil {
			t.Fatal(err)
		}
	}
	r := startFloorRun(t, spec, nil)
	add(r, 10, 20)
	polltest.Eventually(t, "2 rows in the window", func() bool { return windowRowsIn(r.rt) == 2 })
	if _, err := r.rt.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	add(r, 150, 160)
	polltest.Eventually(t, "[0,100) at the sink", func() bool { return r.sink.NumRows() == 1 })
	add(r, 170)
	polltest.Eventually(t, "5 rows in the window", func() bool { return windowRowsIn(r.rt) == 5 })
	if err := r.rt.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
	if got := windowCounts(t, r.sink); !slices.Equal(got, run1) {
		t.Fatalf("run 1 wrote %v, want %v", got, run1)
	}
	if st := r.rt.CheckpointStatus(); st.Completed != 2 || !st.Healthy {
		t.Fatalf("checkpoints after the drain: %+v, want 2 completed (the final one included)", st)
	}
	final := r.rt.CheckpointStatus().LastID

	// The same Source: a memory Source refuses a restore to positions it
	// never delivered (a new process's), so the restart is in-process.
	r = startFloorRunOn(t, spec, r.src)
	if got := r.rt.CheckpointStatus().Restored; got != "checkpoint "+final {
		t.Fatalf("restored %q, want the drain's checkpoint %s", got, final)
	}
	add(r, 180)      // in the window the drain fired last: late
	add(r, 250, 260) // a new window
	add(r, 370)      // fires it
	polltest.Eventually(t, "the new window at the sink", func() bool { return r.sink.NumRows() == 1 })
	if err := r.rt.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
	if got := windowCounts(t, r.sink); !slices.Equal(got, run2) {
		t.Fatalf("run 2 wrote %v, want %v: nothing of run 1 again, no row lost", got, run2)
	}
	if got := windowCounter(r.rt, "late_dropped"); got != 1 {
		t.Fatalf("late_dropped %d in run 2, want 1 (the row of a drained window)", got)
	}
}
