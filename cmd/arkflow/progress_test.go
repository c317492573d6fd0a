package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/vbauerster/mpb/v8"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

// progressSpec is a bounded generate source (12 000 rows at 6 000 rows/s
// in batches of 500: about 2 s) into event-time windows whose jittered
// timestamps make some rows late, written to stdout.
const progressSpec = `id: progress
operators:
  - {id: in, kind: source}
  - id: per-10s
    kind: window
    stateful: true
    key_field: user
    config:
      window: {type: tumbling, size_ms: 10000}
      aggregates: [{function: count, as: n}]
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: per-10s, partitioned: true}
  - {id: b, from: per-10s, to: out}
sources:
  - operator_id: in
    input_type: generate
    config:
      seed: 7
      count: 12000
      batch_size: 500
      rate_per_sec: 6000
      fields:
        - {name: user, type: string, cardinality: 3}
        - {name: ts, type: timestamp, unit: ms, step_ms: 10, jitter_ms: 150}
    time:
      mode: event_time
      timestamp_field: ts
      watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 100}
sinks:
  - {operator_id: out, output_type: stdout}
`

// ansi matches the terminal control sequences mpb writes (cursor up,
// erase down).
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// terminal is the CLI's stderr on a pseudo-terminal: what it wrote, with
// the control sequences and carriage returns taken out.
type terminal struct {
	mu   sync.Mutex
	raw  bytes.Buffer
	done chan struct{}
}

func (tm *terminal) text() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return strings.ReplaceAll(ansi.ReplaceAllString(tm.raw.String(), ""), "\r", "")
}

