package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore/ckpttest"
	"github.com/arkflow-rs/arkflow-go/internal/logtest"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// ckptSpec is a running keyed sum with checkpoints to store. extra adds a
// stateless filter between the source and the aggregate (an upgrade).
func ckptSpec(store, stateBlock string, version int, extra bool) string {
	ops := `{"id":"in","kind":"source"},`
	edges := `{"id":"a","from":"in","to":"sum","partitioned":true},`
	if extra {
		ops += `{"id":"positive","kind":"filter","config":{"expr":"amount > 0"}},`
		edges = `{"id":"a0","from":"in","to":"positive"},{"id":"a","from":"positive","to":"sum","partitioned":true},`
	}
	return fmt.Sprintf(`{"id":"ck","version":%d,"parallelism":2,"operators":[%s
	  {"id":"sum","kind":"aggregate","stateful":true,"key_field":"user","config":{"aggregates":[{"function":"sum","field":"amount","as":"total"}]}},
	  {"id":"out","kind":"sink"}],
	  "edges":[%s{"id":"b","from":"sum","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory"}],"sinks":[{"operator_id":"out","output_type":"memory"}],
	  %s,
	  "checkpoint":{"interval_ms":3600000,"retention":2,"object_store_uri":"file://%s"}}`, version, ops, edges, stateBlock, store)
}

// ckptRun is one run of a checkpointed job fed by hand.
type ckptRun struct {
	t    *testing.T
	rt   *Runtime
	src  *mem.Source
	sink *mem.Sink
	done chan error
	hist *history
}

// history is the input appended so far: a memory source is an input whose
// offsets count rows, so a later run gets the same batches again and its
// restored positions skip the ones already read.
type history struct{ batches []arrow.RecordBatch }

func startCkpt(t *testing.T, spec string, opts Options, hist *history) (*ckptRun, error) {
	r := &ckptRun{t: t, src: mem.NewSource(clickSchema, 2), sink: mem.NewSink(), done: make(chan error, 1), hist: hist}
	for _, b := range hist.batches {
		if err := r.src.Append(0, b); err != nil {
			t.Fatal(err)
		}
	}
	r.rt = New(mustBuild(t, spec, map[string]any{"in": r.src, "out": r.sink}), opts)
	go func() { r.done <- r.rt.Run(context.Background()) }()
	for {
		switch r.rt.State() {
		case Running:
			return r, nil
		case Failed:
			return nil, <-r.done
		}
		select {
		case err := <-r.done:
			return nil, err
		default:
		}
	}
}

// feed appends rows and waits until the sink has n rows in all.
func (r *ckptRun) feed(n int64, users []string, amounts []int64) {
	r.t.Helper()
	b := clicks(users, amounts)
	r.hist.batches = append(r.hist.batches, b)
	if err := r.src.Append(0, b); err != nil {
		r.t.Fatal(err)
	}
	polltest.Eventually(r.t, fmt.Sprintf("%d rows at the sink", n), func() bool { return r.sink.NumRows() == n })
}

// totals returns the last running total per user the sink received.
func (r *ckptRun) totals() map[string]int64 {
	out := map[string]int64{}
	for _, rec := range r.sink.Records() {
		us := column(r.t, rec, "user", str)
		ts := column(r.t, rec, "total", i64)
		for i := range us {
			out[us[i]] = ts[i]
		}
	}
	return out
}

func (r *ckptRun) stop() {
	r.t.Helper()
	r.src.Close()
	if err := <-r.done; err != nil {
		r.t.Fatal(err)
	}
}

// A checkpoint taken while the job runs brings the
// keyed state back in a new run on an empty store, and the recovery
// progress is complete before the job reports Running.
func TestCheckpointRestoresState(t *testing.T) {
	t.Parallel()
	hist := &history{}
	store := t.TempDir()
	spec := ckptSpec(store, `"state":{"backend":"memory"}`, 1, false)
	r, err := startCkpt(t, spec, Options{}, hist)
	if err != nil {
		t.Fatal(err)
	}
	r.feed(2, []string{"ann", "bob"}, []int64{5, 7})
	id, err := r.rt.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := r.rt.CheckpointStatus()
	if !st.Healthy || st.Completed != 1 || st.LastID != id {
		t.Fatalf("status after a checkpoint: %+v", st)
	}
	r.stop()

	r2, err := startCkpt(t, spec, Options{}, hist)
	if err != nil {
		t.Fatal(err)
	}
	st = r2.rt.CheckpointStatus()
	if st.Restored != "checkpoint "+id || !st.Recovery.Done || st.Recovery.BytesRestored != st.Recovery.BytesTotal || st.Recovery.BytesTotal == 0 || st.Recovery.KeysRestored == 0 {
		t.Fatalf("recovery when Running: %+v", st)
	}
	r2.feed(1, []string{"ann"}, []int64{10})
	if got := r2.totals()["ann"]; got != 15 {
		t.Fatalf("ann's total after the restore: %d, want 15 (5 restored + 10)", got)
	}
	r2.stop()
}

