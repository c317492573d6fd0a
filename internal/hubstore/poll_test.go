package hubstore

import (
	"errors"
	"testing"
	"time"
)

// An idle poll is answered from the read pool: it does not wait for the
// writer (the Hub's load test), and still says nothing more than the
// claim's transaction would.
func TestPollIdleSkipsWriter(t *testing.T) {
	t.Parallel()
	s, clk, _ := openTest(t)
	old := register(t, s, "n1", "b1")
	sess := register(t, s, "n1", "b1")

	s.wmu.Lock() // a long write in progress
	done := make(chan error, 1)
	go func() {
		got, err := s.ClaimCommands(ctx, "n1", sess.Token, time.Minute, 10)
		if err == nil && len(got) != 0 {
			t.Errorf("idle poll claimed %+v", got)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		s.wmu.Unlock()
		t.Fatal("an idle poll waited for the writer")
	}
	s.wmu.Unlock()

	// Bad and stale tokens get the write path's answers.
	if _, err := s.ClaimCommands(ctx, "n1", old.Token, time.Minute, 10); !errors.Is(err, ErrStaleSession) {
		t.Fatalf("stale token: %v", err)
	}
	if _, err := s.ClaimCommands(ctx, "n1", "not-a-token", time.Minute, 10); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := s.ClaimCommands(ctx, "nobody", sess.Token, time.Minute, 10); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("unknown node: %v", err)
	}

	// A delivered command whose deadline passes while its claim still
	// holds is expired by the next poll, not skipped as idle.
	c := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_start", JobID: "j", Generation: 1, ExpiresAt: clk.Now().Add(5 * time.Second)}))
	if got := must(s.ClaimCommands(ctx, "n1", sess.Token, time.Hour, 10)); len(got) != 1 || got[0].ID != c.ID {
		t.Fatalf("claim %+v", got)
	}
	if got := must(s.ClaimCommands(ctx, "n1", sess.Token, time.Hour, 10)); len(got) != 0 {
		t.Fatalf("delivered twice within the lease: %+v", got)
	}
	clk.Advance(6 * time.Second)
	if got := must(s.ClaimCommands(ctx, "n1", sess.Token, time.Hour, 10)); len(got) != 0 {
		t.Fatalf("expired command delivered: %+v", got)
	}
	if g := must(s.GetCommand(ctx, c.ID)); g.State != CommandTimedOut {
		t.Fatalf("a poll past the deadline left the command %s", g.State)
	}
}
