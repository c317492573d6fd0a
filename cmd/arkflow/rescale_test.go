package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rescaleJobOf is a keyed running aggregate and a keyed event-time window
// over one rate-limited file source (4 partitions) with a WAL, Badger
// state and checkpoints, at the given parallelism. Rows of a partition are
// 160 ms apart, so a batch of 10 spans 1.44 s of event time, below the
// out-of-orderness: no row is ever late, whatever the parallelism and
// however batches interleave, and every run agrees on every window.
func rescaleJobOf(par int, storeURI, in, aggOut, winOut string, rate int) string {
	rateCfg := ""
	if rate > 0 {
		rateCfg = fmt.Sprintf(", rate_per_sec: %d", rate)
	}
	return fmt.Sprintf(`id: rescale
parallelism: %d
max_parallelism: 24
durability: {sync: group_commit}
state: {backend: badger}
checkpoint: {interval_ms: 400, retention: 2, object_store_uri: "%s"}
operators:
  - {id: in, kind: source}
  - {id: totals, kind: aggregate, key_field: user, config: {aggregates: [{function: count, as: n}, {function: sum, field: amount, as: total}]}}
  - id: per-second
    kind: window
    key_field: user
    config:
      window: {type: tumbling, size_ms: 1000}
      aggregates: [{function: count, as: n}, {function: sum, field: amount, as: total}]
  - {id: agg-out, kind: sink}
  - {id: win-out, kind: sink}
edges:
  - {id: a, from: in, to: totals, partitioned: true}
  - {id: b, from: in, to: per-second, partitioned: true}
  - {id: c, from: totals, to: agg-out}
  - {id: d, from: per-second, to: win-out}
sources:
  - operator_id: in
    input_type: file
    config: {path: %s, partitions: 4, batch_size: 10%s, schema: [{name: user, type: string}, {name: ts, type: int64}, {name: amount, type: int64}]}
    time:
      mode: event_time
      timestamp_field: ts
      watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 3000}
sinks:
  - {operator_id: agg-out, output_type: file, config: {path: %s}}
  - {operator_id: win-out, output_type: file, config: {path: %s}}
`, par, storeURI, in, rateCfg, aggOut, winOut)
}

