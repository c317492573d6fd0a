package hubstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/fsutil"
)

func TestMigrationsFromEmptyAndIdempotent(t *testing.T) {
	t.Parallel()
	clk := newClock()
	path := filepath.Join(t.TempDir(), "hub.db")
	s := openAt(t, path, clk)
	if v := must(s.SchemaVersion(ctx)); v != len(migrations) {
		t.Fatalf("schema version %d, want %d", v, len(migrations))
	}
	var mode string
	var sync, fk int
	if err := s.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q %v", mode, err)
	}
	if err := s.w.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("synchronous %d %v, want 2 (FULL)", sync, err)
	}
	if err := s.w.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys %d %v", fk, err)
	}
	for _, table := range []string{"agents", "agent_sessions", "jobs", "job_versions", "assignments", "intents", "outbox",
		"commands", "command_results", "job_observations", "checkpoints", "idempotency_keys", "audit_log"} {
		var n int
		if err := s.r.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name=?", table).Scan(&n); err != nil || n != 1 {
			t.Fatalf("table %s missing (%v)", table, err)
		}
	}
	s.Close()
	for range 2 { // reopening applies nothing twice
		s = openAt(t, path, clk)
		var rows int
		if err := s.r.QueryRow("SELECT COUNT(*) FROM schema_version").Scan(&rows); err != nil || rows != len(migrations) {
			t.Fatalf("schema_version rows %d %v", rows, err)
		}
		s.Close()
	}
	// One Hub per file (where the platform has flock).
	s = openAt(t, path, clk)
	if _, err := fsutil.Lock(path + ".lock"); errors.Is(err, fsutil.ErrLocked) {
		if _, err := Open(path, Options{Clock: clk.Now}); !errors.Is(err, fsutil.ErrLocked) {
			t.Fatalf("second opener: %v", err)
		}
	}
	s.Close()
	// A database written by a newer Hub is refused, not silently used.
	s = openAt(t, path, clk)
	if _, err := s.w.Exec("INSERT INTO schema_version(version, applied_at_ms) VALUES (999, 0)"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(path, Options{Clock: clk.Now}); err == nil {
		t.Fatal("opened a database with a newer schema")
	}
	if _, err := Open("", Options{}); err == nil {
		t.Fatal("opened without a path")
	}
}

