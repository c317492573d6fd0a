package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// drainJob reads in.jsonl slowly into a per-second count and, beside it,
// copies every row read to read.jsonl, so the test knows what was read.
// Its batches cross window boundaries: advance per_row keeps their rows
// (the default would drop some as late).
func drainJob(dir string) string {
	return `id: drainer
operators:
  - {id: in, kind: source}
  - {id: w, kind: window, stateful: true, key_field: user,
     config: {window: {type: tumbling, size_ms: 1000}, aggregates: [{function: count, as: n}]}}
  - {id: win, kind: sink}
  - {id: read, kind: sink}
edges:
  - {id: a, from: in, to: w, partitioned: true}
  - {id: b, from: w, to: win}
  - {id: c, from: in, to: read}
sources:
  - operator_id: in
    input_type: file
    config: {path: "` + filepath.Join(dir, "in.jsonl") + `", schema: [{name: user, type: string}, {name: ts, type: int64}], batch_size: 7, rate_per_sec: 700}
    time: {mode: event_time, timestamp_field: ts, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 0, advance: per_row}}
sinks:
  - {operator_id: win, output_type: file, config: {path: "` + filepath.Join(dir, "win.jsonl") + `"}}
  - {operator_id: read, output_type: file, config: {path: "` + filepath.Join(dir, "read.jsonl") + `"}}
`
}

// --drain-on-stop: SIGTERM drains the job, so every row read
// is in a window written before the process exits; without the flag the
// window open at the signal is not written.
func TestRunDrainOnStop(t *testing.T) {
	var in strings.Builder
	for i := 0; i < 20_000; i++ {
		fmt.Fprintf(&in, "{\"user\":\"u\",\"ts\":%d}\n", i*10) // 100 rows a window
	}
	for _, drain := range []bool{false, true} {
		t.Run(fmt.Sprintf("drain=%v", drain), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(drainJob(dir)), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"run", "--data-dir", "data", "job.yaml"}
			if drain {
				args = append(args, "--drain-on-stop")
			}
			r := startRun(t, dir, args...)
			deadline := time.Now().Add(60 * time.Second)
			for countLines(filepath.Join(dir, "read.jsonl")) < 150 && time.Now().Before(deadline) && !r.exited() {
				time.Sleep(10 * time.Millisecond)
			}
			if r.exited() {
				t.Fatalf("the run ended before the signal: %v\n%s", r.wait(), r.stderr.String())
			}
			r.cmd.Process.Signal(syscall.SIGTERM)
			if err := r.wait(); err != nil {
				t.Fatalf("run: %v\n%s", err, r.stderr.String())
			}
			read := countLines(filepath.Join(dir, "read.jsonl"))
			counted := 0
			for _, l := range readLines(t, filepath.Join(dir, "win.jsonl")) {
				var row struct{ N int }
				if err := json.Unmarshal([]byte(l), &row); err != nil {
					t.Fatalf("window row %q: %v", l, err)
				}
				counted += row.N
			}
			switch {
			case drain && counted != read:
				t.Fatalf("drained: the windows count %d rows, %d were read\n%s", counted, read, r.stderr.String())
			case !drain && counted >= read:
				t.Fatalf("stopped: the windows count %d rows of %d read; the open window was written", counted, read)
			}
			if drain != strings.Contains(r.stderr.String(), "signal received: draining") {
				t.Errorf("the log does not say what the signal does:\n%s", r.stderr.String())
			}
		})
	}
}
