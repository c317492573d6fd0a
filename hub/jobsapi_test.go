package hub_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/hub"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// callRaw sends body as it is (not marshalled) with a JSON content type.
func callRaw(t *testing.T, method, url, token, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// runOnV1Agent submits spec, sets it running and answers the job_start
// the Hub sends a (a v1 Agent: it runs whole jobs) until the job is
// observed running.
func runOnV1Agent(t *testing.T, api string, a *v1Agent, spec, id string) {
	t.Helper()
	if st, _, body := call(t, "POST", api+"/jobs", operatorToken, map[string]any{"spec": json.RawMessage(spec)}); st != 202 {
		t.Fatalf("submit %s: %d %s", id, st, body)
	}
	if st, _, body := call(t, "PUT", api+"/jobs/"+id+"/desired-state", operatorToken, map[string]any{"state": "running"}); st != 200 {
		t.Fatalf("desired running: %d %s", st, body)
	}
	var start map[string]any
	polltest.Eventually(t, "the job_start of "+id, func() bool {
		for _, c := range a.poll() {
			if c["operation"] == "job_start" && c["resource_id"] == id {
				start = c
			}
		}
		return start != nil
	})
	if st, v := a.result(start, "succeeded", 100, map[string]any{"observed_generation": start["generation"]}); st != 200 {
		t.Fatalf("start result: %d %v", st, v)
	}
	_, _, body := call(t, "GET", api+"/jobs/"+id, viewerToken, nil)
	if rec := decode[hubwire.JobRecord](t, body); rec.ObservedState != hubwire.JobRunning {
		t.Fatalf("%s not observed running: %s", id, body)
	}
}

// v1Spec is a job of built-in connectors (generate → drop) that a v1
// Agent can be given; checkpoint, when not empty, is its checkpoint
// block (with the state block a checkpoint needs).
func v1Spec(id, checkpoint string) string {
	s := `{"id":"` + id + `","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]`
	if checkpoint != "" {
		s += `,"state":{"backend":"memory"},"checkpoint":` + checkpoint
	}
	return s + "}"
}

// A checkpoint or savepoint of a running job whose spec has no checkpoint
// block is refused at once, 409 checkpoints_not_configured naming
// spec.checkpoint, and no command goes to its Agent (it would only fail
// there: the job has nowhere to write one).
func TestCheckpointOfJobWithoutCheckpointBlockRefused(t *testing.T) {
	t.Parallel()
	_, _, api := serveHub(t, testConfig(t, t.TempDir()))
	a := &v1Agent{t: t, api: api, nodeID: "v1-node"}
	a.register()
	runOnV1Agent(t, api, a, v1Spec("plain", ""), "plain")
	for _, route := range []string{"checkpoints", "savepoints"} {
		st, hdr, body := call(t, "POST", api+"/jobs/plain/"+route, operatorToken, nil)
		envelope(t, st, http.StatusConflict, hdr, body, hubwire.CodeCheckpointsNotConfigured)
		e := decode[hubwire.ApiError](t, body)
		if e.Field != "spec.checkpoint" || !strings.Contains(e.Message, "spec.checkpoint") {
			t.Errorf("%s: the error does not name spec.checkpoint: %s", route, body)
		}
	}
	if cmds := a.poll(); len(cmds) != 0 {
		t.Fatalf("commands sent for a refused checkpoint: %v", cmds)
	}
	_, _, body := call(t, "GET", api+"/jobs/plain/checkpoints", viewerToken, nil)
	if cps := decode[[]hubwire.JobCheckpointRecord](t, body); len(cps) != 0 {
		t.Fatalf("records of refused checkpoints: %s", body)
	}
}

// A savepoint request's body is honoured or refused, never ignored: its
// name goes to the Agent in the job_savepoint (and names the completed
// record); an unknown field, a name the checkpoint store cannot hold, a
// name already taken, and any field in a checkpoint's body are refused
// naming the field; a body that is not JSON is 400 invalid_body. None of
// the refused requests sends a command.
func TestSavepointBodyHonouredOrRefused(t *testing.T) {
	t.Parallel()
	_, _, api := serveHub(t, testConfig(t, t.TempDir()))
	a := &v1Agent{t: t, api: api, nodeID: "v1-node"}
	a.register()
	runOnV1Agent(t, api, a, v1Spec("kept", `{"interval_ms":3600000,"object_store_uri":"file://`+t.TempDir()+`"}`), "kept")

	refused := []struct {
		route, body string
		status      int
		code, field string
	}{
		{"savepoints", `{"nmae":"before-upgrade"}`, 422, hubwire.CodeValidationFailed, "nmae"},
		{"savepoints", `{"name":"a/b"}`, 422, hubwire.CodeValidationFailed, "name"},
		{"savepoints", `{"name":7}`, 422, hubwire.CodeValidationFailed, "name"},
		{"checkpoints", `{"name":"x"}`, 422, hubwire.CodeValidationFailed, "name"},
		{"savepoints", `{"name":`, 400, hubwire.CodeInvalidBody, ""},
		{"savepoints", `{"name":"x"} {}`, 400, hubwire.CodeInvalidBody, ""},
	}
	for _, c := range refused {
		st, hdr, body := callRaw(t, "POST", api+"/jobs/kept/"+c.route, operatorToken, c.body)
		envelope(t, st, c.status, hdr, body, c.code)
		if e := decode[hubwire.ApiError](t, body); e.Field != c.field {
			t.Errorf("%s %s: field %q, want %q: %s", c.route, c.body, e.Field, c.field, body)
		}
	}
	if cmds := a.poll(); len(cmds) != 0 {
		t.Fatalf("commands sent for refused requests: %v", cmds)
	}

	st, _, body := callRaw(t, "POST", api+"/jobs/kept/savepoints", operatorToken, `{"name":"before-upgrade"}`)
	if st != 202 {
		t.Fatalf("named savepoint: %d %s", st, body)
	}
	spID := decode[hubwire.JobRecord](t, body).CheckpointID
	cmds := a.poll()
	if len(cmds) != 1 || cmds[0]["operation"] != "job_savepoint" {
		t.Fatalf("commands: %v", cmds)
	}
	var p struct {
		CheckpointID string `json:"checkpoint_id"`
		Name         string `json:"name"`
	}
	if err := json.Unmarshal([]byte(mustJSON(t, cmds[0]["payload"])), &p); err != nil || p.Name != "before-upgrade" || p.CheckpointID != spID {
		t.Fatalf("job_savepoint payload %v (%v): want name before-upgrade, checkpoint_id %s", cmds[0]["payload"], err, spID)
	}
	// The Agent stores it under the name and says so.
	if st, v := a.result(cmds[0], "succeeded", 100, map[string]any{"observed_generation": cmds[0]["generation"],
		"observed_checkpoint_id": "before-upgrade", "checkpoint_manifest_uri": "kept/savepoints/before-upgrade/manifest.json"}); st != 200 {
		t.Fatalf("savepoint result: %d %v", st, v)
	}
	polltest.Eventually(t, "the savepoint completed", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/kept/savepoints", viewerToken, nil)
		for _, c := range decode[[]hubwire.JobCheckpointRecord](t, body) {
			if c.CheckpointID == spID {
				return c.Status == hubwire.CheckpointCompleted && c.Name == "before-upgrade"
			}
		}
		return false
	})
	// The name is taken now.
	st, hdr, body := callRaw(t, "POST", api+"/jobs/kept/savepoints", operatorToken, `{"name":"before-upgrade"}`)
	envelope(t, st, http.StatusConflict, hdr, body, hubwire.CodeSavepointExists)
	if e := decode[hubwire.ApiError](t, body); e.Field != "name" {
		t.Errorf("a reused name: %s", body)
	}
	// Without a body, and with an empty object, both routes start a round.
	for _, c := range []struct{ route, body string }{{"savepoints", ""}, {"checkpoints", ""}, {"checkpoints", " {} "}} {
		st, _, body := callRaw(t, "POST", api+"/jobs/kept/"+c.route, operatorToken, c.body)
		if st != 202 {
			t.Fatalf("%s with body %q: %d %s", c.route, c.body, st, body)
		}
	}
}

