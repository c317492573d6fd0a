package hub_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// reportJob sends a's next report with one job observation (job at gen).
func (a *v1Agent) reportJob(job string, gen int, obs map[string]any) {
	a.t.Helper()
	a.seq++
	o := map[string]any{"job_id": job, "generation": gen}
	for k, v := range obs {
		o[k] = v
	}
	st, v := a.raw("POST", "/agent/report", mustJSON(a.t, map[string]any{"node_id": a.nodeID, "session_token": a.session,
		"version": "0.5.0", "state": "online", "capabilities": a.capabilities(), "streams": []any{}, "operations": []any{},
		"events": []any{}, "metrics": map[string]any{}, "boot_id": "boot-1", "report_seq": a.seq, "jobs": []any{o}}))
	if st != 204 {
		a.t.Fatalf("%s: report: %d %v", a.nodeID, st, v)
	}
}

// nodeMetrics is what one node reports of a job in the test below.
type nodeMetrics struct {
	lag, stateBytes, duration, failures int64
	recovery, pressure                  float64
	healthy, idle                       int64
}

// The detail's metrics aggregate what every node of the generation last
// reported, field by field: the largest watermark lag, checkpoint
// duration and task pressure, the summed state bytes and partitions, the
// slowest restore; checkpoint failures are the most any node reports or
// the rounds the Hub recorded failed, whichever is more. The assignment
// of a node that restores shows its progress.
func TestDetailMetricsAggregateTheNodesReports(t *testing.T) {
	t.Parallel()
	_, _, api := serveHub(t, testConfig(t, t.TempDir()))
	agents := map[string]*fleetAgent{"a": newFleetAgent(t, api, "a"), "b": newFleetAgent(t, api, "b")}
	for _, a := range agents {
		a.nextReport() // the boot id, known before any job
	}
	if st, _, body := call(t, "POST", api+"/jobs", operatorToken, map[string]any{"spec": json.RawMessage(fleetSpec(t.TempDir())), "desired_state": "running"}); st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	var gen int
	for _, a := range agents {
		c := a.next("job_start")
		gen = int(c["generation"].(float64))
		a.succeed(c, nil)
	}
	detail := func() hubwire.JobDetail {
		_, _, body := call(t, "GET", api+"/jobs/fleet/detail", viewerToken, nil)
		return decode[hubwire.JobDetail](t, body)
	}
	polltest.Eventually(t, "the job running", func() bool { return detail().Job.ObservedState == hubwire.JobRunning })
	if m := mustJSON(t, detail().Metrics); m != "{}" {
		t.Fatalf("metrics before any node measured the job: %s", m)
	}
	// The generation's first round, the Hub's periodic one, fails on
	// both nodes: one round the Hub recorded failed.
	for _, a := range agents {
		c := a.next("job_checkpoint")
		if st, v := a.result(c, "failed", 100, map[string]any{"error": "upload refused", "failure_class": "temporary_execution"}); st != 200 {
			t.Fatalf("failed part: %d %v", st, v)
		}
	}
	polltest.Eventually(t, "the failed round", func() bool {
		h := detail().CheckpointHealth
		return h != nil && h.ConsecutiveFailures == 1
	})

	reports := map[string]nodeMetrics{
		"a": {lag: 1500, stateBytes: 1000, duration: 30, failures: 0, recovery: 1, pressure: 0.25, healthy: 2, idle: 1},
		"b": {lag: -20, stateBytes: 234, duration: 75, failures: 0, recovery: 0.4, pressure: 0.5, healthy: 1, idle: 0},
	}
	for id, m := range reports {
		obs := map[string]any{"state": "running", "metrics": map[string]any{"watermark_lag_ms": m.lag, "state_bytes": m.stateBytes,
			"checkpoint_duration_ms": m.duration, "checkpoint_failures": m.failures, "recovery_progress": m.recovery,
			"task_pressure": m.pressure, "partition_health": map[string]any{"healthy": m.healthy, "idle": m.idle}}}
		if m.recovery < 1 {
			obs["state"], obs["recovery_progress"] = "recovering", int(m.recovery*100)
		}
		agents[id].reportJob("fleet", gen, obs)
	}
	// The reference: each field folded over the reports by its rule.
	lag, dur, fails, press := int64(math.MinInt64), int64(0), int64(1), 0.0 // the Hub's one failed round
	var state, healthy, idle int64
	rec := 1.0
	for _, m := range reports {
		lag, dur, fails, press = max(lag, m.lag), max(dur, m.duration), max(fails, m.failures), max(press, m.pressure)
		state, healthy, idle = state+m.stateBytes, healthy+m.healthy, idle+m.idle
		rec = min(rec, m.recovery)
	}
	d := detail()
	m := d.Metrics
	var parts hubwire.PartitionHealth
	if m.WatermarkLagMs == nil || *m.WatermarkLagMs != lag || m.StateBytes == nil || *m.StateBytes != uint64(state) ||
		m.CheckpointDurationMs == nil || *m.CheckpointDurationMs != uint64(dur) || m.CheckpointFailures == nil || *m.CheckpointFailures != uint64(fails) ||
		m.RecoveryProgress == nil || *m.RecoveryProgress != rec || m.TaskPressure == nil || *m.TaskPressure != press ||
		json.Unmarshal(m.PartitionHealth, &parts) != nil || parts.Healthy != uint64(healthy) || parts.Idle != uint64(idle) {
		t.Fatalf("metrics %s, want lag %d, state %d, duration %d, failures %d, recovery %v, pressure %v, partitions %d healthy %d idle",
			mustJSON(t, m), lag, state, dur, fails, rec, press, healthy, idle)
	}
	for _, as := range d.Assignments {
		want := reports[as.NodeID].recovery < 1
		if got := as.RecoveryProgress != nil && *as.RecoveryProgress == 40; got != want {
			t.Errorf("assignment of %s: recovery_progress %v, want 40 only while it restores", as.NodeID, as.RecoveryProgress)
		}
	}
	// A report of an older generation changes nothing.
	agents["a"].reportJob("fleet", gen-1, map[string]any{"state": "running", "metrics": map[string]any{"state_bytes": 1 << 40}})
	if m := detail().Metrics; m.StateBytes == nil || *m.StateBytes != uint64(state) {
		t.Fatalf("after a's report of generation %d: %s, want still %d state bytes", gen-1, mustJSON(t, m), state)
	}
}

