package hubstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func snap(s string) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"from":%q}`, s)) }

func TestReportFreshness(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	submit(t, s, "j1")
	d := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, Assignments: assigns("n1")}))
	s1 := register(t, s, "n1", "boot-A")

	step := func(name string, rep Report, wantAccepted bool) ReportOutcome {
		t.Helper()
		out, err := s.RecordReport(ctx, rep)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if out.Accepted != wantAccepted {
			t.Fatalf("%s: accepted=%v, want %v", name, out.Accepted, wantAccepted)
		}
		return out
	}
	obs := func(state string) []JobObservation {
		return []JobObservation{{JobID: "j1", Generation: d.Generation, State: state}}
	}
	// Sequence numbers start at 0 for a session.
	step("s1 seq 0", Report{NodeID: "n1", SessionToken: s1.Token, BootID: "boot-A", Seq: 0, Snapshot: snap("s1-0"), Jobs: obs("starting")}, true)
	step("s1 seq 1", Report{NodeID: "n1", SessionToken: s1.Token, BootID: "boot-A", Seq: 1, Snapshot: snap("s1-1"), Jobs: obs("running")}, true)
	step("s1 seq 1 replay", Report{NodeID: "n1", SessionToken: s1.Token, BootID: "boot-A", Seq: 1, Snapshot: snap("replay")}, false)
	step("s1 seq 0 reordered", Report{NodeID: "n1", SessionToken: s1.Token, BootID: "boot-A", Seq: 0, Snapshot: snap("old"), Jobs: obs("starting")}, false)
	step("s1 seq 5 without boot id", Report{NodeID: "n1", SessionToken: s1.Token, Seq: 5, Snapshot: snap("s1-5")}, true)
	step("s1 seq 4 without boot id", Report{NodeID: "n1", SessionToken: s1.Token, Seq: 4, Snapshot: snap("old")}, false)

	// ArkFlow's pitfall: the same process reconnects (same boot id) and its
	// sequence restarts. The new session's reports must not be dropped.
	s2 := register(t, s, "n1", "boot-A")
	step("s2 seq 0 after reset", Report{NodeID: "n1", SessionToken: s2.Token, BootID: "boot-A", Seq: 0, Snapshot: snap("s2-0"), Jobs: obs("running")}, true)
	step("s2 seq 1", Report{NodeID: "n1", SessionToken: s2.Token, BootID: "boot-A", Seq: 1, Snapshot: snap("s2-1"), Jobs: obs("running")}, true)

	// A late report of the old session, even with a huge seq, is rejected
	// and rolls nothing back.
	if _, err := s.RecordReport(ctx, Report{NodeID: "n1", SessionToken: s1.Token, BootID: "boot-A", Seq: 100, Snapshot: snap("late"), Jobs: obs("failed")}); !errors.Is(err, ErrStaleSession) {
		t.Fatalf("old session report: %v", err)
	}
	if err := s.RecordJobObservation(ctx, "n1", s1.Token, JobObservation{JobID: "j1", Generation: d.Generation, State: "failed"}); !errors.Is(err, ErrStaleSession) {
		t.Fatalf("old session observation: %v", err)
	}
	a := must(s.GetAgent(ctx, "n1"))
	if a.LastReportSeq != 1 || string(a.LastReport) != string(snap("s2-1")) || a.SessionEpoch != s2.Epoch {
		t.Fatalf("agent after late report: seq %d report %s epoch %d", a.LastReportSeq, a.LastReport, a.SessionEpoch)
	}
	o := must(s.JobObservations(ctx, "j1"))
	if len(o) != 1 || o[0].State != "running" || o[0].SessionEpoch != s2.Epoch || o[0].ReportSeq != 1 {
		t.Fatalf("observation rolled back: %+v", o)
	}

	// Generation fencing of observations.
	out := step("s2 seq 2 stale generation", Report{NodeID: "n1", SessionToken: s2.Token, BootID: "boot-A", Seq: 2,
		Jobs: []JobObservation{{JobID: "j1", Generation: d.Generation - 1, State: "failed"}, {JobID: "ghost", Generation: 1, State: "running"}}}, true)
	if len(out.IgnoredJobs) != 2 {
		t.Fatalf("ignored %v", out.IgnoredJobs)
	}
	if err := s.RecordJobObservation(ctx, "n1", s2.Token, JobObservation{JobID: "j1", Generation: d.Generation + 1, State: "running"}); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("future generation observation: %v", err)
	}
	if err := s.RecordJobObservation(ctx, "n1", s2.Token, JobObservation{JobID: "j1", Generation: d.Generation, State: "stopped"}); err != nil {
		t.Fatal(err)
	}
	if o := must(s.JobObservations(ctx, "j1")); o[0].State != "stopped" {
		t.Fatalf("%+v", o)
	}

	// A real restart: new boot id, new session, sequence from 0.
	s3 := register(t, s, "n1", "boot-B")
	if !s3.NewBoot {
		t.Fatal("new boot not seen")
	}
	step("s3 seq 0", Report{NodeID: "n1", SessionToken: s3.Token, BootID: "boot-B", Seq: 0, Snapshot: snap("s3-0")}, true)
	if _, err := s.RecordReport(ctx, Report{NodeID: "n1", SessionToken: s2.Token, BootID: "boot-A", Seq: 9}); !errors.Is(err, ErrStaleSession) {
		t.Fatalf("old boot report: %v", err)
	}
	if _, err := s.RecordReport(ctx, Report{NodeID: "n1", SessionToken: "forged", Seq: 9}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("forged token: %v", err)
	}
}

// A v1 agent registers without a boot id; the boot id comes with reports.
func TestReportFreshnessBootFromReports(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	sess := register(t, s, "n1", "")
	running := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_start", JobID: "j", Generation: 1}))
	must(s.ClaimCommands(ctx, "n1", sess.Token, 1e9, 10))
	must(s.RecordCommandResult(ctx, "n1", sess.Token, CommandResult{CommandID: running.ID, State: CommandRunning}))

	out := must(s.RecordReport(ctx, Report{NodeID: "n1", SessionToken: sess.Token, BootID: "boot-1", Seq: 5}))
	if !out.Accepted || out.NewBoot {
		t.Fatalf("first report %+v", out)
	}
	if out := must(s.RecordReport(ctx, Report{NodeID: "n1", SessionToken: sess.Token, BootID: "boot-1", Seq: 3})); out.Accepted {
		t.Fatal("older seq of the same boot accepted")
	}
	// The process restarted without re-registering: a new boot id is fresh
	// whatever its seq, and the old boot's running command is fenced.
	out = must(s.RecordReport(ctx, Report{NodeID: "n1", SessionToken: sess.Token, BootID: "boot-2", Seq: 0}))
	if !out.Accepted || !out.NewBoot || len(out.FencedCommands) != 1 {
		t.Fatalf("new boot report %+v", out)
	}
	if out := must(s.RecordReport(ctx, Report{NodeID: "n1", SessionToken: sess.Token, BootID: "boot-2", Seq: 0})); out.Accepted {
		t.Fatal("replay accepted")
	}
	if a := must(s.GetAgent(ctx, "n1")); a.BootID != "boot-2" || a.LastReportSeq != 0 {
		t.Fatalf("%+v", a)
	}
}
