package hubstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func softwareVersion(t *testing.T, s *Store, node string) string {
	t.Helper()
	return must(s.GetAgent(ctx, node)).SoftwareVersion
}

func setVersion(node, v string) func(tx *cachedTx) error {
	return func(tx *cachedTx) error {
		_, err := tx.ExecContext(ctx, "UPDATE agents SET software_version = ? WHERE node_id = ?", v, node)
		return err
	}
}

func items(fns ...func(tx *cachedTx) error) []*groupItem {
	var out []*groupItem
	for _, fn := range fns {
		out = append(out, &groupItem{ctx: ctx, fn: fn, wake: make(chan struct{})})
	}
	return out
}

// One failing write in a batch is rolled back alone: the others commit,
// and each caller gets its own outcome.
func TestGroupCommitItemFailure(t *testing.T) {
	t.Parallel()
	s, _, path := openTest(t)
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		register(t, s, n, "b")
	}
	boom := errors.New("boom")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	batch := items(
		setVersion("n1", "v1"),
		func(tx *cachedTx) error { // writes, then fails in Go
			if err := setVersion("n2", "v2")(tx); err != nil {
				return err
			}
			return boom
		},
		func(tx *cachedTx) error { // writes, then fails in SQL (a duplicate key)
			if err := setVersion("n3", "v3")(tx); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO agent_sessions(node_id, epoch, token_hash, boot_id, created_at_ms) SELECT node_id, epoch, token_hash, boot_id, created_at_ms FROM agent_sessions WHERE node_id = 'n3'")
			return err
		},
		setVersion("n4", "v4"),
		setVersion("n1", "v1b"), // a later write in the same batch sees the earlier one
	)
	batch = append(batch, &groupItem{ctx: canceled, fn: setVersion("n2", "never"), wake: make(chan struct{})})
	s.commitGroup(batch)

	if batch[0].err != nil || batch[3].err != nil || batch[4].err != nil {
		t.Fatalf("good writes failed: %v, %v, %v", batch[0].err, batch[3].err, batch[4].err)
	}
	if !errors.Is(batch[1].err, boom) {
		t.Fatalf("failing write: %v", batch[1].err)
	}
	if batch[2].err == nil || !strings.Contains(strings.ToLower(batch[2].err.Error()), "constraint") {
		t.Fatalf("failing statement: %v", batch[2].err)
	}
	if !errors.Is(batch[5].err, context.Canceled) {
		t.Fatalf("canceled caller: %v", batch[5].err)
	}
	for _, b := range batch {
		if !b.done {
			t.Fatal("an item was left undone")
		}
	}
	check := func(s *Store) {
		t.Helper()
		for node, want := range map[string]string{"n1": "v1b", "n2": "", "n3": "", "n4": "v4"} {
			if got := softwareVersion(t, s, node); got != want {
				t.Errorf("%s software_version %q, want %q", node, got, want)
			}
		}
	}
	check(s)
	// Durable: the files as they are now hold the batch (crash_test.go).
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	copyFile(t, path, crashed)
	copyFile(t, path+"-wal", crashed+"-wal")
	s2 := openAt(t, crashed, newClock())
	defer s2.Close()
	check(s2)
}

// A write that breaks the batch's transaction itself fails alone: the
// others are run again, each in its own transaction, and commit.
func TestGroupCommitBrokenBatch(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	for _, n := range []string{"n1", "n2", "n3"} {
		register(t, s, n, "b")
	}
	var runs sync.Map
	counted := func(node, v string) func(tx *cachedTx) error {
		return func(tx *cachedTx) error {
			n, _ := runs.LoadOrStore(node, new(int))
			*n.(*int)++
			return setVersion(node, v)(tx)
		}
	}
	breaker := errors.New("broke the transaction")
	batch := items(
		counted("n1", "v1"),
		func(tx *cachedTx) error {
			if err := setVersion("n2", "v2")(tx); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "ROLLBACK"); err != nil {
				return err
			}
			return breaker
		},
		counted("n3", "v3"),
	)
	s.commitGroup(batch)
	if batch[0].err != nil || batch[2].err != nil || !errors.Is(batch[1].err, breaker) {
		t.Fatalf("errors %v, %v, %v", batch[0].err, batch[1].err, batch[2].err)
	}
	for node, want := range map[string]string{"n1": "v1", "n2": "", "n3": "v3"} {
		if got := softwareVersion(t, s, node); got != want {
			t.Errorf("%s software_version %q, want %q", node, got, want)
		}
	}
	n1, _ := runs.Load("n1")
	if *n1.(*int) != 2 {
		t.Errorf("n1's write ran %d times, want 2 (batch, then alone)", *n1.(*int))
	}
	// The writer is usable afterwards.
	if err := s.write(ctx, setVersion("n2", "after")); err != nil {
		t.Fatal(err)
	}
}