// A real Agent measures the job it runs and the detail shows it: an
// event-time job with a keyed running count behind a partitioned edge
// and a checkpoint block, read from two partitions, reports every
// metric, each plausible for what runs.
func TestDetailMetricsOfARunningJob(t *testing.T) {
	t.Parallel()
	_, hubURL, api := serveHub(t, testConfig(t, t.TempDir()))
	startAgent(t, hubURL, "n1")
	polltest.Eventually(t, "the agent online", func() bool {
		_, _, body := call(t, "GET", api+"/nodes", viewerToken, nil)
		p := decode[hubwire.Page[hubwire.HubNode]](t, body)
		return len(p.Items) == 1 && p.Items[0].State == hubwire.NodeOnline
	})
	spec := `{"id":"measured","parallelism":2,"state":{"backend":"memory"},
		"checkpoint":{"interval_ms":3600000,"object_store_uri":"file://` + t.TempDir() + `"},
		"operators":[{"id":"clicks","kind":"source"},
			{"id":"counts","kind":"aggregate","stateful":true,"key_field":"user","config":{"aggregates":[{"function":"count","as":"n"}]}},
			{"id":"out","kind":"sink"}],
		"edges":[{"id":"e1","from":"clicks","to":"counts","partitioned":true},{"id":"e2","from":"counts","to":"out"}],
		"sources":[{"operator_id":"clicks","input_type":"generate",
			"config":{"partitions":2,"batch_size":50,"rate_per_sec":500,
				"fields":[{"name":"user","type":"string","prefix":"user-","cardinality":50},{"name":"ts","type":"timestamp","unit":"ms"}]},
			"time":{"mode":"event_time","timestamp_field":"ts","watermark":{"strategy":"bounded_out_of_orderness","out_of_orderness_ms":1000}}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`
	if st, _, body := call(t, "POST", api+"/jobs", operatorToken, map[string]any{"spec": json.RawMessage(spec), "desired_state": "running"}); st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	var m hubwire.JobMetrics
	var at time.Time
	polltest.Eventually(t, "every metric measured, the state non-empty", func() bool {
		at = time.Now()
		_, _, body := call(t, "GET", api+"/jobs/measured/detail", viewerToken, nil)
		d := decode[hubwire.JobDetail](t, body)
		if d.Job.ObservedState == hubwire.JobFailed {
			t.Fatalf("job failed: %s", body)
		}
		m = d.Metrics
		return m.WatermarkLagMs != nil && m.StateBytes != nil && *m.StateBytes > 0 && m.CheckpointDurationMs != nil &&
			m.CheckpointFailures != nil && m.RecoveryProgress != nil && m.TaskPressure != nil && len(m.PartitionHealth) > 0
	})
	// The generator's event times start at 1 700 000 000 000 ms and step
	// 1 ms per row of a partition, so the watermark is that plus at most
	// the rows read so far of one partition: the lag is the clock minus
	// it, within what a few minutes of input at this rate can move it.
	base := at.UnixMilli() - 1_700_000_000_000
	if lag := *m.WatermarkLagMs; lag > base+1000 || lag < base-int64(10*time.Minute/time.Millisecond) {
		t.Errorf("watermark lag %d ms, want about %d", lag, base)
	}
	var parts hubwire.PartitionHealth
	if err := json.Unmarshal(m.PartitionHealth, &parts); err != nil || parts.Healthy+parts.Idle != 2 {
		t.Errorf("partition health %s (%v): want the 2 partitions", m.PartitionHealth, err)
	}
	if *m.CheckpointFailures != 0 || *m.RecoveryProgress != 1 || *m.TaskPressure < 0 || *m.TaskPressure > 1 {
		t.Errorf("metrics %s", mustJSON(t, m))
	}
}