func TestRestartDurability(t *testing.T) {
	t.Parallel()
	clk := newClock()
	path := filepath.Join(t.TempDir(), "hub.db")
	s := openAt(t, path, clk)
	sess := register(t, s, "n1", "boot-1")
	submit(t, s, "j1")
	d := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, ExpectedGeneration: gen(1),
		Assignments: assigns("n1"), Actor: "op", IdempotencyKey: "k1", CorrelationID: "c1"}))
	es := must(s.ClaimOutbox(ctx, "w1", 30*time.Second, 10))
	if len(es) != 1 {
		t.Fatalf("claimed %d outbox entries", len(es))
	}
	cmds := []Command{
		{NodeID: "n1", Operation: "job_start", JobID: "j1", Generation: d.Generation, AssignmentID: "task-a", IntentID: d.IntentID},
		{NodeID: "n1", Operation: "job_checkpoint", JobID: "j1", Generation: d.Generation, AssignmentID: "task-a", CheckpointID: "cp1"},
	}
	queued, done, err := s.DispatchOutbox(ctx, es[0].ID, cmds)
	if err != nil || !done || len(queued) != 2 {
		t.Fatalf("dispatch: %v %v %d", err, done, len(queued))
	}
	got := must(s.ClaimCommands(ctx, "n1", sess.Token, 10*time.Second, 1))
	must(s.RecordCommandResult(ctx, "n1", sess.Token, CommandResult{CommandID: got[0].ID, State: CommandSucceeded, Generation: d.Generation}))
	must(s.CreateCheckpoint(ctx, Checkpoint{JobID: "j1", CheckpointID: "cp1", Kind: KindCheckpoint, Generation: d.Generation, VersionID: d.VersionID, FormatVersion: 1}))
	if err := s.EnqueueOutbox(ctx, OutboxEntry{EventKey: "observed:n1:1", EventType: "observed", JobID: "j1"}); err != nil {
		t.Fatal(err)
	}
	must(s.RecordReport(ctx, Report{NodeID: "n1", SessionToken: sess.Token, BootID: "boot-1", Seq: 1,
		Jobs: []JobObservation{{JobID: "j1", Generation: d.Generation, State: "running"}}}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path, clk)
	defer s.Close()
	if _, err := s.Authenticate(ctx, "n1", sess.Token); err != nil {
		t.Fatalf("session lost: %v", err)
	}
	j := must(s.GetJob(ctx, "j1"))
	if j.Generation != 2 || j.DesiredState != DesiredRunning {
		t.Fatalf("job %+v", j)
	}
	if as := must(s.Assignments(ctx, "j1", 2)); len(as) != 1 || as[0].NodeID != "n1" {
		t.Fatalf("assignments %+v", as)
	}
	it := must(s.GetIntent(ctx, d.IntentID))
	if it.State != "accepted" || it.CorrelationID != "c1" {
		t.Fatalf("intent %+v", it)
	}
	all := must(s.ListCommands(ctx, "j1", -1))
	if len(all) != 2 || all[0].State != CommandSucceeded || all[1].State != CommandQueued {
		t.Fatalf("commands %+v", all)
	}
	if rs := must(s.CommandResults(ctx, all[0].ID)); len(rs) != 1 || rs[0].State != CommandSucceeded {
		t.Fatalf("results %+v", rs)
	}
	// The undelivered command is still there for the agent after the restart.
	if got := must(s.ClaimCommands(ctx, "n1", sess.Token, 10*time.Second, 10)); len(got) != 1 || got[0].Operation != "job_checkpoint" {
		t.Fatalf("after restart claimed %+v", got)
	}
	if e := must(s.GetOutbox(ctx, es[0].ID)); e.ProcessedAt.IsZero() {
		t.Fatal("processed outbox entry forgotten")
	}
	if pending, _ := must2(s.OutboxStats(ctx)); pending != 1 {
		t.Fatalf("pending outbox %d, want 1", pending)
	}
	if cp := must(s.GetCheckpoint(ctx, "j1", "cp1")); cp.Status != CheckpointPending {
		t.Fatalf("checkpoint %+v", cp)
	}
	if obs := must(s.JobObservations(ctx, "j1")); len(obs) != 1 || obs[0].State != "running" {
		t.Fatalf("observations %+v", obs)
	}
	if a := must(s.GetAgent(ctx, "n1")); a.LastReportSeq != 1 {
		t.Fatalf("agent %+v", a)
	}
	// The idempotency record survived: the retry replays the first answer.
	d2 := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, ExpectedGeneration: gen(1),
		Assignments: assigns("n1"), Actor: "op", IdempotencyKey: "k1", CorrelationID: "c-retry"}))
	if !d2.Replayed || d2.IntentID != d.IntentID {
		t.Fatalf("replay after restart %+v", d2)
	}
	if au := must(s.ListAudit(ctx, "j1", 10)); len(au) != 2 {
		t.Fatalf("audit %+v", au)
	}
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func TestCommandClaimLeaseRedelivery(t *testing.T) {
	t.Parallel()
	s, clk, _ := openTest(t)
	sess := register(t, s, "n1", "b1")
	c1 := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_start", JobID: "j", Generation: 1}))
	c2 := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_stop", JobID: "j", Generation: 1}))
	must(s.EnqueueCommand(ctx, Command{NodeID: "n2", Operation: "job_start", JobID: "j", Generation: 1}))

	got := must(s.ClaimCommands(ctx, "n1", sess.Token, 10*time.Second, 10))
	if len(got) != 2 || got[0].ID != c1.ID || got[1].ID != c2.ID {
		t.Fatalf("first poll %+v", got)
	}
	if got := must(s.ClaimCommands(ctx, "n1", sess.Token, 10*time.Second, 10)); len(got) != 0 {
		t.Fatalf("claimed commands delivered twice within the lease: %+v", got)
	}
	must(s.RecordCommandResult(ctx, "n1", sess.Token, CommandResult{CommandID: c1.ID, State: CommandAcknowledged}))
	clk.Advance(9 * time.Second)
	if got := must(s.ClaimCommands(ctx, "n1", sess.Token, 10*time.Second, 10)); len(got) != 0 {
		t.Fatalf("redelivered before the lease ended: %+v", got)
	}
	clk.Advance(time.Second)
	got = must(s.ClaimCommands(ctx, "n1", sess.Token, 10*time.Second, 10))
	if len(got) != 1 || got[0].ID != c2.ID || got[0].DeliveryCount != 2 {
		t.Fatalf("redelivery: %+v (the acknowledged command must not come back)", got)
	}
	// Another node's token cannot claim n1's commands.
	if _, err := s.ClaimCommands(ctx, "n1", "not-a-token", time.Second, 1); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("bad token: %v", err)
	}
	// Limit.
	for range 5 {
		must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_checkpoint", JobID: "j", Generation: 1}))
	}
	if got := must(s.ClaimCommands(ctx, "n1", sess.Token, time.Second, 3)); len(got) != 3 {
		t.Fatalf("limit: %d", len(got))
	}
}

