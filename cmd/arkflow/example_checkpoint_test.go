package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/arkflow-rs/arkflow-go/internal/opsrv/opsrvtest"
)

const checkpointExample = "../../examples/checkpointed-windows.yaml"

// replayMsg is the start of the INFO line a window operator logs once when
// a restart re-reads rows its restored state already holds.
const replayMsg = "window skips rows replayed after the restore"

// The checkpointed-windows example does what its comment says: it
// validates, and killed with SIGKILL after its first checkpoint and run
// again with the same command, it restores the checkpoint and writes the
// window results of an uninterrupted run; windows
// fired between the checkpoint and the kill may be written twice (the
// stdout sink is at-least-once), so results are compared by window. The
// rows the restarted run reads again whose windows fired before the kill
// are replays, not late data: it counts no
// late row, logs no warning, and counts them in their own family with one
// INFO line for the window operator.
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
	refDir, killDir := t.TempDir(), t.TempDir()
	for _, d := range []string{refDir, killDir} {
		if err := os.WriteFile(filepath.Join(d, "job.yaml"), spec(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	output := func(dir string) *os.File {
		f, err := os.OpenFile(filepath.Join(dir, "out.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}

	// The reference: the example run once, to the end.
	ref := startLogRun(t, refDir, output(refDir), nil, "job.yaml")
	if _, err := ref.wait(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, ref.logs())
	}
	if w := ref.records("", "WARN", "ERROR"); len(w) > 0 {
		t.Fatalf("the uninterrupted run warned: %v", w)
	}
	want := windowResults(t, readLines(t, filepath.Join(refDir, "out.jsonl")))
	if len(want) < 20*10 {
		t.Fatalf("the uninterrupted run wrote %d windows", len(want))
	}

	// The same run, killed once its first checkpoint committed...
	first := startLogRun(t, killDir, output(killDir), []string{"checkpoint completed"}, "job.yaml")
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

	// ...and started again: it restores the checkpoint and reads again
	// the rows after its positions, some of windows that fired before.
	second := startLogRun(t, killDir, output(killDir), []string{"metrics listening", replayMsg}, "--metrics-addr", "127.0.0.1:0", "job.yaml")
	var scraped map[string]*dto.MetricFamily
	select {
	case <-second.watch[replayMsg]:
		// The replay is behind: the counters as the job has them now
		// (it runs on for a second or more).
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
	// Every late row would be in a warning: the first at once, the rest
	// within 10 s or when the window closes.
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
	got := readLines(t, filepath.Join(killDir, "out.jsonl"))
	seen := map[windowKey]bool{}
	for _, l := range got {
		k, r := windowResult(t, l)
		w, ok := want[k]
		if !ok || w.clicks != r.clicks || math.Abs(w.spend-r.spend) > 1e-9*math.Abs(w.spend) {
			t.Fatalf("result %s; the uninterrupted run's: %+v (found %v)", l, w, ok)
		}
		seen[k] = true
	}
	for k := range want {
		if !seen[k] {
			t.Fatalf("result %+v of the uninterrupted run is missing", k)
		}
	}
	t.Logf("%d window results as in the uninterrupted run; %d written twice", len(want), len(got)-len(want))
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
