package planner_test

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/jobdefaults"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/job"
)

func mustParse(t *testing.T, data string) *job.Spec {
	t.Helper()
	s, err := job.Parse([]byte(data))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A v1 JobSpec (ArkFlow's field names, nulls for absent options)
// loads unchanged, passes the structural checks and plans.
func TestV1SpecLoadsAndPlans(t *testing.T) {
	t.Parallel()
	s, err := job.Parse(readFile(t, "../../job/testdata/v1-orders.json"))
	if err != nil {
		t.Fatalf("v1 spec does not load: %v", err)
	}
	if s.ID != "orders" || s.Version != 1 || s.MaxParallelism != 128 || s.Parallelism != 3 {
		t.Fatalf("header fields: %+v", s)
	}
	if s.State.Backend != job.BackendEmbeddedKV || s.State.TTLMS != nil || s.Checkpoint.Retention != 2 || s.Recovery != job.RecoverLatestCheckpoint {
		t.Fatalf("state/checkpoint/recovery: %+v %+v %q", s.State, s.Checkpoint, s.Recovery)
	}
	tm := s.Sources[0].Time
	if tm.Mode != job.EventTime || tm.Watermark.OutOfOrdernessMS != 1000 || *tm.Watermark.IdleTimeoutMS != 10000 || tm.AllowedLatenessMS != 500 {
		t.Fatalf("time: %+v %+v", tm, tm.Watermark)
	}
	p := planner.Problems{Job: s.ID}
	planner.CheckStructure(s, &p)
	if err := p.Err(); err != nil {
		t.Fatalf("structural problems: %v", err)
	}
	plan, err := planner.NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, task := range planner.OperatorTasks(plan, "aggregate") {
		got = append(got, task.ID+task.Partitions[0].KeyGroup.String())
	}
	want := []string{"aggregate-0[0,41]", "aggregate-1[42,84]", "aggregate-2[85,127]"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("key-group ranges: got %v, want %v", got, want)
	}
	if len(plan.Tasks) != 9 {
		t.Fatalf("want 9 tasks (3 operators x 3), got %d", len(plan.Tasks))
	}
	// The plan is JSON: v1's {spec, tasks[{id, operator_id, subtask,
	// partitions[{id, key_group{start,end}}]}]} fields are all there.
	raw, err := plan.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	task0 := generic["tasks"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "operator_id", "subtask", "partitions"} {
		if _, ok := task0[k]; !ok {
			t.Errorf("plan task lacks v1 field %q: %v", k, task0)
		}
	}
	kg := task0["partitions"].([]any)[0].(map[string]any)["key_group"].(map[string]any)
	if _, ok := kg["start"]; !ok {
		t.Errorf("partition key_group lacks start: %v", kg)
	}
}

// A lossless round trip through JSON and YAML.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	s, err := job.Parse(readFile(t, "../../job/testdata/v1-orders.json"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	s2 := mustParse(t, string(j))
	if !reflect.DeepEqual(s, s2) {
		t.Fatalf("JSON round trip changed the spec:\n%+v\n%+v", s, s2)
	}
	y, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	s3 := mustParse(t, string(y))
	if !reflect.DeepEqual(s, s3) {
		t.Fatalf("YAML round trip changed the spec:\n%s", y)
	}
	// Big integers survive YAML (no float conversion).
	big := mustParse(t, `{"id":"x","operators":[{"id":"a","kind":"map","config":{"n":9007199254740993}}]}`)
	y, _ = big.YAML()
	back := mustParse(t, string(y))
	if string(back.Operators[0].Config) != `{"n":9007199254740993}` {
		t.Fatalf("big int through YAML: %s", back.Operators[0].Config)
	}
}

// The digest ignores field order and format, follows semantics.
func TestVersionDigest(t *testing.T) {
	t.Parallel()
	base := `{"id":"j","version":2,"operators":[{"id":"src","kind":"source"},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"e","from":"src","to":"out"}],
	  "sources":[{"operator_id":"src","input_type":"generate","config":{"count":10,"seed":1}}],
	  "sinks":[{"operator_id":"out","output_type":"drop"}]}`
	reordered := `{"sinks":[{"output_type":"drop","operator_id":"out"}],"version":2,
	  "sources":[{"config":{"seed":1,"count":10.0},"input_type":"generate","operator_id":"src"}],
	  "edges":[{"to":"out","from":"src","id":"e","partitioned":false}],
	  "operators":[{"kind":"sink","id":"out"},{"id":"src","kind":"source","config":{}}],"id":"j",
	  "parallelism":1,"max_parallelism":128,"recovery":"latest_checkpoint"}`
	yamlForm := `
id: j
version: 2
operators:
  - {id: src, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: e, from: src, to: out}
sources:
  - operator_id: src
    input_type: generate
    config: {seed: 1, count: 10}
sinks:
  - {operator_id: out, output_type: drop}
`
	digest := func(src string) string {
		v, err := planner.NewVersion(mustParse(t, src))
		if err != nil {
			t.Fatal(err)
		}
		return v.Digest
	}
	d := digest(base)
	if !strings.HasPrefix(d, "sha256:") {
		t.Fatalf("digest %q", d)
	}
	if got := digest(reordered); got != d {
		t.Errorf("field order / defaults changed the digest: %s vs %s", got, d)
	}
	if got := digest(yamlForm); got != d {
		t.Errorf("YAML form changed the digest: %s vs %s", got, d)
	}
	for name, changed := range map[string]string{
		"config value": strings.Replace(base, `"count":10`, `"count":11`, 1),
		"parallelism":  strings.Replace(base, `"version":2`, `"version":2,"parallelism":2`, 1),
		"version":      strings.Replace(base, `"version":2`, `"version":3`, 1),
		"partitioned":  strings.Replace(base, `"to":"out"}`, `"to":"out","partitioned":true}`, 1),
	} {
		if digest(changed) == d {
			t.Errorf("%s: semantic change kept the digest", name)
		}
	}
}

// For every P in 1..M the ranges tile [0, M), and OwnerOf inverts
// RangeFor.
func TestKeyGroupRangesTile(t *testing.T) {
	t.Parallel()
	for _, m := range []int{1, 2, 7, 128, 1000} {
		for p := 1; p <= m; p++ {
			next := 0
			for s := 0; s < p; s++ {
				r := keys.RangeFor(m, p, s)
				if r.Start != next || r.Len() < 1 {
					t.Fatalf("M=%d P=%d subtask %d: range %v does not start at %d", m, p, s, r, next)
				}
				for g := r.Start; g <= r.End; g++ {
					if o := keys.OwnerOf(m, p, g); o != s {
						t.Fatalf("M=%d P=%d: group %d owned by %d, range says %d", m, p, g, o, s)
					}
				}
				next = r.End + 1
			}
			if next != m {
				t.Fatalf("M=%d P=%d: ranges end at %d", m, p, next)
			}
		}
	}
}

func TestKeyGroupIsFNV1a(t *testing.T) {
	t.Parallel()
	// Reference values of FNV-1a 64.
	if h := keys.HashKey(nil); h != 0xcbf29ce484222325 {
		t.Fatalf("FNV-1a of empty: %x", h)
	}
	if h := keys.HashKey([]byte("a")); h != 0xaf63dc4c8601ec8c {
		t.Fatalf("FNV-1a of a: %x", h)
	}
	if h := keys.HashKey([]byte("foobar")); h != 0x85944171f73967e8 {
		t.Fatalf("FNV-1a of foobar: %x", h)
	}
	if g := keys.KeyGroup([]byte("foobar"), 128); g != int(uint64(0x85944171f73967e8)%128) {
		t.Fatalf("group %d", g)
	}
}

func structural(t *testing.T, spec string) job.ValidationErrors {
	t.Helper()
	s, err := job.Parse([]byte(spec))
	if err != nil {
		return job.AsValidationErrors(err)
	}
	p := planner.Problems{Job: s.ID}
	planner.CheckStructure(s, &p)
	return job.AsValidationErrors(p.Err())
}

func expectProblem(t *testing.T, errs job.ValidationErrors, op, field, reason string) {
	t.Helper()
	for _, e := range errs {
		if e.Operator == op && e.Field == field && strings.Contains(e.Reason, reason) {
			return
		}
	}
	t.Errorf("no problem {operator %q, field %q, reason ~%q} in:\n%v", op, field, reason, errs)
}

// The structural rules, each reported with operator and field path,
// all at once.
func TestCheckStructure(t *testing.T) {
	t.Parallel()
	valid := `{"id":"j","operators":[{"id":"in","kind":"source"},{"id":"m","kind":"map"},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"e1","from":"in","to":"m"},{"id":"e2","from":"m","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"generate"}],"sinks":[{"operator_id":"out","output_type":"drop"}]}`
	if errs := structural(t, valid); len(errs) != 0 {
		t.Fatalf("valid spec: %v", errs)
	}
	cases := []struct {
		name, from, to   string
		op, field, cause string
	}{
		{"unknown kind", `"id":"m","kind":"map"`, `"id":"m","kind":"mapp"`, "m", "operators[1].kind", `unknown operator kind "mapp" (known: source, map, filter, aggregate, window, join, sink, udf); did you mean "map"?`},
		{"duplicate id", `"id":"m","kind":"map"`, `"id":"in","kind":"map"`, "in", "operators[1].id", "duplicate operator id"},
		{"reserved id", `"id":"m","kind":"map"`, `"id":"__arkflow_runtime","kind":"map"`, "__arkflow_runtime", "operators[1].id", "reserved for the runtime"},
		{"edge to unknown", `"to":"out"}`, `"to":"outt"}`, "m", "edges[1].to", `unknown operator "outt"`},
		{"cycle", `"edges":[`, `"edges":[{"id":"back","from":"m","to":"m2"},{"id":"back2","from":"m2","to":"m"},`, "", "", ""},
		{"keyed without key_field", `{"id":"e1","from":"in","to":"m"}`, `{"id":"e1","from":"in","to":"m","partitioned":true}`, "m", "operators[1].key_field", "is partitioned"},
		{"parallelism", `{"id":"j",`, `{"id":"j","parallelism":200,`, "", "parallelism", "must be in [1, max_parallelism=128] (got 200)"},
		{"operator parallelism", `"id":"m","kind":"map"`, `"id":"m","kind":"map","parallelism":0,"config":{}`, "", "", ""},
		{"unknown backend", `{"id":"j",`, `{"id":"j","state":{"backend":"rocksdb"},`, "", "state.backend", `unknown state backend "rocksdb"`},
		{"stateful without key", `"id":"m","kind":"map"`, `"id":"m","kind":"map","stateful":true`, "m", "operators[1].key_field", "needs key_field"},
		{"bad job id", `{"id":"j",`, `{"id":"j/../x",`, "", "id", "must be 1-128"},
		{"source reaches no sink", `{"id":"e2","from":"m","to":"out"}`, `{"id":"e2","from":"in","to":"out"}`, "m", "operators[1]", "no outgoing edge"},
		{"checkpoint needs state", `{"id":"j",`, `{"id":"j","checkpoint":{"object_store_uri":"file:///tmp/x"},`, "", "checkpoint", "need a state block"},
		{"event time needs field", `"input_type":"generate"}`, `"input_type":"generate","time":{"mode":"event_time"}}`, "in", "sources[0].time.timestamp_field", "needs timestamp_field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := strings.Replace(valid, c.from, c.to, 1)
			if spec == valid {
				t.Fatalf("replacement %q did not apply", c.from)
			}
			if c.name == "cycle" {
				spec = strings.Replace(spec, `{"id":"out","kind":"sink"}`, `{"id":"out","kind":"sink"},{"id":"m2","kind":"map"}`, 1)
				errs := structural(t, spec)
				found := false
				for _, e := range errs {
					found = found || strings.Contains(e.Reason, "cycle: m -> m2 -> m") || strings.Contains(e.Reason, "cycle: m2 -> m -> m2")
				}
				if !found {
					t.Fatalf("cycle not reported: %v", errs)
				}
				return
			}
			if c.name == "operator parallelism" {
				if errs := structural(t, spec); len(errs) != 0 {
					t.Fatalf("parallelism 0 means the job's: %v", errs)
				}
				return
			}
			expectProblem(t, structural(t, spec), c.op, c.field, c.cause)
		})
	}
}

