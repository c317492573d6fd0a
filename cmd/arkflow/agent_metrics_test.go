package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/hub"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/opsrv/opsrvtest"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// agentJobSpec is a keyed count with checkpoints whose gated source
// (gatedInput) holds the job in Starting until the gate file exists.
func agentJobSpec(t *testing.T, dir string) json.RawMessage {
	t.Helper()
	spec, err := job.Parse([]byte(`id: fleet
parallelism: 2
state: {backend: memory}
checkpoint: {interval_ms: 200, object_store_uri: "file://` + filepath.Join(dir, "store") + `"}
operators:
  - {id: in, kind: source}
  - {id: count, kind: aggregate, key_field: user, config: {aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: count, partitioned: true}
  - {id: b, from: count, to: out}
sources:
  - {operator_id: in, input_type: ` + gatedInput + `, config: {count: 1000000, rate_per_sec: 500, batch_size: 10, fields: [{name: user, type: string, cardinality: 5}]}}
sinks:
  - {operator_id: out, output_type: drop}
`))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// send makes an operator request to the Hub's API and fails the test
// unless it succeeds.
func send(t *testing.T, method, url string, body any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, buf.String())
	}
}

// readyz returns /readyz's status code and body.
func readyz(t *testing.T, base string) (int, struct {
	Ready              bool
	Job, State, Reason string
}) {
	t.Helper()
	code, body := opsrvtest.Get(t, base+"/readyz")
	var r struct {
		Ready              bool
		Job, State, Reason string
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("/readyz: %d %v: %s", code, err, body)
	}
	return code, r
}

// `arkflow agent --metrics-addr 127.0.0.1:0` against a Hub in this
// process serves the same four routes as run, over
// real HTTP: /readyz is 503 before the Agent registers (the Hub does not
// answer yet) and while its job starts (naming the job), 200 once it
// runs; /metrics has the Agent's families and the job's, labelled, and
// passes promlint; /status is the Agent's JSON.
func TestAgentServesMetrics(t *testing.T) {
	dir := t.TempDir()
	h, err := hub.New(hub.Config{DataDir: filepath.Join(dir, "hub"), InsecureNoAuth: true,
		PollInterval: 50 * time.Millisecond, ReconcileInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// Bound but not serving yet: the Agent's registration waits.
	srv := httptest.NewUnstartedServer(h.Handler())
	defer srv.Close()
	hubURL := "http://" + srv.Listener.Addr().String()

	gate := filepath.Join(dir, "gate")
	cmd := cliCommand(dir, "agent", "--hub", hubURL, "--node-id", "n1", "--data-dir", "data", "--metrics-addr", "127.0.0.1:0")
	cmd.Env = append(cmd.Env, "ARKFLOW_TEST_GATE="+gate)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	base := metricsBase(t, stderr)

	code, r := readyz(t, base)
	if code != http.StatusServiceUnavailable || r.Ready || !strings.Contains(r.Reason, "not registered with the hub at "+hubURL) {
		t.Fatalf("/readyz before registering: %d %+v", code, r)
	}
	if code, body := opsrvtest.Get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d %s", code, body)
	}

	srv.Start()
	api := srv.URL + "/api/v1"
	send(t, "POST", api+"/jobs", map[string]any{"spec": agentJobSpec(t, dir)})
	send(t, "PUT", api+"/jobs/fleet/desired-state", map[string]any{"state": "running"})
	// Registered, the job assigned and starting (its source waits for the
	// gate): not ready, saying which job.
	polltest.Eventually(t, "/readyz to say job fleet is starting", func() bool {
		code, r := readyz(t, base)
		return code == http.StatusServiceUnavailable && r.Job == "fleet" && r.State == "starting" &&
			r.Reason == "job fleet: the job is starting, not yet running"
	}, stderr.String)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Ready once the job runs, with a checkpoint the Agent reported.
	var st hubclient.Status
	polltest.Eventually(t, "/readyz OK with a checkpoint reported", func() bool {
		code, _ := readyz(t, base)
		_, body := opsrvtest.Get(t, base+"/status")
		st = hubclient.Status{}
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatalf("/status: %v: %s", err, body)
		}
		return code == http.StatusOK && len(st.Jobs) == 1 && st.Jobs[0].Checkpoints.Completed > 0
	}, stderr.String)
	if st.NodeID != "n1" || st.HubURL != hubURL || !st.Registered || st.BootID == "" ||
		st.Jobs[0].JobID != "fleet" || st.Jobs[0].State != "running" || st.Jobs[0].Generation == 0 || !st.Jobs[0].Checkpoints.Healthy {
		t.Errorf("/status: %+v", st)
	}

	fams, _ := opsrvtest.Scrape(t, base+"/metrics")
	want := map[string]string{
		"arkflow_agent_registered":            "",
		"arkflow_agent_registrations_total":   "",
		"arkflow_agent_heartbeats_total":      "result",
		"arkflow_agent_commands_total":        "operation,result",
		"arkflow_agent_job_generation":        "job",
		"arkflow_agent_jobs":                  "state",
		"arkflow_rows_in_total":               "job,operator,subtask",
		"arkflow_job_status":                  "job,status",
		"arkflow_checkpoints_completed_total": "job",
		"go_goroutines":                       "",
		"process_cpu_seconds_total":           "",
	}
	opsrvtest.CheckFamilies(t, fams, want)
	value := func(name string, labels map[string]string) float64 {
		for _, m := range fams[name].GetMetric() {
			if l := opsrvtest.Labels(m); equalLabels(l, labels) {
				return metricValue(m)
			}
		}
		t.Errorf("no %s%v", name, labels)
		return -1
	}
	if v := value("arkflow_agent_registered", map[string]string{}); v != 1 {
		t.Errorf("arkflow_agent_registered = %v", v)
	}
	if v := value("arkflow_agent_heartbeats_total", map[string]string{"result": "ok"}); v < 1 {
		t.Errorf("arkflow_agent_heartbeats_total{result=ok} = %v", v)
	}
	if v := value("arkflow_agent_commands_total", map[string]string{"operation": "job_start", "result": "succeeded"}); v != 1 {
		t.Errorf("arkflow_agent_commands_total{job_start,succeeded} = %v", v)
	}
	if v := value("arkflow_agent_job_generation", map[string]string{"job": "fleet"}); v != float64(st.Jobs[0].Generation) {
		t.Errorf("arkflow_agent_job_generation{job=fleet} = %v, /status says %d", v, st.Jobs[0].Generation)
	}
	if v := value("arkflow_agent_jobs", map[string]string{"state": "running"}); v != 1 {
		t.Errorf("arkflow_agent_jobs{state=running} = %v", v)
	}
	for _, m := range fams["arkflow_rows_in_total"].GetMetric() {
		if opsrvtest.Labels(m)["job"] != "fleet" {
			t.Errorf("arkflow_rows_in_total%v: want job=fleet", opsrvtest.Labels(m))
		}
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent: %v\n%s", err, stderr.String())
	}
}

