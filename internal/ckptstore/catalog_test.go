package ckptstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore/ckpttest"
	"github.com/arkflow-rs/arkflow-go/internal/objsum"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testJob = "orders"

var testPlan = []string{"map-0", "map-1", "src-0"}

func newCatalog(t *testing.T, s Store, opts Options) *Catalog {
	t.Helper()
	if opts.Now == nil {
		var ms atomic.Int64
		ms.Store(1_700_000_000_000)
		opts.Now = func() time.Time { return time.UnixMilli(ms.Add(1000)) }
	}
	c, err := NewCatalog(s, testJob, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// artifact describes a checkpoint or savepoint to write.
type artifact struct {
	kind    Kind
	name    string // savepoint name
	version uint64
	format  int
	tasks   []string
	maxPar  int // 0: not recorded
}

func (a artifact) withDefaults() artifact {
	if a.kind == "" {
		a.kind = KindCheckpoint
	}
	if a.version == 0 {
		a.version = 1
	}
	if a.format == 0 {
		a.format = 1
	}
	if a.tasks == nil {
		a.tasks = testPlan
	}
	return a
}

// prepare writes the state objects of an artifact and returns its
// manifest, not committed, and the state bytes by task. Tasks named
// "src-*" have a position instead of state.
func prepare(t *testing.T, c *Catalog, a artifact) (*Manifest, map[string][]byte) {
	t.Helper()
	a = a.withDefaults()
	ctx := context.Background()
	id := a.name
	if a.kind == KindCheckpoint {
		n, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id = n.String()
	}
	m := &Manifest{
		CheckpointID:   id,
		JobVersion:     a.version,
		Generation:     1,
		WatermarksMS:   map[string]int64{},
		FormatVersion:  a.format,
		Kind:           a.kind,
		PlannedTasks:   slices.Clone(a.tasks),
		PlanDigest:     "sha256:plan",
		MaxParallelism: a.maxPar,
	}
	if a.kind == KindSavepoint {
		m.Name, m.CheckpointID = a.name, "sp-"+a.name
	}
	states := map[string][]byte{}
	for i, task := range a.tasks {
		m.TaskAttempts = append(m.TaskAttempts, TaskAttempt{TaskID: task, AttemptID: task + ":node-1:1", NodeID: "node-1"})
		m.WatermarksMS[task] = int64(1000 + i)
		if strings.HasPrefix(task, "src-") {
			m.SourcePositions = append(m.SourcePositions, SourcePosition{TaskID: task, Topic: "in", Partition: 0, Offset: int64(100 + i)})
			continue
		}
		b := randomBytes(1000 + 100*i)
		states[task] = b
		var r io.Reader = bytes.NewReader(b)
		if i%2 == 1 {
			r = io.MultiReader(r) // unknown size
		}
		e, err := c.PutState(ctx, a.kind, id, task, r)
		if err != nil {
			t.Fatal(err)
		}
		if e.Bytes != int64(len(b)) || e.URI != c.StateKey(a.kind, id, task) || !strings.HasPrefix(e.Checksum, objsum.CRC64NVME) || !objsum.Valid(e.Checksum) {
			t.Fatalf("PutState returned %+v", e)
		}
		e.NodeID = "node-1"
		m.StateSnapshots = append(m.StateSnapshots, e)
	}
	return m, states
}

// commit prepares and commits an artifact.
func commit(t *testing.T, c *Catalog, a artifact) (*Manifest, map[string][]byte) {
	t.Helper()
	m, states := prepare(t, c, a)
	if err := c.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m, states
}

func wantLatest(version uint64) Want {
	return Want{Target: LatestCheckpoint, JobVersion: version, FormatVersion: 1, PlannedTasks: testPlan}
}

// selectOK selects and expects the artifact id.
func selectOK(t *testing.T, c *Catalog, w Want, id string) (*Manifest, []Skipped) {
	t.Helper()
	m, skipped, err := c.Select(context.Background(), w)
	if err != nil {
		t.Fatalf("Select: %v (skipped %v)", err, skipped)
	}
	if m == nil {
		t.Fatalf("Select found nothing (skipped %v), want %s", skipped, id)
	}
	if m.dirID() != id {
		t.Fatalf("Select = %s (skipped %v), want %s", m.dirID(), skipped, id)
	}
	return m, skipped
}

func readState(t *testing.T, c *Catalog, e StateSnapshot) ([]byte, error) {
	t.Helper()
	rc, err := c.OpenState(context.Background(), e)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// TestCommitAndSelect: a committed checkpoint is
// selected and its state reads back.
func TestCommitAndSelect(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		c := newCatalog(t, s, Options{})
		ctx := context.Background()
		if m, skipped, err := c.Select(ctx, wantLatest(1)); m != nil || skipped != nil || err != nil {
			t.Fatalf("empty store: Select = %v, %v, %v; want nothing", m, skipped, err)
		}
		m1, _ := commit(t, c, artifact{})
		m2, states := commit(t, c, artifact{})
		if m1.CheckpointID != ID(1).String() || m2.CheckpointID != ID(2).String() {
			t.Fatalf("ids %s, %s", m1.CheckpointID, m2.CheckpointID)
		}
		got, skipped := selectOK(t, c, wantLatest(1), m2.CheckpointID)
		if len(skipped) != 0 {
			t.Fatalf("skipped %v", skipped)
		}
		if !reflect.DeepEqual(got, m2) {
			t.Fatalf("Select = %+v, want %+v", got, m2)
		}
		for _, e := range got.StateSnapshots {
			b, err := readState(t, c, e)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, states[e.TaskID]) {
				t.Fatalf("state of %s differs", e.TaskID)
			}
		}
		if got := strings.TrimSpace(string(getObject(t, s, c.LatestKey()))); got != m2.CheckpointID {
			t.Fatalf("LATEST = %q", got)
		}
		sums, err := c.List(ctx, KindCheckpoint)
		if err != nil {
			t.Fatal(err)
		}
		if len(sums) != 2 || sums[0].ID != m1.CheckpointID || sums[1].Manifest == nil || !sums[1].Latest || sums[0].Latest {
			t.Fatalf("List = %+v", sums)
		}
	})
}

