package hub_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// The types below are ArkFlow v1's, written from the reference
// (arkflow-reference.md §F and §A.3/§A.4) and not from ours: they hold
// only v1's fields, with v1's types. They decode the Hub's JSON without
// DisallowUnknownFields, because our added fields may follow; v1Fields
// checks separately that every v1 field is there.

// v1JobPlan is JobPlan{spec, tasks}.
type v1JobPlan struct {
	Spec  v1JobSpec    `json:"spec"`
	Tasks []v1TaskSpec `json:"tasks"`
}

// v1JobSpec holds the JobSpec fields a plan's reader needs.
type v1JobSpec struct {
	ID             string `json:"id"`
	Version        uint64 `json:"version"`
	MaxParallelism uint32 `json:"max_parallelism"`
	Parallelism    uint32 `json:"parallelism"`
	Operators      []struct {
		ID          string `json:"id"`
		Kind        string `json:"kind"`
		Stateful    bool   `json:"stateful"`
		Parallelism uint32 `json:"parallelism"`
	} `json:"operators"`
	Edges []struct {
		ID          string `json:"id"`
		From        string `json:"from"`
		To          string `json:"to"`
		Partitioned bool   `json:"partitioned"`
	} `json:"edges"`
	Recovery string `json:"recovery"`
}

// v1TaskSpec is TaskSpec{id "{op}-{subtask}", operator_id, subtask,
// partitions[{id: subtask, key_group{start, end}}]}.
type v1TaskSpec struct {
	ID         string `json:"id"`
	OperatorID string `json:"operator_id"`
	Subtask    uint32 `json:"subtask"`
	Partitions []struct {
		ID       uint32 `json:"id"`
		KeyGroup struct {
			Start uint32 `json:"start"`
			End   uint32 `json:"end"`
		} `json:"key_group"`
	} `json:"partitions"`
}

// v1TaskAttempt is TaskAttempt{id "{task}:{node}:{gen}", job_id,
// job_version, task_id, generation, node_id, state}.
type v1TaskAttempt struct {
	ID         string `json:"id"`
	JobID      string `json:"job_id"`
	JobVersion uint64 `json:"job_version"`
	TaskID     string `json:"task_id"`
	Generation uint64 `json:"generation"`
	NodeID     string `json:"node_id"`
	State      string `json:"state"`
}

// v1AttemptStates are TaskAttempt.state's values.
var v1AttemptStates = []string{"queued", "starting", "running", "stopping", "succeeded", "failed", "cancelled", "superseded"}

// v1Fields fails unless raw is a JSON object holding every key of want
// with a value of the JSON kind want names: "string", "number" (an
// integer >= 0: v1's u32/u64), "bool", "array", "object".
func v1Fields(t *testing.T, what string, raw json.RawMessage, want map[string]string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s is not an object: %v: %s", what, err, raw)
	}
	for k, kind := range want {
		v, ok := m[k]
		if !ok {
			t.Fatalf("%s lacks v1's field %q: %s", what, k, raw)
		}
		var got string
		switch b := bytes.TrimSpace(v); {
		case len(b) == 0 || string(b) == "null":
			got = "null"
		case b[0] == '"':
			got = "string"
		case b[0] == '[':
			got = "array"
		case b[0] == '{':
			got = "object"
		case string(b) == "true" || string(b) == "false":
			got = "bool"
		default:
			var n uint64
			if json.Unmarshal(b, &n) == nil {
				got = "number"
			} else {
				got = "not an unsigned integer: " + string(b)
			}
		}
		if got != kind {
			t.Fatalf("%s: v1's field %q is %s, want %s: %s", what, k, got, kind, raw)
		}
	}
}

