package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// fleetSpec is two independent keyed running sums, a → suma → outa and
// b → sumb → outb: two placement units, which a fleet runs on two
// nodes.
func fleetSpec(store string) string {
	pipe := func(p string) (ops, edges string) {
		ops = fmt.Sprintf(`{"id":"%[1]s","kind":"source"},
	  {"id":"sum%[1]s","kind":"aggregate","stateful":true,"key_field":"user","config":{"aggregates":[{"function":"sum","field":"amount","as":"total"}]}},
	  {"id":"out%[1]s","kind":"sink"}`, p)
		edges = fmt.Sprintf(`{"id":"%[1]s1","from":"%[1]s","to":"sum%[1]s","partitioned":true},{"id":"%[1]s2","from":"sum%[1]s","to":"out%[1]s"}`, p)
		return
	}
	oa, ea := pipe("a")
	ob, eb := pipe("b")
	return fmt.Sprintf(`{"id":"fl","version":1,"operators":[%s,%s],"edges":[%s,%s],
	  "sources":[{"operator_id":"a","input_type":"memory"},{"operator_id":"b","input_type":"memory"}],
	  "sinks":[{"operator_id":"outa","output_type":"memory"},{"operator_id":"outb","output_type":"memory"}],
	  "state":{"backend":"memory"},
	  "checkpoint":{"interval_ms":3600000,"retention":3,"object_store_uri":"file://%s"}}`, oa, ob, ea, eb, store)
}

var (
	unitA = []string{"a-0", "outa-0", "suma-0"}
	unitB = []string{"b-0", "outb-0", "sumb-0"}
)

// fleetRun is one process's run of (part of) fleetSpec; hist holds the
// batches appended to each source so far, replayed into a new run (the
// memory source's offsets count rows, so restored positions skip what a
// checkpoint covers).
type fleetRun struct {
	t     *testing.T
	rt    *Runtime
	srcs  map[string]*mem.Source
	sinks map[string]*mem.Sink
	done  chan error
	hist  map[string][]arrow.RecordBatch
}

func startFleet(t *testing.T, spec string, opts Options, hist map[string][]arrow.RecordBatch) (*fleetRun, error) {
	t.Helper()
	r := &fleetRun{t: t, srcs: map[string]*mem.Source{}, sinks: map[string]*mem.Sink{}, done: make(chan error, 1), hist: hist}
	bind := map[string]any{}
	for _, p := range []string{"a", "b"} {
		r.srcs[p] = mem.NewSource(clickSchema, 1)
		r.sinks[p] = mem.NewSink()
		for _, b := range hist[p] {
			if err := r.srcs[p].Append(0, b); err != nil {
				t.Fatal(err)
			}
		}
		bind[p], bind["out"+p] = r.srcs[p], r.sinks[p]
	}
	r.rt = New(mustBuild(t, spec, bind), opts)
	go func() { r.done <- r.rt.Run(context.Background()) }()
	for {
		select {
		case err := <-r.done:
			return nil, err
		default:
		}
		if r.rt.State() == Running {
			return r, nil
		}
	}
}

// feed appends a batch to pipeline p and waits until its sink has n rows.
func (r *fleetRun) feed(p string, n int64, users []string, amounts []int64) {
	r.t.Helper()
	b := clicks(users, amounts)
	r.hist[p] = append(r.hist[p], b)
	if err := r.srcs[p].Append(0, b); err != nil {
		r.t.Fatal(err)
	}
	polltest.Eventually(r.t, fmt.Sprintf("%d rows at out%s", n, p), func() bool { return r.sinks[p].NumRows() == n })
}

// totals is the last running total per user pipeline p's sink received.
func (r *fleetRun) totals(p string) map[string]int64 {
	out := map[string]int64{}
	for _, rec := range r.sinks[p].Records() {
		us := column(r.t, rec, "user", str)
		ts := column(r.t, rec, "total", i64)
		for i := range us {
			out[us[i]] = ts[i]
		}
	}
	return out
}