// commitRefused checks that a Commit failed with want, and that nothing
// was written: no manifest, LATEST unchanged.
func commitRefused(t *testing.T, c *Catalog, m *Manifest, want error) {
	t.Helper()
	before := snapshotStore(t, c.Store())
	err := c.Commit(context.Background(), m)
	if !errors.Is(err, want) {
		t.Fatalf("Commit = %v, want %v", err, want)
	}
	if after := snapshotStore(t, c.Store()); !reflect.DeepEqual(before, after) {
		t.Fatal("a refused Commit changed the store")
	}
}

// TestCommitRejectsMissingTask: a checkpoint is sealed only with every
// planned task.
func TestCommitRejectsMissingTask(t *testing.T) {
	t.Parallel()
	c := newCatalog(t, openFile(t), Options{})
	commit(t, c, artifact{})
	m, _ := prepare(t, c, artifact{})
	m.TaskAttempts = m.TaskAttempts[1:]
	commitRefused(t, c, m, ErrMissingTask)
	selectOK(t, c, wantLatest(1), ID(1).String())
}

// TestCommitRejectsDuplicateTask: a task listed twice is not sealed.
func TestCommitRejectsDuplicateTask(t *testing.T) {
	t.Parallel()
	c := newCatalog(t, openFile(t), Options{})
	commit(t, c, artifact{})
	m, _ := prepare(t, c, artifact{})
	m.TaskAttempts = append(m.TaskAttempts, m.TaskAttempts[0])
	commitRefused(t, c, m, ErrDuplicateTask)
	selectOK(t, c, wantLatest(1), ID(1).String())
}

// TestCommitRejectsExtraTask: a task not in the plan is not sealed.
func TestCommitRejectsExtraTask(t *testing.T) {
	t.Parallel()
	c := newCatalog(t, openFile(t), Options{})
	commit(t, c, artifact{})
	m, _ := prepare(t, c, artifact{})
	m.TaskAttempts = append(m.TaskAttempts, TaskAttempt{TaskID: "sink-0", AttemptID: "x", NodeID: "node-1"})
	commitRefused(t, c, m, ErrExtraTask)
	selectOK(t, c, wantLatest(1), ID(1).String())
}

// TestCommitRejectsForeignState: a state entry must be the object of its
// own task in its own directory, so retention of another artifact can
// never break it.
func TestCommitRejectsForeignState(t *testing.T) {
	t.Parallel()
	c := newCatalog(t, openFile(t), Options{})
	m1, _ := commit(t, c, artifact{})
	m, _ := prepare(t, c, artifact{})
	m.StateSnapshots[0].URI = m1.StateSnapshots[0].URI
	if err := c.Commit(context.Background(), m); err == nil || !strings.Contains(err.Error(), "not at") {
		t.Fatalf("Commit = %v", err)
	}
	m, _ = prepare(t, c, artifact{})
	m.JobID = "other"
	if err := c.Commit(context.Background(), m); err == nil || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("Commit of another job's manifest = %v", err)
	}
}

// TestSelectSkipsCorruptManifest: damaged manifest bytes make
// the checkpoint skipped with a reason, and the previous one selected.
func TestSelectSkipsCorruptManifest(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		c := newCatalog(t, s, Options{})
		m1, _ := commit(t, c, artifact{})
		m2, _ := commit(t, c, artifact{})
		key := c.ManifestKey(KindCheckpoint, m2.CheckpointID)
		b := getObject(t, s, key)
		b = bytes.Replace(b, []byte(`"offset": 102`), []byte(`"offset": 103`), 1)
		putObject(t, s, key, b)
		_, skipped := selectOK(t, c, wantLatest(1), m1.CheckpointID)
		if len(skipped) != 1 || skipped[0].ID != m2.CheckpointID || !IsCorruption(skipped[0].Err) || !strings.Contains(skipped[0].Reason, "checksum") {
			t.Fatalf("skipped = %v", skipped)
		}
		// Not JSON at all.
		putObject(t, s, key, []byte("\x00garbage"))
		_, skipped = selectOK(t, c, wantLatest(1), m1.CheckpointID)
		if len(skipped) != 1 || !IsCorruption(skipped[0].Err) {
			t.Fatalf("skipped = %v", skipped)
		}
	})
}

