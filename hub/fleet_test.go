package hub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// unitCaps are the capabilities of an Agent that runs parts of jobs.
var unitCaps = append(slices.Clone(v1Capabilities), "placement_units")

var httpClient = &http.Client{Timeout: 10 * time.Second}

// fleetAgent is a simulated Agent that runs parts of jobs: the test reads
// its commands and answers them; a goroutine keeps its lease while alive.
type fleetAgent struct {
	*v1Agent
	stop context.CancelFunc
	done chan struct{}
}

func newFleetAgent(t *testing.T, api, id string) *fleetAgent {
	a := &fleetAgent{v1Agent: &v1Agent{t: t, api: api, nodeID: id, caps: unitCaps}, done: make(chan struct{})}
	a.register()
	ctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	session := a.session
	go func() {
		defer close(a.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				body, _ := json.Marshal(map[string]any{"node_id": id, "session_token": session, "state": "online",
					"protocol_version": "v1", "capabilities": unitCaps})
				req, _ := http.NewRequest("POST", api+"/agent/heartbeat", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := httpClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}
	}()
	t.Cleanup(func() { a.silence() })
	return a
}

// silence stops the heartbeats: the lease lapses.
func (a *fleetAgent) silence() {
	a.stop()
	<-a.done
}

// next polls until a command of op arrives and returns it. A
// job_checkpoint that comes while it waits for another operation is the
// Hub's periodic round, due as soon as a generation runs: its part is
// failed (the round fails, the previous checkpoint stays the newest
// completed) and the wait goes on.
func (a *fleetAgent) next(op string) map[string]any {
	a.t.Helper()
	var found map[string]any
	polltest.Eventually(a.t, a.nodeID+"'s "+op, func() bool {
		for _, c := range a.poll() {
			if c["operation"] == op {
				found = c
				return true
			}
			if c["operation"] == "job_checkpoint" {
				// Its generation may have ended meanwhile, so the Hub may
				// refuse the result as stale: either way the round fails.
				a.result(c, "failed", 100, map[string]any{"error": "not this test's round", "failure_class": "temporary_execution"})
				continue
			}
			a.t.Fatalf("%s: expected %s, got %s: %v", a.nodeID, op, c["operation"], c)
		}
		return false
	})
	return found
}

func (a *fleetAgent) succeed(cmd map[string]any, extra map[string]any) {
	a.t.Helper()
	if extra == nil {
		extra = map[string]any{}
	}
	extra["observed_generation"] = cmd["generation"]
	if st, v := a.result(cmd, "succeeded", 100, extra); st != 200 {
		a.t.Fatalf("%s: result of %s: %d %v", a.nodeID, cmd["operation"], st, v)
	}
}

// tasksOf lists the task ids of a job_start's (or checkpoint's) attempts.
func tasksOf(t *testing.T, cmd map[string]any) []string {
	t.Helper()
	p, _ := cmd["payload"].(map[string]any)
	var out []string
	for _, a := range p["assignments"].([]any) {
		out = append(out, a.(map[string]any)["task_id"].(string))
	}
	sort.Strings(out)
	return out
}

// fleetSpec is a job of three independent chains (generate → drop, both
// with parallelism 3): three placement units, with a checkpoint block
// (its store in dir) so that it takes checkpoints.
func fleetSpec(dir string) string {
	return `{"id":"fleet","operators":[{"id":"gen","kind":"source","parallelism":3},{"id":"out","kind":"sink","parallelism":3}],
	"edges":[{"id":"e","from":"gen","to":"out"}],
	"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
	"sinks":[{"operator_id":"out","output_type":"drop"}],
	"state":{"backend":"memory"},"checkpoint":{"interval_ms":3600000,"object_store_uri":"file://` + dir + `"}}`
}

// TestFleetPlacementCheckpointsFailover drives the Hub's side of a job run
// by three Agents that run parts of jobs: the three placement
// units go one to each Agent; a checkpoint is cut in three parts
// and committed by one node only when all three succeeded, a round with a
// failed part is failed and the previous checkpoint stays the newest
// completed; when an Agent's lease lapses its unit
// moves to another Agent as a new generation restoring from the last
// completed checkpoint, while the others adopt the generation, and the
// job is observed running again, never failed. Not parallel: its lease is
// 1 s, and a neighbour starving the heartbeats would lapse a lease the
// test did not end.
func TestFleetPlacementCheckpointsFailover(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Lease = time.Second
	_, _, api := serveHub(t, cfg)
	agents := map[string]*fleetAgent{}
	for _, id := range []string{"a", "b", "c"} {
		agents[id] = newFleetAgent(t, api, id)
	}

	st, _, body := call(t, "POST", api+"/jobs", operatorToken, map[string]any{"spec": json.RawMessage(fleetSpec(t.TempDir())), "desired_state": "running"})
	if st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	owner := map[string]string{} // task → node
	var all []string
	for id, a := range agents {
		c := a.next("job_start")
		ts := tasksOf(t, c)
		if len(ts) != 2 {
			t.Fatalf("%s got tasks %v, want one unit (gen-i, out-i)", id, ts)
		}
		// A unit is never split: gen-i and out-i go together.
		if strings.TrimPrefix(ts[0], "gen-") != strings.TrimPrefix(ts[1], "out-") {
			t.Fatalf("%s got a split unit: %v", id, ts)
		}
		for _, task := range ts {
			owner[task] = id
			all = append(all, task)
		}
		a.succeed(c, nil)
	}
	sort.Strings(all)
	if fmt.Sprint(all) != "[gen-0 gen-1 gen-2 out-0 out-1 out-2]" {
		t.Fatalf("tasks placed: %v", all)
	}
	detail := func() hubwire.JobDetail {
		_, _, body := call(t, "GET", api+"/jobs/fleet/detail", viewerToken, nil)
		return decode[hubwire.JobDetail](t, body)
	}
	polltest.Eventually(t, "the job running on three Agents", func() bool {
		d := detail()
		return d.Job.ObservedState == hubwire.JobRunning && len(d.Assignments) == 3
	})
	// The detail names each node's units and their tasks.
	for _, a := range detail().Assignments {
		if len(a.Units) != 1 || fmt.Sprint(a.Tasks) != fmt.Sprint(func() []string {
			var ts []string
			for task, n := range owner {
				if n == a.NodeID {
					ts = append(ts, task)
				}
			}
			sort.Strings(ts)
			return ts
		}()) {
			t.Fatalf("the detail's assignment of %s: units %v tasks %v, want one unit with the tasks it was sent (%v)", a.NodeID, a.Units, a.Tasks, owner)
		}
	}

	// A checkpoint, the periodic one the generation takes once it runs:
	// three parts, then one commit.
	parts := map[string]map[string]any{}
	cp1 := ""
	for id, a := range agents {
		parts[id] = a.next("job_checkpoint")
		p := parts[id]["payload"].(map[string]any)
		if cp1 == "" {
			cp1, _ = p["checkpoint_id"].(string)
		}
		if p["checkpoint_id"] != cp1 || fmt.Sprint(tasksOf(t, parts[id])) == "[fleet]" {
			t.Fatalf("%s's part: %v", id, p)
		}
	}
	if _, err := fmt.Sscanf(cp1, "%d", new(uint64)); err != nil || len(cp1) != 20 {
		t.Fatalf("checkpoint id %q is not the catalog's decimal form", cp1)
	}
	records := func() []hubwire.JobCheckpointRecord {
		_, _, body := call(t, "GET", api+"/jobs/fleet/checkpoints", viewerToken, nil)
		return decode[[]hubwire.JobCheckpointRecord](t, body)
	}
	part := func(id string) map[string]any {
		return map[string]any{"observed_checkpoint_id": cp1, "checkpoint_manifest_uri": "fleet/checkpoints/" + cp1 + "/manifests/" + id + ".json"}
	}
	agents["b"].succeed(parts["b"], part("b"))
	time.Sleep(5 * time.Millisecond) // the store times results in ms: b is first
	agents["a"].succeed(parts["a"], part("a"))
	time.Sleep(100 * time.Millisecond) // reconcile passes: nothing may commit with a part missing
	if r := records(); len(r) != 1 || r[0].Status != "pending" {
		t.Fatalf("with a part missing: %+v", r)
	}
	for _, a := range agents {
		if cs := a.poll(); len(cs) != 0 {
			t.Fatalf("%s got %v before every part was in", a.nodeID, cs)
		}
	}
	agents["c"].succeed(parts["c"], part("c"))
	commit := agents["b"].next("job_checkpoint_commit") // b finished first
	cp := commit["payload"].(map[string]any)
	if cp["checkpoint_id"] != cp1 || fmt.Sprint(cp["manifest_nodes"]) != "[a b c]" {
		t.Fatalf("commit payload: %v", cp)
	}
	if r := records(); r[0].Status != "pending" {
		t.Fatalf("completed before the commit: %+v", r)
	}
	// b fails to commit (say it restarted and lost the job's spec): the
	// commit goes to a, whose part came next, instead of failing the
	// round.
	if st, v := agents["b"].result(commit, "failed", 100, map[string]any{"error": "this agent was never sent its spec", "failure_class": "temporary_execution"}); st != 200 {
		t.Fatalf("failed commit: %d %v", st, v)
	}
	commit = agents["a"].next("job_checkpoint_commit")
	if cp := commit["payload"].(map[string]any); cp["checkpoint_id"] != cp1 || fmt.Sprint(cp["manifest_nodes"]) != "[a b c]" {
		t.Fatalf("second commit payload: %v", cp)
	}
	if r := records(); r[0].Status != "pending" {
		t.Fatalf("after one failed commit: %+v", r)
	}
	agents["a"].succeed(commit, map[string]any{"checkpoint_manifest_uri": "fleet/checkpoints/" + cp1 + "/manifest.json"})
	polltest.Eventually(t, "the checkpoint completed", func() bool {
		r := records()
		return r[0].Status == "completed" && r[0].ManifestURI == "fleet/checkpoints/"+cp1+"/manifest.json"
	})

	// An operator's round with a failed part fails; no commit is sent.
	st, _, body = call(t, "POST", api+"/jobs/fleet/checkpoints", operatorToken, nil)
	if st != 202 {
		t.Fatalf("checkpoint 2: %d %s", st, body)
	}
	cp2 := decode[hubwire.JobRecord](t, body).CheckpointID
	if cp2 <= cp1 {
		t.Fatalf("checkpoint ids do not grow: %s then %s", cp1, cp2)
	}
	for id, a := range agents {
		c := a.next("job_checkpoint")
		if id == "c" {
			if st, v := a.result(c, "failed", 100, map[string]any{"error": "upload refused", "failure_class": "temporary_execution"}); st != 200 {
				t.Fatalf("failed result: %d %v", st, v)
			}
			continue
		}
		a.succeed(c, map[string]any{"checkpoint_manifest_uri": "x"})
	}
	polltest.Eventually(t, "the failed round", func() bool { r := records(); return r[0].CheckpointID == cp2 && r[0].Status == "failed" })
	if r := records(); r[1].CheckpointID != cp1 || r[1].Status != "completed" || !strings.Contains(r[0].Error, "upload refused") {
		t.Fatalf("after the failed round: %+v", r)
	}
	if h := detail().CheckpointHealth; h == nil || h.State != "degraded" || h.ConsecutiveFailures != 1 || h.LastCompletedCheckpointID != cp1 {
		t.Fatalf("checkpoint health: %+v", h)
	}
	for _, a := range agents {
		if cs := a.poll(); len(cs) != 0 {
			t.Fatalf("%s got %v after a failed round", a.nodeID, cs)
		}
	}

	// Agent c falls silent: its unit moves, the others adopt generation 3.
	gen := detail().Job.Generation
	agents["c"].silence()
	lost := []string{}
	for task, n := range owner {
		if n == "c" {
			lost = append(lost, task)
		}
	}
	sort.Strings(lost)
	var mu sync.Mutex
	got := map[string][]string{}
	for _, id := range []string{"a", "b"} {
		c := agents[id].next("job_start")
		if g := uint64(c["generation"].(float64)); g != gen+1 {
			t.Fatalf("%s: failover start at generation %d, want %d", id, g, gen+1)
		}
		mu.Lock()
		got[id] = tasksOf(t, c)
		mu.Unlock()
		rec, _ := c["payload"].(map[string]any)["recovery"].(map[string]any)
		if rec == nil || rec["checkpoint_id"] != cp1 || rec["savepoint"] != false {
			t.Fatalf("%s: failover recovery %v, want checkpoint %s", id, rec, cp1)
		}
		agents[id].succeed(c, nil)
	}
	// a and b keep their units; the moved one goes to the least loaded,
	// a tie broken by name: a.
	var bWant []string
	for task, n := range owner {
		if n == "b" {
			bWant = append(bWant, task)
		}
	}
	sort.Strings(bWant)
	if fmt.Sprint(got["b"]) != fmt.Sprint(bWant) {
		t.Fatalf("b's tasks changed: %v, want %v", got["b"], bWant)
	}
	for _, task := range lost {
		if !slices.Contains(got["a"], task) {
			t.Fatalf("lost task %s not moved to a: a has %v", task, got["a"])
		}
	}
	polltest.Eventually(t, "the job running again at the new generation", func() bool {
		d := detail()
		if d.Job.ObservedState == hubwire.JobFailed {
			t.Fatalf("the job failed during failover: %+v", d.Job)
		}
		return d.Job.Generation == gen+1 && d.Job.ObservedState == hubwire.JobRunning && len(d.Assignments) == 2
	})

	// Agent d joins; a rebalance moves one of a's two units to it, and
	// only that one: b keeps its unit.
	agents["d"] = newFleetAgent(t, api, "d")
	st, hdr, body := call(t, "POST", api+"/jobs/fleet/actions/rebalance", operatorToken, nil, "If-Match", fmt.Sprintf(`"generation-%d"`, gen+1))
	if st != 200 || hdr.Get("ETag") != fmt.Sprintf(`"generation-%d"`, gen+2) {
		t.Fatalf("rebalance: %d %s (etag %s)", st, body, hdr.Get("ETag"))
	}
	starts := map[string][]string{}
	for _, id := range []string{"a", "b", "d"} {
		c := agents[id].next("job_start")
		starts[id] = tasksOf(t, c)
		if id == "d" {
			if rec, _ := c["payload"].(map[string]any)["recovery"].(map[string]any); rec == nil || rec["checkpoint_id"] != cp1 {
				t.Fatalf("the moved unit's recovery: %v, want checkpoint %s", rec, cp1)
			}
		}
		agents[id].succeed(c, nil)
	}
	if len(starts["a"]) != 2 || len(starts["d"]) != 2 || fmt.Sprint(starts["b"]) != fmt.Sprint(got["b"]) {
		t.Fatalf("after the rebalance: %v (a had %v)", starts, got["a"])
	}
	for _, task := range starts["d"] {
		if !slices.Contains(got["a"], task) {
			t.Fatalf("d took %s, which a did not run", task)
		}
	}
	polltest.Eventually(t, "the job running on a, b and d", func() bool {
		d := detail()
		return d.Job.Generation == gen+2 && d.Job.ObservedState == hubwire.JobRunning && len(d.Assignments) == 3
	})
	// Balanced already: nothing moves, no new generation.
	st, hdr, body = call(t, "POST", api+"/jobs/fleet/actions/rebalance", operatorToken, nil)
	if st != 200 || hdr.Get("ETag") != fmt.Sprintf(`"generation-%d"`, gen+2) {
		t.Fatalf("second rebalance: %d %s (etag %s)", st, body, hdr.Get("ETag"))
	}
	// A restart runs every unit again, even where it runs already.
	st, _, body = call(t, "POST", api+"/jobs/fleet/actions/restart", operatorToken, nil)
	if st != 200 {
		t.Fatalf("restart: %d %s", st, body)
	}
	for _, id := range []string{"a", "b", "d"} {
		c := agents[id].next("job_start")
		if c["payload"].(map[string]any)["restart"] != true {
			t.Fatalf("%s: the restart's job_start does not say restart: %v", id, c["payload"])
		}
		agents[id].succeed(c, nil)
	}
}
