package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// The CLI's on-demand checkpoints and savepoints: `arkflow checkpoint` and
// `arkflow savepoint` reach a running `arkflow run` through its control
// socket; --savepoint-on-stop takes one on SIGTERM; --from-savepoint
// starts from it.
func TestCLICheckpointAndSavepoint(t *testing.T) {
	dir := t.TempDir()
	spec := `id: ckcli
state: {backend: badger}
checkpoint: {interval_ms: 3600000, retention: 2, object_store_uri: "file://` + filepath.Join(dir, "store") + `"}
operators:
  - {id: in, kind: source}
  - {id: count, kind: aggregate, key_field: user, config: {aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: count, partitioned: true}
  - {id: b, from: count, to: out}
sources:
  - {operator_id: in, input_type: generate, config: {count: 1000000, rate_per_sec: 200, batch_size: 10, fields: [{name: user, type: string, cardinality: 5}]}}
sinks:
  - {operator_id: out, output_type: drop}
`
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := cliCommand(dir, "run", "--data-dir", "data", "--savepoint-on-stop", "final", "job.yaml")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sock := filepath.Join(dir, "data", "ckcli.sock")
	eventuallyFile(t, sock)

	out, err := cliCommand(dir, "checkpoint", "--data-dir", "data", "job.yaml").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "00000000000000000001" {
		t.Fatalf("arkflow checkpoint: %v: %s\n%s", err, out, stderr.String())
	}
	out, err = cliCommand(dir, "savepoint", "--control", sock, "--name", "before-upgrade").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "before-upgrade" {
		t.Fatalf("arkflow savepoint: %v: %s", err, out)
	}
	out, err = cliCommand(dir, "savepoint", "--control", sock, "--name", "../x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "savepoint name") {
		t.Fatalf("a bad savepoint name was accepted: %s", out)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	for _, m := range []string{"checkpoints/00000000000000000001/manifest.json", "savepoints/before-upgrade/manifest.json", "savepoints/final/manifest.json"} {
		if _, err := os.Stat(filepath.Join(dir, "store", "ckcli", m)); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("the control socket was left behind")
	}
	// Start from the savepoint, this time in the default data directory
	// (./arkflow-data), where `arkflow checkpoint` finds the socket with no
	// flags; a missing savepoint is an error that names it, in the job's
	// "job failed" record (said once: the command does not print it again).
	next := cliCommand(dir, "run", "--from-savepoint", "final", "job.yaml")
	nextErr := &lockedBuffer{}
	next.Stderr = nextErr
	if err := next.Start(); err != nil {
		t.Fatal(err)
	}
	defer next.Process.Kill()
	eventuallyFile(t, filepath.Join(dir, "arkflow-data", "ckcli.sock"))
	out, err = cliCommand(dir, "checkpoint", "job.yaml").CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) != 20 {
		t.Fatalf("arkflow checkpoint with the default data directory: %v: %s\n%s", err, out, nextErr.String())
	}
	next.Process.Signal(syscall.SIGTERM)
	if err := next.Wait(); err != nil || !strings.Contains(nextErr.String(), "kind=savepoint checkpoint=final") {
		t.Fatalf("run --from-savepoint: %v\n%s", err, nextErr.String())
	}
	out, err = cliCommand(dir, "run", "--from-savepoint", "nope", "job.yaml").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `msg="job failed" job=ckcli error="savepoint \"nope\"`) {
		t.Fatalf("run from a missing savepoint: %v: %s", err, out)
	}
}

// lockedBuffer is an io.Writer a child process writes while the test may
// read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// eventuallyFile waits until path exists.
func eventuallyFile(t *testing.T, path string) {
	t.Helper()
	polltest.Eventually(t, path+" to appear", func() bool { _, err := os.Stat(path); return err == nil })
}

// Without a running job, checkpoint says where it looked and what to
// check; for a spec without a checkpoint block it says there is nothing
// to ask for.
func TestControlCommandWithoutAJob(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	spec := `id: idle
checkpoint: {object_store_uri: "file://` + filepath.Join(dir, "store") + `"}
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: out}
sources:
  - {operator_id: in, input_type: generate, config: {count: 1, fields: [{name: n, type: int64}]}}
sinks:
  - {operator_id: out, output_type: drop}
`
	if err := os.WriteFile("job.yaml", []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("checkpoint", "job.yaml")
	if code != 1 || !strings.Contains(errOut, "no job is listening on arkflow-data/idle.sock") {
		t.Errorf("checkpoint with nothing running: exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI("savepoint", "--name", "v1", "--data-dir", "elsewhere", "job.yaml")
	if code != 1 || !strings.Contains(errOut, "no job is listening on elsewhere/idle.sock") {
		t.Errorf("savepoint --data-dir elsewhere: exit %d: %s", code, errOut)
	}
	if err := os.WriteFile("plain.yaml", []byte(strings.Replace(spec, "checkpoint:", "# checkpoint:", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI("checkpoint", "plain.yaml")
	if code != 1 || !strings.Contains(errOut, `job "idle" has no checkpoint block`) {
		t.Errorf("checkpoint of a spec without a checkpoint block: exit %d: %s", code, errOut)
	}
}