func TestCommandDeadline(t *testing.T) {
	t.Parallel()
	s, clk, _ := openTest(t)
	sess := register(t, s, "n1", "b1")
	c := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_start", JobID: "j", Generation: 1, ExpiresAt: clk.Now().Add(5 * time.Second)}))
	acked := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_stop", JobID: "j", Generation: 1, ExpiresAt: clk.Now().Add(20 * time.Second)}))
	must(s.ClaimCommands(ctx, "n1", sess.Token, time.Second, 10))
	must(s.RecordCommandResult(ctx, "n1", sess.Token, CommandResult{CommandID: acked.ID, State: CommandRunning}))
	clk.Advance(6 * time.Second)
	if got := must(s.ClaimCommands(ctx, "n1", sess.Token, time.Second, 10)); len(got) != 0 {
		t.Fatalf("expired command delivered: %+v", got)
	}
	if g := must(s.GetCommand(ctx, c.ID)); g.State != CommandTimedOut {
		t.Fatalf("state %s", g.State)
	}
	clk.Advance(20 * time.Second)
	ids := must(s.ExpireCommands(ctx))
	if len(ids) != 1 || ids[0] != acked.ID {
		t.Fatalf("expired %v", ids)
	}
	rs := must(s.CommandResults(ctx, acked.ID))
	if last := rs[len(rs)-1]; last.State != CommandTimedOut || last.FailureClass != "ambiguous" {
		t.Fatalf("result %+v", last)
	}
}

func TestReRegisterRedeliversAndNewBootFences(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	s1 := register(t, s, "n1", "b1")
	delivered := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_start", JobID: "j", Generation: 1}))
	running := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_checkpoint", JobID: "j", Generation: 1}))
	must(s.ClaimCommands(ctx, "n1", s1.Token, time.Hour, 10))
	must(s.RecordCommandResult(ctx, "n1", s1.Token, CommandResult{CommandID: running.ID, State: CommandRunning}))

	// Reconnect of the same process: the unacknowledged command comes back
	// at once (no waiting for the hour-long lease), the running one stays.
	s2 := register(t, s, "n1", "b1")
	if s2.NewBoot || len(s2.FencedCommands) != 0 {
		t.Fatalf("same boot fenced: %+v", s2)
	}
	got := must(s.ClaimCommands(ctx, "n1", s2.Token, time.Hour, 10))
	if len(got) != 1 || got[0].ID != delivered.ID {
		t.Fatalf("after reconnect %+v", got)
	}
	// A new process: what the old one was running can never finish.
	s3 := register(t, s, "n1", "b2")
	if !s3.NewBoot || len(s3.FencedCommands) != 1 || s3.FencedCommands[0] != running.ID {
		t.Fatalf("new boot: %+v", s3)
	}
	if c := must(s.GetCommand(ctx, running.ID)); c.State != CommandNodeUnavailable {
		t.Fatalf("fenced state %s", c.State)
	}
	// The old sessions' tokens are dead.
	for _, tok := range []string{s1.Token, s2.Token} {
		if _, err := s.Heartbeat(ctx, "n1", tok, Heartbeat{}); !errors.Is(err, ErrStaleSession) {
			t.Fatalf("old session heartbeat: %v", err)
		}
	}
	if _, err := s.Heartbeat(ctx, "n1", s3.Token, Heartbeat{State: "running"}); err != nil {
		t.Fatal(err)
	}
}