// A round that cannot reach the store fails; the job keeps running with
// its checkpoint health degraded, a restart still selects the previous
// checkpoint, and the next round after the store returns is healthy.
func TestCheckpointStoreOutage(t *testing.T) {
	t.Parallel()
	hist := &history{}
	store := t.TempDir()
	spec := ckptSpec(store, `"state":{"backend":"memory"}`, 1, false)
	var fault *ckpttest.FaultStore
	wrap := func(s ckptstore.Store) ckptstore.Store {
		if fault == nil {
			fault = ckpttest.NewFaultStore(s)
		}
		return fault
	}
	r, err := startCkpt(t, spec, Options{WrapStore: wrap}, hist)
	if err != nil {
		t.Fatal(err)
	}
	r.feed(1, []string{"ann"}, []int64{5})
	good, err := r.rt.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fault.Fail(ckpttest.OpPut, errors.New("store unreachable"))
	fault.Fail(ckpttest.OpCreate, errors.New("store unreachable"))
	r.feed(2, []string{"ann"}, []int64{100})
	if _, err := r.rt.Checkpoint(context.Background()); err == nil {
		t.Fatal("a checkpoint succeeded with the store down")
	}
	firstDone := r.rt.CheckpointStatus().LastCompleted
	if firstDone.IsZero() {
		t.Fatal("a committed checkpoint left LastCompleted zero")
	}
	if _, err := r.rt.Checkpoint(context.Background()); err == nil {
		t.Fatal("a second checkpoint succeeded with the store down")
	}
	st := r.rt.CheckpointStatus()
	if st.Healthy || st.Failures != 2 || st.ConsecutiveFailures != 2 || !st.LastCompleted.Equal(firstDone) ||
		!strings.Contains(st.LastError, "store unreachable") || r.rt.State() != Running {
		t.Fatalf("after a failed round: state %v, status %+v", r.rt.State(), st)
	}
	// A restart now would still take the last good checkpoint.
	cat, err := r.rt.openCatalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.rt.selectRestore(context.Background(), cat)
	if err != nil || m == nil || m.CheckpointID != good {
		t.Fatalf("selected %v (%v), want %s", m, err, good)
	}
	fault.Heal()
	if _, err := r.rt.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := r.rt.CheckpointStatus(); !st.Healthy || st.Completed != 2 || st.ConsecutiveFailures != 0 || !st.LastCompleted.After(firstDone) {
		t.Fatalf("after the store returned: %+v", st)
	}
	r.stop()
}

