package hubwire

import (
	"errors"
	"strings"
	"testing"
)

func TestFormatETag(t *testing.T) {
	for _, c := range []struct {
		gen  uint64
		want string
	}{
		{0, `"generation-0"`},
		{7, `"generation-7"`},
		{18446744073709551615, `"generation-18446744073709551615"`},
	} {
		if got := FormatETag(c.gen); got != c.want {
			t.Errorf("FormatETag(%d) = %s, want %s", c.gen, got, c.want)
		}
		if g, err := ParseGeneration(c.want); err != nil || g != c.gen {
			t.Errorf("ParseGeneration(FormatETag(%d)) = %d, %v", c.gen, g, err)
		}
	}
}

func TestParseGeneration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{`"generation-3"`, 3, true},
		{`generation-3`, 3, true},
		{` "generation-42" `, 42, true},
		{`generation-0`, 0, true},
		{`generation-007`, 7, true},
		{`"generation-18446744073709551615"`, 18446744073709551615, true},
		{`"generation-18446744073709551616"`, 0, false},
		{`"generation-3`, 0, false},
		{`generation-3"`, 0, false},
		{`"`, 0, false},
		{`""`, 0, false},
		{``, 0, false},
		{`*`, 0, false},
		{`W/"generation-3"`, 0, false},
		{`"generation-"`, 0, false},
		{`"generation--1"`, 0, false},
		{`"generation-+1"`, 0, false},
		{`"generation-1 "`, 0, false},
		{`"generation-1", "generation-2"`, 0, false},
		{`"Generation-1"`, 0, false},
		{`"gen-1"`, 0, false},
		{`3`, 0, false},
		{`"generation-1a"`, 0, false},
	} {
		got, err := ParseGeneration(c.in)
		if c.ok {
			if err != nil || got != c.want {
				t.Errorf("ParseGeneration(%q) = %d, %v; want %d", c.in, got, err, c.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseGeneration(%q) = %d, want an error", c.in, got)
		} else if !errors.Is(err, ErrInvalidGeneration) {
			t.Errorf("ParseGeneration(%q) error %v does not wrap ErrInvalidGeneration", c.in, err)
		}
	}
}

func TestValidCapability(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"job_runtime", true},
		{"a", true},
		{"A.b-c_9", true},
		{strings.Repeat("x", 64), true},
		{strings.Repeat("x", 65), false},
		{"", false},
		{"job runtime", false},
		{"job/runtime", false},
		{"état", false},
		{"cap:1", false},
		{"cap\x00", false},
	} {
		if got := ValidCapability(c.name); got != c.ok {
			t.Errorf("ValidCapability(%q) = %v, want %v", c.name, got, c.ok)
		}
	}
}

func caps(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "cap-" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	return out
}

func TestValidateCapabilities(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    []string
		ok    bool
		inMsg string
	}{
		{"nil", nil, true, ""},
		{"v1 set", []string{"stream_lifecycle", "configuration", "metrics", "job_runtime", "state_backend", "checkpoint_recovery"}, true, ""},
		{"32", caps(32), true, ""},
		{"33", caps(33), false, "at most 32"},
		{"bad name", []string{"metrics", "bad name"}, false, `entry 1 "bad name"`},
		{"empty name", []string{""}, false, "entry 0"},
		{"duplicate", []string{"metrics", "metrics"}, false, "duplicate"},
	} {
		err := ValidateCapabilities(c.in)
		if (err == nil) != c.ok {
			t.Errorf("%s: ValidateCapabilities = %v, want ok=%v", c.name, err, c.ok)
			continue
		}
		if err != nil && (!errors.Is(err, ErrInvalidCapabilities) || !strings.Contains(err.Error(), c.inMsg)) {
			t.Errorf("%s: error %q, want it to wrap ErrInvalidCapabilities and contain %q", c.name, err, c.inMsg)
		}
	}
}

