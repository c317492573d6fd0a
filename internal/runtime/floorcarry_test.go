package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// floorSpec is a keyed tumbling window of 100 ms over an event-time
// memory source, checkpointed by hand, state in Badger at dir.
func floorSpec(store, dir, policy string) string {
	return fmt.Sprintf(`{"id":"fl","operators":[{"id":"in","kind":"source"},{"id":"w","kind":"window","stateful":true,"key_field":"k",
	  "config":{"window":{"type":"tumbling","size_ms":100},"aggregates":[{"function":"count","as":"n"}]}},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"w","partitioned":true},{"id":"b","from":"w","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory","time":{"mode":"event_time","timestamp_field":"ts",
	    "watermark":{"strategy":"bounded_out_of_orderness","out_of_orderness_ms":0}%s}}],
	  "sinks":[{"operator_id":"out","output_type":"memory"}],
	  "state":{"backend":"badger","path":%q},
	  "checkpoint":{"interval_ms":3600000,"retention":3,"object_store_uri":"file://%s"}}`, policy, dir, store)
}

// floorRun is one run of floorSpec; it ends by a cancel (no end of input,
// so nothing fires at the end: a crash as far as the windows can tell).
type floorRun struct {
	rt     *Runtime
	src    *mem.Source
	sink   *mem.Sink
	cancel context.CancelFunc
	done   chan error
}

func startFloorRun(t *testing.T, spec string, hist []arrow.RecordBatch) *floorRun {
	t.Helper()
	src := mem.NewSource(eventSchema, 1)
	for _, b := range hist {
		if err := src.Append(0, b); err != nil {
			t.Fatal(err)
		}
	}
	return startFloorRunOn(t, spec, src)
}

// startFloorRunOn is startFloorRun reading src: a restart in the same
// process, whose memory Source seeks to restored positions it delivered.
func startFloorRunOn(t *testing.T, spec string, src *mem.Source) *floorRun {
	t.Helper()
	r := &floorRun{src: src, sink: mem.NewSink(), done: make(chan error, 1)}
	r.rt = New(mustBuild(t, spec, map[string]any{"in": r.src, "out": r.sink}), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.rt.Run(ctx) }()
	polltest.Eventually(t, "running", func() bool { return r.rt.State() == Running || r.rt.State() == Failed })
	if r.rt.State() == Failed {
		t.Fatal(<-r.done)
	}
	return r
}

func (r *floorRun) kill() { r.cancel(); <-r.done }

// windowStarts returns the window start of every row the sink received.
func windowStarts(t *testing.T, sink *mem.Sink) []int64 {
	t.Helper()
	var out []int64
	for _, rec := range sink.Records() {
		i := rec.Schema().FieldIndices("window_start")
		if len(i) != 1 {
			t.Fatalf("no window_start column in %v", rec.Schema())
		}
		col := rec.Column(i[0]).(*array.Timestamp)
		for j := 0; j < col.Len(); j++ {
			out = append(out, int64(col.Value(j)))
		}
	}
	return out
}

