package hubstore

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// The store's share of the Hub's hot agent paths (the Hub's load test):
// heartbeats, reports and polls of many Agents at once, and the reads
// behind the job detail and node pages. BenchmarkHeartbeat (crash_test.go)
// is the single-writer latency of one durable commit.

const benchNodes = 64

type benchFleet struct {
	s      *Store
	tokens []string
	next   atomic.Int64
}

// openBench opens a store with benchNodes registered Agents and one job
// running on all of them.
func openBench(b *testing.B) *benchFleet {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "hub.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	f := &benchFleet{s: s}
	var as []Assignment
	for i := range benchNodes {
		node := fmt.Sprintf("n%03d", i)
		sess, err := s.RegisterAgent(ctx, Registration{NodeID: node, BootID: "b", ProtocolVersion: "v1"})
		if err != nil {
			b.Fatal(err)
		}
		f.tokens = append(f.tokens, sess.Token)
		as = append(as, Assignment{AssignmentID: fmt.Sprintf("task-%03d", i), NodeID: node})
	}
	if _, err := s.SubmitJob(ctx, SubmitRequest{JobID: "j1", Spec: spec("j1", benchNodes), Plan: json.RawMessage(`{"tasks":[]}`), Actor: "op"}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.SetDesired(ctx, DesiredChange{JobID: "j1", DesiredState: DesiredRunning, Assignments: as}); err != nil {
		b.Fatal(err)
	}
	return f
}

// node hands each caller its own Agent, round robin.
func (f *benchFleet) node() (string, string) {
	i := int(f.next.Add(1)-1) % benchNodes
	return fmt.Sprintf("n%03d", i), f.tokens[i]
}

// BenchmarkHeartbeatParallel: many Agents heartbeating at once.
func BenchmarkHeartbeatParallel(b *testing.B) {
	f := openBench(b)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		node, token := f.node()
		for pb.Next() {
			if _, err := f.s.Heartbeat(ctx, node, token, Heartbeat{State: "online"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkReportParallel: many Agents reporting one job each at once.
func BenchmarkReportParallel(b *testing.B) {
	f := openBench(b)
	j := must(f.s.GetJob(ctx, "j1"))
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		node, token := f.node()
		var seq int64
		for pb.Next() {
			seq++
			snap := json.RawMessage(fmt.Sprintf(`{"node_id":%q,"report_seq":%d}`, node, seq))
			rep := Report{NodeID: node, SessionToken: token, Seq: seq, Snapshot: snap,
				Jobs: []JobObservation{{JobID: "j1", Generation: j.Generation, State: "running", Snapshot: json.RawMessage(`{"state":"running"}`)}}}
			if _, err := f.s.RecordReport(ctx, rep); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPollEmpty: one Agent polling with nothing to claim.
func BenchmarkPollEmpty(b *testing.B) {
	f := openBench(b)
	node, token := f.node()
	b.ResetTimer()
	for b.Loop() {
		if _, err := f.s.ClaimCommands(ctx, node, token, time.Minute, 128); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPollEmptyParallel: many Agents polling at once, nothing queued.
func BenchmarkPollEmptyParallel(b *testing.B) {
	f := openBench(b)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		node, token := f.node()
		for pb.Next() {
			if _, err := f.s.ClaimCommands(ctx, node, token, time.Minute, 128); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkJobDetailReads: the store reads behind a job detail page.
func BenchmarkJobDetailReads(b *testing.B) {
	f := openBench(b)
	b.ResetTimer()
	for b.Loop() {
		j, err := f.s.GetJob(ctx, "j1")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.s.GetVersion(ctx, "j1", j.CurrentVersion); err != nil {
			b.Fatal(err)
		}
		if _, err := f.s.JobObservations(ctx, "j1"); err != nil {
			b.Fatal(err)
		}
		if _, err := f.s.ObserveJob(ctx, "j1", OpJobStart, ObservedRunning); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetAgent: the agent lookup a heartbeat with capabilities does.
func BenchmarkGetAgent(b *testing.B) {
	f := openBench(b)
	node, _ := f.node()
	b.ResetTimer()
	for b.Loop() {
		if _, err := f.s.GetAgent(ctx, node); err != nil {
			b.Fatal(err)
		}
	}
}
