package runtime

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// fleetFloorSpec is two independent keyed tumbling windows of 100 ms,
// a → wa → outa and b → wb → outb: two placement units, state in Badger
// under each process's data directory.
func fleetFloorSpec(store string) string {
	pipe := func(p string) (ops, edges, src, sink string) {
		ops = fmt.Sprintf(`{"id":"%[1]s","kind":"source"},{"id":"w%[1]s","kind":"window","stateful":true,"key_field":"k",
	  "config":{"window":{"type":"tumbling","size_ms":100},"aggregates":[{"function":"count","as":"n"}]}},{"id":"out%[1]s","kind":"sink"}`, p)
		edges = fmt.Sprintf(`{"id":"%[1]s1","from":"%[1]s","to":"w%[1]s","partitioned":true},{"id":"%[1]s2","from":"w%[1]s","to":"out%[1]s"}`, p)
		src = fmt.Sprintf(`{"operator_id":"%s","input_type":"memory","time":{"mode":"event_time","timestamp_field":"ts",
	    "watermark":{"strategy":"bounded_out_of_orderness","out_of_orderness_ms":0}}}`, p)
		sink = fmt.Sprintf(`{"operator_id":"out%s","output_type":"memory"}`, p)
		return
	}
	oa, ea, sa, ka := pipe("a")
	ob, eb, sb, kb := pipe("b")
	return fmt.Sprintf(`{"id":"fl","version":1,"operators":[%s,%s],"edges":[%s,%s],"sources":[%s,%s],"sinks":[%s,%s],
	  "state":{"backend":"badger"},
	  "checkpoint":{"interval_ms":3600000,"retention":3,"object_store_uri":"file://%s"}}`, oa, ob, ea, eb, sa, sb, ka, kb, store)
}

// fleetFloorRun is one process's run of (part of) fleetFloorSpec.
type fleetFloorRun struct {
	rt     *Runtime
	srcs   map[string]*mem.Source
	sinks  map[string]*mem.Sink
	cancel context.CancelFunc
	done   chan error
}