// TestSelectSkipsCorruptState: a flipped byte, a truncated and
// a missing state object each make the checkpoint skipped.
func TestSelectSkipsCorruptState(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		c := newCatalog(t, s, Options{})
		m1, _ := commit(t, c, artifact{})
		m2, states := commit(t, c, artifact{})
		e := m2.StateSnapshots[1]
		orig := states[e.TaskID]
		for name, damage := range map[string]func(){
			"flipped byte": func() {
				b := bytes.Clone(orig)
				b[len(b)/2] ^= 0x01
				putObject(t, s, e.URI, b)
			},
			"truncated": func() { putObject(t, s, e.URI, orig[:len(orig)-1]) },
			"longer":    func() { putObject(t, s, e.URI, append(bytes.Clone(orig), 0)) },
			"missing": func() {
				if err := s.Delete(context.Background(), e.URI); err != nil {
					t.Fatal(err)
				}
			},
		} {
			damage()
			_, skipped := selectOK(t, c, wantLatest(1), m1.CheckpointID)
			if len(skipped) != 1 || skipped[0].ID != m2.CheckpointID || !strings.Contains(skipped[0].Reason, e.TaskID) {
				t.Fatalf("%s: skipped = %v", name, skipped)
			}
			if name == "missing" != errors.Is(skipped[0].Err, ErrNotFound) || name != "missing" && !IsCorruption(skipped[0].Err) {
				t.Fatalf("%s: skip error %v", name, skipped[0].Err)
			}
			// OpenState detects it too.
			if _, err := readState(t, c, e); err == nil {
				t.Fatalf("%s: OpenState read the damaged object without an error", name)
			}
			putObject(t, s, e.URI, orig)
			selectOK(t, c, wantLatest(1), m2.CheckpointID)
		}
	})
}

// TestSelectDeferredStateChecks: with DeferStateChecks Select
// reads manifests only, so it selects a checkpoint whose state object is
// damaged; OpenStateSized still catches a wrong size (the caller checks
// the hash), and selecting again with the artifact in Exclude falls back
// to the previous one, as Select does by itself without the option.
func TestSelectDeferredStateChecks(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		c := newCatalog(t, s, Options{})
		m1, _ := commit(t, c, artifact{})
		m2, states := commit(t, c, artifact{})
		e := m2.StateSnapshots[0]
		orig := states[e.TaskID]
		deferred := wantLatest(1)
		deferred.DeferStateChecks = true
		readSized := func() ([]byte, error) {
			rc, err := c.OpenStateSized(context.Background(), e)
			if err != nil {
				return nil, err
			}
			defer rc.Close()
			return io.ReadAll(rc)
		}
		if b, err := readSized(); err != nil || !bytes.Equal(b, orig) {
			t.Fatalf("OpenStateSized of an intact object: %d bytes, %v", len(b), err)
		}
		flipped := bytes.Clone(orig)
		flipped[len(flipped)/2] ^= 0x01
		putObject(t, s, e.URI, flipped)
		selectOK(t, c, deferred, m2.CheckpointID)
		if b, err := readSized(); err != nil || !bytes.Equal(b, flipped) {
			t.Fatalf("OpenStateSized checks the size only: %d bytes, %v", len(b), err)
		}
		putObject(t, s, e.URI, orig[:len(orig)-1])
		if _, err := readSized(); !IsCorruption(err) {
			t.Fatalf("OpenStateSized of a short object: %v", err)
		}
		putObject(t, s, e.URI, append(bytes.Clone(orig), 1))
		if _, err := readSized(); !IsCorruption(err) {
			t.Fatalf("OpenStateSized of a long object: %v", err)
		}
		deferred.Exclude = []string{m2.CheckpointID}
		_, skipped := selectOK(t, c, deferred, m1.CheckpointID)
		if len(skipped) != 1 || skipped[0].ID != m2.CheckpointID {
			t.Fatalf("skipped = %v", skipped)
		}
		deferred.Exclude = append(deferred.Exclude, m1.CheckpointID)
		if m, skipped, err := c.Select(context.Background(), deferred); m != nil || err != nil || len(skipped) != 2 {
			t.Fatalf("with both excluded: %v %v %v", m, skipped, err)
		}
	})
}

