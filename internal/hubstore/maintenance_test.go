package hubstore

import (
	"errors"
	"testing"
	"time"
)

func TestMaintenanceAndNodeCommands(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	sess := register(t, s, "n1", "b1")
	a := must(s.SetMaintenance(ctx, "n1", MaintenanceDraining, "op", "c1"))
	if a.MaintenanceState != MaintenanceDraining {
		t.Fatalf("%+v", a)
	}
	if _, err := s.SetMaintenance(ctx, "n9", Maintenance, "op", ""); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := s.SetMaintenance(ctx, "n1", "asleep", "op", ""); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	c1 := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_start", JobID: "j", Generation: 1}))
	c2 := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_stop", JobID: "j", Generation: 1}))
	must(s.ClaimCommands(ctx, "n1", sess.Token, time.Minute, 10))
	must(s.RecordCommandResult(ctx, "n1", sess.Token, CommandResult{CommandID: c1.ID, State: CommandSucceeded}))
	if open := must(s.ListNodeCommands(ctx, "n1", true, 10)); len(open) != 1 || open[0].ID != c2.ID {
		t.Fatalf("open %+v", open)
	}
	if all := must(s.ListNodeCommands(ctx, "n1", false, 10)); len(all) != 2 || all[0].ID != c2.ID {
		t.Fatalf("all %+v", all)
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	s, clk, _ := openTest(t)
	old := register(t, s, "n1", "b1")
	sess := register(t, s, "n1", "b1")
	submit(t, s, "j1")
	must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, IdempotencyKey: "k", Actor: "op"}))
	es := must(s.ClaimOutbox(ctx, "w", time.Minute, 10))
	must(s.CompleteOutbox(ctx, es[0].ID))
	done := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_start", JobID: "j1", Generation: 2}))
	open := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_stop", JobID: "j1", Generation: 2}))
	must(s.RecordCommandResult(ctx, "n1", sess.Token, CommandResult{CommandID: done.ID, State: CommandFailed, FailureClass: "permanent_execution"}))
	clk.Advance(time.Hour)
	if err := s.EnqueueOutbox(ctx, OutboxEntry{EventKey: "fresh", EventType: "observed"}); err != nil {
		t.Fatal(err)
	}
	p := must(s.Prune(ctx, clk.Now().Add(-time.Minute)))
	if p != (Pruned{Outbox: 1, Commands: 1, IdempotencyKeys: 1, Sessions: 1}) {
		t.Fatalf("pruned %+v", p)
	}
	if _, err := s.GetCommand(ctx, done.ID); !errors.Is(err, ErrNotFound) {
		t.Fatal("finished command kept")
	}
	if c := must(s.GetCommand(ctx, open.ID)); c.State != CommandQueued {
		t.Fatal("open command pruned")
	}
	if _, err := s.Authenticate(ctx, "n1", old.Token); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("pruned session: %v", err)
	}
	if pending, _ := must2(s.OutboxStats(ctx)); pending != 1 {
		t.Fatalf("pending %d", pending)
	}
	if is := must(s.ListIntents(ctx, "j1")); len(is) != 1 {
		t.Fatal("intent pruned")
	}
}

// A checkpoint completes only when every expected assignment has
// a succeeded checkpoint result; an offline node's gap keeps it pending.
func TestCheckpointNeedsEveryAssignment(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	tok := map[string]string{}
	for _, n := range []string{"n1", "n2"} {
		tok[n] = register(t, s, n, "b").Token
	}
	submit(t, s, "j1")
	d := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, Assignments: []Assignment{
		{AssignmentID: "map-0", NodeID: "n1"}, {AssignmentID: "map-1", NodeID: "n1"}, {AssignmentID: "sink-0", NodeID: "n2"}}}))
	must(s.CreateCheckpoint(ctx, Checkpoint{JobID: "j1", CheckpointID: "cp", Kind: KindCheckpoint, Generation: d.Generation, VersionID: d.VersionID, FormatVersion: 1}))
	// Per-node commands (v1 sends one per node, naming no assignment).
	c1 := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: OpJobCheckpoint, JobID: "j1", Generation: d.Generation, CheckpointID: "cp"}))
	c2 := must(s.EnqueueCommand(ctx, Command{NodeID: "n2", Operation: OpJobCheckpoint, JobID: "j1", Generation: d.Generation, CheckpointID: "cp"}))
	must(s.RecordCommandResult(ctx, "n1", tok["n1"], CommandResult{CommandID: c1.ID, State: CommandSucceeded}))
	must(s.RecordCommandResult(ctx, "n2", tok["n2"], CommandResult{CommandID: c2.ID, State: CommandFailed, FailureClass: "node_unavailable"}))
	if _, err := s.FinishCheckpoint(ctx, "j1", "cp", CheckpointCompleted, "s3://b/cp/manifest.json", ""); !errors.Is(err, ErrConflict) {
		t.Fatalf("partial checkpoint completed: %v", err)
	}
	if cp := must(s.GetCheckpoint(ctx, "j1", "cp")); cp.Status != CheckpointPending {
		t.Fatalf("%+v", cp)
	}
	retry := must(s.EnqueueCommand(ctx, Command{NodeID: "n2", Operation: OpJobCheckpoint, JobID: "j1", Generation: d.Generation, CheckpointID: "cp", AssignmentID: "sink-0"}))
	must(s.RecordCommandResult(ctx, "n2", tok["n2"], CommandResult{CommandID: retry.ID, State: CommandSucceeded}))
	if cp := must(s.FinishCheckpoint(ctx, "j1", "cp", CheckpointCompleted, "s3://b/cp/manifest.json", "")); cp.Status != CheckpointCompleted {
		t.Fatalf("%+v", cp)
	}
}
