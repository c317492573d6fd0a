package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/jobdefaults"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// coPartSpec is a keyed running sum with parallelism par whose source
// promises its partitions are keyed by user (keyed_by): the sum is keyed
// without a partitioned edge, so every subtask chain is its own
// placement unit.
func coPartSpec(store string, par int) string {
	return fmt.Sprintf(`{"id":"cp","version":1,"parallelism":%d,"operators":[{"id":"in","kind":"source"},
	  {"id":"sum","kind":"aggregate","stateful":true,"key_field":"user","config":{"aggregates":[{"function":"sum","field":"amount","as":"total"}]}},
	  {"id":"out","kind":"sink"}],
	  "edges":[{"id":"e1","from":"in","to":"sum"},{"id":"e2","from":"sum","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory","keyed_by":"user"}],
	  "sinks":[{"operator_id":"out","output_type":"memory"}],
	  "state":{"backend":"memory"},
	  "checkpoint":{"interval_ms":3600000,"retention":3,"object_store_uri":"file://%s"}}`, par, store)
}

type coPartRun struct {
	t    *testing.T
	rt   *Runtime
	src  *mem.Source
	sink *mem.Sink
	done chan error
}

// startCoPart runs coPartSpec with hist (batches per partition) already
// in its source.
func startCoPart(t *testing.T, spec string, partitions int, hist map[int][]arrow.RecordBatch) (*coPartRun, error) {
	t.Helper()
	r := &coPartRun{t: t, src: mem.NewSource(clickSchema, partitions), sink: mem.NewSink(), done: make(chan error, 1)}
	for p, bs := range hist {
		for _, b := range bs {
			if err := r.src.Append(p, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.rt = New(mustBuild(t, spec, map[string]any{"in": r.src, "out": r.sink}), Options{})
	go func() { r.done <- r.rt.Run(context.Background()) }()
	for r.rt.State() != Running {
		select {
		case err := <-r.done:
			return nil, err
		default:
		}
	}
	return r, nil
}

func (r *coPartRun) totals() map[string]int64 {
	out := map[string]int64{}
	for _, rec := range r.sink.Records() {
		us := column(r.t, rec, "user", str)
		ts := column(r.t, rec, "total", i64)
		for i := range us {
			out[us[i]] = ts[i]
		}
	}
	return out
}

func (r *coPartRun) stop() {
	r.t.Helper()
	if err := r.rt.Stop(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	if err := <-r.done; err != nil {
		r.t.Fatal(err)
	}
}

// TestCoPartitionedKeyedState: a keyed
// operator whose source is keyed_by its key runs in the source's subtask
// (one placement unit per subtask, no shuffle) and keeps each key's state
// in its own subtask's key groups, so a checkpoint and a restore keep
// every key, also those whose hash falls in the other subtask's range;
// a restore at another parallelism is refused, naming the operator.
func TestCoPartitionedKeyedState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := t.TempDir()
	spec := coPartSpec(store, 2)
	s, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := planner.NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.PlacementUnits) != 2 {
		t.Fatalf("placement units: %+v, want one per subtask", plan.PlacementUnits)
	}
	// Twenty users per partition: with 128 key groups split in two, about
	// half hash into the other subtask's range.
	users := func(p int) []string {
		var us []string
		for i := range 20 {
			us = append(us, fmt.Sprintf("p%d-user%d", p, i))
		}
		return us
	}
	ones := func(n int, v int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	outside := 0
	for p := range 2 {
		own := keys.RangeFor(jobdefaults.MaxParallelism, 2, p)
		for _, u := range users(p) {
			if !own.Contains(keys.KeyGroup([]byte(u), jobdefaults.MaxParallelism)) {
				outside++
			}
		}
	}
	if outside == 0 {
		t.Fatal("no user hashes outside its subtask's range: the test would prove nothing")
	}

	hist := map[int][]arrow.RecordBatch{}
	r, err := startCoPart(t, spec, 2, hist)
	if err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		b := clicks(users(p), ones(20, 1))
		hist[p] = append(hist[p], b)
		if err := r.src.Append(p, b); err != nil {
			t.Fatal(err)
		}
	}
	polltest.Eventually(t, "40 totals", func() bool { return len(r.totals()) == 40 })
	if _, err := r.rt.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	r.stop()

	r2, err := startCoPart(t, spec, 2, hist)
	if err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		b := clicks(users(p), ones(20, 10))
		hist[p] = append(hist[p], b)
		if err := r2.src.Append(p, b); err != nil {
			t.Fatal(err)
		}
	}
	polltest.Eventually(t, "40 totals after the restore", func() bool { return len(r2.totals()) == 40 })
	var lost []string
	for u, total := range r2.totals() {
		if total != 11 {
			lost = append(lost, fmt.Sprintf("%s=%d", u, total))
		}
	}
	r2.stop()
	if len(lost) > 0 {
		t.Fatalf("after the restore %d of 40 users lost their state (want 1+10 each; %d hash outside their subtask's range): %s",
			len(lost), outside, strings.Join(lost, " "))
	}

	// Another parallelism: refused, the operator named.
	_, err = startCoPart(t, coPartSpec(store, 3), 3, hist)
	if err == nil || !strings.Contains(err.Error(), "sum from 2 to 3") || !strings.Contains(err.Error(), "keyed_by") {
		t.Fatalf("a restore at parallelism 3: %v", err)
	}
}
