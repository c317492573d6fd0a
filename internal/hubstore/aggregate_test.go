package hubstore

import (
	"errors"
	"testing"
	"time"
)

func TestAggregateObserved(t *testing.T) {
	t.Parallel()
	exp := []Assignment{{AssignmentID: "t1", NodeID: "n1"}, {AssignmentID: "t2", NodeID: "n2"}, {AssignmentID: "t3", NodeID: "n3"}}
	at := func(i int) time.Time { return time.Unix(int64(i), 0) }
	ok := func(a string, i int) Outcome {
		return Outcome{AssignmentID: a, CommandID: "c-" + a, Generation: 4, State: CommandSucceeded, At: at(i)}
	}
	fail := func(a, class string, i int) Outcome {
		return Outcome{AssignmentID: a, NodeID: "n?", CommandID: "c-" + a + "-f", Generation: 4, State: CommandFailed, FailureClass: class, Error: "boom", At: at(i)}
	}
	with := func(o Outcome, f func(*Outcome)) Outcome { f(&o); return o }
	cases := []struct {
		name     string
		target   ObservedState
		expected []Assignment
		outcomes []Outcome
		want     ObservedState
		failure  string // assignment id of the reported failure
	}{
		{"all succeeded", ObservedRunning, exp, []Outcome{ok("t1", 1), ok("t2", 1), ok("t3", 1)}, ObservedRunning, ""},
		{"all stopped", ObservedStopped, exp, []Outcome{ok("t1", 1), ok("t2", 1), ok("t3", 1)}, ObservedStopped, ""},
		{"one without result", ObservedRunning, exp, []Outcome{ok("t1", 1), ok("t2", 1)}, ObservedConverging, ""},
		{"one acknowledged", ObservedRunning, exp, []Outcome{ok("t1", 1), ok("t2", 1), with(ok("t3", 1), func(o *Outcome) { o.State = CommandAcknowledged })}, ObservedConverging, ""},
		{"one transient failure", ObservedRunning, exp, []Outcome{ok("t1", 1), fail("t2", "temporary_execution", 1), ok("t3", 1)}, ObservedConverging, ""},
		{"one transport failure", ObservedRunning, exp, []Outcome{ok("t1", 1), fail("t2", "transport", 1), ok("t3", 1)}, ObservedConverging, ""},
		{"node restarted", ObservedRunning, exp, []Outcome{ok("t1", 1), with(ok("t2", 1), func(o *Outcome) { o.State = CommandNodeUnavailable }), ok("t3", 1)}, ObservedConverging, ""},
		{"timed out without class", ObservedRunning, exp, []Outcome{ok("t1", 1), ok("t2", 1), with(ok("t3", 1), func(o *Outcome) { o.State = CommandTimedOut })}, ObservedConverging, ""},
		{"retry succeeded after transient failure", ObservedRunning, exp, []Outcome{ok("t1", 1), fail("t2", "transport", 1), ok("t2", 2), ok("t3", 1)}, ObservedRunning, ""},
		{"permanent failure", ObservedRunning, exp, []Outcome{ok("t1", 1), fail("t2", "permanent_execution", 1), ok("t3", 1)}, ObservedFailed, "t2"},
		{"failure without class is permanent", ObservedRunning, exp, []Outcome{ok("t1", 1), ok("t2", 1), fail("t3", "", 1)}, ObservedFailed, "t3"},
		{"permanent failure beside pending", ObservedRunning, exp, []Outcome{fail("t1", "permanent_execution", 1)}, ObservedFailed, "t1"},
		{"failure of an older generation ignored", ObservedRunning, exp, []Outcome{ok("t1", 1), ok("t2", 1), ok("t3", 1),
			with(fail("t2", "permanent_execution", 9), func(o *Outcome) { o.Generation = 3 })}, ObservedRunning, ""},
		{"failure of an unexpected assignment ignored", ObservedRunning, exp, []Outcome{ok("t1", 1), ok("t2", 1), ok("t3", 1), fail("t9", "permanent_execution", 2)}, ObservedRunning, ""},
		{"superseded is not success", ObservedRunning, exp, []Outcome{ok("t1", 1), ok("t2", 1), with(ok("t3", 1), func(o *Outcome) { o.State = CommandSuperseded })}, ObservedConverging, ""},
		{"no expected assignment", ObservedStopped, nil, nil, ObservedStopped, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := AggregateObserved("job-1", 4, c.target, c.expected, c.outcomes)
			if got.State != c.want {
				t.Fatalf("state %s, want %s (%+v)", got.State, c.want, got)
			}
			if got.Expected != len(c.expected) || got.Succeeded+got.Pending+got.Degraded+got.Failed != len(c.expected) {
				t.Fatalf("counts %+v", got)
			}
			if c.failure == "" {
				if got.Failure != nil {
					t.Fatalf("unexpected failure %+v", got.Failure)
				}
				return
			}
			f := got.Failure
			if f == nil || f.AssignmentID != c.failure || f.JobID != "job-1" || f.Generation != 4 || f.CommandID != "c-"+c.failure+"-f" || f.Message != "boom" {
				t.Fatalf("failure %+v", f)
			}
		})
	}
}

