package hub_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/hub"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// v1Agent is an Agent that speaks only ArkFlow v1's JSON, written from the
// reference (§A.3, §B) with raw maps and strings: no hubwire types, no
// hubclient. Its credentials travel where v1 puts them: the node token and
// session token in bodies, the session token in the query of the command
// routes, never in an Authorization header.
type v1Agent struct {
	t       *testing.T
	api     string
	nodeID  string
	session string
	seq     int   // report_seq, restarting at 1 per session as the Rust agent does
	caps    []any // capabilities; nil: v1Capabilities
}

func (a *v1Agent) capabilities() []any {
	if a.caps != nil {
		return a.caps
	}
	return v1Capabilities
}

// v1Capabilities are the capabilities a [v1] Rust agent declares (§B.1).
var v1Capabilities = []any{"stream_lifecycle", "configuration", "metrics", "job_runtime", "state_backend", "checkpoint_recovery"}

// raw sends body (a JSON string, or nil) without any Authorization header
// and returns the status and the decoded body (nil when empty).
func (a *v1Agent) raw(method, path, body string) (int, any) {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.api+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v any
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &v); err != nil {
			a.t.Fatalf("%s %s: %d, not JSON: %s", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, v
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// register is v1's RegisterRequest; it starts a session and its report_seq.
func (a *v1Agent) register() {
	a.t.Helper()
	st, v := a.raw("POST", "/agent/register", mustJSON(a.t, map[string]any{"node_id": a.nodeID, "node_token": nodeToken,
		"protocol_version": "v1", "capabilities": a.capabilities()}))
	m, _ := v.(map[string]any)
	if st != 200 || m["node_id"] != a.nodeID || m["protocol_version"] != "v1" {
		a.t.Fatalf("register: %d %v", st, v)
	}
	tok, _ := m["session_token"].(string)
	if tok == "" || m["lease_ttl_ms"] == nil || m["poll_interval_ms"] == nil {
		a.t.Fatalf("register reply lacks v1 fields: %v", v)
	}
	a.session, a.seq = tok, 0
}

func (a *v1Agent) heartbeat(session string) int {
	a.t.Helper()
	st, _ := a.raw("POST", "/agent/heartbeat", mustJSON(a.t, map[string]any{"node_id": a.nodeID, "session_token": session,
		"state": "online", "protocol_version": "v1", "software_version": "0.5.0", "capabilities": a.capabilities()}))
	return st
}

// report sends a v1 NodeReport with the given session token and seq.
func (a *v1Agent) report(session string, seq int) (int, any) {
	a.t.Helper()
	return a.raw("POST", "/agent/report", mustJSON(a.t, map[string]any{"node_id": a.nodeID, "session_token": session,
		"version": "0.5.0", "state": "online", "capabilities": v1Capabilities, "streams": []any{}, "operations": []any{},
		"events": []any{}, "metrics": map[string]any{"streams_total": 0, "streams_running": 0},
		"boot_id": "boot-1", "report_seq": seq}))
}

// nextReport sends the next report of the current session.
func (a *v1Agent) nextReport() int {
	a.t.Helper()
	a.seq++
	st, v := a.report(a.session, a.seq)
	if st != 204 {
		a.t.Fatalf("report %d: %d %v", a.seq, st, v)
	}
	return st
}

func (a *v1Agent) poll() []map[string]any {
	a.t.Helper()
	st, v := a.raw("GET", "/agent/commands?node_id="+url.QueryEscape(a.nodeID)+"&session_token="+url.QueryEscape(a.session), "")
	list, ok := v.([]any)
	if st != 200 || !ok {
		a.t.Fatalf("poll: %d %v", st, v)
	}
	var out []map[string]any
	for _, c := range list {
		out = append(out, c.(map[string]any))
	}
	return out
}

// result posts a v1 CommandResult for cmd, copying what the Rust agent
// copies from the command (§B.7).
func (a *v1Agent) result(cmd map[string]any, state string, progress int, extra map[string]any) (int, any) {
	a.t.Helper()
	body := map[string]any{"command_id": cmd["id"], "operation_id": cmd["operation_id"], "state": state, "progress": progress,
		"generation": cmd["generation"], "correlation_id": cmd["correlation_id"], "action_id": cmd["action_id"]}
	for k, v := range extra {
		body[k] = v
	}
	id, _ := cmd["id"].(string)
	return a.raw("POST", "/agent/commands/"+url.PathEscape(id)+"/result?node_id="+url.QueryEscape(a.nodeID)+
		"&session_token="+url.QueryEscape(a.session), mustJSON(a.t, body))
}

// TestV1OnlyAgent: an Agent speaking only v1 JSON registers, heartbeats,
// reports, receives the job_start of a job an operator set running, posts
// its result and the Hub shows the job running; then stopped. A v1 Agent
// declares capability names only, no details: the Hub treats it as able
// to run the built-in connectors (it cannot declare Go-bound operators,
// so a job needing one is never placed on it). After a reconnect its
// reports, with report_seq back at 1, are accepted (ArkFlow's pitfall,
// §B.4), and a late report of the old session is refused.
func TestV1OnlyAgent(t *testing.T) {
	t.Parallel()
	h, err := hub.New(testConfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	api := srv.URL + "/api/v1"
	a := &v1Agent{t: t, api: api, nodeID: "v1-node"}

	a.register()
	if st := a.heartbeat(a.session); st != 204 {
		t.Fatalf("heartbeat: %d", st)
	}
	a.nextReport()
	a.nextReport()
	if cmds := a.poll(); len(cmds) != 0 {
		t.Fatalf("commands before any job: %v", cmds)
	}

	// Only built-in connectors: generate → drop.
	spec := `{"id":"v1job","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`
	st, _, body := call(t, "POST", api+"/jobs/validate", operatorToken, map[string]any{"spec": json.RawMessage(spec)})
	var vr map[string]any
	_ = json.Unmarshal(body, &vr)
	nodes, _ := vr["nodes"].([]any)
	if st != 200 || vr["valid"] != true || len(nodes) != 1 || nodes[0].(map[string]any)["compatible"] != true {
		t.Fatalf("validate against the v1 agent: %d %s", st, body)
	}
	st, _, body = call(t, "POST", api+"/jobs", operatorToken, map[string]any{"spec": json.RawMessage(spec)})
	if st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	st, _, body = call(t, "PUT", api+"/jobs/v1job/desired-state", operatorToken, map[string]any{"state": "running"})
	if st != 200 {
		t.Fatalf("desired running: %d %s", st, body)
	}

	var start map[string]any
	polltest.Eventually(t, "the job_start on the v1 agent", func() bool {
		for _, c := range a.poll() {
			if c["operation"] == "job_start" {
				start = c
			}
		}
		if start == nil {
			a.heartbeat(a.session)
		}
		return start != nil
	})
	if start["node_id"] != a.nodeID || start["resource_id"] != "v1job" || start["generation"] != float64(2) {
		t.Fatalf("job_start: %v", start)
	}
	req, _ := start["required_capabilities"].([]any)
	if !strings.Contains(mustJSON(t, req), "job_runtime") || !strings.Contains(mustJSON(t, req), "state_backend") {
		t.Fatalf("required_capabilities: %v", start)
	}
	payload, _ := start["payload"].(map[string]any)
	if payload["job_id"] != "v1job" || payload["spec"] == nil || payload["plan"] == nil || payload["generation"] != float64(2) {
		t.Fatalf("payload: %v", start["payload"])
	}
	// One task attempt per plan task: a v1 Agent runs the whole job.
	if as, _ := payload["assignments"].([]any); len(as) != 2 || tasksOf(t, start)[0] != "gen-0" || tasksOf(t, start)[1] != "out-0" {
		t.Fatalf("assignments: %v", payload["assignments"])
	}

	// v1's sequence: acknowledged (5), running (10), succeeded (100).
	for _, step := range []struct {
		state    string
		progress int
	}{{"acknowledged", 5}, {"running", 10}} {
		if st, v := a.result(start, step.state, step.progress, nil); st != 200 {
			t.Fatalf("result %s: %d %v", step.state, st, v)
		}
	}
	st2, v := a.result(start, "succeeded", 100, map[string]any{"observed_generation": start["generation"]})
	if op, _ := v.(map[string]any); st2 != 200 || op["state"] != "succeeded" || op["command_id"] != start["id"] {
		t.Fatalf("result succeeded: %d %v", st2, v)
	}
	job := func() map[string]any {
		_, _, body := call(t, "GET", api+"/jobs/v1job", viewerToken, nil)
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		return m
	}
	if j := job(); j["observed_state"] != "running" || j["convergence"] != "converged" {
		t.Fatalf("job after the result: %v", j)
	}

	// Reconnect: a new session whose report_seq restarts at 1 with the
	// same boot_id. Its reports are accepted and applied, and the old
	// session's are refused.
	old := a.session
	a.register()
	if a.session == old {
		t.Fatal("re-registering kept the session token")
	}
	if st := a.heartbeat(old); st != 401 {
		t.Fatalf("heartbeat with the old session: %d", st)
	}
	if st := a.heartbeat(a.session); st != 204 {
		t.Fatalf("heartbeat with the new session: %d", st)
	}
	a.nextReport() // seq 1 again
	if st, v := a.report(old, 99); st != 401 {
		t.Fatalf("late report of the old session: %d %v", st, v)
	}
	// The new session's report at seq 2 carries a job observation: it is
	// applied, which shows the report was not dropped as a replay.
	a.seq++
	st, v = a.raw("POST", "/agent/report", mustJSON(t, map[string]any{"node_id": a.nodeID, "session_token": a.session,
		"version": "0.5.0", "state": "online", "capabilities": v1Capabilities, "streams": []any{}, "operations": []any{},
		"events": []any{}, "metrics": map[string]any{}, "boot_id": "boot-1", "report_seq": a.seq,
		"jobs": []any{map[string]any{"job_id": "v1job", "generation": 2, "state": "failed", "error": "sink unreachable"}}}))
	if st != 204 {
		t.Fatalf("report with a job: %d %v", st, v)
	}
	if j := job(); j["observed_state"] != "failed" || !strings.Contains(mustJSON(t, j), "sink unreachable") {
		t.Fatalf("the new session's report was not applied: %v", j)
	}
	// v1's own channel for job state, /agent/job-observations, with the
	// new session: the job is observed running again.
	st, v = a.raw("POST", "/agent/job-observations", mustJSON(t, map[string]any{"node_id": a.nodeID, "session_token": a.session,
		"job_id": "v1job", "generation": 2, "state": "running"}))
	if st != 204 {
		t.Fatalf("job observation: %d %v", st, v)
	}
	if st, v = a.raw("POST", "/agent/job-observations", mustJSON(t, map[string]any{"node_id": a.nodeID, "session_token": old,
		"job_id": "v1job", "generation": 2, "state": "failed", "error": "late"})); st != 401 {
		t.Fatalf("job observation of the old session: %d %v", st, v)
	}
	if j := job(); j["observed_state"] != "running" {
		t.Fatalf("after the observation: %v", j)
	}

	// Stop: the v1 agent gets a job_stop; a result posted with the old
	// session is refused, and the new session's succeeded result shows the
	// job stopped and converged.
	st, _, body = call(t, "PUT", api+"/jobs/v1job/desired-state", operatorToken, map[string]any{"state": "stopped"})
	if st != 200 {
		t.Fatalf("desired stopped: %d %s", st, body)
	}
	var stop map[string]any
	polltest.Eventually(t, "the job_stop on the v1 agent", func() bool {
		for _, c := range a.poll() {
			if c["operation"] == "job_stop" {
				stop = c
			}
		}
		return stop != nil
	})
	if stop["generation"] != float64(3) {
		t.Fatalf("job_stop: %v", stop)
	}
	cur := a.session
	a.session = old
	if st, v := a.result(stop, "succeeded", 100, nil); st != 401 {
		t.Fatalf("result with the old session: %d %v", st, v)
	}
	a.session = cur
	if st, v := a.result(stop, "succeeded", 100, map[string]any{"observed_generation": 3}); st != 200 {
		t.Fatalf("stop result: %d %v", st, v)
	}
	if j := job(); j["observed_state"] != "stopped" || j["desired_state"] != "stopped" || j["convergence"] != "converged" {
		t.Fatalf("job after the stop: %v", j)
	}
}