// startOnPTY starts cmd with its stderr on a new 200×40 pseudo-terminal
// and its stdout in the returned buffer, or on the terminal too.
func startOnPTY(t *testing.T, cmd *exec.Cmd, stdoutToo bool) (*terminal, *bytes.Buffer) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 200}); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if stdoutToo {
		cmd.Stdout = tty
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds it now: reads end (EIO) when it exits
	tm := &terminal{done: make(chan struct{})}
	go func() {
		defer close(tm.done)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			tm.mu.Lock()
			tm.raw.Write(buf[:n])
			tm.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return tm, &stdout
}

// waitCLI waits for cmd to exit 0 and for its terminal output to be read.
func waitCLI(t *testing.T, cmd *exec.Cmd, tm *terminal) {
	t.Helper()
	err := cmd.Wait()
	select {
	case <-tm.done:
	case <-time.After(10 * time.Second):
		t.Error("terminal output did not end after the CLI exited")
	}
	if err != nil {
		t.Fatalf("arkflow run: %v\nterminal:\n%s", err, tm.text())
	}
}

func writeSpec(t *testing.T, dir, spec string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(lines)
	return lines
}

// progressLine is the source's final line: the bar, the whole input read,
// the run's rate, the watermark at the end, and the late rows counted by
// the window downstream.
var progressLine = regexp.MustCompile(`(?m)^in-0 +\[=+\] 12,000 of 12,000 rows +avg [0-9,]+ rows/s +wm end +late ([0-9,]+)$`)

// liveLine is a line drawn while the job ran: its rate over the last
// seconds, and a position short of the end.
var liveLine = regexp.MustCompile(`(?m)^in-0 +\[[=>-]+\] ([0-9,]+) of 12,000 rows +[0-9,]+ rows/s`)

// `arkflow run` with stderr on a terminal draws a live line per source:
// rows/s while it runs, position of end, watermark and late rows; the final
// line stays. Its stdout, the job's output, is the same as without a terminal
// and holds nothing of the progress lines.
func TestRunProgressOnTerminal(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, progressSpec)

	cmd := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
	tm, stdout := startOnPTY(t, cmd, false)
	waitCLI(t, cmd, tm)
	text := tm.text()
	final := progressLine.FindStringSubmatch(text)
	if final == nil {
		t.Fatalf("no final progress line like %q on the terminal:\n%s", progressLine, text)
	}
	if late, _ := strconv.Atoi(strings.ReplaceAll(final[1], ",", "")); late == 0 {
		t.Errorf("the final line counts no late rows; 150 ms of jitter past 100 ms of out-of-orderness makes some:\n%s", final[0])
	}
	var live []string
	for _, m := range liveLine.FindAllStringSubmatch(text, -1) {
		if m[1] != "12,000" {
			live = append(live, m[1])
		}
	}
	if len(live) == 0 {
		t.Errorf("no live line (rows/s, a position short of the end) while the job ran:\n%s", text)
	}
	if !strings.Contains(text, `msg="job running"`) || !strings.Contains(text, `msg="job stopped"`) {
		t.Errorf("the log lines are missing from the terminal:\n%s", text)
	}
	for _, l := range strings.Split(text, "\n") {
		// A log line is whole: never drawn over by a progress line.
		if i := strings.Index(l, "time="); i > 0 {
			t.Errorf("a log line shares its line with something else: %q", l)
		}
	}
	if strings.Contains(stdout.String(), "rows/s") || strings.Contains(stdout.String(), "\x1b") {
		t.Errorf("progress on stdout:\n%s", stdout.String())
	}

	// Not a terminal: the same output, no progress.
	plain := cliCommand(dir, "run", "--data-dir", "data2", "job.yaml")
	var plainOut, plainErr bytes.Buffer
	plain.Stdout, plain.Stderr = &plainOut, &plainErr
	if err := plain.Run(); err != nil {
		t.Fatalf("arkflow run, stderr not a terminal: %v\n%s", err, plainErr.String())
	}
	if strings.Contains(plainErr.String(), "rows/s") || strings.Contains(plainErr.String(), "\x1b[") {
		t.Errorf("progress with stderr not a terminal:\n%s", plainErr.String())
	}
	if got, want := sortedLines(plainOut.String()), sortedLines(stdout.String()); strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) < 3 {
		t.Errorf("stdout differs with stderr on a terminal (%d lines) and not (%d lines):\n%s\n---\n%s", len(want), len(got), stdout.String(), plainOut.String())
	}

	// --quiet on a terminal: the logs, no progress.
	quiet := cliCommand(dir, "run", "--quiet", "--data-dir", "data3", "job.yaml")
	qtm, qout := startOnPTY(t, quiet, false)
	waitCLI(t, quiet, qtm)
	if qtext := qtm.text(); strings.Contains(qtext, "rows/s") || !strings.Contains(qtext, `msg="job stopped"`) {
		t.Errorf("--quiet on a terminal: want the logs and no progress, got:\n%s", qtext)
	}
	if got, want := sortedLines(qout.String()), sortedLines(stdout.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout differs with --quiet:\n%s\n---\n%s", stdout.String(), qout.String())
	}

	// A stdout sink on the same terminal: its rows, no progress drawn
	// through them.
	shared := cliCommand(dir, "run", "--data-dir", "data4", "job.yaml")
	stm, _ := startOnPTY(t, shared, true)
	waitCLI(t, shared, stm)
	if stext := stm.text(); strings.Contains(stext, "rows/s") || !strings.Contains(stext, strings.TrimSpace(strings.SplitN(stdout.String(), "\n", 2)[0])) {
		t.Errorf("stdout sink on the terminal: want its rows and no progress, got:\n%s", stext)
	}
}

// progressRestoreSpec is a keyed count in which every row is a new key (id is the
// row's offset), checkpointed every 200 ms to a local directory.
func progressRestoreSpec(dir string) string {
	return `id: restore
parallelism: 2
state: {backend: memory}
checkpoint: {interval_ms: 200, object_store_uri: "file://` + filepath.Join(dir, "store") + `"}
operators:
  - {id: in, kind: source, parallelism: 1}
  - {id: count, kind: aggregate, stateful: true, key_field: id, config: {aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: count, partitioned: true}
  - {id: b, from: count, to: out}
sources:
  - {operator_id: in, input_type: generate, config: {batch_size: 2000, rate_per_sec: 100000, fields: [{name: id, type: int64, sequence: true}]}}
sinks:
  - {operator_id: out, output_type: drop}
`
}