// The window floor a run acknowledged after the checkpoint it restarts
// from is kept (windowop.floor, carriedMarks): the window that fired and
// was acknowledged after the checkpoint is not written again by the
// restarted run, and the window that was open at the kill fires whole.
// Without the store's note of the checkpoint it ran on from (the control
// case, also what a restore on another node gets), the floor rolls back
// with the checkpoint and the window fires again: the restart's
// duplicates are what a checkpoint interval acknowledged.
func TestRestoreKeepsTheFloorAcknowledgedAfterTheCheckpoint(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		dropNote    bool
		interrupted bool
		policy      string
		wantAgain   bool
		// earlier cuts a checkpoint first, so that the one restored is
		// not the run's first.
		earlier bool
	}{
		{name: "kept"},
		{name: "kept from the run's second checkpoint", earlier: true},
		{name: "no note of the checkpoint", dropNote: true, wantAgain: true},
		{name: "a restore killed after it emptied the store", interrupted: true},
		{name: "late rows dropped, said explicitly", policy: `,"late_event_policy":"drop"`},
		{name: "late rows update fired windows", policy: `,"late_event_policy":"update","allowed_lateness_ms":1000`, wantAgain: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, dir := t.TempDir(), t.TempDir()
			spec := floorSpec(store, dir, c.policy)
			var hist []arrow.RecordBatch
			r := startFloorRun(t, spec, nil)
			add := func(r *floorRun, b arrow.RecordBatch) {
				hist = append(hist, b)
				if err := r.src.Append(0, b); err != nil {
					t.Fatal(err)
				}
			}
			if c.earlier {
				if _, err := r.rt.Checkpoint(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			add(r, timed(10, 20, 30))
			polltest.Eventually(t, "3 rows in the window", func() bool { return windowRowsIn(r.rt) == 3 })
			if _, err := r.rt.Checkpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
			// After the checkpoint: window [0,100) fires and is
			// acknowledged; [100,200) stays open.
			add(r, timed(110, 120))
			polltest.Eventually(t, "window [0,100) at the sink", func() bool { return r.sink.NumRows() == 1 })
			polltest.Eventually(t, "the firing acknowledged", func() bool {
				v, _, ok, _ := r.rt.store.Get(statestore.Key{Job: "fl", Operator: "w", Namespace: "__arkflow_window_floor", KeyGroup: 0, User: []byte("wm")}, 0)
				return ok && len(v) == 8
			})
			r.kill()
			if got := windowStarts(t, r.sink); len(got) != 1 || got[0] != 0 {
				t.Fatalf("run 1 wrote windows %v, want [0]", got)
			}
			if c.dropNote {
				st, err := statestore.Open(statestore.Options{Dir: dir})
				if err != nil {
					t.Fatal(err)
				}
				if err := st.Apply([]statestore.Mutation{{Key: lineageKey("fl"), Delete: true}}); err != nil {
					t.Fatal(err)
				}
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
			}

			if c.interrupted {
				// What a restore does up to emptying the store, then
				// a kill: the floors are only in the carry file.
				rt := New(mustBuild(t, spec, map[string]any{"in": mem.NewSource(eventSchema, 1), "out": mem.NewSink()}), Options{})
				cat, err := rt.openCatalog(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				m, err := rt.selectRestore(context.Background(), cat)
				if err != nil || m == nil {
					t.Fatalf("selecting: %v, %v", m, err)
				}
				st, err := rt.openState()
				if err != nil {
					t.Fatal(err)
				}
				carry, err := rt.carriedMarks(st, m)
				if err != nil || carry == nil || len(carry.marks) != 1 {
					t.Fatalf("carried floors: %+v, %v", carry, err)
				}
				if err := rt.saveCarry(carry); err != nil {
					t.Fatal(err)
				}
				if err := rt.emptyState(st); err != nil {
					t.Fatal(err)
				}
				if _, _, ok, _ := st.Get(lineageKey("fl"), 0); ok {
					t.Fatal("the note survived emptying the store")
				}
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
			}
			r = startFloorRun(t, spec, hist)
			if r.rt.CheckpointStatus().Restored == "" {
				t.Fatal("the second run restored nothing")
			}
			add(r, timed(250))
			polltest.Eventually(t, "window [100,200) at the sink", func() bool {
				for _, s := range windowStarts(t, r.sink) {
					if s == 100 {
						return true
					}
				}
				return false
			})
			got := windowStarts(t, r.sink)
			var again, open int
			for _, s := range got {
				switch s {
				case 0:
					again++
				case 100:
					open++
				}
			}
			if open != 1 {
				t.Fatalf("run 2 wrote windows %v: window [100,200) %d times, want once", got, open)
			}
			if c.wantAgain != (again > 0) || (!c.wantAgain && again > 0) {
				t.Fatalf("run 2 wrote windows %v: window [0,100), acknowledged after the checkpoint, %d times (want again: %v)", got, again, c.wantAgain)
			}
			// The open window fires whole: both its rows were replayed.
			for _, rec := range r.sink.Records() {
				starts := rec.Column(rec.Schema().FieldIndices("window_start")[0]).(*array.Timestamp)
				ns := rec.Column(rec.Schema().FieldIndices("n")[0]).(*array.Int64)
				for j := 0; j < ns.Len(); j++ {
					if starts.Value(j) == 100 && ns.Value(j) != 2 {
						t.Fatalf("window [100,200) counted %d rows, want 2", ns.Value(j))
					}
				}
			}
			r.kill()
		})
	}
}

func keyed(k string, ts ...int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, eventSchema)
	defer b.Release()
	for _, t := range ts {
		b.Field(0).(*array.StringBuilder).Append(k)
		b.Field(1).(*array.Int64Builder).Append(t)
	}
	return b.NewRecordBatch()
}

