package hub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/hub"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

const (
	adminToken    = "admin-secret-0123456789"
	operatorToken = "operator-secret-0123456789"
	viewerToken   = "viewer-secret-0123456789"
	nodeToken     = "node-secret-0123456789"
)

func testConfig(t *testing.T, dir string) hub.Config {
	return hub.Config{
		DataDir:           dir,
		Tokens:            []string{"root|admin|" + adminToken, "ops|operator|" + operatorToken, "eyes|viewer|" + viewerToken},
		NodeToken:         nodeToken,
		PollInterval:      20 * time.Millisecond,
		ReconcileInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// call sends a JSON request with a bearer token ("" for none) and returns
// the status, the headers and the body.
func call(t *testing.T, method, url, token string, body any, headers ...string) (int, http.Header, []byte) {
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
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

type row struct{ N int64 }

func ticks(n *atomic.Int64, checkpoints string) *arkflow.Builder {
	return arkflow.NewJob("ticks").
		Checkpoint(job.Checkpoint{IntervalMS: 60_000, Retention: 2, ObjectStoreURI: "file://" + checkpoints}).
		Source("gen", generate.Config{RatePerSec: 2000, BatchSize: 50, Fields: []generate.Field{{Name: "N", Type: "int64", Sequence: true}}}).
		Sink("out", funcsink.Func[row](func(_ context.Context, rows []row) error { n.Add(int64(len(rows))); return nil }))
}

func specOf(t *testing.T, b *arkflow.Builder) json.RawMessage {
	spec, err := json.Marshal(b.Spec())
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// envelope checks that b is an error envelope with code and a correlation
// id equal to the response header's.
func envelope(t *testing.T, status, wantStatus int, hdr http.Header, b []byte, code string) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status %d, want %d: %s", status, wantStatus, b)
	}
	e := decode[hubwire.ApiError](t, b)
	if e.Code != code {
		t.Fatalf("code %q, want %q: %s", e.Code, code, b)
	}
	if e.CorrelationID == "" || e.CorrelationID != hdr.Get("X-Correlation-ID") {
		t.Fatalf("correlation id %q, header %q", e.CorrelationID, hdr.Get("X-Correlation-ID"))
	}
}

// TestEndToEnd runs a Hub and a real Agent over loopback HTTP: an operator
// validates and submits a job, sets it running, sees it observed running
// with rows arriving in the Agent's Go sink, then stops it.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	h, err := hub.New(testConfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	api := srv.URL + "/api/v1"

	var rows atomic.Int64
	ckpts := t.TempDir()
	b := ticks(&rows, ckpts)
	agent, err := hubclient.New(hubclient.Config{HubURL: srv.URL, NodeID: "n1", NodeToken: nodeToken, DataDir: t.TempDir(),
		Jobs: []*arkflow.Builder{b}, Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); _ = agent.Run(ctx) }()
	defer func() { cancel(); <-agentDone }()

	polltest.Eventually(t, "the agent online", func() bool {
		st, _, body := call(t, "GET", api+"/nodes", viewerToken, nil)
		if st != 200 {
			t.Fatalf("nodes: %d %s", st, body)
		}
		p := decode[hubwire.Page[hubwire.HubNode]](t, body)
		return len(p.Items) == 1 && p.Items[0].State == hubwire.NodeOnline
	})

	spec := specOf(t, b)
	st, _, body := call(t, "POST", api+"/jobs/validate", operatorToken, hubwire.ValidateJobRequest{Spec: spec})
	if st != 200 {
		t.Fatalf("validate: %d %s", st, body)
	}
	vr := decode[hubwire.ValidateJobResponse](t, body)
	if !vr.Valid || len(vr.Nodes) != 1 || !vr.Nodes[0].Compatible {
		t.Fatalf("validate: %s", body)
	}

	// A spec naming a Go operator no Agent binds is invalid, naming it.
	other := arkflow.NewJob("orphan").
		Source("gen", generate.Config{Fields: []generate.Field{{Name: "N", Type: "int64"}}}).
		Sink("out", funcsink.Func[row](func(context.Context, []row) error { return nil }))
	st, hdr, body := call(t, "POST", api+"/jobs", operatorToken, hubwire.SubmitJobRequest{Spec: specOf(t, other)})
	envelope(t, st, 422, hdr, body, hubwire.CodeInvalidJobSpec)
	if !strings.Contains(string(body), `operator \"out\"`) {
		t.Fatalf("the error does not name the operator: %s", body)
	}

	st, hdr, body = call(t, "POST", api+"/jobs", operatorToken, hubwire.SubmitJobRequest{Spec: spec})
	if st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	rec := decode[hubwire.JobRecord](t, body)
	if rec.Generation != 1 || rec.DesiredState != "stopped" || rec.ObservedState != hubwire.JobValidated || hdr.Get("ETag") != `"generation-1"` {
		t.Fatalf("submitted: %s (etag %s)", body, hdr.Get("ETag"))
	}

	// Without a token: 401. A viewer cannot operate: 403. Both are
	// envelopes with the correlation id.
	st, hdr, body = call(t, "PUT", api+"/jobs/ticks/desired-state", "", hubwire.JobDesiredStateRequest{State: "running"})
	envelope(t, st, 401, hdr, body, "unauthorized")
	st, hdr, body = call(t, "PUT", api+"/jobs/ticks/desired-state", viewerToken, hubwire.JobDesiredStateRequest{State: "running"})
	envelope(t, st, 403, hdr, body, "forbidden")

	st, hdr, body = call(t, "PUT", api+"/jobs/ticks/desired-state", operatorToken, hubwire.JobDesiredStateRequest{State: "running"},
		"If-Match", `"generation-1"`, "Idempotency-Key", "start-1")
	if st != 200 || hdr.Get("ETag") != `"generation-2"` {
		t.Fatalf("desired running: %d %s (etag %s)", st, body, hdr.Get("ETag"))
	}
	// The same key and request again: the same answer, no new generation.
	st, hdr, body = call(t, "PUT", api+"/jobs/ticks/desired-state", operatorToken, hubwire.JobDesiredStateRequest{State: "running"},
		"If-Match", `"generation-1"`, "Idempotency-Key", "start-1")
	if st != 200 || hdr.Get("ETag") != `"generation-2"` {
		t.Fatalf("replayed desired running: %d %s (etag %s)", st, body, hdr.Get("ETag"))
	}
	// A stale If-Match without the key: 412 generation_conflict.
	st, hdr, body = call(t, "PUT", api+"/jobs/ticks/desired-state", operatorToken, hubwire.JobDesiredStateRequest{State: "stopped"},
		"If-Match", `"generation-1"`)
	envelope(t, st, 412, hdr, body, hubwire.CodeGenerationConflict)

	var detail hubwire.JobDetail
	polltest.Eventually(t, "the job observed running with rows", func() bool {
		st, _, body := call(t, "GET", api+"/jobs/ticks/detail", viewerToken, nil)
		if st != 200 {
			t.Fatalf("detail: %d %s", st, body)
		}
		detail = decode[hubwire.JobDetail](t, body)
		if detail.Job.ObservedState == hubwire.JobFailed {
			t.Fatalf("job failed: %s", body)
		}
		return detail.Job.ObservedState == hubwire.JobRunning && rows.Load() > 0
	})
	if len(detail.Assignments) != 1 || detail.Assignments[0].NodeID != "n1" || detail.Job.Convergence != hubwire.ConvergenceConverged ||
		len(detail.Job.NodeIDs) != 1 || len(detail.Operations) == 0 {
		t.Fatalf("detail: %+v", detail)
	}

	// A named savepoint: a job_savepoint to the assigned Agent,
	// completed when its result arrives.
	st, _, body = call(t, "POST", api+"/jobs/ticks/savepoints", operatorToken, hubwire.SavepointRequest{Name: "before-upgrade"})
	if st != 202 {
		t.Fatalf("savepoint: %d %s", st, body)
	}
	// The Agent cuts its part, then merges and commits it when the Hub
	// says every part is in: the record completes with the manifest the
	// commit wrote into the job's store.
	record := func(route, id string) (hubwire.JobCheckpointRecord, []hubwire.JobCheckpointRecord) {
		_, _, body := call(t, "GET", api+"/jobs/ticks/"+route, viewerToken, nil)
		cps := decode[[]hubwire.JobCheckpointRecord](t, body)
		for _, c := range cps {
			if c.Status == hubwire.CheckpointFailed {
				t.Fatalf("%s %s failed: %s", c.Kind, c.CheckpointID, body)
			}
			if c.CheckpointID == id {
				return c, cps
			}
		}
		return hubwire.JobCheckpointRecord{}, cps
	}
	spID := decode[hubwire.JobRecord](t, body).CheckpointID
	polltest.Eventually(t, "the savepoint completed", func() bool {
		sp, _ := record("savepoints", spID)
		return sp.Status == hubwire.CheckpointCompleted && sp.Kind == hubwire.KindSavepoint && sp.ManifestURI == "ticks/savepoints/before-upgrade/manifest.json"
	})
	if _, err := os.Stat(filepath.Join(ckpts, "ticks", "savepoints", "before-upgrade", "manifest.json")); err != nil {
		t.Fatalf("the savepoint's manifest is not in the store: %v", err)
	}
	// And a checkpoint on demand; both routes list both kinds. The job's
	// periodic checkpoints are the Hub's too (its spec asks for one a
	// minute, and the first is due when the job runs).
	st, _, body = call(t, "POST", api+"/jobs/ticks/checkpoints", operatorToken, nil)
	if st != 202 {
		t.Fatalf("checkpoint: %d %s", st, body)
	}
	cpID := decode[hubwire.JobRecord](t, body).CheckpointID
	polltest.Eventually(t, "the checkpoint completed", func() bool {
		cp, all := record("checkpoints", cpID)
		periodic := 0
		for _, c := range all {
			if c.Kind == hubwire.KindCheckpoint && c.CheckpointID != cpID && c.Status == hubwire.CheckpointCompleted {
				periodic++
			}
		}
		return cp.Status == hubwire.CheckpointCompleted && cp.ManifestURI == "ticks/checkpoints/"+cpID+"/manifest.json" && periodic >= 1
	})
	if _, err := os.Stat(filepath.Join(ckpts, "ticks", "checkpoints", cpID, "manifest.json")); err != nil {
		t.Fatalf("the checkpoint's manifest is not in the store: %v", err)
	}

	st, _, body = call(t, "PUT", api+"/jobs/ticks/desired-state", operatorToken, hubwire.JobDesiredStateRequest{State: "stopped"},
		"If-Match", `"generation-2"`)
	if st != 200 {
		t.Fatalf("desired stopped: %d %s", st, body)
	}
	polltest.Eventually(t, "the job observed stopped", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/ticks", viewerToken, nil)
		r := decode[hubwire.JobRecord](t, body)
		return r.Generation == 3 && r.ObservedState == hubwire.JobStopped
	})
	st, _, body = call(t, "GET", api+"/jobs/ticks/versions", viewerToken, nil)
	if vs := decode[[]hubwire.JobVersionRecord](t, body); st != 200 || len(vs) != 1 || vs[0].Digest == "" {
		t.Fatalf("versions: %d %s", st, body)
	}
	// Resubmitting the same spec yields the same version (content
	// addressed).
	st, _, body = call(t, "POST", api+"/jobs", operatorToken, hubwire.SubmitJobRequest{Spec: spec})
	if r := decode[hubwire.JobRecord](t, body); st != 202 || r.Version != 1 || r.Digest != rec.Digest {
		t.Fatalf("resubmit: %d %s", st, body)
	}

	// Upgrade: version 2 of the job takes over the savepoint.
	var spare atomic.Int64
	v2 := specOf(t, ticks(&spare, ckpts).Version(2))
	st, hdr, body = call(t, "POST", api+"/jobs/ticks/upgrades", operatorToken, hubwire.UpgradeRequest{Spec: v2, ExpectedGeneration: 2, SavepointID: "before-upgrade"})
	envelope(t, st, 409, hdr, body, hubwire.CodeGenerationConflict)
	st, hdr, body = call(t, "POST", api+"/jobs/ticks/upgrades", operatorToken, hubwire.UpgradeRequest{Spec: spec, ExpectedGeneration: 3, SavepointID: "before-upgrade"})
	envelope(t, st, 400, hdr, body, hubwire.CodeInvalidJobVersion)
	st, hdr, body = call(t, "POST", api+"/jobs/ticks/upgrades", operatorToken, hubwire.UpgradeRequest{Spec: v2, ExpectedGeneration: 3, SavepointID: "nope"})
	envelope(t, st, 409, hdr, body, hubwire.CodeSavepointNotReady)
	st, _, body = call(t, "POST", api+"/jobs/ticks/upgrades", operatorToken, hubwire.UpgradeRequest{Spec: v2, ExpectedGeneration: 3, SavepointID: "before-upgrade"})
	up := decode[hubwire.UpgradeResponse](t, body)
	if st != 202 || up.State != hubwire.ConvergencePendingRecovery || up.Job.Version != 2 || up.Job.Generation != 4 || up.Job.DesiredState != "stopped" {
		t.Fatalf("upgrade: %d %s", st, body)
	}
	n := rows.Load()
	st, _, body = call(t, "PUT", api+"/jobs/ticks/desired-state", operatorToken, hubwire.JobDesiredStateRequest{State: "running"},
		"If-Match", `"generation-4"`)
	if st != 200 {
		t.Fatalf("running v2: %d %s", st, body)
	}
	polltest.Eventually(t, "version 2 running from the savepoint", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/ticks", viewerToken, nil)
		r := decode[hubwire.JobRecord](t, body)
		if r.ObservedState == hubwire.JobFailed {
			t.Fatalf("version 2 failed: %s", body)
		}
		return r.ObservedState == hubwire.JobRunning && r.Version == 2 && rows.Load() > n
	})
	// Rollback needs the job stopped; then version 1 is current again.
	st, hdr, body = call(t, "POST", api+"/jobs/ticks/upgrades/any/rollback", operatorToken, nil)
	envelope(t, st, 409, hdr, body, hubwire.CodeJobMustBeStopped)
	call(t, "PUT", api+"/jobs/ticks/desired-state", operatorToken, hubwire.JobDesiredStateRequest{State: "stopped"})
	polltest.Eventually(t, "version 2 stopped", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/ticks", viewerToken, nil)
		return decode[hubwire.JobRecord](t, body).ObservedState == hubwire.JobStopped
	})
	st, _, body = call(t, "POST", api+"/jobs/ticks/upgrades/any/rollback", operatorToken, nil)
	if r := decode[hubwire.JobRecord](t, body); st != 202 || r.Version != 1 || r.DesiredState != "stopped" || r.Convergence != hubwire.ConvergencePendingRecovery {
		t.Fatalf("rollback: %d %s", st, body)
	}
	st, _, body = call(t, "PUT", api+"/jobs/ticks/desired-state", operatorToken, hubwire.JobDesiredStateRequest{State: "running"})
	if st != 200 {
		t.Fatalf("running v1 again: %d %s", st, body)
	}
	n = rows.Load()
	polltest.Eventually(t, "version 1 running again from its savepoint", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/ticks", viewerToken, nil)
		r := decode[hubwire.JobRecord](t, body)
		if r.ObservedState == hubwire.JobFailed {
			t.Fatalf("version 1 failed: %s", body)
		}
		return r.ObservedState == hubwire.JobRunning && r.Version == 1 && rows.Load() > n
	})
}