// Concurrent heartbeats and reports of many Agents share commits; every
// caller gets its own answer (a stale session its error), and each
// acknowledged report is in the database files.
func TestGroupCommitConcurrent(t *testing.T) {
	t.Parallel()
	s, _, path := openTest(t)
	const nodes, rounds = 32, 10
	tokens := make([]string, nodes)
	for i := range nodes {
		tokens[i] = register(t, s, fmt.Sprintf("n%02d", i), "b").Token
	}
	stale := tokens[0]
	tokens[0] = register(t, s, "n00", "b").Token

	// Hold the writer until the writes have queued up, so they do group.
	s.wmu.Lock()
	var wg sync.WaitGroup
	errs := make(chan error, nodes*rounds*2)
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := fmt.Sprintf("n%02d", i)
			for seq := int64(1); seq <= rounds; seq++ {
				if _, err := s.Heartbeat(ctx, node, tokens[i], Heartbeat{State: "online"}); err != nil {
					errs <- fmt.Errorf("%s heartbeat: %w", node, err)
				}
				out, err := s.RecordReport(ctx, Report{NodeID: node, SessionToken: tokens[i], Seq: seq,
					Snapshot: []byte(fmt.Sprintf(`{"seq":%d}`, seq))})
				if err != nil || !out.Accepted {
					errs <- fmt.Errorf("%s report %d: %+v %w", node, seq, out, err)
				}
			}
		}()
	}
	staleErr := make(chan error, 1)
	go func() {
		_, err := s.Heartbeat(ctx, "n00", stale, Heartbeat{})
		staleErr <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.group.mu.Lock()
		n := len(s.group.queue)
		s.group.mu.Unlock()
		if n >= nodes/2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s.wmu.Unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-staleErr; !errors.Is(err, ErrStaleSession) {
		t.Errorf("stale session's heartbeat: %v", err)
	}
	s.group.mu.Lock()
	largest, leading, queued := s.group.largest, s.group.leading, len(s.group.queue)
	s.group.mu.Unlock()
	if largest < 2 {
		t.Errorf("largest batch %d: the writes never shared a commit", largest)
	}
	if leading || queued != 0 {
		t.Errorf("after the writes: leading %v, %d queued", leading, queued)
	}
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	copyFile(t, path, crashed)
	copyFile(t, path+"-wal", crashed+"-wal")
	s2 := openAt(t, crashed, newClock())
	defer s2.Close()
	for i := range nodes {
		a := must(s2.GetAgent(ctx, fmt.Sprintf("n%02d", i)))
		if a.LastReportSeq != rounds || string(a.LastReport) != fmt.Sprintf(`{"seq":%d}`, rounds) {
			t.Errorf("%s: last report %d %s", a.NodeID, a.LastReportSeq, a.LastReport)
		}
	}
}

// A panicking write fails its own caller only; later writes still run.
func TestGroupCommitPanic(t *testing.T) {
	t.Parallel()
	s, _, _ := openTest(t)
	register(t, s, "n1", "b")
	err := s.writeGrouped(ctx, func(tx *cachedTx) error { panic("bug") })
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("panicking write: %v", err)
	}
	if err := s.writeGrouped(ctx, setVersion("n1", "v1")); err != nil {
		t.Fatal(err)
	}
	if got := softwareVersion(t, s, "n1"); got != "v1" {
		t.Fatalf("software_version %q", got)
	}
}
