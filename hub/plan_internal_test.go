package hub

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
)

// A version an older Hub stored holds only the plan's requirements; GET
// /jobs/{id}/plan serves it in v1's JobPlan shape all the same, its tasks
// planned from the stored spec, and placement still reads the
// requirements.
func TestStoredPlanOfAnOlderHubIsServedAsV1JobPlan(t *testing.T) {
	t.Parallel()
	h, err := New(Config{DataDir: t.TempDir(), InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	spec := `{"id":"old","operators":[{"id":"gen","kind":"source","parallelism":2},{"id":"out","kind":"sink","parallelism":2}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`
	old := `{"job_id":"old","node_ids":["n9"],"required_capabilities":["job_runtime","state_backend"],"connectors":["input:generate","output:drop"],"go_operators":[]}`
	if _, err := h.store.SubmitJob(context.Background(), hubstore.SubmitRequest{JobID: "old", Spec: json.RawMessage(spec), Plan: json.RawMessage(old)}); err != nil {
		t.Fatal(err)
	}
	rec := serve(t, h, "GET", "/api/v1/jobs/old/plan", "", nil)
	if rec.Code != 200 {
		t.Fatalf("plan: %d %s", rec.Code, rec.Body)
	}
	var got struct {
		Plan struct {
			Spec struct {
				ID string `json:"id"`
			} `json:"spec"`
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
			NodeIDs []string `json:"node_ids"`
		} `json:"plan"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, task := range got.Plan.Tasks {
		ids = append(ids, task.ID)
	}
	if got.Plan.Spec.ID != "old" || len(ids) != 4 || len(got.Plan.NodeIDs) != 1 || got.Plan.NodeIDs[0] != "n9" {
		t.Fatalf("served plan: %s", rec.Body)
	}
	// The requirements still place: only n9 may run it, and it is not here.
	if rec := serve(t, h, "PUT", "/api/v1/jobs/old/desired-state", "", map[string]string{"state": "running"}); rec.Code != 409 {
		t.Fatalf("running with no node: %d %s", rec.Code, rec.Body)
	}
}