// TestRestartKeepsJobsAndCommands closes the Hub with a command queued
// for an Agent and opens it again on the same file: the job, its
// generation and the command are still there, and the Agent's session
// still works.
func TestRestartKeepsJobsAndCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	h, err := hub.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler())
	api := srv.URL + "/api/v1"

	// A bare v1 Agent: the node token in the body, no capability details.
	st, _, body := call(t, "POST", api+"/agent/register", "", hubwire.RegisterRequest{NodeID: "n1", NodeToken: nodeToken,
		ProtocolVersion: "v1", Capabilities: []string{"job_runtime", "state_backend"}})
	if st != 200 {
		t.Fatalf("register: %d %s", st, body)
	}
	reg := decode[hubwire.RegisterResponse](t, body)
	// A wrong node token is refused.
	st, hdr, body := call(t, "POST", api+"/agent/register", "", hubwire.RegisterRequest{NodeID: "n2", NodeToken: "wrong",
		ProtocolVersion: "v1"})
	envelope(t, st, 401, hdr, body, "unauthorized")

	spec := json.RawMessage(`{"id":"files","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`)
	st, _, body = call(t, "POST", api+"/jobs", adminToken, hubwire.SubmitJobRequest{Spec: spec, DesiredState: "running"})
	if st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	if r := decode[hubwire.JobRecord](t, body); r.Generation != 2 || r.DesiredState != "running" {
		t.Fatalf("submitted running: %s", body)
	}
	// Wait until the reconciler queued the start (it is visible in the
	// detail's operations), then restart without the Agent polling.
	polltest.Eventually(t, "the job_start queued", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/files/detail", viewerToken, nil)
		return len(decode[hubwire.JobDetail](t, body).Operations) == 1
	})
	srv.Close()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}

	h, err = hub.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv = httptest.NewServer(h.Handler())
	defer srv.Close()
	api = srv.URL + "/api/v1"
	st, _, body = call(t, "GET", api+"/jobs/files", viewerToken, nil)
	if r := decode[hubwire.JobRecord](t, body); st != 200 || r.Generation != 2 || r.DesiredState != "running" || r.ObservedState != hubwire.JobStarting {
		t.Fatalf("after restart: %d %s", st, body)
	}
	// The v1 poll: credentials in the query string.
	st, _, body = call(t, "GET", api+"/agent/commands?node_id=n1&session_token="+reg.SessionToken, "", nil)
	if st != 200 {
		t.Fatalf("commands: %d %s", st, body)
	}
	cmds := decode[[]hubwire.AgentCommand](t, body)
	if len(cmds) != 1 || cmds[0].Operation != hubwire.OpJobStart || cmds[0].Generation != 2 {
		t.Fatalf("commands after restart: %s", body)
	}
	var p hubwire.JobCommandPayload
	if err := json.Unmarshal(cmds[0].Payload, &p); err != nil || p.JobID != "files" || len(p.Spec) == 0 || len(p.Assignments) != 2 { // gen-0 and out-0
		t.Fatalf("payload: %s (%v)", cmds[0].Payload, err)
	}
	// Claimed, not popped: a second poll within the claim lease gets
	// nothing, and the command is still there.
	_, _, body = call(t, "GET", api+"/agent/commands?node_id=n1&session_token="+reg.SessionToken, "", nil)
	if len(decode[[]hubwire.AgentCommand](t, body)) != 0 {
		t.Fatalf("redelivered within the lease: %s", body)
	}
	// A result of an older generation is refused; the right one counts,
	// and repeating it is idempotent.
	res := hubwire.CommandResult{CommandID: cmds[0].ID, State: hubwire.OpStateSucceeded, Progress: 100, Generation: 1}
	st, _, body = call(t, "POST", api+"/agent/commands/"+cmds[0].ID+"/result?node_id=n1", reg.SessionToken, res)
	if st != 409 {
		t.Fatalf("stale result: %d %s", st, body)
	}
	res.Generation = 2
	for range 2 {
		st, _, body = call(t, "POST", api+"/agent/commands/"+cmds[0].ID+"/result", reg.SessionToken, res)
		if op := decode[hubwire.HubOperation](t, body); st != 200 || op.State != hubwire.OpStateSucceeded {
			t.Fatalf("result: %d %s", st, body)
		}
	}
	st, _, body = call(t, "GET", api+"/jobs/files", viewerToken, nil)
	if r := decode[hubwire.JobRecord](t, body); r.ObservedState != hubwire.JobRunning {
		t.Fatalf("after the result: %d %s", st, body)
	}
	// Heartbeat and report with the body's credentials: 204.
	st, _, body = call(t, "POST", api+"/agent/heartbeat", "", hubwire.HeartbeatRequest{NodeID: "n1", SessionToken: reg.SessionToken, State: "online"})
	if st != 204 {
		t.Fatalf("heartbeat: %d %s", st, body)
	}
	// The job fails later on the Agent: its report says so, and the Hub
	// shows the job failed with the Agent's error.
	rep := hubwire.NodeReport{NodeID: "n1", SessionToken: reg.SessionToken, State: "online", BootID: "b1", ReportSeq: 1,
		Jobs: []hubwire.JobStatus{{JobID: "files", Generation: 2, State: hubwire.JobFailed, Error: "disk full"}}}
	for range 2 { // the replay is 204 too
		if st, _, body = call(t, "POST", api+"/agent/report", "", rep); st != 204 {
			t.Fatalf("report: %d %s", st, body)
		}
	}
	st, _, body = call(t, "GET", api+"/jobs/files", viewerToken, nil)
	if r := decode[hubwire.JobRecord](t, body); r.ObservedState != hubwire.JobFailed || !strings.Contains(r.LastError, "disk full") {
		t.Fatalf("after the failure report: %d %s", st, body)
	}
	// Another spec for the running job is refused: it changes version
	// through an upgrade.
	other := json.RawMessage(strings.Replace(string(spec), `"output_type":"drop"`, `"output_type":"stdout"`, 1))
	st, hdr, body = call(t, "POST", api+"/jobs", adminToken, hubwire.SubmitJobRequest{Spec: other})
	envelope(t, st, 409, hdr, body, hubwire.CodeJobMustBeStopped)
	// An unknown route under the API is an envelope too.
	st, hdr, body = call(t, "POST", api+"/jobs/files/rescale", adminToken, map[string]any{})
	envelope(t, st, 404, hdr, body, "not_found")
}