func TestFilterCapabilities(t *testing.T) {
	got := FilterCapabilities([]string{"metrics", "bad name", "metrics", "", "job_runtime", strings.Repeat("y", 65)})
	if strings.Join(got, ",") != "metrics,job_runtime" {
		t.Errorf("FilterCapabilities = %v", got)
	}
	if got := FilterCapabilities(nil); got == nil || len(got) != 0 {
		t.Errorf("FilterCapabilities(nil) = %#v, want empty non-nil", got)
	}
	long := append([]string{"bad name"}, caps(40)...)
	got = FilterCapabilities(long)
	if len(got) != MaxCapabilities || got[0] != long[1] || got[31] != long[32] {
		t.Errorf("FilterCapabilities kept %d entries %v...", len(got), got[:2])
	}
}

func TestMissingCapabilities(t *testing.T) {
	req := OpJobStart.RequiredCapabilities()
	if got := MissingCapabilities(req, []string{"job_runtime", "state_backend", "metrics"}); got != nil {
		t.Errorf("missing = %v, want none", got)
	}
	if got := MissingCapabilities(req, []string{"metrics"}); strings.Join(got, ",") != "job_runtime,state_backend" {
		t.Errorf("missing = %v", got)
	}
}

func TestOperationCapabilities(t *testing.T) {
	for op, want := range map[Operation]string{
		OpStart: "stream_lifecycle", OpStop: "stream_lifecycle", OpRestart: "stream_lifecycle",
		OpApplyConfiguration: "configuration", OpRollbackConfiguration: "configuration",
		OpJobStart: "job_runtime,state_backend", OpJobStop: "job_runtime,state_backend",
		OpJobRestart: "job_runtime,state_backend", OpJobCheckpoint: "job_runtime,state_backend",
		OpJobSavepoint: "job_runtime,state_backend", OpJobCheckpointCommit: "job_runtime,state_backend",
		OpJobSavepointCommit: "job_runtime,state_backend", OpReconcile: "", "bogus": "",
	} {
		if got := strings.Join(op.RequiredCapabilities(), ","); got != want {
			t.Errorf("%s needs %q, want %q", op, got, want)
		}
	}
}

func TestOperationStateTerminal(t *testing.T) {
	terminal := map[OperationState]bool{
		OpStateQueued: false, OpStateDispatched: false, OpStateAcknowledged: false, OpStateRunning: false,
		OpStateSucceeded: true, OpStateFailed: true, OpStateTimedOut: true, OpStateNodeUnavailable: true,
		OpStateCancelled: true, OpStateSuperseded: true,
	}
	for s, want := range terminal {
		if s.Terminal() != want {
			t.Errorf("%s.Terminal() = %v", s, !want)
		}
	}
	for c, want := range map[FailureClass]bool{
		FailureTemporaryExecution: true, FailureTransport: true, FailureNodeUnavailable: true,
		FailurePermanentExecution: false, FailureStaleGeneration: false, FailureAmbiguous: false, FailureValidation: false,
	} {
		if c.Retryable() != want {
			t.Errorf("%s.Retryable() = %v", c, !want)
		}
	}
}

