package hub_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

type keyCount struct {
	K string
	N int64
}

// counts records, per phase, the lowest and the last count each key
// showed.
type counts struct {
	mu    sync.Mutex
	phase int
	first [2]map[string]int64
	last  [2]map[string]int64
}

func (c *counts) sink(_ context.Context, rows []keyCount) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rows {
		if c.first[c.phase] == nil {
			c.first[c.phase], c.last[c.phase] = map[string]int64{}, map[string]int64{}
		}
		if _, ok := c.first[c.phase][r.K]; !ok {
			c.first[c.phase][r.K] = r.N
		}
		c.last[c.phase][r.K] = r.N
	}
	return nil
}

func (c *counts) keys(phase int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.last[phase])
}

// rescaleJob counts rows per key (ten keys) behind a partitioned edge, at
// parallelism par, with checkpoints in dir.
func rescaleJob(c *counts, par int, version uint64, dir string) *arkflow.Builder {
	prefix := "k"
	return arkflow.NewJob("rescale").Version(version).Parallelism(par).
		Checkpoint(job.Checkpoint{IntervalMS: 60_000, Retention: 3, ObjectStoreURI: "file://" + dir}).
		Source("gen", generate.Config{RatePerSec: 5000, BatchSize: 50, Fields: []generate.Field{{Name: "K", Type: "string", Cardinality: 10, Prefix: &prefix}}}).
		KeyBy("K").
		Aggregate("count", job.Running(job.Count("N"))).
		Sink("out", funcsink.Func[keyCount](c.sink))
}

// TestRescaleThroughHub: a job keyed by partitioned
// edges goes from parallelism 2 to 3 through the Hub: a savepoint, a stop,
// an upgrade to a version with the new parallelism, a start. The restore
// redistributes the key groups to the three subtasks (the relayout is
// proven in internal/runtime's restore story "rescale 2→3→1"): no key's
// count starts again at 1. (A job keyed by co-partitioning is refused
// such an upgrade: TestFixedParallelism.)
func TestRescaleThroughHub(t *testing.T) {
	t.Parallel()
	_, hubURL, api := serveHub(t, testConfig(t, t.TempDir()))
	c := &counts{}
	ckpts := t.TempDir()
	for _, id := range []string{"n1", "n2"} {
		startAgent(t, hubURL, id, rescaleJob(c, 2, 1, ckpts))
	}
	polltest.Eventually(t, "two agents", func() bool {
		_, _, body := call(t, "GET", api+"/nodes", viewerToken, nil)
		return decode[hubwire.Page[hubwire.HubNode]](t, body).Total == 2
	})
	st, _, body := call(t, "POST", api+"/jobs", operatorToken, hubwire.SubmitJobRequest{Spec: specOf(t, rescaleJob(c, 2, 1, ckpts)), DesiredState: "running"})
	if st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	jobState := func() hubwire.JobRecord {
		_, _, body := call(t, "GET", api+"/jobs/rescale", viewerToken, nil)
		r := decode[hubwire.JobRecord](t, body)
		if r.ObservedState == hubwire.JobFailed {
			t.Fatalf("the job failed: %s", r.LastError)
		}
		return r
	}
	polltest.Eventually(t, "all ten keys counted", func() bool { return jobState().ObservedState == hubwire.JobRunning && c.keys(0) == 10 })

	st, _, body = call(t, "POST", api+"/jobs/rescale/savepoints", operatorToken, hubwire.SavepointRequest{Name: "before-rescale"})
	if st != 202 {
		t.Fatalf("savepoint: %d %s", st, body)
	}
	spID := decode[hubwire.JobRecord](t, body).CheckpointID
	polltest.Eventually(t, "the savepoint", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/rescale/savepoints", viewerToken, nil)
		for _, r := range decode[[]hubwire.JobCheckpointRecord](t, body) {
			if r.CheckpointID == spID {
				if r.Status == hubwire.CheckpointFailed {
					t.Fatalf("savepoint failed: %s", r.Error)
				}
				return r.Status == hubwire.CheckpointCompleted
			}
		}
		return false
	})
	gen := jobState().Generation
	st, _, body = call(t, "PUT", api+"/jobs/rescale/desired-state", operatorToken, hubwire.JobDesiredStateRequest{State: "stopped"},
		"If-Match", fmt.Sprintf(`"generation-%d"`, gen))
	if st != 200 {
		t.Fatalf("stop: %d %s", st, body)
	}
	polltest.Eventually(t, "stopped", func() bool { return jobState().ObservedState == hubwire.JobStopped })
	gen = jobState().Generation

	st, _, body = call(t, "POST", api+"/jobs/rescale/upgrades", operatorToken, hubwire.UpgradeRequest{
		Spec: specOf(t, rescaleJob(c, 3, 2, ckpts)), SavepointID: "before-rescale", ExpectedGeneration: uint64(gen)})
	if st != 202 {
		t.Fatalf("upgrade to parallelism 3: %d %s", st, body)
	}
	c.mu.Lock()
	c.phase = 1
	c.mu.Unlock()
	gen = jobState().Generation
	st, _, body = call(t, "PUT", api+"/jobs/rescale/desired-state", operatorToken, hubwire.JobDesiredStateRequest{State: "running"},
		"If-Match", fmt.Sprintf(`"generation-%d"`, gen))
	if st != 200 {
		t.Fatalf("start version 2: %d %s", st, body)
	}
	polltest.Eventually(t, "version 2 running with all keys counted", func() bool {
		r := jobState()
		return r.ObservedState == hubwire.JobRunning && r.Version == 2 && c.keys(1) == 10
	})
	c.mu.Lock()
	for k, n := range c.first[1] {
		if n <= 1 {
			t.Errorf("key %s counted from %d after the rescale: its state was not restored", k, n)
		}
	}
	c.mu.Unlock()
}