// TestSelectSkipsResealedIncompleteManifest: a manifest with a
// task entry removed and a valid checksum is still never selected.
func TestSelectSkipsResealedIncompleteManifest(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		c := newCatalog(t, s, Options{})
		m1, _ := commit(t, c, artifact{})
		m2, _ := commit(t, c, artifact{})
		key := c.ManifestKey(KindCheckpoint, m2.CheckpointID)
		m, err := DecodeManifest(getObject(t, s, key))
		if err != nil {
			t.Fatal(err)
		}
		m.TaskAttempts = slices.DeleteFunc(m.TaskAttempts, func(a TaskAttempt) bool { return a.TaskID == "map-1" })
		if err := m.Seal(); err != nil {
			t.Fatal(err)
		}
		b, _ := m.Encode()
		if _, err := DecodeManifest(b); err != nil {
			t.Fatalf("the re-sealed manifest should have a valid checksum: %v", err)
		}
		putObject(t, s, key, b)
		_, skipped := selectOK(t, c, wantLatest(1), m1.CheckpointID)
		if len(skipped) != 1 || !errors.Is(skipped[0].Err, ErrMissingTask) || !strings.Contains(skipped[0].Reason, "map-1") {
			t.Fatalf("skipped = %v", skipped)
		}
	})
}

// selectIncompatible expects an *IncompatibleError and checks that the
// store was not changed.
func selectIncompatible(t *testing.T, c *Catalog, w Want, reason Incompatibility) *IncompatibleError {
	t.Helper()
	before := snapshotStore(t, c.Store())
	m, _, err := c.Select(context.Background(), w)
	var inc *IncompatibleError
	if m != nil || !errors.As(err, &inc) || inc.Reason != reason {
		t.Fatalf("Select = %v, %v; want an IncompatibleError (%s)", m, err, reason)
	}
	if after := snapshotStore(t, c.Store()); !reflect.DeepEqual(before, after) {
		t.Fatal("Select changed the store")
	}
	return inc
}

// TestSelectRejectsDowngrade: a checkpoint of a newer job
// version is rejected up front, without touching state, and no older
// checkpoint is silently used instead (rollback is explicit).
func TestSelectRejectsDowngrade(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		c := newCatalog(t, s, Options{})
		commit(t, c, artifact{version: 2})
		m, _ := commit(t, c, artifact{version: 3})
		inc := selectIncompatible(t, c, wantLatest(2), IncompatibleDowngrade)
		if inc.ID != m.CheckpointID || inc.JobVersion != 3 || inc.WantJobVersion != 2 || !strings.Contains(inc.Error(), "downgrade") {
			t.Fatalf("IncompatibleError = %+v: %v", inc, inc)
		}
		// A savepoint taken by version 2 is the explicit way back.
		commit(t, c, artifact{kind: KindSavepoint, name: "v2", version: 2})
		selectOK(t, c, Want{Target: NamedSavepoint, Name: "v2", JobVersion: 2, FormatVersion: 1, PlannedTasks: testPlan}, "v2")
	})
}

// TestSelectRejectsFormatChange: another state format version has no
// migration path and is rejected up front.
func TestSelectRejectsFormatChange(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		c := newCatalog(t, s, Options{})
		commit(t, c, artifact{version: 1, format: 1})
		w := wantLatest(2)
		w.FormatVersion = 2
		inc := selectIncompatible(t, c, w, IncompatibleFormat)
		if inc.FormatVersion != 1 || inc.WantFormatVersion != 2 {
			t.Fatalf("IncompatibleError = %+v", inc)
		}
		// Also when the newer format would be an upgrade otherwise, and for
		// savepoints.
		commit(t, c, artifact{kind: KindSavepoint, name: "sp", format: 1})
		selectIncompatible(t, c, Want{Target: LatestSavepoint, JobVersion: 2, FormatVersion: 2, PlannedTasks: testPlan}, IncompatibleFormat)
	})
}

// TestSelectUpgrade: a newer job version restores an older
// version's savepoint or checkpoint of the same format, even with another
// task set.
func TestSelectUpgrade(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		c := newCatalog(t, s, Options{})
		commit(t, c, artifact{kind: KindSavepoint, name: "before-upgrade", version: 1, tasks: []string{"map-0", "src-0"}})
		m, _ := commit(t, c, artifact{version: 1, tasks: []string{"map-0", "src-0"}})
		selectOK(t, c, wantLatest(2), m.CheckpointID)
		selectOK(t, c, Want{Target: LatestSavepoint, JobVersion: 2, FormatVersion: 1, PlannedTasks: testPlan}, "before-upgrade")
		// The same version with another parallelism is a rescale:
		// map-0 alone restores into map-0 and map-1.
		selectOK(t, c, wantLatest(1), m.CheckpointID)
		// The same version with other operators is a change without a
		// version bump.
		w := wantLatest(1)
		w.PlannedTasks = []string{"map-0", "src-0", "extra-0"}
		inc := selectIncompatible(t, c, w, IncompatiblePlan)
		if inc.Detail != "operators missing from it: extra" {
			t.Fatalf("Detail = %q", inc.Detail)
		}
	})
}