func TestCheckReport(t *testing.T) {
	at := func(session uint64, boot string, seq uint64) ReportCursor { return ReportCursor{session, boot, seq} }
	for _, c := range []struct {
		name    string
		stored  ReportCursor
		session uint64
		boot    string
		seq     uint64
		want    ReportVerdict
		next    ReportCursor
	}{
		{"first report ever, seq 0", ReportCursor{}, 1, "b1", 0, ReportSessionStart, at(1, "b1", 0)},
		{"new session, seq 1 below the old max (Rust Agent)", at(1, "b1", 40), 2, "b1", 1, ReportSessionStart, at(2, "b1", 1)},
		{"new session, new boot", at(1, "b1", 40), 2, "b2", 0, ReportSessionStart, at(2, "b2", 0)},
		{"new session, process-wide counter", at(1, "b1", 40), 2, "b1", 41, ReportSessionStart, at(2, "b1", 41)},
		{"new session, no boot id", at(1, "b1", 40), 2, "", 0, ReportUnordered, at(2, "", 0)},
		{"next in order", at(1, "b1", 4), 1, "b1", 5, ReportInOrder, at(1, "b1", 5)},
		{"gap in order", at(1, "b1", 4), 1, "b1", 9, ReportInOrder, at(1, "b1", 9)},
		{"replay", at(1, "b1", 4), 1, "b1", 4, ReportStale, at(1, "b1", 4)},
		{"late", at(1, "b1", 4), 1, "b1", 3, ReportStale, at(1, "b1", 4)},
		{"no boot id is accepted", at(1, "b1", 4), 1, "", 1, ReportUnordered, at(1, "b1", 4)},
		{"first boot id of the session", at(1, "", 0), 1, "b1", 7, ReportSessionStart, at(1, "b1", 7)},
		{"boot changes within a session", at(1, "b1", 4), 1, "b2", 10, ReportBootChanged, at(1, "b1", 4)},
		{"old session with a higher seq", at(2, "b2", 1), 1, "b1", 100, ReportOldSession, at(2, "b2", 1)},
		{"old session with a new boot id", at(2, "b2", 1), 1, "b3", 100, ReportOldSession, at(2, "b2", 1)},
		{"old session without boot id", at(2, "b2", 1), 1, "", 100, ReportOldSession, at(2, "b2", 1)},
	} {
		got, next := CheckReport(c.stored, c.session, c.boot, c.seq)
		if got != c.want || next != c.next {
			t.Errorf("%s: CheckReport = %v %+v, want %v %+v", c.name, got, next, c.want, c.next)
		}
		wantFresh := c.want == ReportInOrder || c.want == ReportSessionStart || c.want == ReportUnordered
		if got.Fresh() != wantFresh {
			t.Errorf("%s: %v.Fresh() = %v", c.name, got, got.Fresh())
		}
	}
}

// TestCheckReportSessions plays a restarted Agent: it reports, is
// SIGKILLed and restarted (new boot, new session, sequence from 0), and
// late reports of the dead session arrive after the new session's. The new
// snapshot is never rolled back. The same holds for a reconnect of one
// process (same boot id, sequence restarting at 1 as the Rust Agent does),
// whose reports v1 drops until the sequence passes the old maximum. The
// cursor is never reset: newer sessions win by comparison.
func TestCheckReportSessions(t *testing.T) {
	steps := []struct {
		session uint64
		boot    string
		seq     uint64
		fresh   bool
	}{
		{1, "boot-a", 0, true},
		{1, "boot-a", 1, true},
		{1, "boot-a", 2, true},
		// SIGKILL; the new process registers: session 2.
		{2, "boot-b", 0, true},
		{1, "boot-a", 3, false}, // late report of the dead process
		{2, "boot-b", 1, true},
		{1, "boot-a", 99, false},
		// The same process reconnects: session 3, same boot, seq from 1.
		{3, "boot-b", 1, true},
		{2, "boot-b", 2, false}, // late report of the replaced session
		{3, "boot-b", 2, true},
		{3, "boot-b", 2, false}, // replay
	}
	var cur ReportCursor
	applied := 0
	for i, r := range steps {
		v, next := CheckReport(cur, r.session, r.boot, r.seq)
		if v.Fresh() != r.fresh {
			t.Fatalf("step %d %+v: verdict %v", i, r, v)
		}
		if v.Fresh() {
			applied++
		}
		cur = next
	}
	if cur != (ReportCursor{3, "boot-b", 2}) {
		t.Errorf("final cursor %+v", cur)
	}
	if applied != 7 {
		t.Errorf("applied %d reports, want 7", applied)
	}
}

func TestReportVerdictString(t *testing.T) {
	for v, s := range map[ReportVerdict]string{
		ReportStale: "stale", ReportOldSession: "old_session", ReportBootChanged: "boot_changed",
		ReportInOrder: "in_order", ReportSessionStart: "session_start", ReportUnordered: "unordered", ReportVerdict(99): "unknown",
	} {
		if v.String() != s {
			t.Errorf("%d.String() = %q, want %q", v, v.String(), s)
		}
	}
}

func TestApiErrorError(t *testing.T) {
	e := &ApiError{Code: CodeValidationFailed, Message: "state must be running or stopped", Field: "state"}
	if e.Error() != "validation_failed: state must be running or stopped (field state)" {
		t.Error(e.Error())
	}
	e = &ApiError{Code: CodeJobMustBeStopped, Message: "stop the job first"}
	if e.Error() != "job_must_be_stopped: stop the job first" {
		t.Error(e.Error())
	}
}
