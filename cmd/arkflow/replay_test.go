package main

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/arkflow-rs/arkflow-go/internal/opsrv/opsrvtest"
)

// replayMsg is the start of the INFO line a window operator logs once when
// a restart re-reads rows its restored state already holds.
const replayMsg = "window skips rows replayed after the restore"

// logRun is an `arkflow run --log-format json` child whose stderr is read
// as it comes: its JSON records, and channels closed when a record with a
// message starting with one of the watched prefixes arrives.
type logRun struct {
	cmd  *exec.Cmd
	done chan struct{} // stderr reached EOF

	mu      sync.Mutex
	recs    []map[string]any
	raw     strings.Builder
	watch   map[string]chan struct{}
	watched map[string]map[string]any // the first record of each prefix
}

func startLogRun(t *testing.T, dir string, stdout io.Writer, watch []string, args ...string) *logRun {
	t.Helper()
	cmd := cliCommand(dir, append([]string{"run", "--log-format", "json", "--data-dir", "data"}, args...)...)
	cmd.Stdout = stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &logRun{cmd: cmd, done: make(chan struct{}), watch: map[string]chan struct{}{}, watched: map[string]map[string]any{}}
	for _, w := range watch {
		r.watch[w] = make(chan struct{})
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			var rec map[string]any
			err := json.Unmarshal([]byte(line), &rec)
			r.mu.Lock()
			r.raw.WriteString(line + "\n")
			if err == nil {
				r.recs = append(r.recs, rec)
				msg, _ := rec["msg"].(string)
				for w, ch := range r.watch {
					if _, seen := r.watched[w]; !seen && strings.HasPrefix(msg, w) {
						r.watched[w] = rec
						close(ch)
					}
				}
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// wait waits for the child to exit (after its stderr ended) and returns
// its wait status.
func (r *logRun) wait() (syscall.WaitStatus, error) {
	<-r.done
	err := r.cmd.Wait()
	ws, _ := r.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ws, err
}

func (r *logRun) logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.raw.String()
}

// records returns the records whose level is one of levels and whose
// message starts with prefix.
func (r *logRun) records(prefix string, levels ...string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, rec := range r.recs {
		msg, _ := rec["msg"].(string)
		lvl, _ := rec["level"].(string)
		if strings.HasPrefix(msg, prefix) && (len(levels) == 0 || slices.Contains(levels, lvl)) {
			out = append(out, rec)
		}
	}
	return out
}

// exampleSpec writes examples/checkpointed-windows.yaml into dir as
// job.yaml, its checkpoints in dir instead of /tmp.
func exampleSpec(t *testing.T, dir string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "checkpointed-windows.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const uri = `"file:///tmp/arkflow-example/checkpoints"`
	if !strings.Contains(string(raw), uri) {
		t.Fatalf("the example no longer checkpoints to %s", uri)
	}
	spec := strings.Replace(string(raw), uri, `"file://`+filepath.Join(dir, "checkpoints")+`"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sumSeries sums a family's values whose labels include want.
func sumSeries(f *dto.MetricFamily, want map[string]string) (s float64) {
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		l := opsrvtest.Labels(m)
		for k, v := range want {
			if l[k] != v {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			s += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			s += m.GetGauge().GetValue()
		}
	}
	return s
}

// After a SIGKILL and a restore, the rows the restarted source reads again
// whose windows had already fired before the kill are replays, not late
// data: examples/checkpointed-windows.yaml killed mid-run (once a
// checkpoint committed) and started again writes the window results of an
// uninterrupted run, counts no late row, logs no warning, and counts the
// skipped replays in their own family with one INFO line for the window
// operator. Windows fired between the checkpoint and the kill may be
// written twice (the stdout sink is at-least-once), so results are
// compared by window; none may differ.
func TestRestartedExampleCountsReplaysNotLate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the example three times (about 25 s)")
	}
	dir := t.TempDir()

	// The reference: the example run once, to the end.
	refDir := filepath.Join(dir, "ref")
	os.MkdirAll(refDir, 0o755)
	exampleSpec(t, refDir)
	refOut, err := os.Create(filepath.Join(refDir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ref := startLogRun(t, refDir, refOut, nil, "job.yaml")
	if _, err := ref.wait(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, ref.logs())
	}
	refOut.Close()
	if w := ref.records("", "WARN", "ERROR"); len(w) > 0 {
		t.Fatalf("the uninterrupted run warned: %v", w)
	}
	if n := len(readLines(t, filepath.Join(refDir, "out.jsonl"))); n < 1000 {
		t.Fatalf("the uninterrupted run wrote only %d results", n)
	}

	// The same run, killed once its first checkpoint committed...
	runDir := filepath.Join(dir, "killed")
	os.MkdirAll(runDir, 0o755)
	exampleSpec(t, runDir)
	out, err := os.Create(filepath.Join(runDir, "out.jsonl")) // both runs append to it
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	first := startLogRun(t, runDir, out, []string{"checkpoint completed"}, "job.yaml")
	select {
	case <-first.watch["checkpoint completed"]:
		first.cmd.Process.Signal(syscall.SIGKILL)
	case <-first.done:
	}
	if ws, err := first.wait(); !ws.Signaled() {
		t.Fatalf("the first run ended before its kill (%v):\n%s", err, first.logs())
	}
	if w := first.records("", "WARN", "ERROR"); len(w) > 0 {
		t.Fatalf("the first run warned before its kill: %v", w)
	}

	// ...and started again: it restores the checkpoint and re-reads the
	// rows after its positions.
	second := startLogRun(t, runDir, out, []string{"metrics listening", replayMsg}, "--metrics-addr", "127.0.0.1:0", "job.yaml")
	var scraped map[string]*dto.MetricFamily
	select {
	case <-second.watch[replayMsg]:
		// The replays are behind: the counters as the job counts them
		// now (it runs on for seconds).
		second.mu.Lock()
		addr, _ := second.watched["metrics listening"]["addr"].(string)
		second.mu.Unlock()
		scraped, _ = opsrvtest.Scrape(t, "http://"+addr+"/metrics")
	case <-second.done:
	}
	if _, err := second.wait(); err != nil {
		t.Fatalf("restarted run: %v\n%s", err, second.logs())
	}
	if len(second.records("restoring", "INFO")) == 0 {
		t.Fatalf("the restarted run did not restore a checkpoint:\n%s", second.logs())
	}
	if w := second.records("", "WARN", "ERROR"); len(w) > 0 {
		t.Errorf("the restarted run warned (%d records), the first: %v", len(w), w[0])
	}
	if n := len(second.records(replayMsg, "INFO")); n != 1 {
		t.Errorf("%d INFO lines about replayed rows, want 1 for the one window operator:\n%s", n, second.logs())
	}
	if scraped != nil {
		late := sumSeries(scraped["arkflow_late_rows_total"], map[string]string{"operator": "per-second"})
		replayed := sumSeries(scraped["arkflow_replayed_skipped_rows_total"], map[string]string{"operator": "per-second"})
		if late != 0 || replayed == 0 {
			t.Errorf("after the replay: %v late rows, %v replayed rows skipped; want 0 and some", late, replayed)
		}
		t.Logf("the restart skipped %v replayed rows", replayed)
	}

	// The sums are float64: rows of one window arrive from two source
	// subtasks in an order that varies from run to run, so sums differ in
	// their last bits between any two runs; they are compared to 1e-9.
	wantRes := windowResults(t, readLines(t, filepath.Join(refDir, "out.jsonl")))
	got := readLines(t, filepath.Join(runDir, "out.jsonl"))
	seen := map[windowKey]bool{}
	for _, l := range got {
		k, r := windowResult(t, l)
		w, ok := wantRes[k]
		if !ok || w.clicks != r.clicks || math.Abs(w.spend-r.spend) > 1e-9*math.Abs(w.spend) {
			t.Fatalf("result %s; the uninterrupted run's: %+v (found %v)", l, w, ok)
		}
		seen[k] = true
	}
	for k := range wantRes {
		if !seen[k] {
			t.Fatalf("result %+v of the uninterrupted run is missing", k)
		}
	}
	t.Logf("%d window results as in the uninterrupted run; %d written twice", len(wantRes), len(got)-len(wantRes))
}

// windowKey and windowValue are a result line of the example's window.
type windowKey struct {
	User, Start, End string
	Update           bool
}

type windowValue struct {
	clicks int64
	spend  float64
}

func windowResult(t *testing.T, line string) (windowKey, windowValue) {
	t.Helper()
	var r struct {
		User   string  `json:"user"`
		Start  string  `json:"window_start"`
		End    string  `json:"window_end"`
		Clicks int64   `json:"clicks"`
		Spend  float64 `json:"spend"`
		Update bool    `json:"__arkflow_window_update"`
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil || r.User == "" || r.Start == "" {
		t.Fatalf("not a window result: %q (%v)", line, err)
	}
	return windowKey{r.User, r.Start, r.End, r.Update}, windowValue{r.Clicks, r.Spend}
}

// windowResults maps an uninterrupted run's results by window, each once.
func windowResults(t *testing.T, lines []string) map[windowKey]windowValue {
	t.Helper()
	out := map[windowKey]windowValue{}
	for _, l := range lines {
		k, v := windowResult(t, l)
		if _, dup := out[k]; dup {
			t.Fatalf("the uninterrupted run wrote %+v twice", k)
		}
		out[k] = v
	}
	return out
}
