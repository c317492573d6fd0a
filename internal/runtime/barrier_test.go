package runtime

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// A cut through a running job with two sources feeding
// one keyed aggregate (a multi-input chain that aligns the barrier) waits
// until everything sent before it was written, records the sources'
// positions and a frozen view of the state that covers them, and resumes
// the sources. A source that has ended does not hold the cut up.
func TestCutAlignsAndResumes(t *testing.T) {
	t.Parallel()
	schema := arrow.NewSchema([]arrow.Field{{Name: "user", Type: arrow.BinaryTypes.String}, {Name: "amount", Type: arrow.PrimitiveTypes.Int64}}, nil)
	left, right := mem.NewSource(schema, 2), mem.NewSource(schema, 1)
	sink := mem.NewSink()
	spec := `{"id":"cut","parallelism":2,"operators":[{"id":"left","kind":"source"},{"id":"right","kind":"source","parallelism":1},
	  {"id":"sum","kind":"aggregate","stateful":true,"key_field":"user","config":{"aggregates":[{"function":"sum","field":"amount","as":"total"}]}},
	  {"id":"out","kind":"sink"}],
	  "edges":[{"id":"l","from":"left","to":"sum","partitioned":true},{"id":"r","from":"right","to":"sum","partitioned":true},{"id":"o","from":"sum","to":"out"}],
	  "sources":[{"operator_id":"left","input_type":"memory"},{"operator_id":"right","input_type":"memory"}],
	  "sinks":[{"operator_id":"out","output_type":"memory"}],
	  "state":{"backend":"memory"},
	  "checkpoint":{"interval_ms":3600000,"retention":1,"object_store_uri":"file:///unused"}}`
	rt := New(mustBuild(t, spec, map[string]any{"left": left, "right": right, "out": sink}), Options{ChannelCapacity: 1})
	done := make(chan error, 1)
	go func() { done <- rt.Run(context.Background()) }()
	polltest.Eventually(t, "running", func() bool { return rt.State() == Running })

	rows := func(src *mem.Source, part int, users ...string) {
		amounts := make([]int64, len(users))
		for i := range amounts {
			amounts[i] = 1
		}
		if err := src.Append(part, clicks(users, amounts)); err != nil {
			t.Fatal(err)
		}
	}
	rows(left, 0, "a", "b")
	rows(left, 1, "c")
	rows(right, 0, "a", "d", "e")
	polltest.Eventually(t, "6 rows written", func() bool { return sink.NumRows() == 6 })

	ctx := context.Background()
	c, err := rt.cut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Frozen.Close()
	want := map[string][]connectors.Position{
		"left-0":  {{Partition: 0, Offset: 2}},
		"left-1":  {{Partition: 1, Offset: 1}},
		"right-0": {{Partition: 0, Offset: 3}},
	}
	for task, ps := range want {
		if got := c.Positions[task]; len(got) != 1 || got[0] != ps[0] {
			t.Errorf("%s positions %v, want %v", task, got, ps)
		}
	}
	// The frozen state holds the running totals of all five users.
	var buf bytes.Buffer
	info, err := c.Frozen.Snapshot(&buf, statestore.Scope{Job: "cut", Operator: "sum", Groups: statestore.AllKeyGroups}, time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	if info.Entries < 5 {
		t.Fatalf("frozen state has %d entries, want the 5 users' totals and positions", info.Entries)
	}
	// The sources resumed: new rows flow.
	rows(right, 0, "f")
	polltest.Eventually(t, "7 rows written after the cut", func() bool { return sink.NumRows() == 7 })

	// With one source ended, a second cut still completes.
	left.Close()
	polltest.Eventually(t, "left ended", func() bool {
		for _, s := range rt.sources {
			if s.task == "left-0" {
				select {
				case <-s.done:
					return true
				default:
				}
			}
		}
		return false
	})
	c2, err := rt.cut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c2.Frozen.Close()
	if c2.ID != c.ID+1 {
		t.Fatalf("cut ids %d then %d", c.ID, c2.ID)
	}
	if got := c2.Positions["right-0"]; len(got) != 1 || got[0].Offset != 4 {
		t.Fatalf("right-0 positions after the second cut: %v", got)
	}
	right.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := rt.cut(ctx); err == nil {
		t.Fatal("a cut after the job ended succeeded")
	}
}
