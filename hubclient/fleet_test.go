package hubclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// fleetJob has two placement units (gen-0 → out-0, gen-1 → out-1) and a
// checkpoint store shared by every node.
func fleetJob(c *counter, store string) *arkflow.Builder {
	return arkflow.NewJob("fleet").Parallelism(2).
		Source("gen", generate.Config{Partitions: 2, RatePerSec: 2000, BatchSize: 50, Fields: []generate.Field{{Name: "N", Type: "int64", Sequence: true}}}).
		Sink("out", c.sink()).
		State(job.State{Backend: "memory"}).
		Checkpoint(job.Checkpoint{IntervalMS: 3_600_000, ObjectStoreURI: "file://" + store})
}

// runNode runs an Agent named node against its own fake Hub.
func runNode(t *testing.T, node string, b *arkflow.Builder) (*fakeHub, *hubclient.Agent) {
	t.Helper()
	h := newFakeHub(t, time.Second)
	a, err := hubclient.New(hubclient.Config{HubURL: h.srv.URL, NodeID: node, DataDir: t.TempDir(), Jobs: []*arkflow.Builder{b}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h, a
}

// unitStart is the job_start of b's tasks on node at generation gen,
// restoring checkpoint from when set.
func unitStart(t *testing.T, id string, b *arkflow.Builder, node string, gen uint64, from string, tasks ...string) hubwire.AgentCommand {
	t.Helper()
	spec, err := json.Marshal(b.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p := hubwire.JobCommandPayload{JobID: "fleet", Spec: spec, Generation: gen}
	for _, task := range tasks {
		p.Assignments = append(p.Assignments, hubwire.TaskAttempt{ID: fmt.Sprintf("%s:%s:%d", task, node, gen), JobID: "fleet", TaskID: task, Generation: gen, NodeID: node})
	}
	if from != "" {
		p.Recovery = &hubwire.JobRecovery{CheckpointID: from}
	}
	payload, _ := json.Marshal(p)
	return hubwire.AgentCommand{ID: id, Operation: hubwire.OpJobStart, ResourceID: "fleet", Generation: gen, Payload: payload}
}

func ckptCommand(id, ckpt string, gen uint64) hubwire.AgentCommand {
	payload, _ := json.Marshal(hubwire.CheckpointPayload{JobID: "fleet", CheckpointID: ckpt})
	return hubwire.AgentCommand{ID: id, Operation: hubwire.OpJobCheckpoint, ResourceID: "fleet", Generation: gen, Payload: payload}
}

func commitCommand(id, ckpt string, gen uint64, nodes ...string) hubwire.AgentCommand {
	payload, _ := json.Marshal(hubwire.CommitPayload{JobID: "fleet", CheckpointID: ckpt, ManifestNodes: nodes})
	return hubwire.AgentCommand{ID: id, Operation: hubwire.OpJobCheckpointCommit, ResourceID: "fleet", Generation: gen, Payload: payload}
}

func succeeded(t *testing.T, h *fakeHub, id string) hubwire.CommandResult {
	t.Helper()
	res := waitResult(t, h, id)
	if res.State != hubwire.OpStateSucceeded {
		t.Fatalf("%s: %+v", id, res)
	}
	return res
}

// Two Agents each run one unit of
// a job; the Hub's checkpoint is a part on each, committed by one of
// them only with both parts; a newer generation of the same units is
// adopted without a restart; an Agent that no longer runs the job can
// still merge a commit; a changed task set restarts the job from the
// checkpoint the recovery names.
func TestFleetUnitsOnTwoAgents(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	ca, cb := &counter{}, &counter{}
	ha, a := runNode(t, "node-a", fleetJob(ca, store))
	hb, _ := runNode(t, "node-b", fleetJob(cb, store))
	b := fleetJob(nil, store)

	ha.send(unitStart(t, "a1", b, "node-a", 1, "", "gen-0", "out-0"))
	hb.send(unitStart(t, "b1", b, "node-b", 1, "", "gen-1", "out-1"))
	succeeded(t, ha, "a1")
	succeeded(t, hb, "b1")
	polltest.Eventually(t, "rows on both nodes", func() bool { return ca.n.Load() > 50 && cb.n.Load() > 50 })
	if m := hubclient.JobOf(a, "fleet").Metrics(); len(m.Tasks) != 2 {
		t.Fatalf("node-a runs %d tasks, want its unit's 2: %+v", len(m.Tasks), m.Tasks)
	}
	polltest.Eventually(t, "node-a's report of its assignment", func() bool {
		s, ok := ha.lastJob("fleet")
		return ok && s.State == hubwire.JobRunning && strings.Join(s.AssignmentIDs, ",") == "gen-0:node-a:1,out-0:node-a:1"
	})

	// Round 1: a part on each node, committed with both.
	const id1 = "1733011200000"
	ha.send(ckptCommand("a2", id1, 1))
	hb.send(ckptCommand("b2", id1, 1))
	ra, rb := succeeded(t, ha, "a2"), succeeded(t, hb, "b2")
	if ra.ObservedCheckpointID != id1 || ra.CheckpointManifestURI != "fleet/checkpoints/00000001733011200000/manifests/node-a.json" ||
		rb.CheckpointManifestURI != "fleet/checkpoints/00000001733011200000/manifests/node-b.json" {
		t.Fatalf("part results: %+v %+v", ra, rb)
	}
	latest := filepath.Join(store, "fleet", "checkpoints", "LATEST")
	ha.send(commitCommand("a3", id1, 1, "node-a"))
	if res := waitResult(t, ha, "a3"); res.State != hubwire.OpStateFailed || !strings.Contains(res.Error, "missing") {
		t.Fatalf("a commit without node-b's part: %+v", res)
	}
	if _, err := os.Stat(latest); !os.IsNotExist(err) {
		t.Fatalf("LATEST after a refused commit: %v", err)
	}
	ha.send(commitCommand("a4", id1, 1, "node-a", "node-b"))
	if res := succeeded(t, ha, "a4"); res.CheckpointManifestURI != "fleet/checkpoints/00000001733011200000/manifest.json" {
		t.Fatalf("commit result: %+v", res)
	}
	if b, err := os.ReadFile(latest); err != nil || strings.TrimSpace(string(b)) != "00000001733011200000" {
		t.Fatalf("LATEST after the commit: %q %v", b, err)
	}

	// A savepoint in two parts, committed under its name.
	for _, n := range []struct {
		h  *fakeHub
		id string
	}{{ha, "a4s"}, {hb, "b4s"}} {
		payload, _ := json.Marshal(hubwire.CheckpointPayload{JobID: "fleet", CheckpointID: "sp-7", Name: "before-upgrade"})
		n.h.send(hubwire.AgentCommand{ID: n.id, Operation: hubwire.OpJobSavepoint, ResourceID: "fleet", Generation: 1, Payload: payload})
		if res := succeeded(t, n.h, n.id); res.ObservedCheckpointID != "before-upgrade" || !strings.HasPrefix(res.CheckpointManifestURI, "fleet/savepoints/before-upgrade/manifests/") {
			t.Fatalf("savepoint part: %+v", res)
		}
	}
	spCommit := commitCommand("b4c", "before-upgrade", 1, "node-a", "node-b")
	spCommit.Operation = hubwire.OpJobSavepointCommit
	hb.send(spCommit)
	if res := succeeded(t, hb, "b4c"); res.CheckpointManifestURI != "fleet/savepoints/before-upgrade/manifest.json" {
		t.Fatalf("savepoint commit: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(store, "fleet", "savepoints", "before-upgrade", "manifest.json")); err != nil {
		t.Fatal(err)
	}

	// Generation 2 with the same units: adopted, not restarted.
	before := hubclient.JobOf(a, "fleet")
	ha.send(unitStart(t, "a5", b, "node-a", 2, id1, "gen-0", "out-0"))
	hb.send(unitStart(t, "b5", b, "node-b", 2, id1, "gen-1", "out-1"))
	succeeded(t, ha, "a5")
	succeeded(t, hb, "b5")
	if after := hubclient.JobOf(a, "fleet"); after != before || after.Status() != arkflow.Running {
		t.Fatalf("the job was restarted to adopt generation 2 (%p → %p, %v)", before, after, after.Status())
	}
	polltest.Eventually(t, "node-a's report at generation 2", func() bool {
		s, ok := ha.lastJob("fleet")
		return ok && s.Generation == 2 && s.State == hubwire.JobRunning && strings.Join(s.AssignmentIDs, ",") == "gen-0:node-a:2,out-0:node-a:2"
	})
	// A checkpoint command of generation 1 is now stale.
	ha.send(ckptCommand("a6", "1733011300000", 1))
	if res := waitResult(t, ha, "a6"); res.State != hubwire.OpStateSuperseded {
		t.Fatalf("a stale checkpoint command: %+v", res)
	}

	// Round 2 at generation 2; node-b's job stops, and node-b merges the
	// commit all the same, with the spec it was last sent.
	const id2 = "1733011400000"
	ha.send(ckptCommand("a7", id2, 2))
	hb.send(ckptCommand("b7", id2, 2))
	succeeded(t, ha, "a7")
	succeeded(t, hb, "b7")
	hb.send(jobCommand("b8", hubwire.OpJobStop, "fleet", 2))
	succeeded(t, hb, "b8")
	hb.send(commitCommand("b9", id2, 2, "node-a", "node-b"))
	if res := succeeded(t, hb, "b9"); res.CheckpointManifestURI != "fleet/checkpoints/00000001733011400000/manifest.json" {
		t.Fatalf("commit by a node that does not run the job: %+v", res)
	}
	var m struct {
		Generation uint64 `json:"generation"`
		Tasks      []struct {
			NodeID string `json:"node_id"`
		} `json:"task_attempts"`
	}
	body, err := os.ReadFile(filepath.Join(store, "fleet", "checkpoints", "00000001733011400000", "manifest.json"))
	if err != nil || json.Unmarshal(body, &m) != nil || m.Generation != 2 || len(m.Tasks) != 4 {
		t.Fatalf("merged manifest of round 2: %v %s", err, body)
	}

	// Node-b is gone: node-a takes every task at generation 3, a new
	// task set, so the job restarts from the checkpoint the recovery
	// names.
	ha.send(unitStart(t, "a10", b, "node-a", 3, id2, "gen-0", "gen-1", "out-0", "out-1"))
	succeeded(t, ha, "a10")
	j := hubclient.JobOf(a, "fleet")
	if j == before {
		t.Fatal("a new task set did not restart the job")
	}
	if got := j.Metrics().Checkpoints.Restored; got != "checkpoint 00000001733011400000" {
		t.Fatalf("the restarted job restored %q", got)
	}
	const id3 = "1733011500000"
	ha.send(ckptCommand("a11", id3, 3))
	succeeded(t, ha, "a11")
	ha.send(commitCommand("a12", id3, 3, "node-a"))
	succeeded(t, ha, "a12")
	if b, err := os.ReadFile(latest); err != nil || strings.TrimSpace(string(b)) != "00000001733011500000" {
		t.Fatalf("LATEST after round 3: %q %v", b, err)
	}

	// An operator's restart (restart: true) at generation 4 runs the same
	// units again, from the checkpoint it names, instead of adopting.
	restart := unitStart(t, "a13", b, "node-a", 4, id3, "gen-0", "gen-1", "out-0", "out-1")
	var rp hubwire.JobCommandPayload
	if err := json.Unmarshal(restart.Payload, &rp); err != nil {
		t.Fatal(err)
	}
	rp.Restart = true
	restart.Payload, _ = json.Marshal(rp)
	ha.send(restart)
	succeeded(t, ha, "a13")
	if again := hubclient.JobOf(a, "fleet"); again == j || again.Status() != arkflow.Running || again.Metrics().Checkpoints.Restored != "checkpoint 00000001733011500000" {
		t.Fatalf("restart: true did not run the units again from %s (%p → %p, %v)", id3, j, again, again.Metrics().Checkpoints.Restored)
	}
}