func TestCommandResultsIdempotent(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	n1 := register(t, s, "n1", "b1")
	n2 := register(t, s, "n2", "b1")
	c := must(s.EnqueueCommand(ctx, Command{ID: "cmd-1", NodeID: "n1", Operation: "job_start", JobID: "j", Generation: 3}))
	// Enqueueing the same id again is a no-op; another command under it is a conflict.
	if again := must(s.EnqueueCommand(ctx, Command{ID: "cmd-1", NodeID: "n1", Operation: "job_start", JobID: "j", Generation: 3})); again.CreatedAt != c.CreatedAt {
		t.Fatal("re-enqueue changed the command")
	}
	if _, err := s.EnqueueCommand(ctx, Command{ID: "cmd-1", NodeID: "n2", Operation: "job_start", JobID: "j", Generation: 3}); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting enqueue: %v", err)
	}
	if _, err := s.RecordCommandResult(ctx, "n2", n2.Token, CommandResult{CommandID: c.ID, State: CommandSucceeded}); !errors.Is(err, ErrWrongNode) {
		t.Fatalf("other node: %v", err)
	}
	if _, err := s.RecordCommandResult(ctx, "n1", n1.Token, CommandResult{CommandID: "nope", State: CommandSucceeded}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	if _, err := s.RecordCommandResult(ctx, "n1", n1.Token, CommandResult{CommandID: c.ID, State: CommandSucceeded, Generation: 2}); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("stale generation: %v", err)
	}
	if _, err := s.RecordCommandResult(ctx, "n1", n1.Token, CommandResult{CommandID: c.ID, State: CommandFailed, Details: json.RawMessage("{")}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("malformed details: %v", err)
	}
	if _, err := s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_start", Payload: json.RawMessage("x")}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("malformed payload: %v", err)
	}
	if _, err := s.RecordReport(ctx, Report{NodeID: "n1", SessionToken: n1.Token, Seq: 1, Snapshot: json.RawMessage("[")}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("malformed report: %v", err)
	}
	if _, err := s.RecordCommandResult(ctx, "n1", n1.Token, CommandResult{CommandID: c.ID, State: CommandQueued}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("queued as result: %v", err)
	}
	must(s.RecordCommandResult(ctx, "n1", n1.Token, CommandResult{CommandID: c.ID, State: CommandRunning, Progress: 10}))
	out := must(s.RecordCommandResult(ctx, "n1", n1.Token, CommandResult{CommandID: c.ID, State: CommandAcknowledged, Progress: 5}))
	if out.Command.State != CommandRunning {
		t.Fatalf("regressed to %s", out.Command.State)
	}
	first := must(s.RecordCommandResult(ctx, "n1", n1.Token, CommandResult{CommandID: c.ID, State: CommandSucceeded, Progress: 100, Generation: 3, ObservedGeneration: 3}))
	if first.Duplicate || first.Terminal == nil || first.Terminal.State != CommandSucceeded {
		t.Fatalf("first terminal %+v", first)
	}
	for _, st := range []CommandState{CommandSucceeded, CommandFailed} {
		dup := must(s.RecordCommandResult(ctx, "n1", n1.Token, CommandResult{CommandID: c.ID, State: st, Error: "late"}))
		if !dup.Duplicate || dup.Terminal == nil || dup.Terminal.State != CommandSucceeded || dup.Terminal.ObservedGeneration != 3 {
			t.Fatalf("duplicate %s: %+v %+v", st, dup, dup.Terminal)
		}
	}
	if rs := must(s.CommandResults(ctx, c.ID)); len(rs) != 3 {
		t.Fatalf("stored %d results, want 3 (duplicates are not stored)", len(rs))
	}
}

