package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/harness"
	"github.com/arkflow-rs/arkflow-go/internal/opsrv/opsrvtest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// restoringReason is /readyz's reason while the restore runs.
var restoringReason = regexp.MustCompile(`^restoring the checkpoint's state: \d+ of [1-9]\d* bytes, \d+ keys$`)

// restoreKeys is how many distinct keys the checkpoint of
// TestRunReadyzWhileRestoring holds at least: the 1 M.
const restoreKeys = 1_000_000

// restoreSpec is a keyed count over a generated sequence (every row a new
// key) with a checkpoint block on a local directory store; rate 0 reads
// as fast as the job goes.
func restoreSpec(dir string, rate int) string {
	return fmt.Sprintf(`id: restored
parallelism: 2
state: {backend: memory}
checkpoint: {interval_ms: 3600000, object_store_uri: "file://%s"}
operators:
  - {id: in, kind: source, parallelism: 1}
  - {id: count, kind: aggregate, stateful: true, key_field: id, config: {aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: count, partitioned: true}
  - {id: b, from: count, to: out}
sources:
  - {operator_id: in, input_type: generate, config: {partitions: 1, batch_size: 8192, rate_per_sec: %d, fields: [{name: id, type: int64, sequence: true}]}}
sinks:
  - {operator_id: out, output_type: drop}
`, filepath.Join(dir, "store"), rate)
}

// checkpointKeys runs the job of restoreSpec in this process until its
// keyed count has taken in at least keys rows, then drains it: the
// drain's final checkpoint holds every key read. It returns the number
// of rows (keys) in it.
func checkpointKeys(t *testing.T, dir string, keys int64) int64 {
	t.Helper()
	spec, err := job.Parse([]byte(restoreSpec(dir, 0)))
	if err != nil {
		t.Fatal(err)
	}
	j, err := arkflow.FromSpec(spec, arkflow.WithDataDir(filepath.Join(dir, "data")))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	rt := harness.RuntimeOf(j)
	rowsIn := func() int64 {
		var n int64
		for _, m := range rt.Metrics() {
			if m.Operator == "count" {
				n += m.RowsIn
			}
		}
		return n
	}
	for rowsIn() < keys {
		select {
		case err := <-done:
			t.Fatalf("the job ended before %d rows: %v", keys, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := j.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c := checkpoints(j)
	if c.Completed != 1 {
		t.Fatalf("the drain committed %d checkpoints: %+v", c.Completed, c)
	}
	return rowsIn()
}

// `arkflow run --metrics-addr` restoring a checkpoint of 1 M keys: its
// /readyz answers 503 saying that it restores, with the bytes restored of
// the total, while the restore runs, and 200 once the job runs. The
// metrics server listens before the restore begins, and the
// test polls /readyz as fast as it answers (a poll takes about a
// millisecond, the restore seconds), asserting nothing about time.
//
// Building the checkpoint takes about 30 s and the restore about 25 s
// under -race on two busy cores (a third of that without); -short uses
// 100 k keys.
func TestRunReadyzWhileRestoring(t *testing.T) {
	dir := t.TempDir()
	want := int64(restoreKeys)
	if testing.Short() {
		want = restoreKeys / 10
	}
	start := time.Now()
	keys := checkpointKeys(t, dir, want)
	t.Logf("checkpoint of %d keys in %v", keys, time.Since(start))

	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(restoreSpec(dir, 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	cmd, stderr, base := startMetricsCLI(t, dir)
	defer cmd.Process.Kill()
	var restoring, polls int
	var last string
	for {
		code, body := opsrvtest.Get(t, base+"/readyz")
		polls++
		var r struct {
			Ready         bool
			State, Reason string
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("/readyz: %d %v: %s", code, err, body)
		}
		if code == http.StatusOK {
			if !r.Ready || r.State != "running" {
				t.Fatalf("/readyz 200: %s", body)
			}
			break
		}
		if code != http.StatusServiceUnavailable || r.Ready {
			t.Fatalf("/readyz: %d %s", code, body)
		}
		if strings.HasPrefix(r.Reason, "restoring") {
			if !restoringReason.MatchString(r.Reason) || r.State != "starting" {
				t.Fatalf("/readyz while restoring: %s", body)
			}
			restoring++
			last = r.Reason
		}
		if cmd.ProcessState != nil {
			t.Fatalf("run ended:\n%s", stderr.String())
		}
	}
	t.Logf("ready after %v: %d polls, %d said restoring; the last: %s", time.Since(start), polls, restoring, last)
	if restoring == 0 {
		t.Errorf("/readyz never said it was restoring in %d polls:\n%s", polls, stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "restore progress") {
		t.Errorf("no restore in the log:\n%s", stderr.String())
	}
}