// latestStateBytes is the state size of the checkpoint LATEST names in a
// file:// store, 0 when there is none yet.
func latestStateBytes(storeDir, jobID string) int64 {
	raw, err := os.ReadFile(filepath.Join(storeDir, jobID, "checkpoints", "LATEST"))
	if err != nil {
		return 0
	}
	id, err := ckptstore.ParseID(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0
	}
	body, err := os.ReadFile(filepath.Join(storeDir, jobID, "checkpoints", id.String(), "manifest.json"))
	if err != nil {
		return 0
	}
	m, err := ckptstore.DecodeManifest(body)
	if err != nil {
		return 0
	}
	var n int64
	for _, s := range m.StateSnapshots {
		n += s.Bytes
	}
	return n
}

// restoredLine is what the restore bar leaves: the checkpoint, bytes of
// the total, keys and snapshots.
var restoredLine = regexp.MustCompile(`(?m)^restored checkpoint \S+: ([0-9.]+ [KMG]?i?B) of ([0-9.]+ [KMG]?i?B), ([0-9,]+) keys, 2 of 2 snapshots$`)

// logTime is the time of the first (or last) log line on the terminal
// that contains what.
func logTime(t *testing.T, text, what string, last bool) time.Time {
	t.Helper()
	var at time.Time
	for _, l := range strings.Split(text, "\n") {
		if !strings.Contains(l, what) || !strings.HasPrefix(l, "time=") {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, strings.Fields(strings.TrimPrefix(l, "time="))[0])
		if err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		at = ts
		if !last {
			break
		}
	}
	if at.IsZero() {
		t.Fatalf("no log line with %s:\n%s", what, text)
	}
	return at
}

// restoringLine is the restore bar while it runs.
var restoringLine = regexp.MustCompile(`(?m)^restoring state +\[[=>-]+\] [0-9.]+ [KMG]?i?B of [0-9.]+ [KMG]?i?B, [0-9,]+ keys, [0-2] of 2 snapshots`)

