package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/opsrv/opsrvtest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// metricsSpec is a keyed count with checkpoints every 100 ms, fed by a slow
// generator so it runs until it is stopped.
func metricsSpec(dir, id string) string {
	return `id: ` + id + `
parallelism: 2
state: {backend: memory}
checkpoint: {interval_ms: 100, object_store_uri: "file://` + filepath.Join(dir, "store") + `"}
operators:
  - {id: in, kind: source}
  - {id: count, kind: aggregate, key_field: user, config: {aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: count, partitioned: true}
  - {id: b, from: count, to: out}
sources:
  - {operator_id: in, input_type: generate, config: {count: 1000000, rate_per_sec: 500, batch_size: 10, fields: [{name: user, type: string, cardinality: 5}]}}
sinks:
  - {operator_id: out, output_type: drop}
`
}

var metricsListening = regexp.MustCompile(`msg="metrics listening".*? addr=(\S+)`)

// `arkflow run --metrics-addr 127.0.0.1:0` serves the running job over
// real HTTP: /metrics has the job's families with
// their label sets and passes promlint, /healthz is live, /readyz becomes
// ready once the job runs and checkpoints, /status names the job; the
// server goes away with the job.
func TestRunServesMetrics(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(metricsSpec(dir, "scraped")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, stderr, base := startMetricsCLI(t, dir)
	defer cmd.Process.Kill()
	if n := strings.Count(stderr.String(), "metrics listening"); n != 1 {
		t.Errorf("\"metrics listening\" logged %d times", n)
	}

	if code, body := opsrvtest.Get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	// Ready once running and a checkpoint has completed, so the checkpoint
	// families carry a success.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := opsrvtest.Get(t, base+"/readyz")
		var st struct {
			State       string
			Checkpoints struct{ Completed int64 }
		}
		_, sb := opsrvtest.Get(t, base+"/status")
		if err := json.Unmarshal(sb, &st); err != nil {
			t.Fatalf("/status is not JSON: %v: %s", err, sb)
		}
		if code == http.StatusOK && st.Checkpoints.Completed > 0 {
			break
		}
		if code != http.StatusOK && code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz: %d %s", code, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready with a checkpoint: /readyz %d %s, /status %s\n%s", code, body, sb, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	code, body := opsrvtest.Get(t, base+"/status")
	var status struct {
		Job, State  string
		Checkpoints arkflow.CheckpointStatus
	}
	if err := json.Unmarshal(body, &status); err != nil || code != http.StatusOK {
		t.Fatalf("/status: %d %v: %s", code, err, body)
	}
	if status.Job != "scraped" || status.State != "running" || !status.Checkpoints.Enabled || !status.Checkpoints.Healthy {
		t.Errorf("/status: %s", body)
	}

	fams, _ := opsrvtest.Scrape(t, base+"/metrics")
	labels := opsrvtest.Labels
	// Every family: its label names, and the job label.
	want := map[string]string{
		"arkflow_rows_in_total":                             "job,operator,subtask",
		"arkflow_rows_out_total":                            "job,operator,subtask",
		"arkflow_batches_in_total":                          "job,operator,subtask",
		"arkflow_job_status":                                "job,status",
		"arkflow_checkpoints_completed_total":               "job",
		"arkflow_checkpoints_failed_total":                  "job",
		"arkflow_checkpoint_consecutive_failures":           "job",
		"arkflow_checkpoint_healthy":                        "job",
		"arkflow_checkpoint_last_success_timestamp_seconds": "job",
		"arkflow_checkpoint_last_duration_seconds":          "job",
	}
	for name, lk := range want {
		f := fams[name]
		if f == nil || len(f.GetMetric()) == 0 {
			t.Errorf("no %s in /metrics", name)
			continue
		}
		for _, m := range f.GetMetric() {
			l := labels(m)
			if opsrvtest.LabelNames(m) != lk || l["job"] != "scraped" {
				t.Errorf("%s%v: want the labels %s with job=scraped", name, l, lk)
			}
		}
	}
	// A series per subtask: the count's two subtasks saw rows.
	subtasks := map[string]bool{}
	for _, m := range fams["arkflow_rows_in_total"].GetMetric() {
		if l := labels(m); l["operator"] == "count" && m.GetCounter().GetValue() > 0 {
			subtasks[l["subtask"]] = true
		}
	}
	if len(subtasks) != 2 {
		t.Errorf("arkflow_rows_in_total{operator=\"count\"} > 0 for subtasks %v, want 2", subtasks)
	}
	if v := fams["arkflow_checkpoints_completed_total"].GetMetric()[0].GetCounter().GetValue(); v < 1 {
		t.Errorf("arkflow_checkpoints_completed_total = %v", v)
	}
	for _, m := range fams["arkflow_job_status"].GetMetric() {
		if running := labels(m)["status"] == "running"; running != (m.GetGauge().GetValue() == 1) {
			t.Errorf("arkflow_job_status%v = %v", labels(m), m.GetGauge().GetValue())
		}
	}
	if fams["go_goroutines"] == nil || fams["process_cpu_seconds_total"] == nil {
		t.Error("no Go runtime or process metrics")
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the metrics server still serves after the job ended")
	}
}

// /readyz is 503, with the status and why, while the job is not running
// (here: built, not started), and /healthz is live all the same; the
// same handler as run serves, over real HTTP.
func TestReadyzNotRunning(t *testing.T) {
	dir := t.TempDir()
	spec, err := job.Parse([]byte(metricsSpec(dir, "idle")))
	if err != nil {
		t.Fatal(err)
	}
	j, err := arkflow.FromSpec(spec, arkflow.WithDataDir(filepath.Join(dir, "data")))
	if err != nil {
		t.Fatal(err)
	}
	h, err := metricsHandler(j, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	code, body := opsrvtest.Get(t, srv.URL+"/readyz")
	var r struct {
		Ready         bool
		State, Reason string
	}
	if err := json.Unmarshal(body, &r); err != nil || code != http.StatusServiceUnavailable || r.Ready || r.State != "created" || !strings.Contains(r.Reason, "not yet running") {
		t.Errorf("/readyz of a job not started: %d %v %s", code, err, body)
	}
	if code, body := opsrvtest.Get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	code, body = opsrvtest.Get(t, srv.URL+"/status")
	if code != http.StatusOK || !strings.Contains(string(body), `"job":"idle"`) || !strings.Contains(string(body), `"state":"created"`) {
		t.Errorf("/status: %d %s", code, body)
	}
}

// Ready means running with checkpoints failing fewer than
// readyMaxCheckpointFailures rounds in a row.
func TestReadiness(t *testing.T) {
	ok := arkflow.CheckpointStatus{Enabled: true, Healthy: true}
	failing := func(n int64) arkflow.CheckpointStatus {
		return arkflow.CheckpointStatus{Enabled: true, Failures: n, ConsecutiveFailures: n, LastError: "store unreachable"}
	}
	restoring := arkflow.CheckpointStatus{Enabled: true, Recovery: arkflow.RecoveryProgress{BytesRestored: 10, BytesTotal: 100, KeysRestored: 3}}
	for _, c := range []struct {
		s     arkflow.Status
		c     arkflow.CheckpointStatus
		ready bool
		why   string
	}{
		{arkflow.Running, ok, true, ""},
		{arkflow.Running, arkflow.CheckpointStatus{}, true, ""},
		{arkflow.Running, failing(2), true, ""},
		{arkflow.Running, failing(3), false, "3 checkpoints in a row failed (not ready from 3): store unreachable"},
		{arkflow.Starting, ok, false, "the job is starting, not yet running"},
		{arkflow.Starting, restoring, false, "restoring the checkpoint's state: 10 of 100 bytes, 3 keys"},
		{arkflow.Stopping, ok, false, "the job is stopping"},
		{arkflow.Failed, ok, false, "the job is failed"},
	} {
		ready, why := readiness(c.s, c.c)
		if ready != c.ready || why != c.why {
			t.Errorf("readiness(%v, %+v) = %v %q, want %v %q", c.s, c.c, ready, why, c.ready, c.why)
		}
	}
}

// A --metrics-addr that is no HOST:PORT is a usage mistake (exit 2) that
// names the flag, for run and for validate (which checks run's flags); an
// address already taken fails the run (exit 1) naming it too.
func TestMetricsAddrFlag(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(path, []byte(metricsSpec(dir, "flagged")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"9090", "localhost:http", "127.0.0.1:70000", "::1:9090"} {
		for _, verb := range []string{"run", "validate"} {
			code, _, errOut := runCLI(verb, "--metrics-addr", addr, "--data-dir", filepath.Join(dir, "data"), path)
			if code != 2 || !strings.Contains(errOut, "--metrics-addr \""+addr+"\"") {
				t.Errorf("%s --metrics-addr %s: exit %d: %s", verb, addr, code, errOut)
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errOut := runCLI("run", "--metrics-addr", ln.Addr().String(), "--data-dir", filepath.Join(dir, "data"), path)
	if code != 1 || !strings.Contains(errOut, "--metrics-addr "+ln.Addr().String()) || !strings.Contains(errOut, "address already in use") {
		t.Errorf("run on a taken address: exit %d: %s", code, errOut)
	}
}

// gatedInput is the generate input whose sources connect only once the
// file named by $ARKFLOW_TEST_GATE exists: a job that stays Starting as
// long as a test wants, as one restoring a large checkpoint does.
const gatedInput = "test_gated_generate"

func init() {
	connectors.RegisterInput(gatedInput, func(bc connectors.BuildContext) (connectors.Input, error) {
		gen, _ := connectors.LookupInput("generate")
		in, err := gen(bc)
		if err != nil {
			return nil, err
		}
		return gated{in}, nil
	})
}

type gated struct{ connectors.Input }

func (g gated) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	s, err := g.Input.NewSource(info)
	return gatedSource{s}, err
}

type gatedSource struct{ connectors.Source }

func (g gatedSource) Connect(ctx context.Context) error {
	for {
		if _, err := os.Stat(os.Getenv("ARKFLOW_TEST_GATE")); err == nil {
			return g.Source.Connect(ctx)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// /readyz of `arkflow run` is 503 while the job starts (its sources
// connecting; a restore is in the same Starting status), with /healthz
// live, and 200 once the job runs.
func TestRunReadyzWhileStarting(t *testing.T) {
	dir := t.TempDir()
	spec := `id: gated
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: out}
sources:
  - {operator_id: in, input_type: ` + gatedInput + `, config: {count: 1000000, rate_per_sec: 100, fields: [{name: n, type: int64}]}}
sinks:
  - {operator_id: out, output_type: drop}
`
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(dir, "gate")
	cmd, stderr, base := startMetricsCLI(t, dir, "ARKFLOW_TEST_GATE="+gate)
	defer cmd.Process.Kill()
	// Not ready while starting, however long it takes.
	for range 5 {
		code, body := opsrvtest.Get(t, base+"/readyz")
		var r struct {
			Ready         bool
			State, Reason string
		}
		// Before Run moves it to starting, the job is created: not ready
		// either.
		if err := json.Unmarshal(body, &r); err != nil || code != http.StatusServiceUnavailable || r.Ready || (r.State != "starting" && r.State != "created") {
			t.Fatalf("/readyz while starting: %d %v %s", code, err, body)
		}
		if code, body := opsrvtest.Get(t, base+"/healthz"); code != http.StatusOK {
			t.Fatalf("/healthz while starting: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := opsrvtest.Get(t, base+"/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready once started: %d %s\n%s", code, body, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
}

// startMetricsCLI starts `arkflow run --metrics-addr 127.0.0.1:0 job.yaml`
// in dir (with env added) and returns it, its stderr and the base URL its
// "metrics listening" line names.
func startMetricsCLI(t *testing.T, dir string, env ...string) (*exec.Cmd, *lockedBuffer, string) {
	t.Helper()
	cmd := cliCommand(dir, "run", "--data-dir", "data", "--metrics-addr", "127.0.0.1:0", "job.yaml")
	cmd.Env = append(cmd.Env, env...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := metricsListening.FindStringSubmatch(stderr.String()); m != nil {
			return cmd, stderr, "http://" + m[1]
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("no \"metrics listening\" line:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
