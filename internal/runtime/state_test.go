package runtime

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

func aggSpec(dir string) string {
	return `{"id":"totals","parallelism":2,"operators":[{"id":"in","kind":"source"},
	  {"id":"sum","kind":"aggregate","stateful":true,"key_field":"user","config":{"aggregates":[{"function":"count","as":"n"},{"function":"sum","field":"amount","as":"total"}]}},
	  {"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"sum","partitioned":true},{"id":"b","from":"sum","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"probe"}],"sinks":[{"operator_id":"out","output_type":"probe"}],
	  "state":{"backend":"badger","path":"` + dir + `"}}`
}

func totalsInput() *mem.Source {
	users := []string{"ann", "bob", "cid", "dee", "eve"}
	var parts [][]arrow.RecordBatch
	for p := 0; p < 2; p++ {
		var bs []arrow.RecordBatch
		for b := 0; b < 10; b++ {
			var us []string
			var as []int64
			for i := 0; i < 4; i++ {
				us = append(us, users[(p*7+b*3+i)%len(users)])
				as = append(as, int64(p*1000+b*10+i))
			}
			bs = append(bs, clicks(us, as))
		}
		parts = append(parts, bs)
	}
	src, _ := mem.NewSourceFrom(parts...)
	return src
}

// dump returns every committed entry of a state directory, rendered.
func dump(t *testing.T, dir string) []string {
	t.Helper()
	b, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var out []string
	err = b.Scan(statestore.Scope{Job: "totals", Groups: statestore.AllKeyGroups}, 0, func(e statestore.Entry) error {
		out = append(out, fmt.Sprintf("%s/%d/%s/%x=%x", e.Key.Operator, e.Key.KeyGroup, e.Key.Namespace, e.Key.User, e.Value))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// runUntilDone runs the job until it completes, restarting it after every
// failure from the positions its sources had acknowledged; it returns the
// number of runs.
func runUntilDone(t *testing.T, dir string, src *mem.Source, sink *probe) int {
	t.Helper()
	var start map[string][]connectors.Position
	for run := 1; run <= 200; run++ {
		in := &probe{ev: &events{}, src: src, got: map[int][]arrow.RecordBatch{}}
		rt := New(mustBuild(t, aggSpec(dir), map[string]any{"in": in, "out": sink}), Options{StartPositions: start})
		err := rt.Run(context.Background())
		if err == nil {
			return run
		}
		if !strings.Contains(err.Error(), "probe write failure") {
			t.Fatalf("run %d: %v", run, err)
		}
		start = rt.Positions()
	}
	t.Fatal("the job never completed")
	return 0
}

// A stateful operator's mutations commit only when the sink
// acknowledged the output they produced, and roll back otherwise. With a
// sink that fails every third write and a restart from the acknowledged
// positions after each failure, the final committed state equals the state
// of a run without failures.
func TestJournalCommitsOnlyAcknowledgedOutput(t *testing.T) {
	t.Parallel()
	clean := t.TempDir()
	cleanSink := &probe{ev: &events{}, got: map[int][]arrow.RecordBatch{}}
	if runs := runUntilDone(t, clean, totalsInput(), cleanSink); runs != 1 {
		t.Fatalf("the clean job took %d runs", runs)
	}
	flaky := t.TempDir()
	flakySink := &probe{ev: &events{}, got: map[int][]arrow.RecordBatch{}, failEvery: 3}
	runs := runUntilDone(t, flaky, totalsInput(), flakySink)
	if runs < 5 {
		t.Fatalf("only %d runs: the sink did not fail as often as it should", runs)
	}
	want, got := dump(t, clean), dump(t, flaky)
	if len(want) == 0 {
		t.Fatal("no state committed")
	}
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Fatalf("state after %d runs with failures differs from a clean run:\n--- clean\n%s\n--- flaky\n%s", runs, strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}

// A replay of input already in committed state never commits
// twice: running the whole input again from the start leaves the state as
// it was.
func TestReplayNeverCommitsTwice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := totalsInput()
	sink := &probe{ev: &events{}, got: map[int][]arrow.RecordBatch{}}
	runUntilDone(t, dir, src, sink)
	before := dump(t, dir)
	// Same input, from offset 0 again (as after a crash between the state
	// commit and the source commit).
	sink2 := &probe{ev: &events{}, got: map[int][]arrow.RecordBatch{}}
	runUntilDone(t, dir, src, sink2)
	if after := dump(t, dir); strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Fatalf("replay changed the state:\n--- before\n%s\n--- after\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	rows := 0
	for _, recs := range sink2.got {
		for _, r := range recs {
			rows += int(r.NumRows())
		}
	}
	if rows != 0 {
		t.Fatalf("the replay emitted %d rows for input already applied", rows)
	}
}

// Two jobs using the same user keys in one state directory
// never see each other's state.
func TestStateIsolatedByJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sink := &probe{ev: &events{}, got: map[int][]arrow.RecordBatch{}}
	runUntilDone(t, dir, totalsInput(), sink)
	other := strings.Replace(aggSpec(dir), `"id":"totals"`, `"id":"other"`, 1)
	in := &probe{ev: &events{}, src: totalsInput(), got: map[int][]arrow.RecordBatch{}}
	out := &probe{ev: &events{}, got: map[int][]arrow.RecordBatch{}}
	rt := New(mustBuild(t, other, map[string]any{"in": in, "out": out}), Options{})
	if err := rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The second job started from empty state: its totals equal the first
	// job's, not double.
	last, want := lastTotals(t, out), lastTotals(t, sink)
	for u, w := range want {
		if !bytes.Equal(last[u], w) {
			t.Errorf("user %s: second job's totals %s, first job's %s", u, last[u], w)
		}
	}
	if m := rt.StateBytes(); m["sum"] <= 0 {
		t.Errorf("state bytes of operator sum: %v", m)
	}
}

// lastTotals returns, per user, the last (count, total) a probe sink got.
func lastTotals(t *testing.T, p *probe) map[string][]byte {
	t.Helper()
	last := map[string][]byte{}
	for _, recs := range p.got {
		for _, r := range recs {
			for i := 0; i < int(r.NumRows()); i++ {
				row := r.NewSlice(int64(i), int64(i+1))
				var buf bytes.Buffer
				fmt.Fprint(&buf, row.Column(1), row.Column(2))
				last[column(t, row, "user", str)[0]] = buf.Bytes()
				row.Release()
			}
		}
	}
	return last
}