// TestNoTokensRefusesEverything: a Hub without operator tokens answers
// 401 unless it runs with InsecureNoAuth.
func TestNoTokensRefusesEverything(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.Tokens = nil
	h, err := hub.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	st, hdr, body := call(t, "GET", srv.URL+"/api/v1/jobs", "anything-at-all-1234", nil)
	envelope(t, st, 401, hdr, body, "unauthorized")
}

// TestAgentRestartRestartsItsJobs: an Agent process that restarts (a new
// boot id) gets the jobs it ran started again by the Hub, and rows flow
// into the new process.
func TestAgentRestartRestartsItsJobs(t *testing.T) {
	t.Parallel()
	h, err := hub.New(testConfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	api := srv.URL + "/api/v1"
	dataDir, ckpts := t.TempDir(), t.TempDir()

	startAgent := func(rows *atomic.Int64) (*arkflow.Builder, func()) {
		b := ticks(rows, ckpts)
		a, err := hubclient.New(hubclient.Config{HubURL: srv.URL, NodeID: "n1", NodeToken: nodeToken, DataDir: dataDir,
			Jobs: []*arkflow.Builder{b}, Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = a.Run(ctx) }()
		return b, func() { cancel(); <-done }
	}
	var first, second atomic.Int64
	b, stop := startAgent(&first)
	polltest.Eventually(t, "the agent online", func() bool {
		_, _, body := call(t, "GET", api+"/nodes", viewerToken, nil)
		p := decode[hubwire.Page[hubwire.HubNode]](t, body)
		return len(p.Items) == 1 && p.Items[0].State == hubwire.NodeOnline
	})
	st, _, body := call(t, "POST", api+"/jobs", operatorToken, hubwire.SubmitJobRequest{Spec: specOf(t, b), DesiredState: "running"})
	if st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	polltest.Eventually(t, "rows in the first process", func() bool { return first.Load() > 0 })
	polltest.Eventually(t, "the job observed running", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/ticks", viewerToken, nil)
		return decode[hubwire.JobRecord](t, body).ObservedState == hubwire.JobRunning
	})
	stop()

	_, stop = startAgent(&second)
	defer stop()
	polltest.Eventually(t, "rows in the restarted process", func() bool { return second.Load() > 0 })
	polltest.Eventually(t, "the job observed running again", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/ticks", viewerToken, nil)
		r := decode[hubwire.JobRecord](t, body)
		return r.ObservedState == hubwire.JobRunning && r.Generation == 2
	})
	_, _, body = call(t, "GET", api+"/jobs/ticks/detail", viewerToken, nil)
	starts := 0
	for _, op := range decode[hubwire.JobDetail](t, body).Operations {
		if op.Operation == hubwire.OpJobStart && op.State == hubwire.OpStateSucceeded {
			starts++
		}
	}
	if starts != 2 {
		t.Fatalf("want a start per process, got %d: %s", starts, body)
	}
}