// sessionCounts returns the count per key of the sessions a sink got.
func sessionCounts(t *testing.T, sink *mem.Sink) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	for _, rec := range sink.Records() {
		ks := rec.Column(0).(*array.String)
		ns := rec.Column(rec.Schema().FieldIndices("n")[0]).(*array.Int64)
		for i := 0; i < ks.Len(); i++ {
			out[ks.Value(i)] = append(out[ks.Value(i)], ns.Value(i))
		}
	}
	return out
}

// A session open at a checkpoint, whose first rows came before another
// key's session fired: after a restore from the checkpoint its rows are
// read again from the positions, and must meet the watermark they met the
// first time. The checkpoint recorded the watermark of the moment (after
// the other firing), which made them late: the session fired with 1 of
// its 3 rows. It records the watermark of the positions now (the cut
// caps every task's at what the source had before the first batch it
// would read again), and the restored run's sessions equal an
// uninterrupted run's.
func TestSessionRestoredFromCheckpointKeepsEarlyRows(t *testing.T) {
	t.Parallel()
	spec := func(store, dir string) string {
		return fmt.Sprintf(`{"id":"ss","operators":[{"id":"in","kind":"source"},{"id":"w","kind":"window","stateful":true,"key_field":"k",
	  "config":{"window":{"type":"session","gap_ms":500},"aggregates":[{"function":"count","as":"n"}]}},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"w","partitioned":true},{"id":"b","from":"w","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory","time":{"mode":"event_time","timestamp_field":"ts",
	    "watermark":{"strategy":"bounded_out_of_orderness","out_of_orderness_ms":1000}}}],
	  "sinks":[{"operator_id":"out","output_type":"memory"}],
	  "state":{"backend":"badger","path":%q},
	  "checkpoint":{"interval_ms":3600000,"retention":3,"object_store_uri":"file://%s"}}`, dir, store)
	}
	input := []arrow.RecordBatch{
		keyed("b", 0),
		keyed("a", 100, 400, 700),
		keyed("c", 2100), // watermark 1100: b's session [0,500) fires; a's [100,1200) stays open
		keyed("z", 19000),
	}
	// One uninterrupted run.
	ref := startFloorRun(t, spec(t.TempDir(), t.TempDir()), input)
	polltest.Eventually(t, "a's session in the uninterrupted run", func() bool { return len(sessionCounts(t, ref.sink)["a"]) > 0 })
	want := sessionCounts(t, ref.sink)
	ref.kill()
	if fmt.Sprint(want["a"]) != "[3]" {
		t.Fatalf("the uninterrupted run's sessions: %v", want)
	}

	store, dir := t.TempDir(), t.TempDir()
	r := startFloorRun(t, spec(store, dir), input[:3])
	polltest.Eventually(t, "b's session", func() bool { return r.sink.NumRows() == 1 })
	if _, err := r.rt.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.kill()
	r = startFloorRun(t, spec(store, dir), input)
	if r.rt.CheckpointStatus().Restored == "" {
		t.Fatal("the second run restored nothing")
	}
	polltest.Eventually(t, "a's session after the restore", func() bool { return len(sessionCounts(t, r.sink)["a"]) > 0 })
	got := sessionCounts(t, r.sink)
	r.kill()
	if fmt.Sprint(got["a"]) != fmt.Sprint(want["a"]) {
		t.Fatalf("after the restore a's session counted %v, an uninterrupted run %v", got["a"], want["a"])
	}
}