// TestSelectRejectsMaxParallelismChange: state cut
// with one number of key groups cannot be restored into another; the
// error names both values and the field; a rescale with the same
// max_parallelism is fine; an artifact that does not record it is taken
// as having the job's.
func TestSelectRejectsMaxParallelismChange(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		c := newCatalog(t, s, Options{})
		commit(t, c, artifact{kind: KindSavepoint, name: "old", maxPar: 0})
		m, _ := commit(t, c, artifact{maxPar: 128, tasks: []string{"map-0", "src-0"}})
		w := wantLatest(1)
		w.MaxParallelism = 7
		inc := selectIncompatible(t, c, w, IncompatibleMaxParallelism)
		if inc.MaxParallelism != 128 || inc.WantMaxParallelism != 7 {
			t.Fatalf("IncompatibleError = %+v", inc)
		}
		for _, want := range []string{"max_parallelism 128", "max_parallelism 7", "set max_parallelism back to 128"} {
			if !strings.Contains(inc.Error(), want) {
				t.Errorf("%q does not say %q", inc.Error(), want)
			}
		}
		// An upgrade does not lift it.
		w.JobVersion = 2
		selectIncompatible(t, c, w, IncompatibleMaxParallelism)
		w.MaxParallelism = 128
		selectOK(t, c, w, m.CheckpointID)
		selectOK(t, c, Want{Target: NamedSavepoint, Name: "old", JobVersion: 1, FormatVersion: 1, PlannedTasks: testPlan, MaxParallelism: 7}, "old")
	})
}

// TestRetention: Commit keeps the newest Retention completed
// checkpoints and never deletes savepoints.
func TestRetention(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		c := newCatalog(t, s, Options{Retention: 2})
		ctx := context.Background()
		commit(t, c, artifact{kind: KindSavepoint, name: "sp1"})
		// A checkpoint that never committed (state only) below the
		// committed ones is cleaned up too.
		prepare(t, c, artifact{})
		var last *Manifest
		for range 4 {
			last, _ = commit(t, c, artifact{})
		}
		// One in flight above the newest committed one is left alone.
		inflight, _ := prepare(t, c, artifact{})
		commit(t, c, artifact{kind: KindSavepoint, name: "sp2"})

		sums, err := c.List(ctx, KindCheckpoint)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range sums {
			ids = append(ids, s.ID)
		}
		if want := []string{ID(4).String(), ID(5).String(), inflight.CheckpointID}; !slices.Equal(ids, want) {
			t.Fatalf("checkpoints after retention: %v, want %v", ids, want)
		}
		if sums[2].Manifest != nil || sums[2].Err == nil {
			t.Fatalf("the in-flight checkpoint: %+v", sums[2])
		}
		keys, _ := s.List(ctx, testJob+"/checkpoints/"+ID(3).String())
		if len(keys) != 0 {
			t.Fatalf("objects of a deleted checkpoint remain: %v", keys)
		}
		sps, err := c.List(ctx, KindSavepoint)
		if err != nil {
			t.Fatal(err)
		}
		if len(sps) != 2 || sps[0].ID != "sp1" || sps[1].ID != "sp2" || sps[0].Manifest == nil {
			t.Fatalf("savepoints: %+v", sps)
		}
		selectOK(t, c, wantLatest(1), last.CheckpointID)
		// Deleting a savepoint is explicit.
		if err := c.Delete(ctx, KindSavepoint, "sp1"); err != nil {
			t.Fatal(err)
		}
		if keys, _ := s.List(ctx, c.Dir(KindSavepoint, "sp1")); len(keys) != 0 {
			t.Fatalf("after Delete: %v", keys)
		}
		if err := c.Delete(ctx, KindCheckpoint, last.CheckpointID); err == nil {
			t.Fatal("deleting the LATEST checkpoint succeeded")
		}
		if err := c.Delete(ctx, KindCheckpoint, inflight.CheckpointID); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLatestUnchangedWhenManifestWriteFails: the previous
// checkpoint stays selected until its replacement is durably committed.
func TestLatestUnchangedWhenManifestWriteFails(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, inner Store) {
		f := ckpttest.NewFaultStore(inner)
		c := newCatalog(t, f, Options{})
		ctx := context.Background()
		m1, _ := commit(t, c, artifact{})

		m2, _ := prepare(t, c, artifact{})
		f.FailKey(ckpttest.OpCreate, "manifest.json", nil)
		if err := c.Commit(ctx, m2); !errors.Is(err, ckpttest.ErrInjected) || !strings.Contains(err.Error(), "LATEST is unchanged") {
			t.Fatalf("Commit = %v", err)
		}
		f.Heal()
		if got := strings.TrimSpace(string(getObject(t, inner, c.LatestKey()))); got != m1.CheckpointID {
			t.Fatalf("LATEST = %s, want %s", got, m1.CheckpointID)
		}
		selectOK(t, c, wantLatest(1), m1.CheckpointID)

		// The manifest is written, but LATEST cannot be moved: not
		// committed either, and the manifest is removed again.
		m3, _ := prepare(t, c, artifact{})
		f.FailKey(ckpttest.OpPut, "/LATEST", nil)
		if err := c.Commit(ctx, m3); !errors.Is(err, ckpttest.ErrInjected) {
			t.Fatalf("Commit = %v", err)
		}
		f.Heal()
		if _, err := inner.Get(ctx, c.ManifestKey(KindCheckpoint, m3.CheckpointID)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the manifest of the failed commit remains: %v", err)
		}
		selectOK(t, c, wantLatest(1), m1.CheckpointID)

		// Were it left behind (its delete failed too), Select passes it
		// over as uncommitted.
		m4, _ := prepare(t, c, artifact{})
		f.FailKey(ckpttest.OpPut, "/LATEST", nil)
		f.FailKey(ckpttest.OpDelete, "manifest.json", nil)
		if err := c.Commit(ctx, m4); err == nil {
			t.Fatal("Commit succeeded")
		}
		f.Heal()
		_, skipped := selectOK(t, c, wantLatest(1), m1.CheckpointID)
		if len(skipped) != 1 || skipped[0].ID != m4.CheckpointID || !strings.Contains(skipped[0].Reason, "not committed") {
			t.Fatalf("skipped = %v", skipped)
		}

		// The next commit takes a new id and succeeds; a stale one is
		// refused.
		m5, _ := commit(t, c, artifact{})
		if m5.CheckpointID != ID(5).String() {
			t.Fatalf("next id %s, want %s", m5.CheckpointID, ID(5))
		}
		selectOK(t, c, wantLatest(1), m5.CheckpointID)
		if err := c.Commit(ctx, m2); !errors.Is(err, ErrSuperseded) {
			t.Fatalf("committing a stale checkpoint: %v, want ErrSuperseded", err)
		}
	})
}