// TestAuditLog: GET /audit pages the audit log newest first, filters by
// resource id, and records refused requests as well as accepted ones.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	_, _, api := serveHub(t, testConfig(t, t.TempDir()))
	// Two jobs of built-in connectors, which need no Agent to validate.
	builtin := `{"id":"%s","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`
	for _, id := range []string{"a1", "a2"} {
		st, _, body := call(t, "POST", api+"/jobs", operatorToken, map[string]any{"spec": json.RawMessage(strings.ReplaceAll(builtin, "%s", id))})
		if st != 202 {
			t.Fatalf("submit %s: %d %s", id, st, body)
		}
	}
	st, _, body := call(t, "PUT", api+"/jobs/a1/desired-state", viewerToken, hubwire.JobDesiredStateRequest{State: "running"})
	if st != 403 {
		t.Fatalf("viewer set state: %d %s", st, body)
	}

	st, _, body = call(t, "GET", api+"/audit?resource_id=a1", viewerToken, nil)
	if st != 200 {
		t.Fatalf("audit: %d %s", st, body)
	}
	p := decode[hubwire.Page[hubwire.AuditRecord]](t, body)
	if p.Total != 2 || len(p.Items) != 2 {
		t.Fatalf("a1's audit: %s", body)
	}
	// Newest first: the refused change, then the submit.
	if a := p.Items[0]; a.Outcome != "rejected" || a.FailureCode != "forbidden" || a.Actor != "eyes" || a.ResourceID != "a1" || a.CorrelationID == "" {
		t.Fatalf("newest a1 row: %+v", a)
	}
	if a := p.Items[1]; a.Outcome != "accepted" || a.Action != "job.submit" || a.Actor != "ops" || p.Items[0].EventID <= a.EventID || a.OccurredAtMs == 0 {
		t.Fatalf("older a1 row: %+v", a)
	}
	// Paging over everything: page 2 of size 1 is the second newest row.
	_, _, body = call(t, "GET", api+"/audit", viewerToken, nil)
	all := decode[hubwire.Page[hubwire.AuditRecord]](t, body)
	_, _, body = call(t, "GET", api+"/audit?page=2&page_size=1", viewerToken, nil)
	p2 := decode[hubwire.Page[hubwire.AuditRecord]](t, body)
	if all.Total < 3 || p2.Total != all.Total || len(p2.Items) != 1 || p2.Items[0] != all.Items[1] {
		t.Fatalf("paging: all %s, page 2 %s", mustJSON(t, all), body)
	}
	st, hdr, body := call(t, "GET", api+"/audit?page_size=x", viewerToken, nil)
	envelope(t, st, 400, hdr, body, "invalid_query")
}

// serveHub starts a Hub with cfg behind a loopback HTTP server; both close
// when the test ends (after the Agents startAgent started). It returns the
// Hub, the server's URL and the API's (/api/v1).
func serveHub(t *testing.T, cfg hub.Config) (*hub.Hub, string, string) {
	t.Helper()
	h, err := hub.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		srv.Close()
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	})
	return h, srv.URL, srv.URL + "/api/v1"
}

// startAgent runs an in-process Agent (hubclient) of node id against the
// Hub at hubURL, binding jobs, until the test ends or stop is called.
func startAgent(t *testing.T, hubURL, id string, jobs ...*arkflow.Builder) (stop func()) {
	t.Helper()
	ag, err := hubclient.New(hubclient.Config{HubURL: hubURL, NodeID: id, NodeToken: nodeToken, DataDir: t.TempDir(), Jobs: jobs,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ag.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}