// Every body the job routes cannot decode is 400 invalid_body, and a
// bad desired_state in a submit is v1's invalid_job_state naming it.
func TestJobRoutesBodyErrors(t *testing.T) {
	t.Parallel()
	h, err := hub.New(testConfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	api := srv.URL + "/api/v1"
	for _, c := range []struct{ method, path string }{
		{"POST", "/jobs/validate"}, {"POST", "/jobs"}, {"PUT", "/jobs/x/desired-state"}, {"POST", "/jobs/x/upgrades"},
	} {
		st, hdr, body := callRaw(t, c.method, api+c.path, operatorToken, `{"spec":`)
		envelope(t, st, 400, hdr, body, hubwire.CodeInvalidBody)
	}
	st, hdr, body := callRaw(t, "POST", api+"/jobs", operatorToken, `{"spec":`+v1Spec("j", "")+`,"desired_state":"paused"}`)
	envelope(t, st, 400, hdr, body, hubwire.CodeInvalidJobState)
	if e := decode[hubwire.ApiError](t, body); e.Field != "desired_state" {
		t.Errorf("field %q: %s", e.Field, body)
	}
}

// POST /jobs/validate shows every mistake of a spec at once, as arkflow
// validate does: an unknown field (with its suggestion) and a value of
// the wrong type do not hide the deep build's problems.
func TestValidateShowsEveryMistake(t *testing.T) {
	t.Parallel()
	_, _, api := serveHub(t, testConfig(t, t.TempDir()))
	spec := `{"id":"typos","paralelism":2,"max_parallelism":"many",
		"operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"outt"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`
	for _, route := range []string{"/jobs/validate", "/jobs"} {
		st, hdr, body := call(t, "POST", api+route, operatorToken, map[string]any{"spec": json.RawMessage(spec)})
		envelope(t, st, http.StatusUnprocessableEntity, hdr, body, hubwire.CodeInvalidJobSpec)
		var e struct {
			Details struct{ Problems []string }
		}
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatal(err)
		}
		all := strings.Join(e.Details.Problems, "\n")
		for _, want := range []string{`paralelism: unknown field`, `did you mean "parallelism"?`, `max_parallelism: must be an integer`, `unknown operator "outt"`} {
			if !strings.Contains(all, want) {
				t.Errorf("%s: the problems do not say %q:\n%s", route, want, all)
			}
		}
	}
}