// checkV1Plan checks raw is v1's JobPlan of spec id with tasks: one per
// operator and subtask, named "{op}-{subtask}", each with one partition
// whose id is the subtask and whose key groups are v1's range
// [s·M/P, (s+1)·M/P − 1] (computed here from the reference's formula).
// It returns the task ids.
func checkV1Plan(t *testing.T, what string, raw json.RawMessage, id string, parallelism map[string]int) []string {
	t.Helper()
	v1Fields(t, what, raw, map[string]string{"spec": "object", "tasks": "array"})
	var p v1JobPlan
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("%s does not decode as v1's JobPlan: %v: %s", what, err, raw)
	}
	var generic struct {
		Spec  json.RawMessage   `json:"spec"`
		Tasks []json.RawMessage `json:"tasks"`
	}
	_ = json.Unmarshal(raw, &generic)
	v1Fields(t, what+".spec", generic.Spec, map[string]string{"id": "string", "version": "number", "max_parallelism": "number",
		"parallelism": "number", "operators": "array", "edges": "array", "sources": "array", "sinks": "array", "recovery": "string"})
	if p.Spec.ID != id || p.Spec.MaxParallelism == 0 {
		t.Fatalf("%s.spec: %+v", what, p.Spec)
	}
	m := int(p.Spec.MaxParallelism)
	type want struct {
		op         string
		sub        int
		start, end int
	}
	var exp []want
	for op, par := range parallelism {
		for s := 0; s < par; s++ {
			exp = append(exp, want{op, s, s * m / par, (s+1)*m/par - 1})
		}
	}
	sort.Slice(exp, func(i, j int) bool { return fmt.Sprint(exp[i].op, exp[i].sub) < fmt.Sprint(exp[j].op, exp[j].sub) })
	if len(p.Tasks) != len(exp) {
		t.Fatalf("%s: %d tasks, want %d (one per operator and subtask): %s", what, len(p.Tasks), len(exp), raw)
	}
	got := map[string]v1TaskSpec{}
	var ids []string
	for i, task := range p.Tasks {
		v1Fields(t, fmt.Sprintf("%s.tasks[%d]", what, i), generic.Tasks[i], map[string]string{"id": "string", "operator_id": "string",
			"subtask": "number", "partitions": "array"})
		var parts struct {
			Partitions []json.RawMessage `json:"partitions"`
		}
		_ = json.Unmarshal(generic.Tasks[i], &parts)
		for j, pr := range parts.Partitions {
			v1Fields(t, fmt.Sprintf("%s.tasks[%d].partitions[%d]", what, i, j), pr, map[string]string{"id": "number", "key_group": "object"})
			var kg struct {
				KeyGroup json.RawMessage `json:"key_group"`
			}
			_ = json.Unmarshal(pr, &kg)
			v1Fields(t, fmt.Sprintf("%s.tasks[%d].partitions[%d].key_group", what, i, j), kg.KeyGroup, map[string]string{"start": "number", "end": "number"})
		}
		got[task.ID] = task
		ids = append(ids, task.ID)
	}
	for _, e := range exp {
		task, ok := got[fmt.Sprintf("%s-%d", e.op, e.sub)]
		if !ok || task.OperatorID != e.op || task.Subtask != uint32(e.sub) || len(task.Partitions) != 1 ||
			task.Partitions[0].ID != uint32(e.sub) || task.Partitions[0].KeyGroup.Start != uint32(e.start) || task.Partitions[0].KeyGroup.End != uint32(e.end) {
			t.Fatalf("%s: task %s-%d is %+v, want operator %s subtask %d, one partition %d with key groups [%d,%d]",
				what, e.op, e.sub, task, e.op, e.sub, e.sub, e.start, e.end)
		}
	}
	sort.Strings(ids)
	return ids
}

// checkV1Attempts decodes raw (a JSON array) as v1 TaskAttempts of job id
// at generation gen on node, and checks their ids, that they cover tasks
// once each, and that each is in state.
func checkV1Attempts(t *testing.T, what string, raw json.RawMessage, id, node string, gen uint64, tasks []string, state string) {
	t.Helper()
	var generic []json.RawMessage
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatalf("%s is not an array: %v: %s", what, err, raw)
	}
	var got []string
	for i, g := range generic {
		v1Fields(t, fmt.Sprintf("%s[%d]", what, i), g, map[string]string{"id": "string", "job_id": "string", "job_version": "number",
			"task_id": "string", "generation": "number", "node_id": "string", "state": "string"})
		var a v1TaskAttempt
		if err := json.Unmarshal(g, &a); err != nil {
			t.Fatalf("%s[%d] does not decode as v1's TaskAttempt: %v", what, i, err)
		}
		if !slices.Contains(v1AttemptStates, a.State) {
			t.Fatalf("%s[%d]: state %q is not one of v1's %v", what, i, a.State, v1AttemptStates)
		}
		if a.ID != fmt.Sprintf("%s:%s:%d", a.TaskID, node, gen) || a.JobID != id || a.JobVersion != 1 || a.Generation != gen ||
			a.NodeID != node || a.State != state {
			t.Fatalf("%s[%d]: %+v, want id {task}:%s:%d of job %s version 1 in state %s", what, i, a, node, gen, id, state)
		}
		got = append(got, a.TaskID)
	}
	sort.Strings(got)
	if !slices.Equal(got, tasks) {
		t.Fatalf("%s: attempts of tasks %v, want one of each plan task %v", what, got, tasks)
	}
}