// TestSelectStoreFailureIsNotFallback: a store that cannot be read is an
// error, never a reason to fall back to an older checkpoint.
func TestSelectStoreFailureIsNotFallback(t *testing.T) {
	t.Parallel()
	f := ckpttest.NewFaultStore(openFile(t))
	c := newCatalog(t, f, Options{})
	commit(t, c, artifact{})
	commit(t, c, artifact{})
	for _, fail := range []struct{ op, key string }{{ckpttest.OpGet, "state/"}, {ckpttest.OpGet, "manifest.json"}, {ckpttest.OpGet, "LATEST"}, {ckpttest.OpList, ""}} {
		f.FailKey(fail.op, fail.key, nil)
		m, skipped, err := c.Select(context.Background(), wantLatest(1))
		if !errors.Is(err, ckpttest.ErrInjected) || m != nil || skipped != nil {
			t.Fatalf("%v: Select = %v, %v, %v; want the store error", fail, m, skipped, err)
		}
		f.Heal()
	}
}

// TestNextIDNeverReuses: ids increase across catalogs (restarts), after
// retention and after failed commits.
func TestNextIDNeverReuses(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		c := newCatalog(t, s, Options{Retention: 1})
		for range 3 {
			commit(t, c, artifact{})
		}
		// Retention kept only 3; a restarted process continues at 4.
		c2 := newCatalog(t, s, Options{Retention: 1})
		if id, err := c2.NextID(ctx); err != nil || id != 4 {
			t.Fatalf("NextID after restart = %d, %v; want 4", id, err)
		}
		// An id issued but not written is not issued twice by this catalog.
		if id, _ := c2.NextID(ctx); id != 5 {
			t.Fatalf("NextID = %d, want 5", id)
		}
		// State written for 6 (commit never came) holds 6 for another catalog.
		m, _ := prepare(t, c2, artifact{})
		if m.CheckpointID != ID(6).String() {
			t.Fatalf("id %s", m.CheckpointID)
		}
		if id, _ := newCatalog(t, s, Options{}).NextID(ctx); id != 7 {
			t.Fatalf("NextID = %d, want 7", id)
		}
		// Even if every checkpoint directory is gone, LATEST keeps the
		// sequence going.
		for _, sum := range must(c.List(ctx, KindCheckpoint)) {
			keys := must(s.List(ctx, c.Dir(KindCheckpoint, sum.ID)))
			for _, k := range keys {
				s.Delete(ctx, k)
			}
		}
		if id, _ := newCatalog(t, s, Options{}).NextID(ctx); id != 4 {
			t.Fatalf("NextID with only LATEST = %d, want 4", id)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSavepoints: named, write-once, selected by name or as the
// newest.
func TestSavepoints(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		c := newCatalog(t, s, Options{})
		w := Want{Target: NamedSavepoint, Name: "nope", JobVersion: 1, FormatVersion: 1, PlannedTasks: testPlan}
		if m, skipped, err := c.Select(ctx, w); m != nil || skipped != nil || err != nil {
			t.Fatalf("a missing savepoint: %v, %v, %v", m, skipped, err)
		}
		commit(t, c, artifact{kind: KindSavepoint, name: "b-first"})
		commit(t, c, artifact{kind: KindSavepoint, name: "a-second"})
		w.Target, w.Name = LatestSavepoint, ""
		selectOK(t, c, w, "a-second")
		w.Target, w.Name = NamedSavepoint, "b-first"
		selectOK(t, c, w, "b-first")

		// A damaged newest savepoint falls back to the previous one.
		putObject(t, s, c.ManifestKey(KindSavepoint, "a-second"), []byte("{}"))
		w.Target, w.Name = LatestSavepoint, ""
		_, skipped := selectOK(t, c, w, "b-first")
		if len(skipped) != 1 || skipped[0].ID != "a-second" {
			t.Fatalf("skipped = %v", skipped)
		}
		// A named one that is damaged is skipped, not "nothing there".
		w.Target, w.Name = NamedSavepoint, "a-second"
		if m, skipped, err := c.Select(ctx, w); m != nil || err != nil || len(skipped) != 1 {
			t.Fatalf("damaged named savepoint: %v, %v, %v", m, skipped, err)
		}
		// A name is never reused, and a committed savepoint's state
		// cannot be overwritten.
		if _, err := c.PutState(ctx, KindSavepoint, "b-first", "map-0", strings.NewReader("x")); !errors.Is(err, ErrExists) {
			t.Fatalf("writing state into savepoint b-first: %v, want ErrExists", err)
		}
		stateless := artifact{kind: KindSavepoint, name: "e", tasks: []string{"src-0"}}
		commit(t, c, stateless)
		m, _ := prepare(t, c, stateless)
		if err := c.Commit(ctx, m); !errors.Is(err, ErrExists) {
			t.Fatalf("a second savepoint named e: %v, want ErrExists", err)
		}
		selectOK(t, c, Want{Target: NamedSavepoint, Name: "b-first", JobVersion: 1, FormatVersion: 1, PlannedTasks: testPlan}, "b-first")
		// But a retried Commit of the same manifest is idempotent.
		m2, _ := prepare(t, c, artifact{kind: KindSavepoint, name: "c"})
		m2.CreatedMS = 5
		if err := c.Commit(ctx, m2); err != nil {
			t.Fatal(err)
		}
		m2.Checksum = ""
		if err := c.Commit(ctx, m2); err != nil {
			t.Fatalf("retrying the same commit: %v", err)
		}
	})
}