// Each key's session floor is removed once the last completed checkpoint
// recorded a watermark past its session's end (a restore from it or a
// later one finds the session's rows late by the watermark alone), so
// the floors do not grow with every key that ever had a session.
func TestSessionFloorsRemovedAfterACheckpointPassesThem(t *testing.T) {
	t.Parallel()
	store, dir := t.TempDir(), t.TempDir()
	spec := fmt.Sprintf(`{"id":"sg","operators":[{"id":"in","kind":"source"},{"id":"w","kind":"window","stateful":true,"key_field":"k",
	  "config":{"window":{"type":"session","gap_ms":100},"aggregates":[{"function":"count","as":"n"}]}},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"w","partitioned":true},{"id":"b","from":"w","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory","time":{"mode":"event_time","timestamp_field":"ts",
	    "watermark":{"strategy":"bounded_out_of_orderness","out_of_orderness_ms":0}}}],
	  "sinks":[{"operator_id":"out","output_type":"memory"}],
	  "state":{"backend":"badger","path":%q},
	  "checkpoint":{"interval_ms":3600000,"retention":3,"object_store_uri":"file://%s"}}`, dir, store)
	floors := func() int {
		n := 0
		for _, e := range dumpState(t, dir, "sg") {
			if strings.Contains(e, "/__arkflow_session_floor/") {
				n++
			}
		}
		return n
	}
	r := startFloorRun(t, spec, nil)
	// 50 keys, one session each, all fired by the last row (key y).
	var hist []arrow.RecordBatch
	for i := 0; i < 50; i++ {
		hist = append(hist, keyed(fmt.Sprintf("k%d", i), int64(i*10)))
		if err := r.src.Append(0, hist[i]); err != nil {
			t.Fatal(err)
		}
	}
	hist = append(hist, keyed("y", 1000))
	if err := r.src.Append(0, hist[50]); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "50 sessions fired", func() bool { return r.sink.NumRows() == 50 })
	polltest.Eventually(t, "their firing acknowledged", func() bool {
		v, _, ok, _ := r.rt.store.Get(windowop.FloorKey("sg", "w", 0), 0)
		wm, okV := windowop.DecodeFloor(v)
		return ok && okV && wm == 1000
	})
	r.kill()
	if n := floors(); n != 50 {
		t.Fatalf("%d session floors after 50 fired sessions and no checkpoint, want 50", n)
	}
	// Run 2 replays y's batch (held by its open session; the others are
	// in the window's state already) and reads on: y's session fires at
	// 2000, x's at 3000; a checkpoint then records the watermark before
	// the first batch still held (w's): 2000, past the end of every k
	// session and y's; the next firing (w's) removes their floors.
	r = startFloorRun(t, spec, hist)
	for _, b := range []arrow.RecordBatch{keyed("x", 2000), keyed("w", 3000)} {
		if err := r.src.Append(0, b); err != nil {
			t.Fatal(err)
		}
	}
	polltest.Eventually(t, "y's and x's sessions", func() bool { return r.sink.NumRows() == 2 })
	floorAt := func(want int64) func() bool {
		return func() bool {
			v, _, ok, _ := r.rt.store.Get(windowop.FloorKey("sg", "w", 0), 0)
			wm, okV := windowop.DecodeFloor(v)
			return ok && okV && wm == want
		}
	}
	polltest.Eventually(t, "x's firing acknowledged", floorAt(3000))
	if _, err := r.rt.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if wm, ok := r.rt.checkpointWatermark(""); !ok || wm != 2000 {
		t.Fatalf("the checkpoint recorded watermark %d (%v), want 2000 (before w's batch, still held)", wm, ok)
	}
	if err := r.src.Append(0, keyed("v", 4000)); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "w's session", func() bool { return r.sink.NumRows() == 3 })
	polltest.Eventually(t, "w's firing acknowledged", floorAt(4000))
	r.kill()
	if n := floors(); n != 2 {
		t.Fatalf("%d session floors after the checkpoint and the next firing, want 2 (x's and w's; the 50 of run 1 and y's removed)", n)
	}
}
