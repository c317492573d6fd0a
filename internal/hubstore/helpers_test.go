package hubstore

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *fakeClock { return &fakeClock{t: time.UnixMilli(1_800_000_000_000)} }

func openAt(t *testing.T, path string, clk *fakeClock) *Store {
	t.Helper()
	s, err := Open(path, Options{Clock: clk.Now, LeaseTTL: 15 * time.Second})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func openTest(t *testing.T) (*Store, *fakeClock, string) {
	t.Helper()
	clk := newClock()
	path := filepath.Join(t.TempDir(), "hub.db")
	s := openAt(t, path, clk)
	t.Cleanup(func() { s.Close() })
	return s, clk, path
}

var ctx = context.Background()

// must unwraps a (value, error) pair; a test fails by the panic's trace.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func register(t *testing.T, s *Store, node, boot string) Session {
	t.Helper()
	return must(s.RegisterAgent(ctx, Registration{NodeID: node, BootID: boot, ProtocolVersion: "v1",
		Capabilities: Capabilities{JobRuntimeVersion: "1", StateBackends: []string{"memory"}, CheckpointProtocol: 1}}))
}

func spec(id string, parallelism int) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"id": id, "parallelism": parallelism, "operators": []any{}})
	return b
}

func submit(t *testing.T, s *Store, job string) SubmitResult {
	t.Helper()
	return must(s.SubmitJob(ctx, SubmitRequest{JobID: job, Spec: spec(job, 1), Plan: json.RawMessage(`{"tasks":[]}`), Actor: "op"}))
}

func gen(n int64) *int64 { return &n }

func assigns(nodes ...string) []Assignment {
	var out []Assignment
	for i, n := range nodes {
		out = append(out, Assignment{AssignmentID: "task-" + string(rune('a'+i)), NodeID: n})
	}
	return out
}
