package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/logtest"
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// replaySpec is a keyed window (its config's window block) over an
// event-time memory source with an out-of-orderness of 100 ms and the
// time options in policy, checkpointed by hand, state in Badger at dir.
func replaySpec(store, dir, window, policy string) string {
	return fmt.Sprintf(`{"id":"rp","operators":[{"id":"in","kind":"source"},{"id":"w","kind":"window","stateful":true,"key_field":"k",
	  "config":{"window":%s,"aggregates":[{"function":"count","as":"n"}]}},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"w","partitioned":true},{"id":"b","from":"w","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory","time":{"mode":"event_time","timestamp_field":"ts",
	    "watermark":{"strategy":"bounded_out_of_orderness","out_of_orderness_ms":100}%s}}],
	  "sinks":[{"operator_id":"out","output_type":"memory"}],
	  "state":{"backend":"badger","path":%q},
	  "checkpoint":{"interval_ms":3600000,"retention":3,"object_store_uri":"file://%s"}}`, window, policy, dir, store)
}

// rows is a batch of (key, event time) rows.
func rows(kts ...any) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, eventSchema)
	defer b.Release()
	for i := 0; i < len(kts); i += 2 {
		b.Field(0).(*array.StringBuilder).Append(kts[i].(string))
		b.Field(1).(*array.Int64Builder).Append(int64(kts[i+1].(int)))
	}
	return b.NewRecordBatch()
}

// results returns the sink's rows as "key start n update", sorted.
func results(t *testing.T, sink *mem.Sink) []string {
	t.Helper()
	var out []string
	for _, rec := range sink.Records() {
		ks := rec.Column(0).(*array.String)
		starts := rec.Column(rec.Schema().FieldIndices("window_start")[0]).(*array.Timestamp)
		ns := rec.Column(rec.Schema().FieldIndices("n")[0]).(*array.Int64)
		upd := rec.Column(rec.Schema().FieldIndices(windowop.ColumnUpdate)[0]).(*array.Boolean)
		for i := 0; i < ks.Len(); i++ {
			out = append(out, fmt.Sprintf("%s %d %d %v", ks.Value(i), starts.Value(i), ns.Value(i), upd.Value(i)))
		}
	}
	slices.Sort(out)
	return out
}

