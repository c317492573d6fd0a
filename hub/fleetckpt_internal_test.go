package hub

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// Two checkpoint rounds of one job whose parts are all in are committed
// oldest first, one at a time: the checkpoint store's retention deletes
// the uncommitted checkpoints below the one it commits, so the older
// round's commit, sent after the newer one's, would fail with its part
// manifest gone. The newer round waits for the older one, then both
// complete. The reconciler's checkpoint pass is driven by hand after each
// result.
func TestCheckpointCommitsGoInIDOrder(t *testing.T) {
	t.Parallel()
	h, err := New(Config{DataDir: t.TempDir(), InsecureNoAuth: true, Lease: time.Hour, ReconcileInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	rec := serve(t, h, "POST", "/api/v1/agent/register", "", hubwire.RegisterRequest{NodeID: "n1", ProtocolVersion: "v1", BootID: "b",
		Capabilities: []string{"job_runtime", "state_backend", "placement_units"}})
	var reg hubwire.RegisterResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &reg); err != nil {
		t.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	spec := json.RawMessage(`{"id":"j","state":{"backend":"memory"},"checkpoint":{"object_store_uri":"file://` + t.TempDir() + `"},
		"operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`)
	if rec := serve(t, h, "POST", "/api/v1/jobs", "", hubwire.SubmitJobRequest{Spec: spec, DesiredState: "running"}); rec.Code != 202 {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	// claim takes the node's next command, which must be of op.
	claim := func(op string) hubstore.Command {
		t.Helper()
		var got []hubstore.Command
		polltest.Eventually(t, "a "+op, func() bool {
			got, err = h.store.ClaimCommands(ctx, "n1", reg.SessionToken, time.Minute, 1)
			return err == nil && len(got) == 1
		})
		if got[0].Operation != op {
			t.Fatalf("got %s, want %s: %+v", got[0].Operation, op, got[0])
		}
		return got[0]
	}
	succeed := func(c hubstore.Command, uri string) {
		t.Helper()
		details, _ := json.Marshal(hubwire.CommandResult{CommandID: c.ID, State: hubwire.OpStateSucceeded, Generation: uint64(c.Generation),
			ObservedCheckpointID: c.CheckpointID, CheckpointManifestURI: uri})
		if _, err := h.store.RecordCommandResult(ctx, "n1", reg.SessionToken, hubstore.CommandResult{CommandID: c.ID, Generation: c.Generation,
			State: hubstore.CommandSucceeded, Details: details}); err != nil {
			t.Fatal(err)
		}
	}
	succeed(claim(hubstore.OpJobStart), "")
	round := func() string {
		t.Helper()
		rec := serve(t, h, "POST", "/api/v1/jobs/j/checkpoints", "", nil)
		var jr hubwire.JobRecord
		if err := json.Unmarshal(rec.Body.Bytes(), &jr); err != nil || rec.Code != 202 {
			t.Fatalf("checkpoint: %d %s", rec.Code, rec.Body)
		}
		return jr.CheckpointID
	}
	// The older round is the periodic one, due as soon as the job runs;
	// while it is open no other periodic round starts. The newer is an
	// operator's.
	h.poke()
	var older string
	polltest.Eventually(t, "the periodic round", func() bool {
		cps, err := h.store.ListCheckpoints(ctx, "j", hubstore.KindCheckpoint)
		if err == nil && len(cps) == 1 {
			older = cps[0].CheckpointID
		}
		return older != ""
	})
	newer := round()
	// The rounds' parts, in whichever order they were dispatched (the
	// periodic round's command may go out after the operator's).
	partOld, partNew := claim(hubstore.OpJobCheckpoint), claim(hubstore.OpJobCheckpoint)
	if partOld.CheckpointID == newer {
		partOld, partNew = partNew, partOld
	}
	if partOld.CheckpointID != older || partNew.CheckpointID != newer || older >= newer {
		t.Fatalf("rounds %s then %s, parts of %s and %s", older, newer, partOld.CheckpointID, partNew.CheckpointID)
	}
	commits := func() []hubstore.Command {
		cmds, err := h.store.ListCommands(ctx, "j", -1)
		if err != nil {
			t.Fatal(err)
		}
		var out []hubstore.Command
		for _, c := range cmds {
			if c.Operation == hubstore.OpJobCheckpointCommit {
				out = append(out, c)
			}
		}
		return out
	}
	// The newer round's part is in first: it must wait for the older.
	succeed(partNew, "j/checkpoints/"+newer+"/manifests/n1.json")
	h.advanceCheckpoints(ctx)
	if c := commits(); len(c) != 0 {
		t.Fatalf("a commit while the older round %s is open: %+v", older, c)
	}
	succeed(partOld, "j/checkpoints/"+older+"/manifests/n1.json")
	h.advanceCheckpoints(ctx)
	c := claim(hubstore.OpJobCheckpointCommit)
	if c.CheckpointID != older || len(commits()) != 1 {
		t.Fatalf("first commit %s (commits %+v), want only %s's", c.CheckpointID, commits(), older)
	}
	succeed(c, "j/checkpoints/"+older+"/manifest.json")
	h.advanceCheckpoints(ctx)
	c = claim(hubstore.OpJobCheckpointCommit)
	if c.CheckpointID != newer {
		t.Fatalf("second commit %s, want %s", c.CheckpointID, newer)
	}
	succeed(c, "j/checkpoints/"+newer+"/manifest.json")
	h.advanceCheckpoints(ctx)
	cps, err := h.store.ListCheckpoints(ctx, "j", hubstore.KindCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range cps {
		if cp.Status != hubstore.CheckpointCompleted {
			t.Fatalf("checkpoint %s: %s %s", cp.CheckpointID, cp.Status, cp.Error)
		}
	}
}