// TestSelectSkipsCopiedManifest: a manifest moved to another id's
// directory (or another job's) is not used.
func TestSelectSkipsCopiedManifest(t *testing.T) {
	t.Parallel()
	s := openFile(t)
	c := newCatalog(t, s, Options{})
	m1, _ := commit(t, c, artifact{})
	m2, _ := commit(t, c, artifact{})
	putObject(t, s, c.ManifestKey(KindCheckpoint, m2.CheckpointID), getObject(t, s, c.ManifestKey(KindCheckpoint, m1.CheckpointID)))
	_, skipped := selectOK(t, c, wantLatest(1), m1.CheckpointID)
	if len(skipped) != 1 || !strings.Contains(skipped[0].Reason, "copied") {
		t.Fatalf("skipped = %v", skipped)
	}
}

// TestSelectWithoutLatest: a lost or damaged LATEST falls back to every
// checkpoint with a manifest, newest first.
func TestSelectWithoutLatest(t *testing.T) {
	t.Parallel()
	s := openFile(t)
	c := newCatalog(t, s, Options{})
	commit(t, c, artifact{})
	m2, _ := commit(t, c, artifact{})
	putObject(t, s, c.LatestKey(), []byte("garbage"))
	_, skipped := selectOK(t, c, wantLatest(1), m2.CheckpointID)
	if len(skipped) != 1 || skipped[0].ID != "LATEST" {
		t.Fatalf("skipped = %v", skipped)
	}
	s.Delete(context.Background(), c.LatestKey())
	selectOK(t, c, wantLatest(1), m2.CheckpointID)
	// A commit heals it.
	m3, _ := commit(t, c, artifact{})
	if got := strings.TrimSpace(string(getObject(t, s, c.LatestKey()))); got != m3.CheckpointID {
		t.Fatalf("LATEST = %q", got)
	}
}

func TestWantValidation(t *testing.T) {
	t.Parallel()
	c := newCatalog(t, openFile(t), Options{})
	for i, w := range []Want{
		{},
		{Target: LatestCheckpoint, FormatVersion: 1},
		{Target: LatestCheckpoint, PlannedTasks: testPlan},
		{Target: NamedSavepoint, FormatVersion: 1, PlannedTasks: testPlan},
		{Target: LatestCheckpoint, FormatVersion: 1, PlannedTasks: []string{"a", "a"}},
	} {
		if _, _, err := c.Select(context.Background(), w); err == nil {
			t.Errorf("%d: Select(%+v) succeeded", i, w)
		}
	}
	if _, err := NewCatalog(openFile(t), "bad/job", Options{}); err == nil {
		t.Error("NewCatalog accepted a bad job id")
	}
	if _, err := c.PutState(context.Background(), KindCheckpoint, "7", "t", strings.NewReader("")); err == nil {
		t.Error("PutState accepted a bad id")
	}
	if _, err := c.PutState(context.Background(), KindCheckpoint, ID(7).String(), "../t", strings.NewReader("")); err == nil {
		t.Error("PutState accepted a bad task id")
	}
}