// A restart re-reads, from the restored positions, rows whose windows had
// fired and been acknowledged before the kill (a batch straddling a fired
// and an open window is held until both fired). The restored floor puts
// them behind the operator's watermark, but the input's own watermark has
// not passed them: they are replays the restored state holds, counted in
// replayed_skipped, not late_dropped, and logged once, at INFO, not
// warned about. A row that was late in the uninterrupted run (the
// watermark of the rows before it had passed its window) is still late
// after the restart: late_dropped and the warning count the
// uninterrupted run's, and the results are its results.
func TestRestartTellsReplayedRowsFromLateOnes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, window, policy string
		// before and after the checkpoint of run 1, which is killed once
		// every row is in; then more rows, for run 2.
		before, after, more []arrow.RecordBatch
		// what the sink must have before the checkpoint, and the floor
		// before the kill
		fired        int
		floor        int64
		wantReplayed int64
		countsOnly   bool
	}{
		{
			// [0,100) fires at watermark 110 (row 210) with 10, 20 and
			// 60; the batch [60, 120] waits for [100,200). 40 comes
			// after the firing: late. The checkpoint comes before the
			// firing and records no watermark, the floor acknowledged
			// after it is kept: run 2 re-reads 10, 20 and 60 behind it.
			name:   "tumbling",
			window: `{"type":"tumbling","size_ms":100}`,
			before: []arrow.RecordBatch{rows("a", 10, "a", 20)},
			after:  []arrow.RecordBatch{rows("a", 60, "a", 120), rows("a", 210), rows("a", 40)},
			more:   []arrow.RecordBatch{rows("a", 400)},
			floor:  110,
			// 10, 20, 60
			wantReplayed: 3,
		},
		{
			// As above, the checkpoint after the firing, and the fired
			// window kept for updates (no floor is carried then: see
			// carriedMarks): 40 updates it. Run 2 re-reads 60 behind
			// the restored floor: a replay, not a late update.
			//
			// Only the counts are compared: the kept window's state is
			// staged behind the epoch of the batch [60, 120], which
			// [100,200) holds, so the checkpoint does not have it, and
			// after the restore 40 starts the window again alone.
			name:       "tumbling, late rows update",
			countsOnly: true,
			window:     `{"type":"tumbling","size_ms":100}`,
			policy:     `,"late_event_policy":"update","allowed_lateness_ms":1000`,
			before:     []arrow.RecordBatch{rows("a", 10, "a", 20), rows("a", 60, "a", 120), rows("a", 210)},
			fired:      1,
			after:      []arrow.RecordBatch{rows("a", 40)},
			more:       []arrow.RecordBatch{rows("a", 400)},
			floor:      110,
			// 60
			wantReplayed: 1,
		},
		{
			// a's session [10,160) fires at watermark 200 (c's row)
			// with 10, 20 and 60; the batch [a 60, b 200] waits for b's
			// session, so the checkpoint's positions are before it
			// and its watermark before it (-80). a's 30 comes after the
			// firing: late. Run 2 re-reads a's 60 at watermark 100,
			// behind a's floor (60) and joining no open session.
			name:   "session",
			window: `{"type":"session","gap_ms":100}`,
			before: []arrow.RecordBatch{rows("a", 10, "a", 20), rows("a", 60, "b", 200), rows("c", 300)},
			fired:  1,
			after:  []arrow.RecordBatch{rows("a", 30)},
			more:   []arrow.RecordBatch{rows("d", 600)},
			floor:  200,
			// a's 60
			wantReplayed: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			all := slices.Concat(c.before, c.after, c.more)
			total := 0
			for _, b := range all {
				total += int(b.NumRows())
			}
			// The uninterrupted run.
			ref := startReplayRun(t, replaySpec(t.TempDir(), t.TempDir(), c.window, c.policy), mem.NewSource(eventSchema, 1), nil)
			for _, b := range all {
				ref.src.Append(0, b)
			}
			polltest.Eventually(t, "every row in the uninterrupted run", func() bool { return windowRowsIn(ref.rt) == int64(total) })
			lateCounts := func(r *floorRun) [3]int64 {
				return [3]int64{windowCounter(r.rt, windowop.MetricLateDropped), windowCounter(r.rt, windowop.MetricLateRouted), windowCounter(r.rt, windowop.MetricLateUpdated)}
			}
			wantLate := lateCounts(ref)
			ref.kill()
			want := results(t, ref.sink)
			if wantLate[0]+wantLate[1]+wantLate[2] != 1 {
				t.Fatalf("the uninterrupted run's late rows (dropped, routed, updated): %v, want one", wantLate)
			}

			store, dir := t.TempDir(), t.TempDir()
			spec := replaySpec(store, dir, c.window, c.policy)
			src := mem.NewSource(eventSchema, 1)
			r := startReplayRun(t, spec, src, nil)
			in := 0
			for _, b := range c.before {
				src.Append(0, b)
				in += int(b.NumRows())
			}
			polltest.Eventually(t, "the rows before the checkpoint", func() bool { return windowRowsIn(r.rt) == int64(in) })
			polltest.Eventually(t, "the firings before the checkpoint", func() bool { return r.sink.NumRows() == int64(c.fired) })
			if _, err := r.rt.Checkpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, b := range c.after {
				src.Append(0, b)
				in += int(b.NumRows())
			}
			polltest.Eventually(t, "the rows after the checkpoint", func() bool { return windowRowsIn(r.rt) == int64(in) })
			polltest.Eventually(t, "the firing acknowledged", func() bool {
				v, _, ok, _ := r.rt.store.Get(windowop.FloorKey("rp", "w", 0), 0)
				wm, okV := windowop.DecodeFloor(v)
				return ok && okV && wm == c.floor
			})
			r.kill()
			got := results(t, r.sink)

			// Run 2: the same source (it seeks to the restored
			// positions), then the rest.
			rec := logtest.New()
			r = startReplayRun(t, spec, src, slog.New(rec))
			if r.rt.CheckpointStatus().Restored == "" {
				t.Fatal("run 2 restored nothing")
			}
			for _, b := range c.more {
				src.Append(0, b)
			}
			// The last batch fires the windows still open; every row
			// before it has been counted then.
			all2 := func() []string {
				u := slices.Concat(got, results(t, r.sink))
				slices.Sort(u)
				return slices.Compact(u) // windows acknowledged after the checkpoint may come again
			}
			polltest.Eventually(t, "every window of the uninterrupted run", func() bool { return len(all2()) >= len(want) })
			late, replayed := lateCounts(r), windowCounter(r.rt, "replayed_skipped")
			r.kill()
			got = all2()
			if late != wantLate || replayed != c.wantReplayed {
				t.Errorf("run 2: late rows (dropped, routed, updated) %v, replayed_skipped %d; want %v (the uninterrupted run's) and %d", late, replayed, wantLate, c.wantReplayed)
			}
			// The window warns about the late row, and only about it.
			warned := 0
			for _, w := range rec.Warnings() {
				if w.Attrs["operator"] == "w" {
					n, err := strconv.Atoi(w.Attrs["dropped"])
					if err != nil || !strings.HasPrefix(w.Msg, "window dropped late rows") {
						t.Errorf("run 2's window warned: %s %v", w.Msg, w.Attrs)
					}
					warned += n
				}
			}
			if int64(warned) != wantLate[0] {
				t.Errorf("run 2's window warned about %d late rows, want %d", warned, wantLate[0])
			}
			var infos []string
			for _, x := range rec.Records() {
				if strings.Contains(x.Msg, "replayed") && x.Attrs["operator"] == "w" {
					infos = append(infos, x.Level.String()+" "+x.Msg)
				}
			}
			if len(infos) != 1 || !strings.HasPrefix(infos[0], "INFO ") {
				t.Errorf("run 2 logged about replayed rows: %q; want one INFO line", infos)
			}
			if !c.countsOnly && !slices.Equal(got, want) {
				t.Errorf("results %v, the uninterrupted run's %v", got, want)
			}
		})
	}
}

// startReplayRun runs spec on src until kill, logging to log (nil:
// discard).
func startReplayRun(t *testing.T, spec string, src *mem.Source, log *slog.Logger) *floorRun {
	t.Helper()
	r := &floorRun{src: src, sink: mem.NewSink(), done: make(chan error, 1)}
	r.rt = New(mustBuild(t, spec, map[string]any{"in": r.src, "out": r.sink}), Options{Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.rt.Run(ctx) }()
	polltest.Eventually(t, "running", func() bool { return r.rt.State() == Running || r.rt.State() == Failed })
	if r.rt.State() == Failed {
		t.Fatal(<-r.done)
	}
	return r
}