func TestOutboxClaimLease(t *testing.T) {
	t.Parallel()
	s, clk, _ := openTest(t)
	register(t, s, "n1", "b1")
	submit(t, s, "j1")
	d := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, Assignments: assigns("n1")}))
	es := must(s.ClaimOutbox(ctx, "w1", 30*time.Second, 10))
	if len(es) != 1 || es[0].IntentID != d.IntentID || es[0].ClaimCount != 1 {
		t.Fatalf("claim %+v", es)
	}
	if got := must(s.ClaimOutbox(ctx, "w2", 30*time.Second, 10)); len(got) != 0 {
		t.Fatalf("double claim %+v", got)
	}
	clk.Advance(30 * time.Second) // w1 died
	es2 := must(s.ClaimOutbox(ctx, "w2", 30*time.Second, 10))
	if len(es2) != 1 || es2[0].ID != es[0].ID || es2[0].ClaimCount != 2 || es2[0].ClaimedBy != "w2" {
		t.Fatalf("reclaim %+v", es2)
	}
	cmd := Command{NodeID: "n1", Operation: "job_start", JobID: "j1", Generation: d.Generation, AssignmentID: "task-a"}
	q, done, err := s.DispatchOutbox(ctx, es2[0].ID, []Command{cmd})
	if err != nil || !done || len(q) != 1 {
		t.Fatalf("dispatch %v %v %v", q, done, err)
	}
	// w1 wakes up and tries to finish the same entry: nothing is queued twice.
	q, done, err = s.DispatchOutbox(ctx, es[0].ID, []Command{cmd})
	if err != nil || done || len(q) != 0 {
		t.Fatalf("late dispatch %v %v %v", q, done, err)
	}
	if done, err := s.CompleteOutbox(ctx, es[0].ID); err != nil || done {
		t.Fatalf("complete again: %v %v", done, err)
	}
	if _, err := s.CompleteOutbox(ctx, 9999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("complete unknown: %v", err)
	}
	if n := len(must(s.ListCommands(ctx, "j1", d.Generation))); n != 1 {
		t.Fatalf("%d commands", n)
	}
	// Defer: an entry whose node is offline comes back later.
	if err := s.EnqueueOutbox(ctx, OutboxEntry{EventKey: "k", EventType: "observed"}); err != nil {
		t.Fatal(err)
	}
	if err := s.EnqueueOutbox(ctx, OutboxEntry{EventKey: "k", EventType: "observed"}); err != nil {
		t.Fatal(err)
	}
	e := must(s.ClaimOutbox(ctx, "w1", time.Minute, 10))
	if len(e) != 1 {
		t.Fatalf("same event key enqueued twice: %d", len(e))
	}
	if err := s.DeferOutbox(ctx, e[0].ID, clk.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ClaimOutbox(ctx, "w1", time.Minute, 10)); len(got) != 0 {
		t.Fatal("deferred entry claimed early")
	}
	clk.Advance(5 * time.Second)
	if got := must(s.ClaimOutbox(ctx, "w1", time.Minute, 10)); len(got) != 1 {
		t.Fatal("deferred entry not claimable")
	}
}

func TestGenerationCAS(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	r := submit(t, s, "j1")
	if r.Job.Generation != 1 || r.Job.DesiredState != DesiredStopped || !r.NewJob {
		t.Fatalf("new job %+v", r)
	}
	d := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, ExpectedGeneration: gen(1)}))
	if d.Generation != 2 {
		t.Fatalf("generation %d", d.Generation)
	}
	_, err := s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredStopped, ExpectedGeneration: gen(1)})
	var ge *GenerationConflictError
	if !errors.Is(err, ErrGenerationConflict) || !errors.As(err, &ge) || ge.Expected != 1 || ge.Current != 2 {
		t.Fatalf("conflict: %v", err)
	}
	if j := must(s.GetJob(ctx, "j1")); j.Generation != 2 || j.DesiredState != DesiredRunning {
		t.Fatalf("conflict changed the job: %+v", j)
	}
	if _, err := s.SetDesired(ctx, DesiredChange{JobID: "nope", DesiredState: DesiredStopped}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	if _, err := s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredStopped, Payload: json.RawMessage(`{`)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("malformed payload: %v", err)
	}
	if _, err := s.SubmitJob(ctx, SubmitRequest{JobID: "j1", Spec: spec("j1", 1), Plan: json.RawMessage(`nope`)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("malformed plan: %v", err)
	}
	if _, err := s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: "paused"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad state: %v", err)
	}
	d3 := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredStopped}))
	if d3.Generation != 3 {
		t.Fatalf("unconditional write: %+v", d3)
	}
	// The older intent is superseded by the newer one.
	if it := must(s.GetIntent(ctx, d.IntentID)); it.State != "superseded" || it.SupersededBy != d3.IntentID {
		t.Fatalf("old intent %+v", it)
	}
	if err := s.UpdateIntent(ctx, IntentUpdate{IntentID: d.IntentID, State: "converged", Convergence: "in_sync"}); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("update superseded intent: %v", err)
	}
}