// finalTotals reads the running aggregate's output: the last (largest)
// count and sum of every user. Both only grow, so the largest line of a
// key is its final result, however runs interleave their updates.
func finalTotals(t *testing.T, path string) map[string][2]int64 {
	t.Helper()
	out := map[string][2]int64{}
	for _, l := range readLinesUnsorted(t, path) {
		var r struct {
			User  string `json:"user"`
			N     int64  `json:"n"`
			Total int64  `json:"total"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: %q: %v", path, l, err)
		}
		if cur := out[r.User]; r.N > cur[0] || (r.N == cur[0] && r.Total > cur[1]) {
			out[r.User] = [2]int64{r.N, r.Total}
		}
	}
	return out
}

// The rescale proof: the job runs
// at parallelism 2, stops with a savepoint, and is restored from it at 3,
// then at 1, then at 4, each run reading further into the input. The
// savepoint of the run at 3 is taken while it runs and the process is
// then SIGKILLed, so its WAL and state went on past it. After the last run
// reaches the end of the input, every user's final count and sum, and the
// set of window results, equal those of one uninterrupted run: no key
// group's state lost, none applied twice.
func TestRescaleFromSavepoints(t *testing.T) {
	dir := t.TempDir()
	const rows = 4000
	var in strings.Builder
	for i := 0; i < rows; i++ {
		fmt.Fprintf(&in, "{\"user\":\"u%d\",\"ts\":%d,\"amount\":%d}\n", i%29, 1_700_000_000_000+int64(i)*40, i%100)
	}
	inPath := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(inPath, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(runDir string, par, rate int, args ...string) *execRun {
		spec := rescaleJobOf(par, "file://"+filepath.Join(runDir, "checkpoints"), inPath, filepath.Join(runDir, "agg.jsonl"), filepath.Join(runDir, "win.jsonl"), rate)
		if err := os.WriteFile(filepath.Join(runDir, "job.yaml"), []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		return startRun(t, runDir, append(append([]string{"run", "--data-dir", "data"}, args...), "job.yaml")...)
	}

	refDir := filepath.Join(dir, "ref")
	os.MkdirAll(refDir, 0o755)
	if r := run(refDir, 2, 0); r.wait() != nil {
		t.Fatalf("reference run: %v\n%s", r.err, r.stderr.String())
	}
	wantTotals := finalTotals(t, filepath.Join(refDir, "agg.jsonl"))
	wantWins := readLines(t, filepath.Join(refDir, "win.jsonl"))
	if len(wantTotals) != 29 || len(wantWins) < 29*100 {
		t.Fatalf("the reference has %d users and %d window results", len(wantTotals), len(wantWins))
	}

	runDir := filepath.Join(dir, "rescaled")
	os.MkdirAll(runDir, 0o755)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 16))
	linesIn := func() int { return countLines(filepath.Join(runDir, "agg.jsonl")) }
	// Each run reads for a while (at 300 rows a second per subtask),
	// then saves and stops.
	steps := []struct {
		par  int
		from string
		kill bool // savepoint through the control socket, then SIGKILL
	}{{2, "", false}, {3, "s1", true}, {1, "s2", false}}
	for i, st := range steps {
		name := fmt.Sprintf("s%d", i+1)
		args := []string{"--savepoint-on-stop", name}
		if st.kill {
			args = nil
		}
		if st.from != "" {
			args = append(args, "--from-savepoint", st.from)
		}
		before := linesIn()
		r := run(runDir, st.par, 300, args...)
		deadline := time.Now().Add(60 * time.Second)
		for linesIn() < before+50+rng.IntN(100) && time.Now().Before(deadline) && !r.exited() {
			time.Sleep(50 * time.Millisecond)
		}
		if r.exited() {
			t.Fatalf("run at parallelism %d ended early: %v\n%s", st.par, r.wait(), r.stderr.String())
		}
		if st.kill {
			if out, err := cliCommand(runDir, "savepoint", "--data-dir", "data", "--name", name, "job.yaml").CombinedOutput(); err != nil {
				t.Fatalf("savepoint at parallelism %d: %v\n%s", st.par, err, out)
			}
			// Past the savepoint before the kill.
			time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
			r.cmd.Process.Signal(syscall.SIGKILL)
			r.wait()
		} else {
			r.cmd.Process.Signal(syscall.SIGTERM)
			if err := r.wait(); err != nil {
				t.Fatalf("run at parallelism %d: %v\n%s", st.par, err, r.stderr.String())
			}
		}
		if st.from != "" && !strings.Contains(r.stderr.String(), "rescaling operator state") {
			t.Fatalf("the run at parallelism %d from %s did not rescale:\n%s", st.par, st.from, r.stderr.String())
		}
		os.WriteFile(filepath.Join(runDir, fmt.Sprintf("run-%d.log", i+1)), []byte(r.stderr.String()), 0o644)
	}
	last := run(runDir, 4, 0, "--from-savepoint", "s3")
	if err := last.wait(); err != nil {
		t.Fatalf("last run at parallelism 4: %v\n%s", err, last.stderr.String())
	}
	for _, want := range []string{"rescaling operator state", "redistributing the write-ahead log"} {
		if !strings.Contains(last.stderr.String(), want) {
			t.Errorf("the last run did not log %q:\n%s", want, last.stderr.String())
		}
	}
	gotTotals := finalTotals(t, filepath.Join(runDir, "agg.jsonl"))
	for u, w := range wantTotals {
		if g := gotTotals[u]; g != w {
			t.Errorf("user %s: final count and sum %v, want %v", u, g, w)
		}
	}
	got := readLines(t, filepath.Join(runDir, "win.jsonl"))
	missing, wrong := diffLines(wantWins, got)
	if len(missing) > 0 || len(wrong) > 0 {
		t.Fatalf("%d window results missing (first %v), %d not in the uninterrupted run (first %v)",
			len(missing), missing[:min(3, len(missing))], len(wrong), wrong[:min(3, len(wrong))])
	}
	t.Logf("2 → 3 → 1 → 4: %d users' totals and %d window results as in the uninterrupted run (%d window lines written, %d aggregate updates)",
		len(wantTotals), len(wantWins), len(got), countLines(filepath.Join(runDir, "agg.jsonl")))
}

// execRun is a started `arkflow` child process.
type execRun struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
	err    error
}

func startRun(t *testing.T, dir string, args ...string) *execRun {
	t.Helper()
	cmd := cliCommand(dir, args...)
	r := &execRun{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	return r
}

func (r *execRun) wait() error {
	<-r.done
	return r.err
}

func (r *execRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// dirSnapshot reads every file under dir (nil when it does not exist).
func dirSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// State cut with one max_parallelism is never restored
// into another. A start from a checkpoint or a savepoint with another one
// exits non-zero before it opens the state store, naming both values and
// the field; so does a start on the local store alone. The state
// directory, the WAL and the checkpoints are byte-identical afterwards.
func TestMaxParallelismChangeIsRefused(t *testing.T) {
	dir := t.TempDir()
	var in strings.Builder
	// Enough input that the first run, rate-limited, is still reading when
	// it is stopped.
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&in, "{\"user\":\"u%d\",\"ts\":%d,\"amount\":%d}\n", i%29, 1_700_000_000_000+int64(i)*40, i%100)
	}
	inPath := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(inPath, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := func(maxPar int, ckpt bool) string {
		s := rescaleJobOf(2, "file://"+filepath.Join(dir, "checkpoints"), inPath, filepath.Join(dir, "agg.jsonl"), filepath.Join(dir, "win.jsonl"), 0)
		s = strings.Replace(s, "max_parallelism: 24", fmt.Sprintf("max_parallelism: %d", maxPar), 1)
		if !ckpt {
			s = strings.Replace(s, "checkpoint: {", "# checkpoint: {", 1)
		}
		return s
	}
	start := func(spec string, args ...string) *execRun {
		if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		return startRun(t, dir, append(append([]string{"run", "--data-dir", "data"}, args...), "job.yaml")...)
	}
	runWith := func(spec string, args ...string) (int, string) {
		r := start(spec, args...)
		r.wait()
		return r.cmd.ProcessState.ExitCode(), r.stderr.String()
	}
	// A run that takes a checkpoint and stops.
	first := start(strings.Replace(spec(24, true), "batch_size: 10", "batch_size: 10, rate_per_sec: 100", 1))
	for countLines(filepath.Join(dir, "agg.jsonl")) < 20 && !first.exited() {
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := cliCommand(dir, "checkpoint", "--data-dir", "data", "job.yaml").CombinedOutput(); err != nil {
		t.Fatalf("checkpoint: %v\n%s", err, out)
	}
	first.cmd.Process.Signal(syscall.SIGTERM)
	if err := first.wait(); err != nil {
		t.Fatalf("first run: %v\n%s", err, first.stderr.String())
	}
	for _, c := range []struct {
		name string
		spec string
		args []string
		want []string
	}{
		{"the latest checkpoint", spec(7, true), nil, []string{"was cut with max_parallelism 24, and this job has max_parallelism 7", "set max_parallelism back to 24"}},
		{"the local store alone", spec(7, false), nil, []string{"max_parallelism: the state store in data/rescale/state was written with max_parallelism 24, and this job has max_parallelism 7"}},
		{"another parallelism on the local store alone", strings.Replace(spec(24, false), "parallelism: 2\n", "parallelism: 3\n", 1), nil,
			[]string{"parallelism: this start changes the parallelism of per-second from 2 to 3, totals from 2 to 3", "give the job a checkpoint block"}},
	} {
		before := dirSnapshot(t, dir)
		code, out := runWith(c.spec, c.args...)
		if code == 0 {
			t.Fatalf("%s: the start with another layout ran:\n%s", c.name, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the error does not say %q:\n%s", c.name, w, out)
			}
		}
		after := dirSnapshot(t, dir)
		delete(before, filepath.Join(dir, "job.yaml"))
		delete(after, filepath.Join(dir, "job.yaml"))
		var changed []string
		for p, b := range after {
			if before[p] != b {
				changed = append(changed, p)
			}
		}
		for p := range before {
			if _, ok := after[p]; !ok {
				changed = append(changed, p)
			}
		}
		if len(changed) > 0 {
			sort.Strings(changed)
			t.Errorf("%s: the refused start changed %v", c.name, changed)
		}
	}
}