// TestV1JobPlanAndTaskAttempts: the plan of POST /jobs/validate, GET
// /jobs/{id}/plan, GET /jobs/{id}/detail and the job_start payload is v1's
// JobPlan (one task per operator and subtask with its key groups), and
// the detail's tasks and the job_start's assignments are v1 TaskAttempts:
// "{task}:{node}:{gen}", one per plan task (a v1 Agent runs the whole
// job), in v1's states as the job is queued, started, running, stopped.
func TestV1JobPlanAndTaskAttempts(t *testing.T) {
	t.Parallel()
	_, _, api := serveHub(t, testConfig(t, t.TempDir()))
	a := &v1Agent{t: t, api: api, nodeID: "v1-node"}
	a.register()
	spec := `{"id":"shapes","parallelism":2,"operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink","parallelism":3}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`
	par := map[string]int{"gen": 2, "out": 3}
	field := func(body []byte, key string) json.RawMessage {
		t.Helper()
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return m[key]
	}

	st, _, body := call(t, "POST", api+"/jobs/validate", operatorToken, map[string]any{"spec": json.RawMessage(spec)})
	if st != 200 {
		t.Fatalf("validate: %d %s", st, body)
	}
	tasks := checkV1Plan(t, "validate's plan", field(body, "plan"), "shapes", par)

	if st, _, body := call(t, "POST", api+"/jobs", operatorToken, map[string]any{"spec": json.RawMessage(spec)}); st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	_, _, body = call(t, "GET", api+"/jobs/shapes/plan", viewerToken, nil)
	v1Fields(t, "GET plan", body, map[string]string{"job_id": "string", "version": "number", "plan": "object"})
	if got := checkV1Plan(t, "GET plan's plan", field(body, "plan"), "shapes", par); !slices.Equal(got, tasks) {
		t.Fatalf("GET plan's tasks %v, validate's %v", got, tasks)
	}
	detail := func() []byte {
		_, _, body := call(t, "GET", api+"/jobs/shapes/detail", viewerToken, nil)
		v1Fields(t, "detail", body, map[string]string{"job": "object", "plan": "object", "tasks": "array", "nodes": "array",
			"operations": "array", "checkpoints": "array", "metrics": "object"})
		checkV1Plan(t, "detail's plan", field(body, "plan"), "shapes", par)
		return body
	}
	// Stopped and never run: no attempts yet.
	checkV1Attempts(t, "detail's tasks before a start", field(detail(), "tasks"), "shapes", "v1-node", 1, nil, "")

	if st, _, body := call(t, "PUT", api+"/jobs/shapes/desired-state", operatorToken, map[string]any{"state": "running"}); st != 200 {
		t.Fatalf("running: %d %s", st, body)
	}
	// Queued until the Agent takes the start.
	polltest.Eventually(t, "the start queued", func() bool {
		var d struct {
			Tasks []v1TaskAttempt `json:"tasks"`
		}
		_ = json.Unmarshal(detail(), &d)
		return len(d.Tasks) > 0
	})
	checkV1Attempts(t, "detail's tasks, start queued", field(detail(), "tasks"), "shapes", "v1-node", 2, tasks, "queued")
	var start map[string]any
	polltest.Eventually(t, "the job_start", func() bool {
		for _, c := range a.poll() {
			if c["operation"] == "job_start" {
				start = c
			}
		}
		return start != nil
	})
	payload := json.RawMessage(mustJSON(t, start["payload"]))
	v1Fields(t, "job_start payload", payload, map[string]string{"job_id": "string", "spec": "object", "plan": "object",
		"assignments": "array", "generation": "number"})
	checkV1Plan(t, "job_start's plan", field(payload, "plan"), "shapes", par)
	checkV1Attempts(t, "job_start's assignments", field(payload, "assignments"), "shapes", "v1-node", 2, tasks, "queued")

	// v1's result sequence moves the attempts: acknowledged → starting,
	// succeeded → running.
	if st, v := a.result(start, "acknowledged", 5, nil); st != 200 {
		t.Fatalf("acknowledged: %d %v", st, v)
	}
	checkV1Attempts(t, "detail's tasks, start taken", field(detail(), "tasks"), "shapes", "v1-node", 2, tasks, "starting")
	if st, v := a.result(start, "succeeded", 100, map[string]any{"observed_generation": 2}); st != 200 {
		t.Fatalf("succeeded: %d %v", st, v)
	}
	body = detail()
	checkV1Attempts(t, "detail's tasks, running", field(body, "tasks"), "shapes", "v1-node", 2, tasks, "running")
	var ext struct {
		Assignments []struct {
			State string `json:"state"`
		} `json:"assignments"`
	}
	if err := json.Unmarshal(body, &ext); err != nil || len(ext.Assignments) != 1 || ext.Assignments[0].State != "running" {
		t.Fatalf("detail's assignments: %v %s", err, body)
	}

	// Stopped: stopping until the Agent's stop succeeded, then cancelled.
	if st, _, body := call(t, "PUT", api+"/jobs/shapes/desired-state", operatorToken, map[string]any{"state": "stopped"}); st != 200 {
		t.Fatalf("stopped: %d %s", st, body)
	}
	checkV1Attempts(t, "detail's tasks, stop queued", field(detail(), "tasks"), "shapes", "v1-node", 3, tasks, "stopping")
	var stop map[string]any
	polltest.Eventually(t, "the job_stop", func() bool {
		for _, c := range a.poll() {
			if c["operation"] == "job_stop" {
				stop = c
			}
		}
		return stop != nil
	})
	stopPayload := json.RawMessage(mustJSON(t, stop["payload"]))
	checkV1Attempts(t, "job_stop's assignments", field(stopPayload, "assignments"), "shapes", "v1-node", 3, tasks, "stopping")
	if st, v := a.result(stop, "succeeded", 100, map[string]any{"observed_generation": 3}); st != 200 {
		t.Fatalf("stop succeeded: %d %v", st, v)
	}
	checkV1Attempts(t, "detail's tasks, stopped", field(detail(), "tasks"), "shapes", "v1-node", 3, tasks, "cancelled")
}