func TestSupersedeOldGenerationCommands(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	sess := register(t, s, "n1", "b1")
	submit(t, s, "j1")
	d := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, Assignments: assigns("n1")}))
	old := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_start", JobID: "j1", Generation: d.Generation}))
	must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredStopped, Assignments: assigns("n1")}))
	if c := must(s.GetCommand(ctx, old.ID)); c.State != CommandSuperseded {
		t.Fatalf("old-generation command %s", c.State)
	}
	if got := must(s.ClaimCommands(ctx, "n1", sess.Token, time.Second, 10)); len(got) != 0 {
		t.Fatalf("superseded command delivered: %+v", got)
	}
	// An agent that got it anyway learns it was superseded.
	out := must(s.RecordCommandResult(ctx, "n1", sess.Token, CommandResult{CommandID: old.ID, State: CommandSucceeded}))
	if !out.Duplicate || out.Terminal == nil || out.Terminal.State != CommandSuperseded || out.Terminal.FailureClass != "stale_generation" {
		t.Fatalf("result for a superseded command: %+v %+v", out, out.Terminal)
	}
}

func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	submit(t, s, "j1")
	req := DesiredChange{JobID: "j1", DesiredState: DesiredRunning, ExpectedGeneration: gen(1), Actor: "alice", IdempotencyKey: "key-1", CorrelationID: "a"}
	first := must(s.SetDesired(ctx, req))
	req.CorrelationID = "b" // a retry carries another correlation id
	again := must(s.SetDesired(ctx, req))
	if !again.Replayed || again.IntentID != first.IntentID || again.Generation != first.Generation {
		t.Fatalf("replay %+v vs %+v", again, first)
	}
	if j := must(s.GetJob(ctx, "j1")); j.Generation != 2 {
		t.Fatalf("replay wrote: generation %d", j.Generation)
	}
	other := req
	other.DesiredState = DesiredStopped
	if _, err := s.SetDesired(ctx, other); !errors.Is(err, ErrIdempotencyKeyReused) {
		t.Fatalf("reused key: %v", err)
	}
	// Keys belong to a principal.
	bob := req
	bob.Actor, bob.ExpectedGeneration = "bob", gen(2)
	if r := must(s.SetDesired(ctx, bob)); r.Replayed || r.Generation != 3 {
		t.Fatalf("bob's key: %+v", r)
	}
	// Submit is keyed too.
	must(s.SubmitJob(ctx, SubmitRequest{JobID: "j2", Spec: spec("j2", 1), Actor: "alice", IdempotencyKey: "s1"}))
	if _, err := s.SubmitJob(ctx, SubmitRequest{JobID: "j2", Spec: spec("j2", 2), Actor: "alice", IdempotencyKey: "s1"}); !errors.Is(err, ErrIdempotencyKeyReused) {
		t.Fatalf("submit reused key: %v", err)
	}
}

func TestVersionsContentAddressed(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	a := must(s.SubmitJob(ctx, SubmitRequest{JobID: "j1", Spec: json.RawMessage(`{"id":"j1","parallelism":1,"x":[1,2.50]}`)}))
	b := must(s.SubmitJob(ctx, SubmitRequest{JobID: "j1", Spec: json.RawMessage(" {\"x\": [1, 2.50], \"parallelism\":1, \"id\":\"j1\"}\n")}))
	if b.NewVersion || b.Version.VersionID != a.Version.VersionID || b.Version.Number != 1 {
		t.Fatalf("same spec, new version: %+v", b.Version)
	}
	c := must(s.SubmitJob(ctx, SubmitRequest{JobID: "j1", Spec: spec("j1", 2)}))
	if !c.NewVersion || c.Version.Number != 2 || c.Job.CurrentVersion != a.Version.VersionID {
		t.Fatalf("second version %+v job %+v", c.Version, c.Job)
	}
	if _, err := s.SubmitJob(ctx, SubmitRequest{JobID: "j1", Spec: json.RawMessage(`{"id":`)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad spec: %v", err)
	}
	d := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredStopped, Kind: "upgrade", VersionID: c.Version.VersionID}))
	if j := must(s.GetJob(ctx, "j1")); j.CurrentVersion != c.Version.VersionID || d.VersionID != c.Version.VersionID {
		t.Fatalf("upgrade: %+v", j)
	}
	if _, err := s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredStopped, VersionID: "sha256:00"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown version: %v", err)
	}
	vs := must(s.ListVersions(ctx, "j1"))
	if len(vs) != 2 || !bytes.Equal(vs[0].Spec, []byte(`{"id":"j1","parallelism":1,"x":[1,2.50]}`)) {
		t.Fatalf("versions %+v", vs)
	}
	if v := must(s.GetVersion(ctx, "j1", a.Version.VersionID)); v.Number != 1 {
		t.Fatalf("version %+v", v)
	}
}