func (r *fleetRun) stop() {
	r.t.Helper()
	if err := r.rt.Stop(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	if err := <-r.done; err != nil {
		r.t.Fatal(err)
	}
}

// A job of two placement units
// runs as two processes, each with its unit only; a checkpoint is cut in
// two parts under the id the Hub chose and committed by merging them; a
// commit with a part missing is refused and LATEST stays; two new
// processes each restore only their unit's state (one snapshot each)
// from the merged checkpoint and their sums go on from the restored
// values, ending where one process that ran everything ends.
func TestFleetPartsCommitAndRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := t.TempDir()
	spec := fleetSpec(store)
	hist := map[string][]arrow.RecordBatch{}
	a, err := startFleet(t, spec, Options{Tasks: unitA, HubCheckpoints: true, NodeID: "node/a", Generation: 4}, hist)
	if err != nil {
		t.Fatal(err)
	}
	b, err := startFleet(t, spec, Options{Tasks: unitB, HubCheckpoints: true, NodeID: "node-b", Generation: 4}, hist)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(a.rt.Metrics()); got != 3 {
		t.Fatalf("the process of unit a runs %d tasks, want 3", got)
	}
	a.feed("a", 2, []string{"ann", "bob"}, []int64{5, 7})
	b.feed("b", 1, []string{"ann"}, []int64{100})
	if _, err := a.rt.Checkpoint(ctx); err == nil {
		t.Fatal("a process of part of the job committed a checkpoint alone")
	}

	const id = "1733011200000"
	keyA, err := a.rt.CheckpointPart(ctx, ckptstore.KindCheckpoint, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := "fl/checkpoints/00000001733011200000/manifests/node_a.json"; keyA != want {
		t.Fatalf("part key %q, want %q", keyA, want)
	}
	if _, err := a.rt.CommitParts(ctx, ckptstore.KindCheckpoint, id, []string{"node/a"}); !errors.Is(err, ckptstore.ErrMissingTask) {
		t.Fatalf("commit without unit b's part: %v, want ErrMissingTask", err)
	}
	if _, err := b.rt.CheckpointPart(ctx, ckptstore.KindCheckpoint, id); err != nil {
		t.Fatal(err)
	}
	st, err := ckptstore.OpenStore(ctx, "file://"+store, ckptstore.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := ckptstore.NewCatalog(st, "fl", ckptstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := cat.Latest(ctx); err != nil || l != 0 {
		t.Fatalf("LATEST before the commit: %v %v", l, err)
	}
	m, err := b.rt.CommitParts(ctx, ckptstore.KindCheckpoint, id, []string{"node/a", "node-b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.PlannedTasks) != 6 || len(m.TaskAttempts) != 6 || len(m.StateSnapshots) != 2 || m.Generation != 4 {
		t.Fatalf("merged manifest: %+v", m)
	}
	if l, _ := cat.Latest(ctx); l.String() != "00000001733011200000" {
		t.Fatalf("LATEST %s after the commit", l)
	}
	// After the checkpoint: read again by the next runs from the
	// restored positions.
	a.feed("a", 3, []string{"ann"}, []int64{1})
	b.feed("b", 2, []string{"cid"}, []int64{3})
	a.stop()
	b.stop()

	a2, err := startFleet(t, spec, Options{Tasks: unitA, HubCheckpoints: true, NodeID: "node/a", FromCheckpoint: id}, hist)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := startFleet(t, spec, Options{Tasks: unitB, HubCheckpoints: true, NodeID: "node-b", FromCheckpoint: id}, hist)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*fleetRun{"a": a2, "b": b2} {
		s := r.rt.CheckpointStatus()
		if s.Restored != "checkpoint 00000001733011200000" || s.Recovery.SnapshotsTotal != 1 || !s.Recovery.Done {
			t.Fatalf("process of unit %s: restore %+v (want only its own snapshot)", name, s)
		}
	}
	// One replayed row each, then one new row each.
	a2.feed("a", 2, []string{"bob"}, []int64{10})
	b2.feed("b", 2, []string{"ann"}, []int64{1})
	gotA, gotB := a2.totals("a"), b2.totals("b")
	a2.stop()
	b2.stop()

	// The reference: one process, every task, the same input.
	ref, err := startFleet(t, fleetSpec(t.TempDir()), Options{}, map[string][]arrow.RecordBatch{})
	if err != nil {
		t.Fatal(err)
	}
	var n = map[string]int64{}
	for _, p := range []string{"a", "b"} {
		for _, rec := range hist[p] {
			n[p] += rec.NumRows()
			ref.feed(p, n[p], column(t, rec, "user", str), column(t, rec, "amount", i64))
		}
	}
	wantA, wantB := ref.totals("a"), ref.totals("b")
	ref.stop()
	if fmt.Sprint(gotA) != fmt.Sprint(map[string]int64{"ann": 6, "bob": 17}) || fmt.Sprint(gotA) != fmt.Sprint(wantA) {
		t.Errorf("unit a after the restore: %v, the single process: %v", gotA, wantA)
	}
	if fmt.Sprint(gotB) != fmt.Sprint(map[string]int64{"ann": 101, "cid": 3}) || fmt.Sprint(gotB) != fmt.Sprint(wantB) {
		t.Errorf("unit b after the restore: %v, the single process: %v", gotB, wantB)
	}
}

// A task set that splits a placement unit, or names
// a task the plan does not have, is refused with the unit named.
func TestFleetTasksMustBeWholeUnits(t *testing.T) {
	t.Parallel()
	spec := fleetSpec(t.TempDir())
	_, err := startFleet(t, spec, Options{Tasks: []string{"a-0", "suma-0"}, HubCheckpoints: true}, map[string][]arrow.RecordBatch{})
	if err == nil || !strings.Contains(err.Error(), "would be split") || !strings.Contains(err.Error(), "outa-0") {
		t.Fatalf("a split unit: %v", err)
	}
	_, err = startFleet(t, spec, Options{Tasks: []string{"a-0", "suma-0", "outa-0", "zz-0"}}, map[string][]arrow.RecordBatch{})
	if err == nil || !strings.Contains(err.Error(), "zz-0") {
		t.Fatalf("an unknown task: %v", err)
	}
}

// walFloor is the retention floor of source task's WAL.
func walFloor(t *testing.T, rt *Runtime, task string) uint64 {
	t.Helper()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, s := range rt.sources {
		if s.task == task && s.wal != nil {
			return s.wal.Log().Floor()
		}
	}
	t.Fatalf("no WAL for %s", task)
	return 0
}

// With Hub-driven checkpoints, an
// unrewindable source's WAL keeps the entries a part holds until a
// checkpoint holding them is committed: not at the part, not when
// another node merges the commit, but at the next part round after it
// (or at once when this process merges it).
func TestFleetWALReleasedOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	store := dir + "/ckpt"
	spec := onceSpec(store, `"state":{"backend":"memory"}`, 3_600_000)
	r := startOnce(t, spec, dir, Options{HubCheckpoints: true, NodeID: "n1"})
	defer r.stop()
	r.feed.Push([]string{"ann", "bob"}, []int64{5, 7})
	r.waitFor("ann", 1, 5)
	r.waitFor("bob", 1, 7)
	floor0 := walFloor(t, r.rt, "in-0")
	if _, err := r.rt.CheckpointPart(ctx, ckptstore.KindCheckpoint, "100"); err != nil {
		t.Fatal(err)
	}
	if f := walFloor(t, r.rt, "in-0"); f != floor0 {
		t.Fatalf("the WAL released entries of a part nobody committed: floor %d → %d", floor0, f)
	}
	// Another node merges the commit.
	st, err := ckptstore.OpenStore(ctx, "file://"+store, ckptstore.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := ckptstore.NewCatalog(st, "once", ckptstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ckptstore.CommitParts(ctx, cat, ckptstore.Parts{Kind: ckptstore.KindCheckpoint, ID: "00000000000000000100", Nodes: []string{"n1"}, PlannedTasks: r.rt.plannedTasks()}); err != nil {
		t.Fatal(err)
	}
	if f := walFloor(t, r.rt, "in-0"); f != floor0 {
		t.Fatalf("floor moved before this process learnt of the commit: %d → %d", floor0, f)
	}
	r.feed.Push([]string{"ann"}, []int64{10})
	r.waitFor("ann", 2, 15)
	if _, err := r.rt.CheckpointPart(ctx, ckptstore.KindCheckpoint, "200"); err != nil {
		t.Fatal(err)
	}
	floor1 := walFloor(t, r.rt, "in-0")
	if floor1 <= floor0 {
		t.Fatalf("the next part round did not release what checkpoint 100 holds: floor %d → %d", floor0, floor1)
	}
	if _, err := r.rt.CommitParts(ctx, ckptstore.KindCheckpoint, "200", []string{"n1"}); err != nil {
		t.Fatal(err)
	}
	if f := walFloor(t, r.rt, "in-0"); f <= floor1 {
		t.Fatalf("merging checkpoint 200 here did not release what it holds: floor %d → %d", floor1, f)
	}
}

// After a rescale, a process restores only the snapshots whose
// key groups overlap those of its own tasks, so what it reads follows the
// key groups it takes.
func TestFleetRestoresOnlyOverlappingSnapshots(t *testing.T) {
	t.Parallel()
	spec := strings.Replace(ckptSpec(t.TempDir(), `"state":{"backend":"memory"}`, 1, false), `"parallelism":2`, `"parallelism":2,"max_parallelism":120`, 1)
	r := New(mustBuild(t, spec, map[string]any{"in": mem.NewSource(clickSchema, 2), "out": mem.NewSink()}), Options{})
	r.local = map[string]bool{"sum-0": true} // key groups 0-59
	for _, c := range []struct {
		oldPar int
		want   []bool
	}{
		{4, []bool{true, true, false, false}}, // 0-29, 30-59, 60-89, 90-119
		{3, []bool{true, true, false}},        // 0-39, 40-79, 80-119
		{2, []bool{true, false}},
		{1, []bool{true}},
	} {
		for sub, want := range c.want {
			if got := r.snapshotWanted("sum", sub, c.oldPar, 120); got != want {
				t.Errorf("snapshot of sum-%d of %d subtasks: restored %v, want %v", sub, c.oldPar, got, want)
			}
		}
	}
}
