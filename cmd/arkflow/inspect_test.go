package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/wal"
)

// inspectSpec is a keyed window job with a WAL and checkpoints in dir.
func inspectSpec(dir string, version, format, count int) string {
	return fmt.Sprintf(`
id: orders
version: %d
durability: {sync: group_commit}
state: {backend: memory, format_version: %d}
checkpoint: {interval_ms: 3600000, object_store_uri: "file://%s/ckpt"}
operators:
  - {id: in, kind: source}
  - {id: w, kind: window, key_field: user, config: {window: {type: tumbling, size_ms: 1000}, aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: w, partitioned: true}
  - {id: b, from: w, to: out}
sources:
  - operator_id: in
    input_type: generate
    config:
      count: %d
      batch_size: 100
      rate_per_sec: 20000
      fields: [{name: user, type: string, cardinality: 5}, {name: ts, type: timestamp, step_ms: 1}]
    time: {mode: event_time, timestamp_field: ts, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 10}}
sinks:
  - {operator_id: out, output_type: drop}
`, version, format, dir, count)
}

func writeInspectSpec(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// arkflow wal inspect describes the logs arkflow run left, as wal.Inspect
// does (--json is its result), and exits 1 on a log a restart refuses.
func TestWalInspectCommand(t *testing.T) {
	dir := t.TempDir()
	spec := writeInspectSpec(t, dir, "job.yaml", inspectSpec(dir, 1, 1, 1000))
	if code, out, errOut := runCLI("run", "--quiet", "--data-dir", dir, spec); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	walDir := filepath.Join(dir, "orders", "wal")
	code, out, errOut := runCLI("wal", "inspect", walDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"log " + filepath.Join(walDir, "in", "0") + " (source in, subtask 0)\n",
		"  cursor    10, positions 0@1000\n",
		"  entries   1..10 stored, 0 pending\n",
		"  segment   00000000000000000001.wal  1..10  10 entries",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	code, out, _ = runCLI("wal", "inspect", "--entries", walDir)
	if code != 0 || strings.Count(out, "  entry ") != 10 || !strings.Contains(out, "in  ") || !strings.Contains(out, "acknowledged") {
		t.Fatalf("--entries: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("wal", "inspect", "--json", "--entries", walDir)
	var got []wal.Info
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	want, err := wal.Inspect(context.Background(), walDir, wal.InspectOptions{Entries: true})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("--json\n%+v\nwal.Inspect\n%+v, %v", got, want, err)
	}

	// Entry 2's payload damaged: a restart refuses the log, so does this.
	seg := filepath.Join(walDir, "in", "0", "00000000000000000001.wal")
	b, _ := os.ReadFile(seg)
	b[len(b)/5] ^= 0xff
	os.WriteFile(seg, b, 0o644)
	code, _, errOut = runCLI("wal", "inspect", walDir)
	if code != 1 || !strings.Contains(errOut, "00000000000000000001.wal is corrupt at offset") {
		t.Fatalf("damaged: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("wal", "inspect", t.TempDir()); code != 1 || !strings.Contains(errOut, "no write-ahead log in") {
		t.Fatalf("empty dir: exit %d: %s", code, errOut)
	}
}

// arkflow checkpoint list, inspect and check on the checkpoints and the
// savepoint arkflow checkpoint and arkflow savepoint took of a job arkflow
// run ran; arkflow checkpoint with a SPEC still asks the running job.
func TestCheckpointStoreCommands(t *testing.T) {
	dir := t.TempDir()
	spec := writeInspectSpec(t, dir, "job.yaml", inspectSpec(dir, 1, 1, 30000))
	done := make(chan [3]string, 1)
	go func() {
		code, out, errOut := runCLI("run", "--quiet", "--data-dir", dir, spec)
		done <- [3]string{fmt.Sprint(code), out, errOut}
	}()
	sock := filepath.Join(dir, "orders.sock")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the control socket did not appear")
		}
	}
	code, ckptOut, errOut := runCLI("checkpoint", "--data-dir", dir, spec)
	if code != 0 {
		t.Fatalf("checkpoint: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("savepoint", "--name", "v1", "--data-dir", dir, spec); code != 0 {
		t.Fatalf("savepoint: exit %d: %s", code, errOut)
	}
	if r := <-done; r[0] != "0" {
		t.Fatalf("run: exit %s\n%s%s", r[0], r[1], r[2])
	}
	ckpt := strings.TrimSpace(ckptOut)
	uri := "file://" + filepath.Join(dir, "ckpt")

	// list: a header and one line per artifact, as checkpoint.List says.
	code, out, errOut := runCLI("checkpoint", "list", uri)
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "JOB") || !strings.Contains(lines[1], "checkpoint  "+ckpt) ||
		!strings.HasSuffix(lines[1], "completed, latest") || !strings.Contains(lines[2], "savepoint   v1") {
		t.Fatalf("list:\n%s", out)
	}
	st, err := checkpoint.Open(context.Background(), uri, checkpoint.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := st.List(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	_, out, _ = runCLI("checkpoint", "list", "--json", "--job", "orders", uri)
	var got []checkpoint.Info
	if err := json.Unmarshal([]byte(out), &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("list --json\n%+v\ncheckpoint.List\n%+v, %v", got, want, err)
	}

	// inspect: by name, by id without its zeros, verified.
	code, out, errOut = runCLI("checkpoint", "inspect", "--verify", uri, "v1")
	if code != 0 || !strings.HasPrefix(out, "savepoint v1 of job orders: completed\n") || !strings.Contains(out, "  job version 1, state format 1, max_parallelism 128") ||
		!strings.Contains(out, "  TASK") || !strings.Contains(out, "\n  in-0 ") || !strings.Contains(out, "verified: every state object matches") {
		t.Fatalf("inspect v1: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI("checkpoint", "inspect", uri, strings.TrimLeft(ckpt, "0")); code != 0 || !strings.HasPrefix(out, "checkpoint "+ckpt+" of job orders: completed, latest") {
		t.Fatalf("inspect %s: exit %d\n%s%s", ckpt, code, out, errOut)
	}
	if code, _, errOut := runCLI("checkpoint", "inspect", uri, "v9"); code != 1 || !strings.Contains(errOut, `job "orders" has no savepoint or checkpoint "v9"`) {
		t.Fatalf("inspect v9: exit %d: %s", code, errOut)
	}

	// check: exit 0 for an upgrade, 1 for a state format change (with
	// the start's words) or a missing savepoint, 3 for a spec that does
	// not build.
	v2 := writeInspectSpec(t, dir, "v2.yaml", inspectSpec(dir, 2, 1, 10))
	if code, out, errOut := runCLI("checkpoint", "check", uri, "v1", v2); code != 0 || out != "ok: job orders version 2 can start from savepoint v1\n" {
		t.Fatalf("check v2: exit %d\n%s%s", code, out, errOut)
	}
	f2 := writeInspectSpec(t, dir, "f2.yaml", inspectSpec(dir, 2, 2, 10))
	if code, out, _ := runCLI("checkpoint", "check", uri, "v1", f2); code != 1 || !strings.HasPrefix(out, "refused: job orders version 2 would not start from savepoint v1: ") ||
		!strings.Contains(out, "a state format change has no migration path") {
		t.Fatalf("check f2: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("checkpoint", "check", "--json", uri, "v1", f2)
	var verdict struct {
		Accepted bool
		Reason   string
	}
	if err := json.Unmarshal([]byte(out), &verdict); code != 1 || err != nil || verdict.Accepted || !strings.Contains(verdict.Reason, "state format") {
		t.Fatalf("check --json f2: exit %d, %v\n%s", code, err, out)
	}
	if code, out, _ := runCLI("checkpoint", "check", uri, "v9", v2); code != 1 || !strings.Contains(out, `savepoint "v9" was not found`) {
		t.Fatalf("check v9: exit %d\n%s", code, out)
	}
	bad := writeInspectSpec(t, dir, "bad.yaml", strings.Replace(inspectSpec(dir, 2, 1, 10), "output_type: drop", "output_type: dorp", 1))
	if code, _, errOut := runCLI("checkpoint", "check", uri, "v1", bad); code != 3 || !strings.Contains(errOut, `unknown output type "dorp"`) {
		t.Fatalf("check bad: exit %d: %s", code, errOut)
	}
}