func TestCheckpointRecords(t *testing.T) {
	t.Parallel()
	s, clk, _ := openTest(t)
	r := submit(t, s, "j1")
	cp := Checkpoint{JobID: "j1", CheckpointID: "cp1", Kind: KindCheckpoint, Generation: 1, VersionID: r.Version.VersionID, FormatVersion: 1}
	must(s.CreateCheckpoint(ctx, cp))
	must(s.CreateCheckpoint(ctx, cp))
	bad := cp
	bad.Generation = 7
	if _, err := s.CreateCheckpoint(ctx, bad); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting create: %v", err)
	}
	if _, err := s.CreateCheckpoint(ctx, Checkpoint{JobID: "nope", CheckpointID: "x", Kind: KindSavepoint, FormatVersion: 1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	if _, err := s.LatestCompleted(ctx, "j1", KindCheckpoint, r.Version.VersionID, 1); !errors.Is(err, ErrNotFound) {
		t.Fatal("a pending checkpoint is not recoverable")
	}
	done := must(s.FinishCheckpoint(ctx, "j1", "cp1", CheckpointCompleted, "s3://b/checkpoints/cp1/manifest.json", ""))
	if done.Status != CheckpointCompleted {
		t.Fatalf("%+v", done)
	}
	must(s.FinishCheckpoint(ctx, "j1", "cp1", CheckpointCompleted, "s3://b/checkpoints/cp1/manifest.json", ""))
	if _, err := s.FinishCheckpoint(ctx, "j1", "cp1", CheckpointFailed, "", "late"); !errors.Is(err, ErrConflict) {
		t.Fatalf("completed then failed: %v", err)
	}
	clk.Advance(time.Second)
	sp := cp
	sp.CheckpointID, sp.Kind = "sp1", KindSavepoint
	must(s.CreateCheckpoint(ctx, sp))
	must(s.FinishCheckpoint(ctx, "j1", "sp1", CheckpointFailed, "", "node n2 offline"))
	if l := must(s.LatestCompleted(ctx, "j1", KindCheckpoint, r.Version.VersionID, 1)); l.CheckpointID != "cp1" {
		t.Fatalf("latest %+v", l)
	}
	if all := must(s.ListCheckpoints(ctx, "j1", "")); len(all) != 2 || all[0].CheckpointID != "sp1" {
		t.Fatalf("list %+v", all)
	}
	if sps := must(s.ListCheckpoints(ctx, "j1", KindSavepoint)); len(sps) != 1 || sps[0].Error != "node n2 offline" {
		t.Fatalf("savepoints %+v", sps)
	}
}

func TestRecoverIntents(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	submit(t, s, "j1")
	d := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning}))
	es := must(s.ClaimOutbox(ctx, "w", time.Minute, 10))
	must(s.CompleteOutbox(ctx, es[0].ID))
	// The intent is open but has no pending work: recovery re-arms it once.
	if n := must(s.RecoverIntents(ctx)); n != 1 {
		t.Fatalf("recovered %d", n)
	}
	if n := must(s.RecoverIntents(ctx)); n != 0 {
		t.Fatalf("recovered twice: %d", n)
	}
	if err := s.UpdateIntent(ctx, IntentUpdate{IntentID: d.IntentID, State: "retrying", Convergence: "degraded", FailureClass: "transport", Retry: s.now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if it := must(s.GetIntent(ctx, d.IntentID)); it.RetryCount != 1 || it.State != "retrying" {
		t.Fatalf("%+v", it)
	}
	if p, _ := must2(s.OutboxStats(ctx)); p != 2 {
		t.Fatalf("pending %d", p)
	}
}

func TestAudit(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	if err := s.Audit(ctx, AuditRecord{Actor: "viewer", Action: "operator.operate", ResourceType: "job", ResourceID: "j1",
		Outcome: "rejected", FailureCode: "forbidden", Message: string(bytes.Repeat([]byte("x"), 300)), CorrelationID: "c9"}); err != nil {
		t.Fatal(err)
	}
	au := must(s.ListAudit(ctx, "j1", 10))
	if len(au) != 1 || au[0].FailureCode != "forbidden" || len(au[0].Message) != 256 || au[0].CorrelationID != "c9" || au[0].At.IsZero() {
		t.Fatalf("%+v", au)
	}
}

func TestSessionTokensRandomAndNeverStored(t *testing.T) {
	t.Parallel()
	s, _, path := openTest(t)
	seen := map[string]bool{}
	var tokens []string
	for i := range 1000 {
		sess := register(t, s, "n"+string(rune('a'+i%26)), "b")
		if len(sess.Token) != 32 || seen[sess.Token] {
			t.Fatalf("token %q (len %d) repeated or short", sess.Token, len(sess.Token))
		}
		seen[sess.Token] = true
		tokens = append(tokens, sess.Token)
	}
	s.Close()
	var all []byte
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	for _, tok := range tokens[len(tokens)-50:] {
		if bytes.Contains(all, []byte(tok)) {
			t.Fatal("a session token is stored in the clear")
		}
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	sess := register(t, s, "n1", "b1")
	if _, err := s.Authenticate(ctx, "n1", sess.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "n1", sess.Token+"x"); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := s.Authenticate(ctx, "n2", sess.Token); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("other node: %v", err)
	}
	if _, err := s.RegisterAgent(ctx, Registration{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty node id: %v", err)
	}
	a := must(s.GetAgent(ctx, "n1"))
	if a.Capabilities.CheckpointProtocol != 1 || a.Capabilities.StateBackends[0] != "memory" || !a.Online(s.now()) {
		t.Fatalf("%+v", a)
	}
	if !a.Online(s.now().Add(14*time.Second)) || a.Online(s.now().Add(15*time.Second)) {
		t.Fatal("lease")
	}
	if _, err := s.GetAgent(ctx, "zz"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
}

// Many goroutines write at once: the one-writer path serialises them, the
// CAS loses no update and nothing returns SQLITE_BUSY.
func TestConcurrentWritersSerialised(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	sess := register(t, s, "n1", "b1")
	submit(t, s, "j1")
	const workers, each = 8, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*4)
	var mu sync.Mutex
	wins := 0
	delivered := map[string]int{}
	for w := range workers {
		wg.Add(3)
		go func() { // CAS loop
			defer wg.Done()
			for range each {
				for {
					j, err := s.GetJob(ctx, "j1")
					if err != nil {
						errs <- err
						return
					}
					_, err = s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, ExpectedGeneration: gen(j.Generation)})
					if errors.Is(err, ErrGenerationConflict) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					wins++
					mu.Unlock()
					break
				}
			}
		}()
		go func() { // commands and heartbeats
			defer wg.Done()
			for range each {
				if _, err := s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_checkpoint", JobID: "jx", Generation: int64(w)}); err != nil {
					errs <- err
					return
				}
				if _, err := s.Heartbeat(ctx, "n1", sess.Token, Heartbeat{}); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() { // polls: within the lease no command goes out twice
			defer wg.Done()
			for range each {
				got, err := s.ClaimCommands(ctx, "n1", sess.Token, time.Hour, 4)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, c := range got {
					delivered[c.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if j := must(s.GetJob(ctx, "j1")); j.Generation != int64(1+wins) || wins != workers*each {
		t.Fatalf("generation %d after %d wins", j.Generation, wins)
	}
	if n := len(must(s.ListCommands(ctx, "jx", -1))); n != workers*each {
		t.Fatalf("%d commands", n)
	}
	for id, n := range delivered {
		if n != 1 {
			t.Fatalf("command %s delivered %d times within its lease", id, n)
		}
	}
	if is := must(s.ListIntents(ctx, "j1")); len(is) != workers*each || is[0].State != "accepted" || is[1].State != "superseded" {
		t.Fatalf("%d intents", len(is))
	}
}
