package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test re-execute this binary as the arkflow CLI: with
// ARKFLOW_CLI_ARGS set (a JSON list of arguments) the process runs the CLI
// instead of the tests, so crash tests can SIGKILL a real `arkflow run`.
func TestMain(m *testing.M) {
	if raw := os.Getenv("ARKFLOW_CLI_ARGS"); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(run(args, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func cliCommand(dir string, args ...string) *exec.Cmd {
	raw, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0])
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ARKFLOW_CLI_ARGS="+string(raw))
	return cmd
}

// The end-to-end proof of the WAL's at-least-once delivery: a file source →
// keyed map → file sink job with durability on is SIGKILLed at random moments
// and restarted with `arkflow run` each time; after a final run to the end,
// every input row is in the output at least once. Duplicates (rows replayed
// after the last persisted cursor) are counted and logged, not failed.
func TestRunSurvivesSIGKILL(t *testing.T) {
	for _, sync := range []string{"group_commit", "always"} {
		t.Run(sync, func(t *testing.T) { crashLoop(t, sync) })
	}
}

func crashLoop(t *testing.T, sync string) {
	dir := t.TempDir()
	const rows = 8000
	var in strings.Builder
	for i := 0; i < rows; i++ {
		fmt.Fprintf(&in, "{\"user\":\"u%d\",\"num\":%d}\n", i%13, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := `id: crash
parallelism: 2
durability: {sync: ` + sync + `}
operators:
  - {id: in, kind: source}
  - {id: tag, kind: map, key_field: user, config: {set: [{name: twice, expr: "num * 2"}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: tag, partitioned: true}
  - {id: b, from: tag, to: out}
sources:
  - {operator_id: in, input_type: file, config: {path: in.jsonl, partitions: 2, batch_size: 20, rate_per_sec: 250, schema: [{name: user, type: string}, {name: num, type: int64}]}}
sinks:
  - {operator_id: out, output_type: file, config: {path: out.jsonl}}
`
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	kills := 8
	if testing.Short() {
		kills = 3
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	killed := 0
	for killed < kills {
		cmd := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(100+rng.IntN(500)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			killed++
			continue
		}
		if err != nil {
			t.Fatalf("run %d failed: %v\n%s", killed+1, err, stderr.String())
		}
		// It finished before the kill: every row is through already.
		t.Logf("run %d ended before its kill", killed+1)
		break
	}
	final := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
	out, err := final.CombinedOutput()
	if err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	f, err := os.Open(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := make([]int, rows)
	total := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			User  string `json:"user"`
			Num   int    `json:"num"`
			Twice int    `json:"twice"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("output line %d is not a row: %q: %v", total+1, sc.Text(), err)
		}
		if r.Num < 0 || r.Num >= rows || r.Twice != 2*r.Num || r.User != fmt.Sprintf("u%d", r.Num%13) {
			t.Fatalf("output line %d is not an input row: %q", total+1, sc.Text())
		}
		seen[r.Num]++
		total++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var missing []int
	for i, n := range seen {
		if n == 0 {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d input rows are missing from the output after %d kills (first: %v)", len(missing), rows, killed, missing[:min(10, len(missing))])
	}
	// The WAL lets each run resume where the last one's cursor was, so a
	// kill costs only the rows after the persisted cursor (≈100 ms of input
	// plus what was in flight). A source without it starts over each run
	// and re-emits ≈675 rows per kill here.
	if dups := total - rows; dups > 400*killed {
		t.Fatalf("%d duplicates after %d kills: the runs did not resume from the WAL", dups, killed)
	}
	t.Logf("sync=%s: %d kills, %d rows out for %d in (%d duplicates from replay)", sync, killed, total, rows, total-rows)
}

// A dry run opens and closes every WAL, so the real run that
// follows at once can open the same paths.
func TestDryRunThenRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte("{\"num\":1}\n{\"num\":2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := `id: dry
durability: {path: wal}
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: out}
sources:
  - {operator_id: in, input_type: file, config: {path: ` + filepath.Join(dir, "in.jsonl") + `, schema: [{name: num, type: int64}]}}
sinks:
  - {operator_id: out, output_type: file, config: {path: ` + filepath.Join(dir, "out.jsonl") + `}}
`
	specPath := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	if code, _, errOut := runCLI("run", "--dry-run", specPath); code != 0 {
		t.Fatalf("dry run exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "wal", "in", "0", "LOCK")); err != nil {
		t.Fatalf("the dry run did not open the WAL: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.jsonl")); err == nil {
		t.Fatal("the dry run wrote output")
	}
	if code, _, errOut := runCLI("run", specPath); code != 0 {
		t.Fatalf("run after the dry run: exit %d: %s", code, errOut)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if string(got) != "{\"num\":1}\n{\"num\":2}\n" {
		t.Fatalf("output %q", got)
	}
}