// Three agents start a job; one fails transiently and is retried: the job
// goes converging → running and is never failed; a stale-generation result
// changes nothing.
func TestObserveJob(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	tok := map[string]string{}
	for _, n := range []string{"n1", "n2", "n3"} {
		tok[n] = register(t, s, n, "b-"+n).Token
	}
	submit(t, s, "j1")
	d := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, Assignments: assigns("n1", "n2", "n3")}))
	as := must(s.Assignments(ctx, "j1", d.Generation))
	ids := map[string]string{}
	for _, a := range as {
		c := must(s.EnqueueCommand(ctx, Command{NodeID: a.NodeID, Operation: "job_start", JobID: "j1", Generation: d.Generation, AssignmentID: a.AssignmentID, IntentID: d.IntentID}))
		ids[a.NodeID] = c.ID
	}
	observe := func(want ObservedState) Aggregate {
		t.Helper()
		agg := must(s.ObserveJob(ctx, "j1", "job_start", ObservedRunning))
		if agg.State != want {
			t.Fatalf("observed %s, want %s: %+v", agg.State, want, agg.Assignments)
		}
		return agg
	}
	observe(ObservedConverging)
	res := func(node string, r CommandResult) {
		t.Helper()
		r.CommandID = ids[node]
		must(s.RecordCommandResult(ctx, node, tok[node], r))
	}
	res("n1", CommandResult{State: CommandSucceeded, Generation: d.Generation})
	res("n2", CommandResult{State: CommandFailed, FailureClass: "temporary_execution", Error: "port busy", Generation: d.Generation})
	res("n3", CommandResult{State: CommandRunning})
	agg := observe(ObservedConverging)
	if agg.Degraded != 1 || agg.Pending != 1 || agg.Succeeded != 1 {
		t.Fatalf("%+v", agg)
	}
	first := ids["n2"]
	retry := must(s.EnqueueCommand(ctx, Command{NodeID: "n2", Operation: "job_start", JobID: "j1", Generation: d.Generation, AssignmentID: "task-b"}))
	ids["n2"] = retry.ID
	res("n2", CommandResult{State: CommandSucceeded})
	res("n3", CommandResult{State: CommandSucceeded})
	observe(ObservedRunning)
	// A late failure for the first n2 attempt is a duplicate: no change.
	if dup := must(s.RecordCommandResult(ctx, "n2", tok["n2"], CommandResult{CommandID: first, State: CommandFailed, FailureClass: "permanent_execution"})); !dup.Duplicate {
		t.Fatal("second terminal result applied")
	}
	// A result naming an older generation is rejected outright.
	stale := must(s.EnqueueCommand(ctx, Command{NodeID: "n3", Operation: "job_start", JobID: "j1", Generation: d.Generation, AssignmentID: "task-c"}))
	if _, err := s.RecordCommandResult(ctx, "n3", tok["n3"], CommandResult{CommandID: stale.ID, State: CommandFailed, Generation: d.Generation - 1}); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("stale-generation result: %v", err)
	}
	observe(ObservedConverging) // the fresh n3 command is outstanding
	// A new generation: the old generation's outcomes decide nothing.
	d2 := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, Assignments: assigns("n1", "n2", "n3")}))
	if c := must(s.GetCommand(ctx, stale.ID)); c.State != CommandSuperseded {
		t.Fatalf("old generation command %s", c.State)
	}
	if agg := observe(ObservedConverging); agg.Pending != 3 || d2.Generation != d.Generation+1 {
		t.Fatalf("%+v", agg)
	}
}
