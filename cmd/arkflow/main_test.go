package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// arkflow validate prints every mistake, one per line, each naming its
// operator and field path, and exits 1.
func TestValidateListsEveryMistake(t *testing.T) {
	code, out, errOut := runCLI("validate", "testdata/three-mistakes.json")
	if code != 1 {
		t.Fatalf("exit code %d, want 1 (stdout %q)", code, out)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	want := []string{
		`job "mistakes": operator "per-user": operators[2].key_field: unknown column "usr"`,
		`job "mistakes": operator "per-user": edges[2].to: unknown operator "outt"`,
		`job "mistakes": operator "out": sinks[0].output_type: unknown output type "stdoutt"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("want exactly %d lines, got:\n%s", len(want), errOut)
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("no line starting with %q in:\n%s", w, errOut)
		}
	}
}

// A spec's unknown field and value of the wrong type do not hide its
// other mistakes: arkflow validate prints the typo (with the field it
// misspells), the type error and the dangling edge, each with its path.
func TestValidatePrintsDecodeProblemsWithTheRest(t *testing.T) {
	code, out, errOut := runCLI("validate", "testdata/typos.yaml")
	if code != 1 {
		t.Fatalf("exit code %d, want 1 (stdout %q, stderr %q)", code, out, errOut)
	}
	want := []string{
		`job "typos": paralelism: unknown field (known fields: id, version, max_parallelism, parallelism, operators, edges, sources, sinks, state, durability, checkpoint, recovery); did you mean "parallelism"?`,
		`job "typos": operator "in": edges[0].to: unknown operator "outt" (operators: "in", "out"); did you mean "out"?`,
		`job "typos": operator "in": sources[0].time.allowed_lateness_ms: must be an integer (got string "soon")`,
	}
	if got := strings.Split(strings.TrimSpace(errOut), "\n"); !slices.Equal(got, want) {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, strings.Join(want, "\n"))
	}
}

func TestValidateOK(t *testing.T) {
	code, out, errOut := runCLI("validate", "../../job/testdata/v1-orders.json")
	if code != 0 || !strings.HasPrefix(out, "ok: job orders version 1 (sha256:") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// arkflow plan on a v1 spec with M=128, P=3 shows the ranges ArkFlow
// computes.
func TestPlanShowsV1Ranges(t *testing.T) {
	code, out, errOut := runCLI("plan", "../../job/testdata/v1-orders.json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan struct {
		Tasks []struct {
			ID         string `json:"id"`
			OperatorID string `json:"operator_id"`
			Partitions []struct {
				KeyGroup struct{ Start, End int } `json:"key_group"`
			} `json:"partitions"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("plan is not JSON: %v\n%s", err, out)
	}
	got := map[string][2]int{}
	for _, task := range plan.Tasks {
		if task.OperatorID == "aggregate" {
			kg := task.Partitions[0].KeyGroup
			got[task.ID] = [2]int{kg.Start, kg.End}
		}
	}
	want := map[string][2]int{"aggregate-0": {0, 41}, "aggregate-1": {42, 84}, "aggregate-2": {85, 127}}
	for id, r := range want {
		if got[id] != r {
			t.Errorf("%s: got %v, want %v (all: %v)", id, got[id], r, got)
		}
	}
	code, text, _ := runCLI("plan", "--text", "../../job/testdata/v1-orders.json")
	if code != 0 || !strings.Contains(text, "aggregate-2") || !strings.Contains(text, "[85,127]") {
		t.Fatalf("text plan:\n%s", text)
	}
}

func TestRunFileToFile(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	lines := `{"user":"ann","amount":1.5}
{"user":"bob","amount":2}
{"user":"ann","amount":3}
`
	if err := os.WriteFile(in, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	spec := `id: totals
operators:
  - {id: in, kind: source}
  - {id: cents, kind: map, config: {set: [{name: cents, expr: "to_int(amount * 100)"}], drop: [amount]}}
  - {id: per-user, kind: aggregate, key_field: user, config: {emit: final, aggregates: [{function: sum, field: cents, as: total}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: cents}
  - {id: b, from: cents, to: per-user, partitioned: true}
  - {id: c, from: per-user, to: out}
sources:
  - {operator_id: in, input_type: file, config: {path: "` + in + `", schema: [{name: user, type: string}, {name: amount, type: float64}]}}
sinks:
  - {operator_id: out, output_type: file, config: {path: "` + out + `"}}
`
	specPath := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("run", specPath)
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, errOut)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"user\":\"ann\",\"total\":450}\n{\"user\":\"bob\",\"total\":200}\n"
	if string(got) != want {
		t.Fatalf("output:\n%s\nwant:\n%s", got, want)
	}
}

// A declarative event-time window job with a late route runs from the CLI
// (the stdout sinks print to the process's stdout, so run it as a child).
func TestRunWindowSpec(t *testing.T) {
	if os.Getenv("ARKFLOW_CLI_CHILD") == "1" {
		os.Exit(run([]string{"run", "../../testdata/windows.yaml"}, os.Stdout, os.Stderr))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunWindowSpec$")
	cmd.Env = append(os.Environ(), "ARKFLOW_CLI_CHILD=1")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var windows, late int
	for _, l := range lines {
		switch {
		case strings.Contains(l, `"window_start"`):
			windows++
		case strings.Contains(l, `"ts":"2026-01-01T00:00:00.900Z"`):
			late++
		}
	}
	if windows != 4 || late != 1 {
		t.Fatalf("want 4 window rows and 1 routed late row, got:\n%s", out.String())
	}
}

// The declarative window join of testdata/joins.yaml runs from the CLI
// and prints the pairs its rows make, worked out by hand from the file:
// ann (p1) with auctions 1 and 2 in the first second, bob (p2) without an
// auction (left outer), cid (p3) with auction 4 in the next second (auction
// 3 is in the first second, cid in the second).
func TestRunJoinSpec(t *testing.T) {
	if os.Getenv("ARKFLOW_CLI_CHILD") == "1" {
		os.Exit(run([]string{"run", "--quiet", "../../testdata/joins.yaml"}, os.Stdout, os.Stderr))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunJoinSpec$")
	cmd.Env = append(os.Environ(), "ARKFLOW_CLI_CHILD=1")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r struct {
			ID      string `json:"id"`
			Start   string `json:"window_start"`
			Auction *int64 `json:"auction"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		a := "null"
		if r.Auction != nil {
			a = fmt.Sprint(*r.Auction)
		}
		got = append(got, r.ID+" "+r.Start[17:23]+" "+a)
	}
	slices.Sort(got)
	want := []string{"p1 00.000 1", "p1 00.000 2", "p2 00.000 null", "p3 01.000 4"}
	if !slices.Equal(got, want) {
		t.Fatalf("pairs %q, want %q; output:\n%s", got, want, out.String())
	}
}

// agent refuses a missing --hub or --node-id as a usage mistake naming
// what is missing, before it contacts anything.
func TestAgentUsage(t *testing.T) {
	t.Setenv("ARKFLOW_NODE_ID", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent"}, "--hub URL is required"},
		{[]string{"agent", "--hub", "http://127.0.0.1:1"}, "NodeID: required"},
		{[]string{"agent", "--hub", "ftp://x", "--node-id", "n"}, "HubURL: want http(s)://host[:port]"},
		{[]string{"agent", "--hub", "http://127.0.0.1:1", "extra"}, "takes no arguments"},
	} {
		var stdout, stderr strings.Builder
		if code := run(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("arkflow %s: exit %d, stderr %q; want 2 and %q", strings.Join(tc.args, " "), code, stderr.String(), tc.want)
		}
	}
}