func startFleetFloor(t *testing.T, spec string, opts Options, hist map[string][]arrow.RecordBatch) *fleetFloorRun {
	t.Helper()
	r := &fleetFloorRun{srcs: map[string]*mem.Source{}, sinks: map[string]*mem.Sink{}, done: make(chan error, 1)}
	bind := map[string]any{}
	for _, p := range []string{"a", "b"} {
		r.srcs[p], r.sinks[p] = mem.NewSource(eventSchema, 1), mem.NewSink()
		for _, b := range hist[p] {
			if err := r.srcs[p].Append(0, b); err != nil {
				t.Fatal(err)
			}
		}
		bind[p], bind["out"+p] = r.srcs[p], r.sinks[p]
	}
	sp, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	g, err := build.Build(sp, build.Env{Bindings: bind, Connectors: testEnv, DataDir: opts.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	r.rt = New(g, opts)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.rt.Run(ctx) }()
	polltest.Eventually(t, "running", func() bool { return r.rt.State() == Running || r.rt.State() == Failed })
	if r.rt.State() == Failed {
		t.Fatal(<-r.done)
	}
	return r
}

// A survivor of a failover that is given a moved unit beside its own
// restarts with both (hubclient starts the new task set) and restores
// the last checkpoint; the window floors its own units acknowledged after
// that checkpoint are kept, so their acknowledged windows are not written
// again, while the moved unit's floor rolls back with the checkpoint
// (its marks in this store, if any, are not on top of it) and its window
// fires again: the L2 bound, as for any restore on another node (issue
// 20; found by TestFleetKafkaExactlyOnceUnderSIGKILL, where the
// survivors' units wrote windows again after every failover). Before,
// one foreign attempt in the checkpoint dropped every local floor.
func TestFleetSurvivorKeepsItsFloorsBesideAMovedUnit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := t.TempDir()
	spec := fleetFloorSpec(store)
	dirA, dirB := t.TempDir(), t.TempDir()
	unitA, unitB := []string{"a-0", "outa-0", "wa-0"}, []string{"b-0", "outb-0", "wb-0"}
	hist := map[string][]arrow.RecordBatch{}
	a := startFleetFloor(t, spec, Options{Tasks: unitA, HubCheckpoints: true, NodeID: "na", Generation: 2, DataDir: dirA}, hist)
	b := startFleetFloor(t, spec, Options{Tasks: unitB, HubCheckpoints: true, NodeID: "nb", Generation: 2, DataDir: dirB}, hist)
	add := func(r *fleetFloorRun, p string, bt arrow.RecordBatch) {
		hist[p] = append(hist[p], bt)
		if err := r.srcs[p].Append(0, bt); err != nil {
			t.Fatal(err)
		}
	}
	add(a, "a", timed(10, 20, 30))
	add(b, "b", timed(10, 20, 30))
	rowsIn := func(r *fleetFloorRun, op string) int64 {
		for _, m := range r.rt.Metrics() {
			if m.Operator == op {
				return m.RowsIn
			}
		}
		return -1
	}
	polltest.Eventually(t, "3 rows in each window", func() bool { return rowsIn(a, "wa") == 3 && rowsIn(b, "wb") == 3 })
	const id = "1733011200000"
	for _, r := range []*fleetFloorRun{a, b} {
		if _, err := r.rt.CheckpointPart(ctx, ckptstore.KindCheckpoint, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.rt.CommitParts(ctx, ckptstore.KindCheckpoint, id, []string{"na", "nb"}); err != nil {
		t.Fatal(err)
	}
	// After the checkpoint: window [0,100) fires in both units and is
	// acknowledged; [100,200) stays open.
	for p, r := range map[string]*fleetFloorRun{"a": a, "b": b} {
		add(r, p, timed(110, 120))
		polltest.Eventually(t, "window [0,100) at out"+p, func() bool { return r.sinks[p].NumRows() == 1 })
		polltest.Eventually(t, "the firing of w"+p+" acknowledged", func() bool {
			v, _, ok, _ := r.rt.store.Get(statestore.Key{Job: "fl", Operator: "w" + p, Namespace: "__arkflow_window_floor", KeyGroup: 0, User: []byte("wm")}, 0)
			return ok && len(v) == 8
		})
	}
	// nb dies; na is stopped and started again with both units (the
	// failover's new task set), restoring the checkpoint.
	a.cancel()
	<-a.done
	b.cancel()
	<-b.done
	a2 := startFleetFloor(t, spec, Options{Tasks: append(append([]string{}, unitA...), unitB...), HubCheckpoints: true, NodeID: "na",
		Generation: 3, DataDir: dirA, FromCheckpoint: id}, hist)
	defer func() { a2.cancel(); <-a2.done }()
	if a2.rt.CheckpointStatus().Restored == "" {
		t.Fatal("the survivor restored nothing")
	}
	for p, r := range map[string]*fleetFloorRun{"a": a2, "b": a2} {
		add(r, p, timed(250))
		polltest.Eventually(t, "window [100,200) at out"+p, func() bool {
			for _, s := range windowStarts(t, r.sinks[p]) {
				if s == 100 {
					return true
				}
			}
			return false
		})
	}
	count := func(p string) (again, open int) {
		for _, s := range windowStarts(t, a2.sinks[p]) {
			switch s {
			case 0:
				again++
			case 100:
				open++
			}
		}
		return
	}
	if again, open := count("a"); again != 0 || open != 1 {
		t.Errorf("the survivor's own unit wrote window [0,100) (acknowledged after the checkpoint) %d times, want 0; [100,200) %d times, want 1", again, open)
	}
	if again, open := count("b"); again != 1 || open != 1 {
		t.Errorf("the moved unit wrote window [0,100) %d times, want 1 (its floor rolls back with the checkpoint); [100,200) %d times, want 1", again, open)
	}
}