// dirBytes reads every file under dir.
func dirBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Stop with a savepoint, start version 2 (an added
// stateless operator) from it: the state carries over. Starting version 1
// from version 2's savepoint (a downgrade), or version 2 with another
// state format, is refused before the state store is touched: its files
// are byte-identical afterwards.
func TestSavepointUpgradeAndRefusals(t *testing.T) {
	t.Parallel()
	hist := &history{}
	store := t.TempDir()
	stateDir := t.TempDir()
	badger := func(format int) string {
		return fmt.Sprintf(`"state":{"backend":"badger","path":"%s","format_version":%d}`, stateDir, format)
	}
	v1 := ckptSpec(store, badger(1), 1, false)
	r, err := startCkpt(t, v1, Options{}, hist)
	if err != nil {
		t.Fatal(err)
	}
	r.feed(2, []string{"ann", "bob"}, []int64{5, 7})
	if err := r.rt.Savepoint(context.Background(), "v1"); err != nil {
		t.Fatal(err)
	}
	r.stop()

	v2 := ckptSpec(store, badger(1), 2, true)
	r2, err := startCkpt(t, v2, Options{FromSavepoint: "v1"}, hist)
	if err != nil {
		t.Fatal(err)
	}
	r2.feed(1, []string{"bob"}, []int64{1})
	if got := r2.totals()["bob"]; got != 8 {
		t.Fatalf("bob's total in version 2: %d, want 8 (7 from the v1 savepoint + 1)", got)
	}
	if err := r2.rt.Savepoint(context.Background(), "v2"); err != nil {
		t.Fatal(err)
	}
	r2.stop()

	before := dirBytes(t, stateDir)
	_, err = startCkpt(t, v1, Options{FromSavepoint: "v2"}, hist)
	var inc *ckptstore.IncompatibleError
	if !errors.As(err, &inc) || inc.Reason != ckptstore.IncompatibleDowngrade {
		t.Fatalf("downgrade: %v", err)
	}
	if after := dirBytes(t, stateDir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("the refused downgrade changed the state files")
	}
	_, err = startCkpt(t, ckptSpec(store, badger(2), 2, true), Options{FromSavepoint: "v2"}, hist)
	if !errors.As(err, &inc) || inc.Reason != ckptstore.IncompatibleFormat {
		t.Fatalf("format change: %v", err)
	}
	if after := dirBytes(t, stateDir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("the refused format change changed the state files")
	}
	// On a node without a state directory the store opens while the
	// checkpoint is chosen; a refusal leaves no directory behind.
	newDir := filepath.Join(t.TempDir(), "new-node", "state")
	_, err = startCkpt(t, ckptSpec(store, fmt.Sprintf(`"state":{"backend":"badger","path":%q}`, newDir), 1, false), Options{FromSavepoint: "v2"}, hist)
	if !errors.As(err, &inc) || inc.Reason != ckptstore.IncompatibleDowngrade {
		t.Fatalf("downgrade on a new node: %v", err)
	}
	if _, err := os.Lstat(newDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused downgrade left the new node's state directory: %v", err)
	}
	// Rollback is explicit: version 1 from its own savepoint. The input
	// after the savepoint's positions (bob's 1) is read again.
	r3, err := startCkpt(t, v1, Options{FromSavepoint: "v1"}, hist)
	if err != nil {
		t.Fatal(err)
	}
	r3.feed(2, []string{"bob"}, []int64{2})
	if got := r3.totals()["bob"]; got != 10 {
		t.Fatalf("bob's total after the rollback: %d, want 10 (7 + 1 replayed + 2)", got)
	}
	r3.stop()
}

// dumpState returns every entry of a job's state in a Badger directory,
// in key order: key, value and expiry.
func dumpState(t *testing.T, dir, jobName string) []string {
	t.Helper()
	st, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out []string
	err = st.Scan(statestore.Scope{Job: jobName, Groups: statestore.AllKeyGroups}, time.Now().UnixMilli(), func(e statestore.Entry) error {
		if e.Key.Operator == runtimeStateOp {
			return nil // the runtime's note of its checkpoints, not operator state
		}
		out = append(out, fmt.Sprintf("%s/%d/%s/%x=%x@%d", e.Key.Operator, e.Key.KeyGroup, e.Key.Namespace, e.Key.User, e.Value, e.ExpiresAt))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// On Badger a restore gives back exactly the entries
// that were checkpointed — into a directory that does not exist yet (a
// replacement node, whose store opens while the checkpoint is chosen),
// into the crashed node's own directory, and
// into a directory that holds other state (entry by entry), which it
// leaves alone.
func TestCheckpointRestoreBadgerExact(t *testing.T) {
	t.Parallel()
	hist := &history{}
	store := t.TempDir()
	dirs := []string{t.TempDir(), filepath.Join(t.TempDir(), "new"), t.TempDir()}
	badger := func(dir string) string { return fmt.Sprintf(`"state":{"backend":"badger","path":%q}`, dir) }
	r, err := startCkpt(t, ckptSpec(store, badger(dirs[0]), 1, false), Options{}, hist)
	if err != nil {
		t.Fatal(err)
	}
	r.feed(3, []string{"ann", "bob", "cid"}, []int64{5, 7, 1})
	if _, err := r.rt.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.feed(5, []string{"ann", "dan"}, []int64{3, 4})
	id, err := r.rt.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.stop()
	want := dumpState(t, dirs[0], "ck")
	if len(want) < 4 {
		t.Fatalf("the checkpointed state has %d entries: %v", len(want), want)
	}
	other := statestore.Mutation{Key: statestore.Key{Job: "other-job", Operator: "x", User: []byte("u")}, Value: []byte("v")}
	func() {
		st, err := statestore.Open(statestore.Options{Dir: dirs[2]})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.Apply([]statestore.Mutation{other}); err != nil {
			t.Fatal(err)
		}
	}()
	for i, dir := range []string{dirs[1], dirs[0], dirs[2]} {
		r2, err := startCkpt(t, ckptSpec(store, badger(dir), 1, false), Options{}, hist)
		if err != nil {
			t.Fatal(err)
		}
		st := r2.rt.CheckpointStatus()
		if st.Restored != "checkpoint "+id || !st.Recovery.Done || st.Recovery.KeysRestored != int64(len(want)) || st.Recovery.BytesRestored != st.Recovery.BytesTotal {
			t.Fatalf("run %d: recovery %+v, want checkpoint %s with %d keys", i, st, id, len(want))
		}
		r2.stop()
		if got := dumpState(t, dir, "ck"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("run %d: restored\n%v\nwant\n%v", i, got, want)
		}
	}
	if got := dumpState(t, dirs[2], "other-job"); len(got) != 1 {
		t.Fatalf("the other job's state after the restore: %v", got)
	}
}

// twoCheckpoints runs spec (ckptSpec's keyed sum) over ann 5 and bob 7,
// checkpoints (id1), then over ann 3, checkpoints again (id2) and stops.
func twoCheckpoints(t *testing.T, spec string, hist *history) (id1, id2 string) {
	t.Helper()
	r, err := startCkpt(t, spec, Options{}, hist)
	if err != nil {
		t.Fatal(err)
	}
	r.feed(2, []string{"ann", "bob"}, []int64{5, 7})
	if id1, err = r.rt.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.feed(3, []string{"ann"}, []int64{3})
	if id2, err = r.rt.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.stop()
	return id1, id2
}

// A state object found damaged or missing while it is restored
// (Select reads manifests only) makes the restore discard what it wrote
// and fall back to the previous checkpoint; with none left the job starts
// from the beginning of its input. Either way the totals come out as in
// one uninterrupted run.
func TestCheckpointRestoreFallsBackOnDamagedState(t *testing.T) {
	t.Parallel()
	damages := map[string]func(t *testing.T, path string){
		"flipped byte": func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x10
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"truncated": func(t *testing.T, path string) {
			if err := os.Truncate(path, 20); err != nil {
				t.Fatal(err)
			}
		},
		"missing": func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, backend := range []string{"badger", "memory"} {
		for name, damage := range damages {
			for _, both := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/both=%v", backend, name, both), func(t *testing.T) {
					hist := &history{}
					store := t.TempDir()
					block := `"state":{"backend":"memory"}`
					if backend == "badger" {
						block = fmt.Sprintf(`"state":{"backend":"badger","path":%q}`, t.TempDir())
					}
					id1, id2 := twoCheckpoints(t, ckptSpec(store, block, 1, false), hist)
					ids := []string{id2}
					if both {
						ids = append(ids, id1)
					}
					for _, id := range ids {
						objs, err := filepath.Glob(filepath.Join(store, "ck", "checkpoints", id, "state", "sum-*.snap"))
						if err != nil || len(objs) != 2 {
							t.Fatalf("state objects of %s: %v %v", id, objs, err)
						}
						damage(t, objs[1])
					}
					if backend == "badger" {
						block = fmt.Sprintf(`"state":{"backend":"badger","path":%q}`, t.TempDir())
					}
					r2, err := startCkpt(t, ckptSpec(store, block, 1, false), Options{}, hist)
					if err != nil {
						t.Fatal(err)
					}
					st := r2.rt.CheckpointStatus()
					wantRestored, replayed := "checkpoint "+id1, int64(1)
					if both {
						wantRestored, replayed = "", 3
					}
					if st.Restored != wantRestored || !st.Recovery.Done {
						t.Fatalf("recovery %+v, want %q", st, wantRestored)
					}
					r2.feed(replayed+1, []string{"dan"}, []int64{1})
					if got := r2.totals(); got["ann"] != 8 || got["dan"] != 1 || (both && got["bob"] != 7) {
						t.Fatalf("totals after the fallback: %v", got)
					}
					r2.stop()
				})
			}
		}
	}
}

// A restore that fails for good (a damaged savepoint, which has no
// fallback) fails the start and leaves none of the savepoint's state
// behind, also when it went in snapshot by snapshot (a store holding
// other state); the other state is kept.
func TestFailedRestoreLeavesNoPartialState(t *testing.T) {
	t.Parallel()
	hist := &history{}
	store := t.TempDir()
	dir := t.TempDir()
	spec := ckptSpec(store, fmt.Sprintf(`"state":{"backend":"badger","path":%q}`, dir), 1, false)
	r, err := startCkpt(t, spec, Options{}, hist)
	if err != nil {
		t.Fatal(err)
	}
	r.feed(4, []string{"ann", "bob", "cid", "dan"}, []int64{5, 7, 1, 2})
	if err := r.rt.Savepoint(context.Background(), "sp"); err != nil {
		t.Fatal(err)
	}
	r.stop()
	objs, err := filepath.Glob(filepath.Join(store, "ck", "savepoints", "sp", "state", "sum-*.snap"))
	if err != nil || len(objs) != 2 {
		t.Fatalf("state objects: %v %v", objs, err)
	}
	b, err := os.ReadFile(objs[1])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3] ^= 0x01 // in the trailer: found only once the entries are in
	if err := os.WriteFile(objs[1], b, 0o644); err != nil {
		t.Fatal(err)
	}
	func() {
		st, err := statestore.Open(statestore.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.Apply([]statestore.Mutation{{Key: statestore.Key{Job: "other-job", Operator: "x", User: []byte("u")}, Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}()
	if _, err := startCkpt(t, spec, Options{FromSavepoint: "sp"}, hist); err == nil {
		t.Fatal("the job started from a damaged savepoint")
	}
	if got := dumpState(t, dir, "ck"); len(got) != 0 {
		t.Fatalf("a failed restore left %d entries: %v", len(got), got)
	}
	if got := dumpState(t, dir, "other-job"); len(got) != 1 {
		t.Fatalf("the other job's state: %v", got)
	}
}

// stallingStore holds every upload, once armed, until its context ends:
// a round in flight when the job ends.
type stallingStore struct {
	ckptstore.Store
	armed   atomic.Bool
	stalled chan struct{}
	once    sync.Once
}

func (s *stallingStore) stall(ctx context.Context) error {
	s.once.Do(func() { close(s.stalled) })
	<-ctx.Done()
	return fmt.Errorf("checkpoint: put: %w", ctx.Err())
}

func (s *stallingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if s.armed.Load() {
		return s.stall(ctx)
	}
	return s.Store.Put(ctx, key, r, size)
}

func (s *stallingStore) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	if s.armed.Load() {
		return s.stall(ctx)
	}
	return s.Store.Create(ctx, key, r, size)
}

// A periodic round still uploading when the job's input ends is
// abandoned, not failed: the job ending is no checkpoint failure, so the
// health stays good, no failure is counted and nothing is logged as a
// warning (it was, at the end of every bounded job that ended during a
// round).
func TestCheckpointRoundAbandonedAtTheEnd(t *testing.T) {
	t.Parallel()
	hist := &history{}
	spec := strings.Replace(ckptSpec(t.TempDir(), `"state":{"backend":"memory"}`, 1, false), `"interval_ms":3600000`, `"interval_ms":20`, 1)
	st := &stallingStore{stalled: make(chan struct{})}
	logs := logtest.New()
	r, err := startCkpt(t, spec, Options{Logger: slog.New(logs), WrapStore: func(s ckptstore.Store) ckptstore.Store {
		st.Store = s
		return st
	}}, hist)
	if err != nil {
		t.Fatal(err)
	}
	r.feed(2, []string{"ann", "bob"}, []int64{5, 7})
	polltest.Eventually(t, "a periodic checkpoint", func() bool { return r.rt.CheckpointStatus().Completed > 0 })
	st.armed.Store(true)
	<-st.stalled
	r.stop()
	s := r.rt.CheckpointStatus()
	if s.Failures != 0 || s.ConsecutiveFailures != 0 || !s.Healthy || s.LastError != "" {
		t.Errorf("a round abandoned at the end counted as a failure: %+v", s)
	}
	for _, w := range logs.Warnings() {
		t.Errorf("warning logged at the end of the job: %s %v", w.Msg, w.Attrs)
	}
}

// Cancelling Run's context ends the job as Failed with the context's
// error, as documented, but logs it as a cancellation (a warning), not
// as a failure: a service shutting down is no fault of the job.
func TestCancelledRunIsNotLoggedAsAFailure(t *testing.T) {
	t.Parallel()
	logs := logtest.New()
	src := mem.NewSource(clickSchema, 2)
	rt := New(mustBuild(t, ckptSpec(t.TempDir(), `"state":{"backend":"memory"}`, 1, false), map[string]any{"in": src, "out": mem.NewSink()}), Options{Logger: slog.New(logs)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	polltest.Eventually(t, "running", func() bool { return rt.State() == Running })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	if rt.State() != Failed || !errors.Is(rt.Err(), context.Canceled) {
		t.Errorf("state %v, err %v; want failed with context.Canceled", rt.State(), rt.Err())
	}
	cancelled := 0
	for _, r := range logs.Records() {
		if r.Level >= slog.LevelError {
			t.Errorf("error logged for a cancelled run: %s %v", r.Msg, r.Attrs)
		}
		if r.Level == slog.LevelWarn && strings.HasPrefix(r.Msg, "job cancelled") {
			cancelled++
		}
	}
	if cancelled != 1 {
		t.Errorf("%d \"job cancelled\" warnings, want 1", cancelled)
	}
}