func TestParseErrorsNameFields(t *testing.T) {
	t.Parallel()
	_, err := job.Parse([]byte(`{"id":"j","paralelism":2,"operators":[{"id":"a","kind":"map","parallelism":"x"}],"max_parallelism":0}`))
	errs := job.AsValidationErrors(err)
	expectProblem(t, errs, "", "paralelism", "unknown field")
	expectProblem(t, errs, "a", "operators[0].parallelism", "must be an integer")
	// Explicit zero is kept (and reported by validation), absence defaults.
	s, _ := job.Parse([]byte(`{"id":"j","max_parallelism":0}`))
	if s.MaxParallelism != 0 {
		t.Fatalf("explicit 0 replaced by %d", s.MaxParallelism)
	}
	p := planner.Problems{Job: "j"}
	planner.CheckStructure(s, &p)
	expectProblem(t, p.List(), "", "max_parallelism", "must be in [1, 32768] (got 0)")
	if _, err := job.Parse([]byte("[1,2]")); err == nil || !strings.Contains(err.Error(), "must be an object") {
		t.Fatalf("array spec: %v", err)
	}
	if _, err := job.Parse([]byte("id: [unclosed")); err == nil || !strings.Contains(err.Error(), "invalid YAML") {
		t.Fatalf("bad YAML: %v", err)
	}
}

