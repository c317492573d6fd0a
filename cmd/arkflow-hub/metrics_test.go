package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/hub"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/opsrv/opsrvtest"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"

	_ "github.com/arkflow-rs/arkflow-go/connectors/drop"
	_ "github.com/arkflow-rs/arkflow-go/connectors/generate"
)

var metricsListening = regexp.MustCompile(`msg="metrics listening" addr=(\S+)`)

const opsToken = "operator-secret-0123456789"

// do sends a request with the operator token and returns the status code
// and body.
func do(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+opsToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// `arkflow-hub --metrics-addr 127.0.0.1:0` serves the routes of
// `arkflow run` on a listener of its own, over real
// HTTP: /readyz 200 once the store answers and the API serves; /metrics
// has the jobs by desired and observed state, the nodes by state, the
// API's requests labelled by route pattern (never by raw path) and code,
// passes promlint; /status has the version, the jobs by state and the
// nodes.
func TestHubServesMetrics(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	var logs syncBuffer
	go func() {
		errc <- run(ctx, []string{"--data-dir", filepath.Join(dir, "hub"), "--listen", "127.0.0.1:0", "--token", "ops|operator|" + opsToken,
			"--lease", "3s", "--poll-interval", "50ms", "--metrics-addr", "127.0.0.1:0"}, &logs, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("run: %v\n%s", err, logs.String())
	}
	m := metricsListening.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no \"metrics listening\" line:\n%s", logs.String())
	}
	base, api := "http://"+m[1], "http://"+addr+"/api/v1"
	if m[1] == addr {
		t.Fatalf("the metrics server shares the API's address %s", addr)
	}
	// The API's first request may race Run's start: wait for ready.
	var code int
	var body []byte
	polltest.Eventually(t, "/readyz to say ready", func() bool {
		code, body = opsrvtest.Get(t, base+"/readyz")
		return code == http.StatusOK && strings.Contains(string(body), `"ready":true`)
	}, func() string { return fmt.Sprintf("/readyz: %d %s\n%s", code, body, logs.String()) })
	if code, body := opsrvtest.Get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	// The metrics listener has no API, and the API no /metrics.
	if code, _ := opsrvtest.Get(t, base+"/api/v1/jobs"); code != http.StatusNotFound {
		t.Errorf("/api/v1/jobs on the metrics listener: %d", code)
	}

	// An Agent and a job running on it.
	ag, err := hubclient.New(hubclient.Config{HubURL: "http://" + addr, NodeID: "n1", DataDir: filepath.Join(dir, "agent"),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithCancel(context.Background())
	adone := make(chan struct{})
	go func() { defer close(adone); ag.Run(actx) }()
	defer func() { acancel(); <-adone }()
	spec, err := job.Parse([]byte(`id: ticks
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: out}
sources:
  - {operator_id: in, input_type: generate, config: {rate_per_sec: 100, fields: [{name: n, type: int64}]}}
sinks:
  - {operator_id: out, output_type: drop}
`))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := do(t, "POST", api+"/jobs", map[string]any{"spec": spec}); code/100 != 2 {
		t.Fatalf("submit: %d %s", code, body)
	}
	// The Hub places a job only on an Agent it has seen: wait for the
	// Agent's first heartbeat (without it the desired state is refused
	// with node_unavailable, which CI saw once).
	var nodes []byte
	polltest.Eventually(t, "the agent online", func() bool {
		var code int
		code, nodes = do(t, "GET", api+"/nodes", nil)
		var p hubwire.Page[hubwire.HubNode]
		if err := json.Unmarshal(nodes, &p); err != nil || code != http.StatusOK {
			t.Fatalf("nodes: %d %v: %s", code, err, nodes)
		}
		return len(p.Items) == 1 && p.Items[0].State == hubwire.NodeOnline
	}, func() string { return fmt.Sprintf("/nodes %s", nodes) })
	if code, body := do(t, "PUT", api+"/jobs/ticks/desired-state", map[string]any{"state": "running"}); code/100 != 2 {
		t.Fatalf("desired running: %d %s", code, body)
	}
	// A raw path the metrics must not keep: only its route pattern.
	if code, _ := do(t, "GET", api+"/jobs/no-such-job-4711", nil); code != http.StatusNotFound {
		t.Fatalf("GET an unknown job: %d", code)
	}
	var st hub.Status
	polltest.Eventually(t, "the job running on the node", func() bool {
		code, body = opsrvtest.Get(t, base+"/status")
		st = hub.Status{}
		if err := json.Unmarshal(body, &st); err != nil || code != http.StatusOK {
			t.Fatalf("/status: %d %v: %s", code, err, body)
		}
		return st.Jobs["running"] == 1 && len(st.Nodes) == 1
	}, func() string { return fmt.Sprintf("/status %s\n%s", body, logs.String()) })
	if st.Version == "" || st.Nodes[0].NodeID != "n1" || st.Nodes[0].State != "online" || st.Nodes[0].LastSeen.IsZero() {
		t.Errorf("/status: %+v", st)
	}

	fams, text := opsrvtest.Scrape(t, base+"/metrics")
	if strings.Contains(string(text), "no-such-job-4711") {
		t.Error("/metrics keeps a raw request path")
	}
	want := map[string]string{
		"arkflow_hub_jobs":                          "desired_state,observed_state",
		"arkflow_hub_nodes":                         "state",
		"arkflow_hub_store_up":                      "",
		"arkflow_hub_http_requests_total":           "code,route",
		"arkflow_hub_http_request_duration_seconds": "code,route",
		"arkflow_hub_failovers_total":               "",
		"arkflow_hub_store_write_duration_seconds":  "",
		"go_goroutines":                             "",
		"process_cpu_seconds_total":                 "",
	}
	opsrvtest.CheckFamilies(t, fams, want)
	value := func(name string, labels ...string) float64 {
		for _, m := range fams[name].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			match := true
			for i := 0; i+1 < len(labels); i += 2 {
				match = match && l[labels[i]] == labels[i+1]
			}
			if match {
				switch {
				case m.Gauge != nil:
					return m.GetGauge().GetValue()
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				case m.Histogram != nil:
					return float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return -1
	}
	if v := value("arkflow_hub_jobs", "desired_state", "running", "observed_state", "running"); v != 1 {
		t.Errorf("arkflow_hub_jobs{running,running} = %v", v)
	}
	if v := value("arkflow_hub_nodes", "state", "online"); v != 1 {
		t.Errorf("arkflow_hub_nodes{online} = %v", v)
	}
	if v := value("arkflow_hub_store_up"); v != 1 {
		t.Errorf("arkflow_hub_store_up = %v", v)
	}
	if v := value("arkflow_hub_http_requests_total", "route", "GET /api/v1/jobs/{id}", "code", "404"); v != 1 {
		t.Errorf("arkflow_hub_http_requests_total{GET /api/v1/jobs/{id},404} = %v", v)
	}
	if v := value("arkflow_hub_http_request_duration_seconds", "route", "POST /api/v1/agent/register", "code", "200"); v < 1 {
		t.Errorf("arkflow_hub_http_request_duration_seconds{POST /api/v1/agent/register,200} has %v samples", v)
	}
	if v := value("arkflow_hub_store_write_duration_seconds"); v < 1 {
		t.Errorf("arkflow_hub_store_write_duration_seconds has %v samples", v)
	}
	// Every route label is a pattern the mux has (METHOD /path) or
	// unmatched.
	for _, m := range fams["arkflow_hub_http_requests_total"].GetMetric() {
		for _, p := range m.GetLabel() {
			if p.GetName() == "route" && p.GetValue() != "unmatched" && !regexp.MustCompile(`^([A-Z]+ )?/`).MatchString(p.GetValue()) {
				t.Errorf("route label %q", p.GetValue())
			}
		}
	}

	acancel()
	<-adone
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the metrics server still serves after the Hub stopped")
	}
}

// /readyz is 503 with a reason while the API does not serve, and while
// the store cannot be read (a closed Hub).
func TestHubReadiness(t *testing.T) {
	h, err := hub.New(hub.Config{DataDir: t.TempDir(), InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	if ok, body := hubReadiness(h, true); !ok {
		t.Errorf("an open Hub serving its API is not ready: %v", body)
	}
	if ok, body := hubReadiness(h, false); ok || body["reason"] != "the API listener is not serving" {
		t.Errorf("not serving: %v %v", ok, body)
	}
	h.Close()
	if ok, body := hubReadiness(h, true); ok || !strings.HasPrefix(body["reason"].(string), "the store cannot be read") {
		t.Errorf("closed: %v %v", ok, body)
	}
}

// A --metrics-addr that is no HOST:PORT is a usage mistake naming the
// flag.
func TestHubMetricsAddrFlag(t *testing.T) {
	var logs syncBuffer
	err := run(context.Background(), []string{"--data-dir", t.TempDir(), "--metrics-addr", "9090"}, &logs, nil)
	var usage usageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), `--metrics-addr "9090"`) {
		t.Errorf("--metrics-addr 9090: %v", err)
	}
}
