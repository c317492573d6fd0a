package ckptstore

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// putPart uploads the state of tasks (src-* tasks get a position instead)
// and writes node's part of checkpoint id.
func putPart(t *testing.T, c *Catalog, kind Kind, id, node string, gen uint64, tasks ...string) string {
	t.Helper()
	ctx := context.Background()
	m := &Manifest{CheckpointID: id, JobVersion: 1, Generation: gen, FormatVersion: 1, Kind: kind,
		PlannedTasks: tasks, PlanDigest: "digest", MaxParallelism: 128, WatermarksMS: map[string]int64{}}
	if kind == KindSavepoint {
		m.Name = id
	}
	for _, task := range tasks {
		m.TaskAttempts = append(m.TaskAttempts, TaskAttempt{TaskID: task, AttemptID: task + ":" + node + ":run", NodeID: node})
		m.WatermarksMS[task] = 42
		if strings.HasPrefix(task, "src-") {
			m.SourcePositions = append(m.SourcePositions, SourcePosition{TaskID: task, Partition: 0, Offset: 7})
			continue
		}
		snap, err := c.PutState(ctx, kind, id, task, strings.NewReader("state of "+task))
		if err != nil {
			t.Fatal(err)
		}
		snap.NodeID = node
		m.StateSnapshots = append(m.StateSnapshots, snap)
	}
	key, err := c.PutPart(ctx, m, node)
	if err != nil {
		t.Fatal(err)
	}
	if want := c.Dir(kind, id) + "manifests/" + strings.ReplaceAll(node, "/", "_") + ".json"; key != want {
		t.Fatalf("part key %q, want %q", key, want)
	}
	return key
}

// Parts of every unit merge into one
// committed manifest with the whole plan's task set; a missing part, a
// task in two parts or parts of different generations are refused and
// leave LATEST where it was; a redelivered commit returns the committed
// manifest; a Hub's id may lack the leading zeros.
func TestCommitParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, openFile(t), Options{})
	plan := []string{"map-0", "map-1", "src-0", "src-1"}
	id1, err := ParseHubID("1733011200000")
	if err != nil {
		t.Fatal(err)
	}
	if id1.String() != "00000001733011200000" {
		t.Fatalf("ParseHubID: %s", id1)
	}
	for _, bad := range []string{"", "0", "x1", "123456789012345678901", "-1"} {
		if _, err := ParseHubID(bad); err == nil {
			t.Errorf("ParseHubID(%q) accepted", bad)
		}
	}
	a := id1.String()
	putPart(t, c, KindCheckpoint, a, "node/a", 3, "map-0", "src-0")
	// One part only: not sealed.
	_, err = CommitParts(ctx, c, Parts{Kind: KindCheckpoint, ID: a, Nodes: []string{"node/a"}, PlannedTasks: plan})
	if !errors.Is(err, ErrMissingTask) {
		t.Fatalf("commit with a unit missing: %v, want ErrMissingTask", err)
	}
	if l, err := c.Latest(ctx); err != nil || l != 0 {
		t.Fatalf("LATEST after a refused commit: %v %v", l, err)
	}
	// A part named but absent.
	if _, err := CommitParts(ctx, c, Parts{Kind: KindCheckpoint, ID: a, Nodes: []string{"node/a", "node-b"}, PlannedTasks: plan}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("commit with an absent part: %v, want ErrNotFound", err)
	}
	putPart(t, c, KindCheckpoint, a, "node-b", 3, "map-1", "src-1")
	m, err := CommitParts(ctx, c, Parts{Kind: KindCheckpoint, ID: a, Nodes: []string{"node/a", "node-b"}, PlannedTasks: plan, PlanDigest: "digest"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.TaskAttempts) != 4 || len(m.StateSnapshots) != 2 || len(m.SourcePositions) != 2 || len(m.WatermarksMS) != 4 || m.Generation != 3 {
		t.Fatalf("merged manifest: %+v", m)
	}
	if l, _ := c.Latest(ctx); l != id1 {
		t.Fatalf("LATEST %s, want %s", l, id1)
	}
	got, skipped, err := c.Select(ctx, Want{Target: ExactCheckpoint, Name: a, JobVersion: 1, FormatVersion: 1, PlannedTasks: plan})
	if err != nil || got == nil || got.CheckpointID != a {
		t.Fatalf("select exact: %v %v %v", got, skipped, err)
	}
	// Redelivered: the same manifest, no error.
	again, err := CommitParts(ctx, c, Parts{Kind: KindCheckpoint, ID: a, Nodes: []string{"node-b", "node/a"}, PlannedTasks: plan})
	if err != nil || again.Checksum != got.Checksum {
		t.Fatalf("redelivered commit: %v (%v)", err, again)
	}

	// A task in two parts.
	b := (id1 + 10).String()
	putPart(t, c, KindCheckpoint, b, "node/a", 3, "map-0", "src-0")
	putPart(t, c, KindCheckpoint, b, "node-b", 3, "map-0", "map-1", "src-1")
	if _, err := CommitParts(ctx, c, Parts{Kind: KindCheckpoint, ID: b, Nodes: []string{"node/a", "node-b"}, PlannedTasks: plan}); !errors.Is(err, ErrDuplicateTask) {
		t.Fatalf("commit with a task twice: %v, want ErrDuplicateTask", err)
	}
	// Parts of two generations.
	cc := (id1 + 20).String()
	putPart(t, c, KindCheckpoint, cc, "node/a", 3, "map-0", "src-0")
	putPart(t, c, KindCheckpoint, cc, "node-b", 4, "map-1", "src-1")
	if _, err := CommitParts(ctx, c, Parts{Kind: KindCheckpoint, ID: cc, Nodes: []string{"node/a", "node-b"}, PlannedTasks: plan}); err == nil || !strings.Contains(err.Error(), "generation") {
		t.Fatalf("commit across generations: %v", err)
	}
	if l, _ := c.Latest(ctx); l != id1 {
		t.Fatalf("LATEST moved to %s after refused commits", l)
	}
	// An uncommitted id is not selected by ExactCheckpoint.
	got, skipped, err = c.Select(ctx, Want{Target: ExactCheckpoint, Name: cc, JobVersion: 1, FormatVersion: 1, PlannedTasks: plan})
	if err != nil || got != nil || len(skipped) != 1 {
		t.Fatalf("select exact uncommitted: %v %v %v", got, skipped, err)
	}

	// A savepoint in parts.
	putPart(t, c, KindSavepoint, "before-upgrade", "node/a", 3, "map-0", "src-0")
	putPart(t, c, KindSavepoint, "before-upgrade", "node-b", 3, "map-1", "src-1")
	sp, err := CommitParts(ctx, c, Parts{Kind: KindSavepoint, ID: "before-upgrade", Nodes: []string{"node/a", "node-b"}, PlannedTasks: plan})
	if err != nil || sp.Name != "before-upgrade" {
		t.Fatalf("savepoint commit: %v %+v", err, sp)
	}
	// Committed: no more parts.
	if _, err := c.PutPart(ctx, &Manifest{CheckpointID: "before-upgrade", Name: "before-upgrade", Kind: KindSavepoint, FormatVersion: 1,
		PlannedTasks: []string{"src-0"}, TaskAttempts: []TaskAttempt{{TaskID: "src-0"}}}, "node/a"); !errors.Is(err, ErrExists) {
		t.Fatalf("part of a committed savepoint: %v", err)
	}
}
