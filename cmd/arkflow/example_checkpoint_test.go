package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const checkpointExample = "../../examples/checkpointed-windows.yaml"

// The checkpointed-windows example does what its comment says: it
// validates, and killed with SIGKILL after its first checkpoint and run
// again with the same command, it restores the checkpoint and its window
// distinct window results (every window's count; the sums of floats
// depend on the order rows meet in) are an uninterrupted run's (R-CKPT-1,
// R-CKPT-4).
func TestExampleCheckpointedWindows(t *testing.T) {
	if code, out, errOut := runCLI("validate", checkpointExample); code != 0 || !strings.HasPrefix(out, "ok: job checkpointed-windows") {
		t.Fatalf("validate exit %d\n%s%s", code, out, errOut)
	}
	raw, err := os.ReadFile(checkpointExample)
	if err != nil {
		t.Fatal(err)
	}
	// Its own checkpoint directory, and a third of the rows (10 s at the
	// example's rate would make a slow test).
	spec := func(dir string) []byte {
		s := string(raw)
		for _, r := range [][2]string{
			{"file:///tmp/arkflow-example/checkpoints", "file://" + filepath.Join(dir, "checkpoints")},
			{"count: 100000", "count: 30000"},
		} {
			if !strings.Contains(s, r[0]) {
				t.Fatalf("the example no longer contains %q", r[0])
			}
			s = strings.ReplaceAll(s, r[0], r[1])
		}
		return []byte(s)
	}
	spend := regexp.MustCompile(`"spend":[^,]*,`)
	results := func(out string) []string {
		var rs []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l != "" {
				rs = append(rs, spend.ReplaceAllString(l, ""))
			}
		}
		slices.Sort(rs)
		return rs
	}
	run := func(dir string, kill bool) (stdout, stderr string) {
		cmd := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if kill {
			latest := filepath.Join(dir, "checkpoints", "checkpointed-windows", "checkpoints", "LATEST")
			eventuallyFile(t, latest)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			return o.String(), e.String()
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run: %v\n%s", err, e.String())
			}
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Fatalf("the example did not finish\n%s", e.String())
		}
		return o.String(), e.String()
	}

	refDir, killDir := t.TempDir(), t.TempDir()
	for _, d := range []string{refDir, killDir} {
		if err := os.WriteFile(filepath.Join(d, "job.yaml"), spec(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refOut, _ := run(refDir, false)
	want := results(refOut)
	if len(want) < 20*10 {
		t.Fatalf("the uninterrupted run printed %d windows", len(want))
	}
	first, _ := run(killDir, true)
	second, log := run(killDir, false)
	if !strings.Contains(log, "msg=restoring") {
		t.Fatalf("the second run restored no checkpoint:\n%s", log)
	}
	got := results(first + second)
	// A window fired between the sink's write and its acknowledgement
	// when the kill came is printed again.
	t.Logf("%d windows printed twice", len(got)-len(slices.Compact(slices.Clone(got))))
	if got = slices.Compact(got); !slices.Equal(got, want) {
		t.Fatalf("killed and restarted: %d distinct windows, the uninterrupted run %d; they differ", len(got), len(want))
	}
}
