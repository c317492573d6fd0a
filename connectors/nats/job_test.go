package nats

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/job"
)

// exactSpec is JetStream (two subjects, two consumers) → keyed running
// aggregate (count and sum per user, Badger state) → file, with
// checkpoints.
const exactSpec = `
id: nats-exact
state: {backend: badger}
checkpoint: {interval_ms: 300, retention: 3, object_store_uri: %[1]q}
operators:
  - {id: in, kind: source}
  - {id: totals, kind: aggregate, key_field: user, config: {aggregates: [{function: count, as: n}, {function: sum, field: amount, as: total}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: totals, partitioned: true}
  - {id: b, from: totals, to: out}
sources:
  - operator_id: in
    input_type: nats
    config:
      url: %[2]q
      mode: {type: jet_stream, stream: %[3]q, consumer_name: totals, subjects: [%[3]s.p0, %[3]s.p1]}
      schema: [{name: user, type: string}, {name: amount, type: int64}]
      batch_size: 16
sinks:
  - {operator_id: out, output_type: file, config: {path: %[4]q}}
`

// exactUsers is how many users the messages are dealt to.
const exactUsers = 7

// model is what the aggregate must hold after messages [0, n): message i
// is user u(i mod 7) with amount i, each counted once.
func model(n int) map[string][2]int64 {
	out := map[string][2]int64{}
	for i := 0; i < n; i++ {
		u := fmt.Sprintf("u%d", i%exactUsers)
		t := out[u]
		out[u] = [2]int64{t[0] + 1, t[1] + int64(i)}
	}
	return out
}

// publishRange publishes messages [from, to), alternating subjects.
func publishRange(t *testing.T, stream string, from, to int) {
	t.Helper()
	js := jsOf(t, conn(t))
	for i := from; i < to; i++ {
		body := fmt.Sprintf(`{"user":"u%d","amount":%d}`, i%exactUsers, i)
		publishJS(t, js, fmt.Sprintf("%s.p%d", stream, i%2), []byte(body))
	}
}

// totals reads the aggregate's updates in a file: the latest (largest)
// count and sum of each user. Counts only grow within a run, so the
// largest is the latest.
func totals(t *testing.T, path string) map[string][2]int64 {
	t.Helper()
	out := map[string][2]int64{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			User  string `json:"user"`
			N     int64  `json:"n"`
			Total int64  `json:"total"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		if cur := out[r.User]; r.N > cur[0] {
			out[r.User] = [2]int64{r.N, r.Total}
		}
	}
	return out
}

// waitTotals waits until the file's totals are the model's; a count above
// the model's (a message counted twice) fails at once.
func waitTotals(t *testing.T, path string, want map[string][2]int64, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := totals(t, path)
		for u, g := range got {
			if g[0] > want[u][0] {
				t.Fatalf("%s: user %s counted %d messages (sum %d), the model %d (sum %d): messages were counted twice", what, u, g[0], g[1], want[u][0], want[u][1])
			}
		}
		if fmt.Sprint(sorted(got)) == fmt.Sprint(sorted(want)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: totals %v\nwant %v", what, sorted(got), sorted(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sorted(m map[string][2]int64) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%d/%d", k, v[0], v[1]))
	}
	sort.Strings(out)
	return out
}

// startJob runs the spec and returns a function that stops it gracefully.
func startJob(t *testing.T, spec string, opts ...arkflow.Option) (*arkflow.Job, func()) {
	t.Helper()
	s, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	j, err := arkflow.FromSpec(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := j.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return j, stop
}

// JetStream exactness across restarts: every message is counted once in
// the keyed state, whichever way a job comes back.
//
//   - Run 1 counts A, takes a savepoint, counts B (acknowledging it, so
//     the consumers' ack floors pass B) and stops.
//   - Run 2 starts from the savepoint: its state holds A only, and the
//     consumers are reset below their ack floors to the savepoint's
//     positions, so B is read again and counted once; then C.
//   - Run 3 restarts from the latest checkpoint and its local state;
//     then D.
//
// Each run writes its own file, whose totals must reach the model of
// what the run's state should hold, and never pass it.
func TestJetStreamExactAcrossRestarts(t *testing.T) {
	stream, _ := newStream(t, nil)
	dir := t.TempDir()
	store := "file://" + filepath.Join(dir, "checkpoints")
	spec := func(out string) string {
		return fmt.Sprintf(exactSpec, store, serverURL(t), stream, filepath.Join(dir, out))
	}
	data := arkflow.WithDataDir(filepath.Join(dir, "data"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	publishRange(t, stream, 0, 300) // A
	j, stop := startJob(t, spec("run1.jsonl"), data)
	waitTotals(t, filepath.Join(dir, "run1.jsonl"), model(300), "run 1 after A")
	if err := j.Savepoint(ctx, "after-a"); err != nil {
		t.Fatal(err)
	}
	publishRange(t, stream, 300, 500) // B
	waitTotals(t, filepath.Join(dir, "run1.jsonl"), model(500), "run 1 after B")
	stop()

	_, stop = startJob(t, spec("run2.jsonl"), data, arkflow.WithSavepoint("after-a"))
	waitTotals(t, filepath.Join(dir, "run2.jsonl"), model(500), "run 2 (from the savepoint after A) after reading B again")
	publishRange(t, stream, 500, 600) // C
	waitTotals(t, filepath.Join(dir, "run2.jsonl"), model(600), "run 2 after C")
	stop()

	_, stop = startJob(t, spec("run3.jsonl"), data)
	publishRange(t, stream, 600, 700) // D
	waitTotals(t, filepath.Join(dir, "run3.jsonl"), model(700), "run 3 (restarted) after D")
	stop()
}
