package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	arkflow "github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// specOf is a keyed window job checkpointing into dir. The fields of v
// change what the compatibility rules look at.
type variant struct {
	version, format, maxPar, par int
	extra                        bool // one more operator in the graph
}

func specOf(t *testing.T, dir string, v variant) *job.Spec {
	t.Helper()
	if v.version == 0 {
		v.version = 1
	}
	if v.format == 0 {
		v.format = 1
	}
	if v.maxPar == 0 {
		v.maxPar = 128
	}
	if v.par == 0 {
		v.par = 2
	}
	ops, edges := "  - {id: w, kind: window, stateful: true, key_field: user, config: {window: {type: tumbling, size_ms: 1000}, aggregates: [{function: count, as: n}]}}\n",
		"  - {id: in-w, from: in, to: w, partitioned: true}\n  - {id: w-out, from: w, to: out}\n"
	if v.extra {
		ops += "  - {id: f, kind: filter, config: {expr: \"n > 0\"}}\n"
		edges = "  - {id: in-w, from: in, to: w, partitioned: true}\n  - {id: w-f, from: w, to: f}\n  - {id: f-out, from: f, to: out}\n"
	}
	spec, err := job.Parse(fmt.Appendf(nil, `
id: orders
version: %d
parallelism: %d
max_parallelism: %d
state: {backend: memory, format_version: %d}
checkpoint: {interval_ms: 3600000, object_store_uri: "file://%s"}
operators:
  - {id: in, kind: source}
%s  - {id: out, kind: sink}
edges:
%ssources:
  - operator_id: in
    input_type: generate
    config:
      count: 1000000
      rate_per_sec: 20000
      batch_size: 100
      partitions: 2
      fields:
        - {name: user, type: string, prefix: "u-", cardinality: 10}
        - {name: ts, type: timestamp, unit: ms, step_ms: 1}
    time: {mode: event_time, timestamp_field: ts, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 10}}
sinks:
  - {operator_id: out, output_type: drop}
`, v.version, v.par, v.maxPar, v.format, dir, ops, edges))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// takeArtifacts runs spec, takes a checkpoint and the savepoint name
// (when not ""), and stops it. It returns the checkpoint's id.
func takeArtifacts(t *testing.T, spec *job.Spec, savepoint string) string {
	t.Helper()
	j, err := arkflow.FromSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	polltest.Eventually(t, "the job running", func() bool { return j.Status() == arkflow.Running },
		func() string { return fmt.Sprintf("status %v", j.Status()) })
	time.Sleep(50 * time.Millisecond) // some rows into the windows
	id, err := j.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if savepoint != "" {
		if err := j.Savepoint(ctx, savepoint); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return id
}

// manifestOf reads a manifest as the job wrote it.
func manifestOf(t *testing.T, dir, key string) *ckptstore.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ckptstore.DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// List and Inspect describe the checkpoints and savepoints a real job
// took, as their manifests record them; Verify reads their state.
func TestListInspectVerify(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	first := takeArtifacts(t, specOf(t, dir, variant{}), "v1")
	second := takeArtifacts(t, specOf(t, dir, variant{}), "")

	st, err := checkpoint.Open(ctx, "file://"+dir, checkpoint.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.URI() != "file://"+dir {
		t.Fatalf("URI %q", st.URI())
	}
	jobs, err := st.Jobs(ctx)
	if err != nil || !slices.Equal(jobs, []string{"orders"}) {
		t.Fatalf("Jobs = %v, %v", jobs, err)
	}
	list, err := st.List(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range list {
		ids = append(ids, string(in.Kind)+" "+in.ID)
		if !in.Completed || in.Problem != "" {
			t.Fatalf("%s %s: not completed: %s", in.Kind, in.ID, in.Problem)
		}
	}
	// The second run restored the first's checkpoint, and took the next.
	if !slices.Contains(ids, "checkpoint "+first) || !slices.Contains(ids, "checkpoint "+second) || ids[len(ids)-1] != "savepoint v1" {
		t.Fatalf("artifacts %v; want checkpoints %s and %s, then savepoint v1", ids, first, second)
	}
	for _, in := range list {
		if in.Latest != (in.ID == second) {
			t.Fatalf("%s %s: Latest %v", in.Kind, in.ID, in.Latest)
		}
	}

	// Inspect, with the id's leading zeros left out: what the manifest says.
	short := strings.TrimLeft(second, "0")
	in, err := st.Inspect(ctx, "orders", checkpoint.KindCheckpoint, short)
	if err != nil {
		t.Fatal(err)
	}
	m := manifestOf(t, dir, "orders/checkpoints/"+second+"/manifest.json")
	if in.ID != second || in.JobVersion != m.JobVersion || in.FormatVersion != m.FormatVersion || in.MaxParallelism != 128 ||
		in.Generation != m.Generation || in.PlanDigest != m.PlanDigest || in.Created.UnixMilli() != m.CreatedMS {
		t.Fatalf("inspected %+v\nmanifest %+v", in, m)
	}
	var taskIDs []string
	var bytes int64
	for _, task := range in.Tasks {
		taskIDs = append(taskIDs, task.ID)
		bytes += task.StateBytes
	}
	if !slices.Equal(taskIDs, m.PlannedTasks) || len(m.StateSnapshots) == 0 || bytes != in.Bytes {
		t.Fatalf("tasks %v, %d bytes; manifest plans %v with %d snapshots", taskIDs, in.Bytes, m.PlannedTasks, len(m.StateSnapshots))
	}
	for _, s := range m.StateSnapshots {
		i := slices.IndexFunc(in.Tasks, func(t checkpoint.Task) bool { return t.ID == s.TaskID })
		if in.Tasks[i].StateBytes != s.Bytes || in.Tasks[i].StateChecksum != s.Checksum {
			t.Fatalf("task %s: %+v; manifest entry %+v", s.TaskID, in.Tasks[i], s)
		}
	}
	for _, p := range m.SourcePositions {
		i := slices.IndexFunc(in.Tasks, func(t checkpoint.Task) bool { return t.ID == p.TaskID })
		if !slices.ContainsFunc(in.Tasks[i].Positions, func(q connectors.Position) bool { return q.Partition == p.Partition && q.Offset == p.Offset }) {
			t.Fatalf("task %s: positions %v lack %+v", p.TaskID, in.Tasks[i].Positions, p)
		}
	}
	sp, err := st.Inspect(ctx, "orders", checkpoint.KindSavepoint, "v1")
	if err != nil || sp.Kind != checkpoint.KindSavepoint || !sp.Completed || sp.Latest {
		t.Fatalf("savepoint: %+v, %v", sp, err)
	}
	if err := st.Verify(ctx, "orders", checkpoint.KindSavepoint, "v1"); err != nil {
		t.Fatal(err)
	}

	// A missing artifact, and bad arguments, each named.
	if _, err := st.Inspect(ctx, "orders", checkpoint.KindSavepoint, "v9"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("missing savepoint: %v", err)
	}
	for _, c := range []struct {
		job  string
		kind checkpoint.Kind
		id   string
		want string
	}{
		{"", checkpoint.KindSavepoint, "v1", "job is empty"},
		{"a/b", checkpoint.KindSavepoint, "v1", "job_id"},
		{"orders", "snapshot", "v1", `kind "snapshot"`},
		{"orders", checkpoint.KindCheckpoint, "x1", `id "x1"`},
		{"orders", checkpoint.KindSavepoint, "a/b", `savepoint name "a/b"`},
	} {
		if _, err := st.Inspect(ctx, c.job, c.kind, c.id); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Inspect(%q, %q, %q): %v; want %q", c.job, c.kind, c.id, err, c.want)
		}
	}

	// Damage: a state object cut short fails Verify; a checkpoint without
	// its manifest is listed, not Completed.
	s := m.StateSnapshots[0]
	path := filepath.Join(dir, filepath.FromSlash(s.URI))
	if err := os.Truncate(path, s.Bytes-1); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(ctx, "orders", checkpoint.KindCheckpoint, second); !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), s.URI) {
		t.Fatalf("Verify of a cut state object: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "orders", "checkpoints", first, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	in, err = st.Inspect(ctx, "orders", checkpoint.KindCheckpoint, first)
	if err != nil || in.Completed || !strings.Contains(in.Problem, "no manifest.json") {
		t.Fatalf("without its manifest: %+v, %v", in, err)
	}
	if err := st.Verify(ctx, "orders", checkpoint.KindCheckpoint, first); err == nil || !strings.Contains(err.Error(), "not complete") {
		t.Fatalf("Verify without a manifest: %v", err)
	}

	if _, err := checkpoint.Open(ctx, "file://"+filepath.Join(dir, "nope"), checkpoint.StoreOptions{}); err == nil {
		t.Fatal("Open must not create a missing directory")
	}
	if _, err := os.Stat(filepath.Join(dir, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("Open created the directory")
	}
	if _, err := checkpoint.Open(ctx, "ftp://h/x", checkpoint.StoreOptions{}); err == nil || !strings.Contains(err.Error(), "unsupported scheme") {
		t.Fatalf("Open(ftp): %v", err)
	}
}