// A restart on a terminal shows the restore: a bar of bytes and keys
// restored of the total while it runs, then a line of what it restored.
func TestRunProgressRestore(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, progressRestoreSpec(dir))

	// A first run checkpoints some 100 000 keys, then stops.
	first := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for latestStateBytes(filepath.Join(dir, "store"), "restore") < 1<<20 {
		if time.Now().After(deadline) {
			_ = first.Process.Kill()
			_ = first.Wait()
			t.Fatalf("no checkpoint of 1 MiB of state within a minute:\n%s", firstErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first run: %v\n%s", err, firstErr.String())
	}

	// The restart, on a terminal, restores it; it is stopped once the
	// restore is reported.
	second := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
	tm, _ := startOnPTY(t, second, false)
	deadline = time.Now().Add(60 * time.Second)
	for !restoredLine.MatchString(tm.text()) {
		if time.Now().After(deadline) {
			_ = second.Process.Kill()
			_ = second.Wait()
			t.Fatalf("no restored line within a minute:\n%s", tm.text())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitCLI(t, second, tm)
	text := tm.text()
	m := restoredLine.FindStringSubmatch(text)
	if m[1] != m[2] {
		t.Errorf("restored %s of %s: want all of it\n%s", m[1], m[2], m[0])
	}
	if keys, _ := strconv.Atoi(strings.ReplaceAll(m[3], ",", "")); keys < 1000 {
		t.Errorf("restored %d keys; the checkpoint holds 1 MiB of one-row keys\n%s", keys, m[0])
	}
	// The bar was drawn while the state came in, unless that was over
	// before the view could see it (a read every 40 ms, a redraw every
	// 80 ms): the logs time it.
	took := logTime(t, text, `msg=restoring`, false).Sub(logTime(t, text, `msg="restore progress"`, true))
	switch bar := restoringLine.FindString(text); {
	case bar != "":
		t.Logf("restore bar drawn: %s", bar)
	case -took > 4*progressStartingEvery:
		t.Errorf("the restore took %s and no restore bar was drawn:\n%s", -took, text)
	default:
		t.Logf("the restore took %s, too quick for the bar to be drawn", -took)
	}
	// The live source line follows it.
	if !regexp.MustCompile(`(?m)^in-0 +[0-9,]+ rows `).MatchString(text) {
		t.Errorf("no source line after the restore:\n%s", text)
	}
}

// With more than progressMaxTaskLines source tasks each source operator
// gets one line, its tasks summed: rows, position of end (here in bytes,
// with the rows read too), the rate over the window, the lowest watermark
// and the late rows of the operators downstream of it only.
func TestProgressLinePerOperator(t *testing.T) {
	spec, err := job.Parse([]byte(`id: wide
operators:
  - {id: in, kind: source, parallelism: 10}
  - {id: agg, kind: aggregate, key_field: k, config: {aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
  - {id: other, kind: source}
  - {id: agg2, kind: aggregate, key_field: k, config: {aggregates: [{function: count, as: n}]}}
  - {id: out2, kind: sink}
edges:
  - {id: a, from: in, to: agg, partitioned: true}
  - {id: b, from: agg, to: out}
  - {id: c, from: other, to: agg2, partitioned: true}
  - {id: d, from: agg2, to: out2}
sources:
  - {operator_id: in, input_type: generate, config: {partitions: 10, fields: [{name: k, type: string}]}}
  - {operator_id: other, input_type: generate, config: {fields: [{name: k, type: string}]}}
sinks:
  - {operator_id: out, output_type: drop}
  - {operator_id: out2, output_type: drop}
`))
	if err != nil {
		t.Fatal(err)
	}
	j, err := arkflow.FromSpec(spec, arkflow.WithDataDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	p := mpb.New(mpb.WithOutput(io.Discard))
	defer p.Shutdown()
	v := newProgressView(j, p)
	var names []string
	for _, l := range v.sources {
		names = append(names, l.name)
	}
	if strings.Join(names, ",") != "in ×10,other ×1" {
		t.Fatalf("lines %q, want one per source operator", names)
	}
	tasks := func(rows int64) map[string]runtime.TaskMetrics {
		m := map[string]runtime.TaskMetrics{
			"agg-0":  {Task: "agg-0", Operator: "agg", Counters: map[string]int64{windowop.MetricLateDropped: 3, windowop.MetricLateRouted: 2}},
			"agg2-0": {Task: "agg2-0", Operator: "agg2", Counters: map[string]int64{windowop.MetricLateDropped: 7}},
		}
		for i := range 10 {
			id := "in-" + strconv.Itoa(i)
			wm := int64(1_700_000_000_000) + int64(i)
			if i == 3 {
				wm = math.MaxInt64 // ended
			}
			m[id] = runtime.TaskMetrics{Task: id, Operator: "in", RowsIn: rows, Watermark: wm,
				Gauges: map[string]int64{runtime.GaugeSourcePosition + "bytes": 1024, runtime.GaugeSourceEnd + "bytes": 2048}}
		}
		return m
	}
	in := v.sources[0]
	t0 := time.Now()
	text, frac := v.sourceText(in, tasks(100), t0, false)
	if want := "10 KiB of 20 KiB  1,000 rows  - rows/s  wm 2023-11-14T22:13:20.000Z  late 5"; text != want || frac != 0.5 {
		t.Errorf("first line %q (%v), want %q (0.5)", text, frac, want)
	}
	text, _ = v.sourceText(in, tasks(300), t0.Add(2*time.Second), false)
	if want := "10 KiB of 20 KiB  3,000 rows  1,000 rows/s  wm 2023-11-14T22:13:20.000Z  late 5"; text != want {
		t.Errorf("two seconds later %q, want %q", text, want)
	}
}