// A spec's decode problems (an unknown field, a value of the wrong type)
// do not hide its other mistakes: Parse returns the spec as far as it
// decoded, and checking that spec reports Parse's problems together with
// the rest, without a second problem for the field that did not decode.
func TestParseProblemsDoNotHideTheRest(t *testing.T) {
	t.Parallel()
	const spec = `{"id":"j","paralelism":2,"max_parallelism":"many",
	  "operators":[{"id":"in","kind":"source"},{"id":"out","kind":"sink","parallelism":"two"}],
	  "edges":[{"id":"e","from":"in","to":"outt"}],
	  "sources":[{"operator_id":"in","input_type":"memory"}],
	  "sinks":[{"operator_id":"out","output_type":"drop"}]}`
	want := []string{
		`max_parallelism: must be an integer (got string "many")`,
		`paralelism: unknown field (known fields: id, version, max_parallelism, parallelism, operators, edges, sources, sinks, state, durability, checkpoint, recovery); did you mean "parallelism"?`,
		`out operators[1].parallelism: must be an integer (got string "two")`,
		`in edges[0].to: unknown operator "outt" (operators: "in", "out"); did you mean "out"?`,
	}
	render := func(errs job.ValidationErrors) []string {
		var out []string
		for _, e := range errs {
			l := e.Field + ": " + e.Reason
			if e.Operator != "" {
				l = e.Operator + " " + l
			}
			out = append(out, l)
		}
		return out
	}
	s, err := job.Parse([]byte(spec))
	if s == nil {
		t.Fatalf("Parse returned no spec with %v", err)
	}
	if got := render(job.AsValidationErrors(err)); !slices.Equal(got, want[:3]) {
		t.Errorf("Parse:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want[:3], "\n"))
	}
	// The field that did not decode takes its default, as if absent.
	if s.MaxParallelism != jobdefaults.MaxParallelism {
		t.Errorf("max_parallelism = %d, want the default %d", s.MaxParallelism, jobdefaults.MaxParallelism)
	}
	p := planner.Problems{Job: s.ID}
	planner.CheckStructure(s, &p)
	if got := render(job.AsValidationErrors(p.Err())); !slices.Equal(got, want) {
		t.Errorf("CheckStructure:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// So does a clone (what a deep build checks).
	p = planner.Problems{Job: s.ID}
	planner.CheckStructure(s.Clone(), &p)
	if got := render(job.AsValidationErrors(p.Err())); !slices.Equal(got, want) {
		t.Errorf("CheckStructure of a clone:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Chains: forward edges between equal parallelism fuse; keyed edges,
// parallelism changes and multi-input operators start new chains.
func TestPlanChainsAndPlacement(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `{"id":"j","parallelism":2,"operators":[
	  {"id":"a","kind":"source"},{"id":"b","kind":"map"},{"id":"c","kind":"aggregate","key_field":"k"},
	  {"id":"d","kind":"sink"},{"id":"x","kind":"source"},{"id":"y","kind":"sink","parallelism":1}],
	  "edges":[{"id":"ab","from":"a","to":"b"},{"id":"bc","from":"b","to":"c","partitioned":true},
	  {"id":"cd","from":"c","to":"d"},{"id":"xy","from":"x","to":"y"}],
	  "sources":[{"operator_id":"a","input_type":"generate"},{"operator_id":"x","input_type":"generate"}],
	  "sinks":[{"operator_id":"d","output_type":"drop"},{"operator_id":"y","output_type":"drop"}]}`)
	plan, err := planner.NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	var chains []string
	for _, c := range plan.Chains {
		chains = append(chains, fmt.Sprintf("%s=%s/x%d", c.ID, strings.Join(c.Operators, ">"), c.Parallelism))
	}
	want := []string{"chain-a=a>b/x2", "chain-c=c>d/x2", "chain-x=x/x2", "chain-y=y/x1"}
	if !reflect.DeepEqual(chains, want) {
		t.Fatalf("chains %v, want %v", chains, want)
	}
	modes := map[string]string{}
	for _, e := range plan.Edges {
		modes[e.ID] = e.Mode
	}
	if modes["ab"] != job.EdgeChained || modes["bc"] != job.EdgeKeyGroups || modes["cd"] != job.EdgeChained || modes["xy"] != job.EdgeRebalance {
		t.Fatalf("edge modes %v", modes)
	}
	// a,b,c,d are connected through the keyed edge: one unit. x,y too.
	if len(plan.PlacementUnits) != 2 {
		t.Fatalf("placement units: %+v", plan.PlacementUnits)
	}
	if got := len(plan.PlacementUnits[0].Tasks); got != 8 {
		t.Fatalf("unit 0 has %d tasks: %v", got, plan.PlacementUnits[0].Tasks)
	}
	if !strings.Contains(plan.String(), "a-1") {
		t.Fatalf("plan text lacks tasks:\n%s", plan)
	}

	// Without keyed edges, subtasks are independent placement units: scale
	// out by splitting source partitions.
	s2 := mustParse(t, `{"id":"j","parallelism":3,"operators":[{"id":"a","kind":"source"},{"id":"b","kind":"sink"}],
	  "edges":[{"id":"ab","from":"a","to":"b"}],"sources":[{"operator_id":"a","input_type":"generate"}],"sinks":[{"operator_id":"b","output_type":"drop"}]}`)
	plan2, _ := planner.NewPlan(s2)
	if len(plan2.PlacementUnits) != 3 {
		t.Fatalf("independent subtasks: %+v", plan2.PlacementUnits)
	}
	for _, u := range plan2.PlacementUnits {
		if len(u.Tasks) != 2 {
			t.Fatalf("unit %+v should hold one source and one sink task", u)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	t.Parallel()
	s, _ := job.Parse(readFile(t, "../../job/testdata/v1-orders.json"))
	c := s.Clone()
	c.Operators[0].Config[0] = 'X'
	*c.Sources[0].Time.Watermark.IdleTimeoutMS = 1
	c.State.Backend = "x"
	if s.Operators[0].Config[0] == 'X' || *s.Sources[0].Time.Watermark.IdleTimeoutMS == 1 || s.State.Backend == "x" {
		t.Fatal("Clone shares memory with the original")
	}
}