// A job whose units run on two nodes: each node's job_start and, when the
// job is stopped, its job_stop name only the tasks it runs, and the
// detail lists every plan task once, stopping and then cancelled.
func TestV1AttemptsOfAJobOnTwoNodes(t *testing.T) {
	t.Parallel()
	_, _, api := serveHub(t, testConfig(t, t.TempDir()))
	agents := map[string]*fleetAgent{"a": newFleetAgent(t, api, "a"), "b": newFleetAgent(t, api, "b")}
	if st, _, body := call(t, "POST", api+"/jobs", operatorToken, map[string]any{"spec": json.RawMessage(fleetSpec(t.TempDir())), "desired_state": "running"}); st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	runs := map[string][]string{}
	for id, a := range agents {
		c := a.next("job_start")
		runs[id] = tasksOf(t, c)
		a.succeed(c, nil)
	}
	all := append(slices.Clone(runs["a"]), runs["b"]...)
	sort.Strings(all)
	if len(runs["a"]) == 0 || len(runs["b"]) == 0 || fmt.Sprint(all) != "[gen-0 gen-1 gen-2 out-0 out-1 out-2]" {
		t.Fatalf("tasks placed: %v", runs)
	}
	detailTasks := func() map[string][]v1TaskAttempt {
		_, _, body := call(t, "GET", api+"/jobs/fleet/detail", viewerToken, nil)
		var d struct {
			Tasks []v1TaskAttempt `json:"tasks"`
		}
		if err := json.Unmarshal(body, &d); err != nil {
			t.Fatal(err)
		}
		byTask := map[string][]v1TaskAttempt{}
		for _, a := range d.Tasks {
			byTask[a.TaskID] = append(byTask[a.TaskID], a)
		}
		return byTask
	}
	check := func(what, state string) {
		t.Helper()
		byTask := detailTasks()
		for node, ts := range runs {
			for _, task := range ts {
				if as := byTask[task]; len(as) != 1 || as[0].NodeID != node || as[0].State != state {
					t.Fatalf("%s: the detail's attempts of %s: %+v, want one on %s in %s", what, task, as, node, state)
				}
			}
		}
		if len(byTask) != len(all) {
			t.Fatalf("%s: attempts of %d tasks, the plan has %d", what, len(byTask), len(all))
		}
	}
	polltest.Eventually(t, "the job running", func() bool { return len(detailTasks()["gen-0"]) == 1 && detailTasks()["gen-0"][0].State == "running" })
	check("running", "running")
	if st, _, body := call(t, "PUT", api+"/jobs/fleet/desired-state", operatorToken, map[string]any{"state": "stopped"}); st != 200 {
		t.Fatalf("stopped: %d %s", st, body)
	}
	check("stop sent", "stopping")
	for id, a := range agents {
		c := a.next("job_stop")
		if got := tasksOf(t, c); !slices.Equal(got, runs[id]) {
			t.Fatalf("%s's job_stop names %v, it runs %v", id, got, runs[id])
		}
		a.succeed(c, nil)
	}
	check("stopped", "cancelled")
}