// metricsBase waits for the "metrics listening" line on stderr and
// returns the base URL it names.
func metricsBase(t *testing.T, stderr *lockedBuffer) string {
	t.Helper()
	var base string
	polltest.Eventually(t, "the metrics listening line", func() bool {
		m := metricsListening.FindStringSubmatch(stderr.String())
		if m != nil {
			base = "http://" + m[1]
		}
		return m != nil
	}, stderr.String)
	return base
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// The Agent is ready once registered with every job it holds running;
// otherwise the reason names the first job that is not, and why: a
// restore with its bytes, a failure with its error. A job the Hub
// stopped does not count.
func TestAgentReadiness(t *testing.T) {
	ok := arkflow.CheckpointStatus{Enabled: true, Healthy: true}
	restoring := arkflow.CheckpointStatus{Recovery: arkflow.RecoveryProgress{BytesRestored: 10, BytesTotal: 100, KeysRestored: 3}}
	job := func(id, state string, c arkflow.CheckpointStatus, err string) hubclient.JobStatus {
		return hubclient.JobStatus{JobID: id, Generation: 1, State: state, Checkpoints: c, Error: err}
	}
	for _, c := range []struct {
		s      hubclient.Status
		ready  bool
		job    string
		reason string
	}{
		{hubclient.Status{HubURL: "http://hub:8080"}, false, "", "not registered with the hub at http://hub:8080"},
		{hubclient.Status{Registered: true}, true, "", ""},
		{hubclient.Status{Registered: true, Jobs: []hubclient.JobStatus{job("a", "running", ok, ""), job("b", "stopped", ok, "")}}, true, "", ""},
		{hubclient.Status{Registered: true, Jobs: []hubclient.JobStatus{job("a", "running", ok, ""), job("b", "recovering", restoring, "")}},
			false, "b", "job b: restoring the checkpoint's state: 10 of 100 bytes, 3 keys"},
		{hubclient.Status{Registered: true, Jobs: []hubclient.JobStatus{job("a", "failed", ok, "sink unreachable")}},
			false, "a", "job a: the job is failed: sink unreachable"},
		{hubclient.Status{Registered: true, Jobs: []hubclient.JobStatus{job("a", "running", arkflow.CheckpointStatus{Enabled: true, ConsecutiveFailures: 3, LastError: "store down"}, "")}},
			false, "a", "job a: 3 checkpoints in a row failed (not ready from 3): store down"},
	} {
		ready, body := agentReadiness(c.s)
		reason, _ := body["reason"].(string)
		jobID, _ := body["job"].(string)
		if ready != c.ready || reason != c.reason || jobID != c.job {
			t.Errorf("agentReadiness(%+v) = %v %v, want %v job %q %q", c.s, ready, body, c.ready, c.job, c.reason)
		}
	}
}

// A --metrics-addr that is no HOST:PORT is a usage mistake of agent too.
func TestAgentMetricsAddrFlag(t *testing.T) {
	code, _, errOut := runCLI("agent", "--hub", "http://127.0.0.1:1", "--node-id", "n", "--metrics-addr", "9090")
	if code != 2 || !strings.Contains(errOut, `--metrics-addr "9090"`) {
		t.Errorf("agent --metrics-addr 9090: exit %d: %s", code, errOut)
	}
}
