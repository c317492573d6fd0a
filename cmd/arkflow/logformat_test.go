package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jsonKeys returns the top-level keys of the JSON object line, in order
// and with repeats (decoding into a map would hide a key said twice).
func jsonKeys(line string) ([]string, error) {
	dec := json.NewDecoder(strings.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object (%v)", err)
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one value on the line")
	}
	return keys, nil
}

// checkJSONLines parses every line of logs as one JSON object with time,
// level and msg, each key said once, and returns the records.
func checkJSONLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for i, line := range strings.Split(strings.TrimRight(logs, "\n"), "\n") {
		keys, err := jsonKeys(line)
		if err != nil {
			t.Fatalf("line %d is not one JSON object: %v\n%s", i+1, err, line)
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				t.Errorf("line %d says %q twice: %s", i+1, k, line)
			}
			seen[k] = true
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %d: %v\n%s", i+1, err, line)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k].(string); !ok {
				t.Errorf("line %d has no %s: %s", i+1, k, line)
			}
		}
		recs = append(recs, rec)
	}
	return recs
}

// logJob is a short job (its rate holds it about 1.5 s: 1 500 rows at
// 1 000 rows/s) with a write-ahead log, Badger state and a
// checkpoint every 100 ms into a local directory: it logs from the
// runtime, the WAL, the state store and the checkpoints.
func logJob(dir string) string {
	return `id: logjson
durability: {sync: group_commit}
state: {backend: badger}
checkpoint: {interval_ms: 100, retention: 2, object_store_uri: "file://` + filepath.Join(dir, "checkpoints") + `"}
operators:
  - {id: clicks, kind: source}
  - {id: per-user, kind: window, stateful: true, key_field: user,
     config: {window: {type: tumbling, size_ms: 100}, aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: clicks, to: per-user, partitioned: true}
  - {id: b, from: per-user, to: out}
sources:
  - operator_id: clicks
    input_type: generate
    config:
      seed: 7
      count: 1500
      batch_size: 100
      rate_per_sec: 1000
      fields:
        - {name: user, type: string, prefix: "user-", cardinality: 5}
        - {name: ts, type: timestamp, unit: ms, step_ms: 1}
    time: {mode: event_time, timestamp_field: ts, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 10, advance: per_row}}
sinks:
  - {operator_id: out, output_type: drop}
`
}

// arkflow run --log-format json writes one JSON object a line on stderr,
// every one naming the job once (the command's own lines too), and the
// checkpoints' lines carry the checkpoint ID under "checkpoint".
func TestRunLogFormatJSON(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(spec, []byte(logJob(dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("run", "--log-format", "json", "--data-dir", filepath.Join(dir, "data"), spec)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	recs := checkJSONLines(t, errOut)
	checkpoints := 0
	for _, rec := range recs {
		if rec["job"] != "logjson" {
			t.Errorf("a line without job=logjson: %v", rec)
		}
		if rec["msg"] == "checkpoint completed" {
			if id, _ := rec["checkpoint"].(string); id == "" || rec["kind"] != "checkpoint" {
				t.Errorf("a checkpoint line without its checkpoint ID: %v", rec)
			}
			checkpoints++
		}
		if _, ok := rec["id"]; ok {
			t.Errorf("a line with an id key (the checkpoint's is \"checkpoint\"): %v", rec)
		}
		if _, ok := rec["err"]; ok {
			t.Errorf("a line with an err key (errors go under \"error\"): %v", rec)
		}
	}
	if checkpoints == 0 {
		t.Errorf("no checkpoint completed line in:\n%s", errOut)
	}
	for _, msg := range []string{"job running", "job stopped"} {
		found := false
		for _, rec := range recs {
			found = found || rec["msg"] == msg
		}
		if !found {
			t.Errorf("no %q line in:\n%s", msg, errOut)
		}
	}
}

// The default is text, and --log-format text says so explicitly.
func TestRunLogFormatText(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(spec, []byte(strings.Replace(logJob(dir), "count: 1500", "count: 300", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--log-format", "text"}} {
		args = append(append([]string{"run"}, args...), "--data-dir", filepath.Join(dir, "data"), spec)
		code, _, errOut := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		if !strings.Contains(errOut, `level=INFO msg="job running" job=logjson`) {
			t.Errorf("%v: not text logs:\n%s", args, errOut)
		}
	}
}

// A --log-format other than text or json is a usage mistake (exit 2)
// that names the flag and the values it takes, for every command that
// has the flag.
func TestBadLogFormat(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--log-format", "xml", "job.yaml"},
		{"validate", "--log-format=yaml", "job.yaml"},
		{"agent", "--hub", "http://127.0.0.1:1", "--log-format", "JSON"},
	} {
		code, _, errOut := runCLI(args...)
		if code != 2 || !strings.Contains(errOut, "-log-format") || !strings.Contains(errOut, "must be text or json") {
			t.Errorf("%v: exit %d, want 2 and a message naming --log-format and its values:\n%s", args, code, errOut)
		}
	}
}

// help lists --log-format with its default.
func TestHelpListsLogFormat(t *testing.T) {
	for _, c := range []string{"run", "agent"} {
		var out, errb bytes.Buffer
		if code := run([]string{"help", c}, &out, &errb); code != 0 {
			t.Fatalf("help %s: exit %d: %s", c, code, errb.String())
		}
		if !strings.Contains(out.String(), "--log-format text") || !strings.Contains(out.String(), "(default text)") {
			t.Errorf("help %s does not list --log-format:\n%s", c, out.String())
		}
	}
}

// A job that fails while it runs is logged once, by the job ("job
// failed", error=); the command exits 1 without printing the error again,
// so with --log-format json stderr is still all JSON records.
func TestRunFailureLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "job.yaml")
	missing := filepath.Join(dir, "missing.jsonl")
	if err := os.WriteFile(spec, []byte(`id: fails
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: out}
sources:
  - {operator_id: in, input_type: file, config: {path: "`+missing+`", schema: [{name: user, type: string}]}}
sinks:
  - {operator_id: out, output_type: drop}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "text"} {
		code, _, errOut := runCLI("run", "--log-format", format, "--data-dir", filepath.Join(dir, "data"), spec)
		if code != 1 {
			t.Fatalf("%s: exit %d, want 1\n%s", format, code, errOut)
		}
		if n := strings.Count(errOut, "no such file or directory"); n != 1 {
			t.Errorf("%s: the error is said %d times, want once:\n%s", format, n, errOut)
		}
		if format == "text" {
			continue
		}
		failed := 0
		for _, rec := range checkJSONLines(t, errOut) {
			if rec["msg"] == "job failed" && rec["level"] == "ERROR" && rec["job"] == "fails" && strings.Contains(fmt.Sprint(rec["error"]), missing) {
				failed++
			}
		}
		if failed != 1 {
			t.Errorf("want one job failed record naming the missing file:\n%s", errOut)
		}
	}
}
