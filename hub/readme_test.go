package hub_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// readmeHubSection returns the fenced sh blocks of README.md's "Run a
// Hub" section (up to the next "## " heading), in order.
func readmeHubSection(t *testing.T) [][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]string
	in, fenced := false, false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "## Run a Hub":
			in = true
		case in && strings.HasPrefix(line, "## "):
			return blocks
		case in && line == "```sh":
			fenced = true
			blocks = append(blocks, nil)
		case in && fenced && line == "```":
			fenced = false
		case in && fenced:
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], line)
		}
	}
	if !in {
		t.Fatal(`README.md has no "## Run a Hub" section`)
	}
	return blocks
}

// shellWords splits a README command line as sh does (quotes and all).
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", "set -- "+line+`; for a; do printf '%s\0' "$a"; done`).Output()
	if err != nil {
		t.Fatalf("splitting %q: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// goRun splits a README line "[NAME=value …] go run ./cmd/<name> args…" into
// its environment, the command's name and args.
func goRun(t *testing.T, line string) (env []string, cmd string, args []string) {
	t.Helper()
	words := shellWords(t, line)
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
		env, words = append(env, words[0]), words[1:]
	}
	if len(words) < 3 || words[0] != "go" || words[1] != "run" || !strings.HasPrefix(words[2], "./cmd/") {
		t.Fatalf("README line %q is not `go run ./cmd/…`", line)
	}
	return env, strings.TrimPrefix(words[2], "./cmd/"), words[3:]
}

// TestREADMEHubWalkthrough runs README.md's "Run a Hub" section as the
// README gives it: its first block's two commands start the Hub
// (cmd/arkflow-hub) and an Agent (cmd/arkflow agent), built from this
// tree, with the README's flags; every other block of the section runs,
// in order, in one sh session, as a reader pastes them into a third
// terminal. Only the address (a free port instead of 8080) and the
// checkpoint directory (a temporary one) are changed, and every curl
// fails on an HTTP error. Then the outcomes the README describes are
// checked over the API: validated with a v1 plan, submitted stopped, run
// with v1 task attempts, stopped; a job with a checkpoint block running
// with a completed checkpoint and a completed savepoint of the README's
// name, whose manifest is in the store.
func TestREADMEHubWalkthrough(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	blocks := readmeHubSection(t)
	if len(blocks) < 2 || len(blocks[0]) != 2 {
		t.Fatalf("the README's Hub section should open with a block of two commands (Hub, Agent), then the walk-through: %q", blocks)
	}
	hubBin, agentBin := buildFleetBinaries(t)
	dir, ckpts := t.TempDir(), t.TempDir()
	addr := freeLoopbackAddr(t)
	const readmeURL, readmeCkpts = "http://127.0.0.1:8080", "/tmp/arkflow-checkpoints"
	url := "http://" + addr

	// The Hub, with the README's flags, on a free port.
	env, cmd, args := goRun(t, blocks[0][0])
	if cmd != "arkflow-hub" {
		t.Fatalf("the first command runs %s, not the Hub", cmd)
	}
	fs := flag.NewFlagSet("arkflow-hub", flag.ContinueOnError)
	var tokens []string
	fs.Func("token", "", func(s string) error { tokens = append(tokens, s); return nil })
	fs.String("data-dir", "", "")
	fs.String("node-token", "", "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || len(tokens) == 0 {
		t.Fatalf("the README's Hub flags %q: %v (this test knows --data-dir, --token, --node-token)", args, err)
	}
	operator := tokens[0][strings.LastIndex(tokens[0], "|")+1:]
	startReadmeProc(t, dir, "hub", env, hubBin, append(args, "--listen", addr)...)

	// The Agent, with the README's command, pointed at that port.
	env, cmd, args = goRun(t, blocks[0][1])
	if cmd != "arkflow" || len(args) == 0 || args[0] != "agent" {
		t.Fatalf("the second command runs %s %q, not an Agent", cmd, args)
	}
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], readmeURL, url)
	}
	startReadmeProc(t, dir, "agent", env, agentBin, args...)
	polltest.EventuallyWithin(t, fleetDeadline, "the Agent online", func() bool {
		st, body, ok := fleetGet(url+"/api/v1/nodes", operator)
		return ok && st == 200 && strings.Contains(string(body), `"state":"online"`)
	})

	// The walk-through, one sh session; "### block N" marks where each
	// block's output starts.
	var script strings.Builder
	script.WriteString("set -e\ncurl() { command curl --fail-with-body --max-time 60 \"$@\"; }\n")
	for i, b := range blocks[1:] {
		fmt.Fprintf(&script, "echo; echo '### block %d'\n", i+1)
		for _, line := range b {
			line = strings.ReplaceAll(line, readmeURL, url)
			script.WriteString(strings.ReplaceAll(line, readmeCkpts, ckpts) + "\n")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", script.String())
	sh.Dir = dir
	out, err := sh.CombinedOutput()
	t.Logf("the walk-through's output:\n%s", out)
	if err != nil {
		t.Fatalf("the README's Hub walk-through failed: %v (logs in %s)", err, dir)
	}
	outputs := map[int]string{}
	for _, part := range strings.Split(string(out), "### block ")[1:] {
		var n int
		fmt.Sscanf(part, "%d", &n)
		outputs[n] = part
	}
	// Validate: valid, v1's plan with the tasks, the Agent fits.
	if o := outputs[1]; !strings.Contains(o, `"valid":true`) || !strings.Contains(o, `"tasks":[{"id":"gen-0","operator_id":"gen","subtask":0`) ||
		!strings.Contains(o, `"node_id":"n1"`) || !strings.Contains(o, `"compatible":true`) {
		t.Errorf("validate's answer: %s", o)
	}
	// Submit: stopped at generation 1, spec_json a string; the detail
	// has the plan and no attempts.
	if o := outputs[2]; !strings.Contains(o, `"spec_json":"{`) || !strings.Contains(o, `"desired_state":"stopped"`) ||
		!strings.Contains(o, `"observed_state":"validated"`) || !strings.Contains(o, `"tasks":[]`) {
		t.Errorf("submit and detail: %s", o)
	}
	// Running: the detail lists v1 task attempts.
	if o := outputs[3]; !strings.Contains(o, `"id":"gen-0:n1:2"`) || !strings.Contains(o, `"task_id":"gen-0","generation":2,"node_id":"n1","state":"running"`) {
		t.Errorf("running detail: %s", o)
	}

	job := func(id string) hubwire.JobDetail {
		st, body, ok := fleetGet(url+"/api/v1/jobs/"+id+"/detail", operator)
		if !ok || st != 200 {
			t.Fatalf("detail of %s: %d %s", id, st, body)
		}
		var d hubwire.JobDetail
		if err := json.Unmarshal(body, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	polltest.EventuallyWithin(t, fleetDeadline, "ticks stopped", func() bool {
		d := job("ticks")
		return d.Job.ObservedState == hubwire.JobStopped && d.Job.Convergence == hubwire.ConvergenceConverged
	})
	var cp, sp hubwire.JobCheckpointRecord
	polltest.EventuallyWithin(t, fleetDeadline, "the checkpoint and the named savepoint completed", func() bool {
		d := job("counts")
		cp, sp = hubwire.JobCheckpointRecord{}, hubwire.JobCheckpointRecord{}
		for _, c := range d.Checkpoints {
			switch {
			case c.Status == hubwire.CheckpointFailed:
				t.Fatalf("%s %s failed: %s", c.Kind, c.CheckpointID, c.Error)
			case c.Kind == hubwire.KindSavepoint && c.Status == hubwire.CheckpointCompleted:
				sp = c
			case c.Kind == hubwire.KindCheckpoint && c.Status == hubwire.CheckpointCompleted:
				cp = c
			}
		}
		return d.Job.ObservedState == hubwire.JobRunning && cp.CheckpointID != "" && sp.CheckpointID != ""
	})
	if sp.Name != "before-upgrade" || sp.ManifestURI != "counts/savepoints/before-upgrade/manifest.json" {
		t.Fatalf("the savepoint: %+v, want the README's name", sp)
	}
	if _, err := os.Stat(filepath.Join(ckpts, "counts", "savepoints", "before-upgrade", "manifest.json")); err != nil {
		t.Fatalf("the savepoint is not in the store: %v", err)
	}
}

// startReadmeProc starts bin in dir (the README's relative paths land
// there) with its output in dir/name.log, killed when the test ends.
func startReadmeProc(t *testing.T, dir, name string, env []string, bin string, args ...string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, append(os.Environ(), env...), f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(f.Name())
			t.Logf("%s's log:\n%s", name, b)
		}
	})
}
