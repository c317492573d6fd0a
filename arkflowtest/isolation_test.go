package arkflowtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/arkflowtest"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// prodJob is a job as production code configures it: checkpoints, Badger
// state and a write-ahead log at fixed places under base.
func prodJob(in *arkflowtest.Input[click], out *arkflowtest.Output[count], base string) *arkflow.Builder {
	return arkflow.NewJob("clicks").
		Source("in", in, eventTime("ts"), arkflow.Durable(job.Durability{Path: filepath.Join(base, "wal-src")})).
		KeyBy("user").Window("w", window.Tumbling(time.Second, job.Count("n"))).Sink("out", out).
		Durability(job.Durability{Path: filepath.Join(base, "wal")}).
		State(job.State{Backend: job.BackendBadger, Path: filepath.Join(base, "state")}).
		Checkpoint(job.Checkpoint{ObjectStoreURI: (&url.URL{Scheme: "file", Path: filepath.Join(base, "checkpoints")}).String(), IntervalMS: 3_600_000})
}

// isolatedBody is one test's body over a harness of b: the windows of the
// first steps, a snapshot and a checkpoint on the way (artifacts a second
// run must not find), and a last step left open when the test ends.
func isolatedBody(t *testing.T, b *arkflow.Builder, in *arkflowtest.Input[click], out *arkflowtest.Output[count], steps [][]pushed) [][]string {
	h := arkflowtest.New(t, b)
	got := runSteps(h, in, out, steps[:2])
	h.Snapshot()
	got = append(got, runStepsFrom(h, in, out, steps[2:len(steps)-1], 2)...)
	if _, err := h.Job().Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, p := range steps[len(steps)-1] { // held in an open window at the end
		in.Push(p.partition, p.rows...)
	}
	return got
}

// A test run twice in a row over a job whose spec names its checkpoint
// store, state and WAL directories gives the same windows both times, as
// the reference counts them: each harness works in directories of its
// own, and nothing is written where the spec says.
func TestRunTwiceIsolated(t *testing.T) {
	steps := windowSteps(5, 2)
	want := windowCounts(steps[:len(steps)-1])
	base := t.TempDir()
	for _, run := range []string{"first", "second"} {
		t.Run(run, func(t *testing.T) {
			in, out := arkflowtest.NewInput[click](2), arkflowtest.NewOutput[count]()
			sameSteps(t, run+" run", isolatedBody(t, prodJob(in, out, base), in, out, steps), want)
		})
	}
	var written []string
	filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if p != base {
			written = append(written, p)
		}
		return err
	})
	if len(written) > 0 {
		t.Fatalf("the harnesses wrote where the spec says: %v", written)
	}
}

// Two harnesses over one shared Builder, one after the other, give the
// same windows: the second neither restores the first's checkpoints or
// state nor reads what was pushed to the first; each test's rows are its
// own, Outputs included.
func TestSharedBuilderSequential(t *testing.T) {
	steps := windowSteps(5, 2)
	want := windowCounts(steps[:len(steps)-1])
	in, out := arkflowtest.NewInput[click](2), arkflowtest.NewOutput[count]()
	b := prodJob(in, out, t.TempDir())
	for _, run := range []string{"first", "second"} {
		t.Run(run, func(t *testing.T) {
			sameSteps(t, run+" run", isolatedBody(t, b, in, out, steps), want)
		})
	}
}

// Two harnesses over one shared Builder at once, whose source is not an
// Input (a bounded memory source, which several jobs may read) and whose
// spec names fixed directories: neither takes the other's state, WAL or
// checkpoints, and each fires every window the reference counts.
func TestSharedBuilderAtOnce(t *testing.T) {
	steps := windowSteps(4, 1)
	var want []string
	for _, w := range windowCounts(steps) {
		want = append(want, w...)
	}
	var batches []arrow.RecordBatch
	for _, step := range steps {
		for _, p := range step {
			rec, err := arkflow.Encode(p.rows)
			if err != nil {
				t.Fatal(err)
			}
			batches = append(batches, rec)
		}
	}
	src, err := memory.NewSourceFrom(batches)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	sink := funcsink.Func[count](func(_ context.Context, rows []count) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rows {
			got = append(got, r.String())
		}
		return nil
	})
	base := t.TempDir()
	b := arkflow.NewJob("clicks").
		Source("in", src, eventTime("ts"), arkflow.Durable(job.Durability{Path: filepath.Join(base, "wal")})).
		KeyBy("user").Window("w", window.Tumbling(time.Second, job.Count("n"))).Sink("out", sink).
		State(job.State{Backend: job.BackendBadger, Path: filepath.Join(base, "state")}).
		Checkpoint(job.Checkpoint{ObjectStoreURI: (&url.URL{Scheme: "file", Path: filepath.Join(base, "checkpoints")}).String(), IntervalMS: 3_600_000})
	before, _ := json.Marshal(b.Spec())
	t.Run("together", func(t *testing.T) {
		for _, name := range []string{"a", "b"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				h := arkflowtest.New(t, b)
				h.Finish() // the source is bounded: its end fires every window
				if n := h.Counter("w", "windows_fired"); n != int64(len(want)) {
					t.Fatalf("windows_fired = %d, want %d", n, len(want))
				}
			})
		}
	})
	both := append(append([]string(nil), want...), want...)
	sort.Strings(both)
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(both) {
		t.Fatalf("the two jobs wrote\n got: %v\nwant: %v (each window twice)", got, both)
	}
	if after, _ := json.Marshal(b.Spec()); string(after) != string(before) {
		t.Fatalf("the builder's spec changed\nbefore: %s\n after: %s", before, after)
	}
	if entries, _ := os.ReadDir(base); len(entries) > 0 {
		t.Fatalf("the harnesses wrote where the spec says: %v", entries)
	}
}

// A WAL the spec keeps in an object store is kept in the harness's own
// directory instead: the harness never talks to the bucket.
func TestObjectStoreWALIsLocal(t *testing.T) {
	steps := windowSteps(3, 2)
	in, out := arkflowtest.NewInput[click](2), arkflowtest.NewOutput[count]()
	bucket := &job.WALBackend{Type: job.WALBackendObjectStore, NodeID: "node-1",
		S3: &job.WALObjectStore{Bucket: "wal", Endpoint: "http://127.0.0.1:1", AllowHTTP: true, AccessKeyID: "k", SecretAccessKey: "s"}}
	b := counts(in, window.Tumbling(time.Second, job.Count("n")), out).Durability(job.Durability{Backend: bucket})
	h := arkflowtest.New(t, b)
	sameSteps(t, "object-store WAL", runSteps(h, in, out, steps), windowCounts(steps))
	for _, tm := range h.Job().Metrics().Tasks {
		if tm.Operator == "in" && tm.Gauges["wal_last"] == 0 {
			t.Fatalf("source task %s appended nothing to a WAL: gauges %v", tm.Task, tm.Gauges)
		}
	}
}
