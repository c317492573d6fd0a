package hubstore

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// A Hub killed without Close: the database and WAL files as they are on
// disk while the store is open hold every acknowledged write.
func TestCrashWithoutClose(t *testing.T) {
	t.Parallel()
	s, clk, path := openTest(t)
	sess := register(t, s, "n1", "b1")
	submit(t, s, "j1")
	d := must(s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, Assignments: assigns("n1")}))
	c := must(s.EnqueueCommand(ctx, Command{NodeID: "n1", Operation: "job_start", JobID: "j1", Generation: d.Generation, AssignmentID: "task-a"}))
	must(s.ClaimCommands(ctx, "n1", sess.Token, time.Minute, 10))
	must(s.RecordCommandResult(ctx, "n1", sess.Token, CommandResult{CommandID: c.ID, State: CommandSucceeded}))

	crashed := filepath.Join(t.TempDir(), "crashed.db")
	copyFile(t, path, crashed)
	copyFile(t, path+"-wal", crashed+"-wal")
	s2 := openAt(t, crashed, clk)
	defer s2.Close()
	if got := must(s2.GetCommand(ctx, c.ID)); got.State != CommandSucceeded {
		t.Fatalf("command %+v", got)
	}
	if it := must(s2.GetIntent(ctx, d.IntentID)); it.Generation != d.Generation {
		t.Fatalf("intent %+v", it)
	}
	if pending, _ := must2(s2.OutboxStats(ctx)); pending != 1 {
		t.Fatalf("outbox pending %d", pending)
	}
	if _, err := s2.Authenticate(ctx, "n1", sess.Token); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkHeartbeat measures one durable write (synchronous=FULL).
func BenchmarkHeartbeat(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "hub.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	sess, err := s.RegisterAgent(ctx, Registration{NodeID: "n1", BootID: "b"})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Heartbeat(ctx, "n1", sess.Token, Heartbeat{}); err != nil {
			b.Fatal(err)
		}
	}
}