// TestConcurrentPutState: tasks upload their state at the same time, as
// the runtime does.
func TestConcurrentPutState(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		c := newCatalog(t, s, Options{VerifyConcurrency: 3})
		var tasks []string
		for i := range 12 {
			tasks = append(tasks, fmt.Sprintf("op-%d", i))
		}
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := &Manifest{CheckpointID: id.String(), Kind: KindCheckpoint, JobVersion: 1, FormatVersion: 1, PlannedTasks: tasks}
		entries := make([]StateSnapshot, len(tasks))
		errs := make([]error, len(tasks))
		var wg sync.WaitGroup
		for i, task := range tasks {
			m.TaskAttempts = append(m.TaskAttempts, TaskAttempt{TaskID: task, AttemptID: task + ":n:1", NodeID: "n"})
			wg.Go(func() {
				entries[i], errs[i] = c.PutState(ctx, KindCheckpoint, id.String(), task, io.MultiReader(bytes.NewReader(randomBytes(10_000+i))))
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		m.StateSnapshots = entries
		if err := c.Commit(ctx, m); err != nil {
			t.Fatal(err)
		}
		w := Want{Target: LatestCheckpoint, JobVersion: 1, FormatVersion: 1, PlannedTasks: tasks}
		selectOK(t, c, w, id.String())
		// One damaged object among many is found.
		putObject(t, s, entries[7].URI, randomBytes(int(entries[7].Bytes)))
		if m, skipped, err := c.Select(ctx, w); m != nil || err != nil || len(skipped) != 1 || !strings.Contains(skipped[0].Reason, "op-7") {
			t.Fatalf("Select = %v, %v, %v", m, skipped, err)
		}
	})
}

// PutStateSum records the producer's checksum and count without hashing
// again; a count that differs from the bytes read, a malformed checksum
// or a failing sum fail the call.
func TestPutStateSum(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s Store) {
		c := newCatalog(t, s, Options{})
		ctx := context.Background()
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		body := randomBytes(100_000)
		h := sha256.Sum256(body)
		crc := objsum.NewCRC64()
		crc.Write(body)
		// Both checksums are recorded and verified: CRC-64/NVME, what
		// checkpoints record, and SHA-256, what they recorded before.
		for _, want := range []string{objsum.Format(objsum.CRC64NVME, crc.Sum(nil)), "sha256:" + hex.EncodeToString(h[:])} {
			snap, err := c.PutStateSum(ctx, KindCheckpoint, id.String(), "map-0", bytes.NewReader(body), func() (string, int64, error) {
				return want, int64(len(body)), nil
			})
			if err != nil || snap.Checksum != want || snap.Bytes != int64(len(body)) {
				t.Fatalf("%+v %v", snap, err)
			}
			if got, err := readState(t, c, snap); err != nil || !bytes.Equal(got, body) {
				t.Fatalf("reading it back: %v", err)
			}
			// The wrong value of the same algorithm is a corrupt object.
			bad, last := snap, "0"
			if strings.HasSuffix(want, "0") {
				last = "1"
			}
			bad.Checksum = want[:len(want)-1] + last
			if _, err := readState(t, c, bad); !IsCorruption(err) {
				t.Fatalf("%s: a wrong checksum reads back as %v", want, err)
			}
		}
		want := "sha256:" + hex.EncodeToString(h[:])
		for name, sum := range map[string]func() (string, int64, error){
			"count":    func() (string, int64, error) { return want, int64(len(body)) - 1, nil },
			"checksum": func() (string, int64, error) { return "sha256:xyz", int64(len(body)), nil },
			"error":    func() (string, int64, error) { return "", 0, errors.New("snapshot failed") },
		} {
			if _, err := c.PutStateSum(ctx, KindCheckpoint, id.String(), "map-1", bytes.NewReader(body), sum); err == nil {
				t.Fatalf("%s: PutStateSum succeeded", name)
			}
		}
	})
}

// Jobs finds the jobs with artifacts and nothing else; Verify reads a
// manifest's state and names a damaged object.
func TestJobsAndVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openFile(t)
	put := func(key, body string) {
		t.Helper()
		if err := s.Put(ctx, key, strings.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}
	put("orders/checkpoints/LATEST", "00000000000000000001\n")
	put("clicks/savepoints/v1/state/a-0.snap", "x")
	put("notes/readme.txt", "not a job")
	put("bad.id/checkpoints/x", "x")
	jobs, err := Jobs(ctx, s)
	if err != nil || !slices.Equal(jobs, []string{"clicks", "orders"}) {
		t.Fatalf("Jobs = %v, %v", jobs, err)
	}

	cat, err := NewCatalog(s, "clicks", Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := "the state"
	e, err := cat.PutState(ctx, KindSavepoint, "v2", "a-0", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	m := &Manifest{Kind: KindSavepoint, Name: "v2", CheckpointID: "v2", JobID: "clicks", StateSnapshots: []StateSnapshot{e}}
	if err := cat.Verify(ctx, m); err != nil {
		t.Fatal(err)
	}
	put(e.URI, "the stat!")
	if err := cat.Verify(ctx, m); !IsCorruption(err) || !strings.Contains(err.Error(), e.URI) {
		t.Fatalf("Verify of a changed object: %v", err)
	}
	if err := s.Delete(ctx, e.URI); err != nil {
		t.Fatal(err)
	}
	if err := cat.Verify(ctx, m); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Verify of a missing object: %v", err)
	}
}
