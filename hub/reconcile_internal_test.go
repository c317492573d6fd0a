package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func serve(t *testing.T, h *Hub, method, path, token string, body any, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	b, _ := json.Marshal(body)
	req := httptest.NewRequest(method, path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, req)
	return rec
}

// The reconciler turns desired running into one job_start for the only
// fitting Agent, and its expiry sweep times the command out when the
// Agent never takes it; the job is then still converging, not running.
// Time moves by hand: nothing here waits for a lease.
func TestReconcilerDispatchesAndExpires(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{}
	clock.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	h, err := New(Config{DataDir: t.TempDir(), InsecureNoAuth: true, Clock: clock.now, ReconcileInterval: 5 * time.Millisecond,
		CommandTimeout: time.Minute, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// n1 lacks state_backend: placement must skip it for n2.
	register := func(node, boot string, caps []string) string {
		rec := serve(t, h, "POST", "/api/v1/agent/register", "", hubwire.RegisterRequest{NodeID: node, ProtocolVersion: "v1", Capabilities: caps, BootID: boot})
		if rec.Code != 200 {
			t.Fatalf("register %s: %d %s", node, rec.Code, rec.Body)
		}
		var r hubwire.RegisterResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		return r.SessionToken
	}
	register("n1", "boot-a", []string{"job_runtime"})
	caps := []string{"job_runtime", "state_backend"}
	token := register("n2", "boot-1", caps)
	spec := json.RawMessage(`{"id":"j","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`)
	rec := serve(t, h, "POST", "/api/v1/jobs/validate", "", hubwire.ValidateJobRequest{Spec: spec})
	var vr hubwire.ValidateJobResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &vr); err != nil || !vr.Valid || len(vr.Nodes) != 2 {
		t.Fatalf("validate: %s", rec.Body)
	}
	for _, n := range vr.Nodes {
		if n.NodeID == "n1" && (n.Compatible || len(n.MissingCapabilities) != 1 || n.MissingCapabilities[0] != "state_backend") {
			t.Fatalf("n1 should miss state_backend: %+v", n)
		}
		if n.NodeID == "n2" && !n.Compatible {
			t.Fatalf("n2 should fit: %+v", n)
		}
	}
	// The deep validation names the operator and the field.
	bad := json.RawMessage(strings.Replace(string(spec), `"type":"int64"`, `"type":"int65"`, 1))
	rec = serve(t, h, "POST", "/api/v1/jobs/validate", "", hubwire.ValidateJobRequest{Spec: bad})
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), `"code":"invalid_job_spec"`) ||
		!strings.Contains(rec.Body.String(), `operator \"gen\"`) {
		t.Fatalf("invalid spec: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(t, h, "POST", "/api/v1/jobs", "", hubwire.SubmitJobRequest{Spec: spec, DesiredState: "running"}); rec.Code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	ctx := context.Background()
	var cmds []hubstore.Command
	polltest.Eventually(t, "the job_start queued", func() bool {
		cmds, err = h.store.ListCommands(ctx, "j", -1)
		return err == nil && len(cmds) == 1
	})
	if c := cmds[0]; c.NodeID != "n2" || c.Operation != hubstore.OpJobStart || c.Generation != 2 {
		t.Fatalf("command: %+v", c)
	}
	clock.advance(2 * time.Minute)
	h.poke()
	polltest.Eventually(t, "the command timed out", func() bool {
		c, err := h.store.GetCommand(ctx, cmds[0].ID)
		return err == nil && c.State == hubstore.CommandTimedOut
	})
	rec = serve(t, h, "GET", "/api/v1/jobs/j", "", nil)
	var jr hubwire.JobRecord
	if err := json.Unmarshal(rec.Body.Bytes(), &jr); err != nil || jr.ObservedState == hubwire.JobRunning {
		t.Fatalf("job after the timeout: %s", rec.Body)
	}

	// The Agent is online, so the timed-out start is sent again after the
	// retry delay.
	clock.advance(retryDelay + time.Second)
	h.poke()
	polltest.Eventually(t, "the start sent again", func() bool {
		cmds, err = h.store.ListCommands(ctx, "j", -1)
		return err == nil && len(cmds) == 2
	})
	if c := cmds[1]; c.ID != cmds[0].ID+"-retry1" || c.Operation != hubstore.OpJobStart || c.AssignmentID != cmds[0].AssignmentID {
		t.Fatalf("retry: %+v", c)
	}
	claimed, err := h.store.ClaimCommands(ctx, "n2", token, time.Minute, 10)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	if _, err := h.store.RecordCommandResult(ctx, "n2", token, hubstore.CommandResult{CommandID: claimed[0].ID, Generation: 2,
		State: hubstore.CommandSucceeded}); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(serve(t, h, "GET", "/api/v1/jobs/j", "", nil).Body.Bytes(), &jr); err != nil || jr.ObservedState != hubwire.JobRunning {
		t.Fatalf("job after the retry succeeded: %+v %v", jr, err)
	}

	// The Agent's process restarts (a new boot id): its jobs are gone, so
	// the Hub sends the start again and the job converges anew.
	register("n2", "boot-2", caps)
	cmds, err = h.store.ListCommands(ctx, "j", -1)
	if err != nil || len(cmds) != 3 || cmds[2].ID != cmds[0].ID+"-boot-boot-2" {
		t.Fatalf("after a new boot: %v %+v", err, cmds)
	}
	if err := json.Unmarshal(serve(t, h, "GET", "/api/v1/jobs/j", "", nil).Body.Bytes(), &jr); err != nil || jr.ObservedState != hubwire.JobStarting {
		t.Fatalf("job after the agent restarted: %+v %v", jr, err)
	}
}

// Submitting another spec for a stopped job makes it the current version
// (v1 replaces it); for a running job it is 409 job_must_be_stopped.
func TestSubmitReplacesAStoppedJob(t *testing.T) {
	t.Parallel()
	h, err := New(Config{DataDir: t.TempDir(), InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	spec := func(rate int) json.RawMessage {
		return json.RawMessage(`{"id":"j","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"rate_per_sec":` + fmt.Sprint(rate) + `,"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`)
	}
	var jr hubwire.JobRecord
	for i, rate := range []int{1, 2} {
		rec := serve(t, h, "POST", "/api/v1/jobs", "", hubwire.SubmitJobRequest{Spec: spec(rate)})
		if err := json.Unmarshal(rec.Body.Bytes(), &jr); err != nil || rec.Code != http.StatusAccepted || !strings.Contains(jr.SpecJSON, fmt.Sprintf(`"rate_per_sec":%d`, rate)) ||
			jr.Generation != uint64(i+1) {
			t.Fatalf("submit %d: %d %s", rate, rec.Code, rec.Body)
		}
	}
	if rec := serve(t, h, "GET", "/api/v1/jobs/j/versions", "", nil); !strings.Contains(rec.Body.String(), `"version":2`) {
		t.Fatalf("versions: %s", rec.Body)
	}
	// Desired running with no Agent: nothing can run it.
	if rec := serve(t, h, "PUT", "/api/v1/jobs/j/desired-state", "", hubwire.JobDesiredStateRequest{State: "running"}); rec.Code != http.StatusConflict ||
		!strings.Contains(rec.Body.String(), hubwire.CodeNodeUnavailable) {
		t.Fatalf("running without agents: %d %s", rec.Code, rec.Body)
	}
}

// ${secret:NAME} is resolved from the Hub's secrets only in the command an
// Agent receives: the stored spec and command keep the reference, and
// validation refuses a secret the Hub lacks.
func TestSecretsResolvedOnDelivery(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{}
	h, err := New(Config{DataDir: t.TempDir(), InsecureNoAuth: true, ReconcileInterval: 5 * time.Millisecond,
		Secrets: func(n string) (string, bool) { v, ok := secrets[n]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	spec := json.RawMessage(`{"id":"s","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"${secret:COLUMN}","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`)
	rec := serve(t, h, "POST", "/api/v1/jobs/validate", "", hubwire.ValidateJobRequest{Spec: spec})
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), `secret \"COLUMN\"`) {
		t.Fatalf("missing secret: %d %s", rec.Code, rec.Body)
	}
	secrets["COLUMN"] = "hidden_col"
	rec = serve(t, h, "POST", "/api/v1/agent/register", "", hubwire.RegisterRequest{NodeID: "n1", ProtocolVersion: "v1"})
	var reg hubwire.RegisterResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &reg); err != nil {
		t.Fatal(err)
	}
	if rec := serve(t, h, "POST", "/api/v1/jobs", "", hubwire.SubmitJobRequest{Spec: spec, DesiredState: "running"}); rec.Code != http.StatusAccepted ||
		strings.Contains(rec.Body.String(), "hidden_col") {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	var cmds []hubwire.AgentCommand
	polltest.Eventually(t, "the start delivered", func() bool {
		rec := serve(t, h, "GET", "/api/v1/agent/commands?node_id=n1&session_token="+reg.SessionToken, "", nil)
		if err := json.Unmarshal(rec.Body.Bytes(), &cmds); err != nil {
			t.Fatal(err)
		}
		return len(cmds) == 1
	})
	if p := string(cmds[0].Payload); !strings.Contains(p, "hidden_col") || strings.Contains(p, "${secret:") {
		t.Fatalf("delivered payload: %s", p)
	}
	stored, err := h.store.ListCommands(context.Background(), "s", -1)
	if err != nil || len(stored) != 1 || strings.Contains(string(stored[0].Payload), "hidden_col") {
		t.Fatalf("stored command: %v %s", err, stored[0].Payload)
	}
}

// The capability details an Agent registered with are stored: after a Hub
// restart a job naming the Agent's Go operator validates and places at
// once, without waiting for a heartbeat.
func TestCapabilitiesSurviveARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{DataDir: dir, InsecureNoAuth: true}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(t, h, "POST", "/api/v1/agent/register", "", hubwire.RegisterRequest{NodeID: "n1", ProtocolVersion: "v1",
		Capabilities: []string{"job_runtime", "state_backend"}, BootID: "b1",
		CapabilityDetails: &hubwire.CapabilityDetails{StateBackends: []string{"memory"}, Connectors: []string{"input:generate", "output:func"},
			Operators: []string{"g/out"}}})
	if rec.Code != 200 {
		t.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	h.Close()
	if h, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	spec := json.RawMessage(`{"id":"g","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"func"}]}`)
	rec = serve(t, h, "POST", "/api/v1/jobs/validate", "", hubwire.ValidateJobRequest{Spec: spec})
	var vr hubwire.ValidateJobResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &vr); err != nil || !vr.Valid || len(vr.Nodes) != 1 || !vr.Nodes[0].Compatible {
		t.Fatalf("validate after restart: %d %s", rec.Code, rec.Body)
	}
	// A badger job does not fit an Agent that offers only memory state.
	badger := json.RawMessage(strings.Replace(string(spec), `"edges"`, `"state":{"backend":"badger"},"edges"`, 1))
	rec = serve(t, h, "POST", "/api/v1/jobs/validate", "", hubwire.ValidateJobRequest{Spec: badger})
	if err := json.Unmarshal(rec.Body.Bytes(), &vr); err != nil || len(vr.Nodes) != 1 || vr.Nodes[0].Compatible ||
		!strings.Contains(rec.Body.String(), `"required":"badger"`) {
		t.Fatalf("validate badger: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(t, h, "POST", "/api/v1/jobs", "", hubwire.SubmitJobRequest{Spec: spec, DesiredState: "running"}); rec.Code != http.StatusAccepted {
		t.Fatalf("submit after restart: %d %s", rec.Code, rec.Body)
	}
}
