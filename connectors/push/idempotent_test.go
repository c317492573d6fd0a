package push_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
)

// order is a row with an idempotency key of its own.
type order struct {
	ID     string
	User   string
	Amount int64
}

func orderID(o order) string { return o.ID }

// idemJob runs a job that passes the orders of in to out, with a WAL in
// dir (and checkpoints, when ckpt), at parallelism par.
func idemJob(t *testing.T, in *push.Source[order], out *collector[order], dir string, par int, ckpt bool) (*arkflow.Job, chan error) {
	t.Helper()
	b := arkflow.NewJob("orders").Parallelism(par).
		Source("orders", in, arkflow.Durable(job.Durability{})).
		Sink("out", out.sink())
	if ckpt {
		b = b.Checkpoint(job.Checkpoint{IntervalMS: 3_600_000, ObjectStoreURI: "file://" + dir + "/store"})
	}
	return startJob(t, b, arkflow.WithDataDir(dir))
}

func stopJob(t *testing.T, j *arkflow.Job, done chan error) {
	t.Helper()
	if err := j.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// countIDs counts the rows of each ID the sink got.
func countIDs(rows []order) map[string]int {
	n := map[string]int{}
	for _, r := range rows {
		n[r.ID]++
	}
	return n
}

// Calls of several rows, with retries of earlier calls, repeats within a
// call and rows without a key, in a random mix: every row whose key was
// pushed before (or earlier in its call) is acknowledged as a duplicate,
// the others enter, and the sink gets each key once and every keyless
// row. The model is a plain set of the keys pushed so far.
func TestPushDedupSkipsSeenKeys(t *testing.T) {
	in := push.New(push.Config[order]{IdempotencyKey: orderID, Partitions: 3, PartitionKey: func(o order) string { return o.User }})
	var out collector[order]
	j, done := idemJob(t, in, &out, t.TempDir(), 2, false)
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	seen := map[string]bool{}
	var sent []order // every row pushed, duplicates included
	keyless := 0
	for call := range 300 {
		rows := make([]order, 1+rng.IntN(5))
		for i := range rows {
			switch {
			case rng.IntN(10) == 0:
				rows[i] = order{User: "anon", Amount: 1} // no key
			case len(sent) > 0 && rng.IntN(3) == 0:
				rows[i] = sent[rng.IntN(len(sent))] // a retry
			default:
				rows[i] = order{ID: fmt.Sprintf("o%d-%d", call, i), User: fmt.Sprint("u", rng.IntN(7)), Amount: int64(call)}
			}
		}
		wantDups := 0
		for _, r := range rows {
			if r.ID == "" {
				keyless++
			} else if seen[r.ID] {
				wantDups++
			}
			if r.ID != "" {
				seen[r.ID] = true
			}
		}
		dups, err := in.PushDedup(ctx, rows...)
		if err != nil {
			t.Fatal(err)
		}
		if dups != wantDups {
			t.Fatalf("call %d (%v): %d duplicates, want %d", call, rows, dups, wantDups)
		}
		sent = append(sent, rows...)
	}
	stopJob(t, j, done)
	got := countIDs(out.get())
	if got[""] != keyless {
		t.Errorf("%d rows without a key reached the sink, want all %d", got[""], keyless)
	}
	delete(got, "")
	for id, n := range got {
		if n != 1 || !seen[id] {
			t.Errorf("key %s reached the sink %d times", id, n)
		}
	}
	if len(got) != len(seen) {
		t.Errorf("%d keys reached the sink, want %d", len(got), len(seen))
	}
}

// Retries that race (the same keys pushed by many goroutines at once)
// enter the job once: each key reaches the sink once, and of the pushes of
// a key all but one are acknowledged as duplicates.
func TestPushDedupRacingRetries(t *testing.T) {
	in := push.New(push.Config[order]{IdempotencyKey: orderID, Partitions: 2, PartitionKey: func(o order) string { return o.ID }})
	var out collector[order]
	j, done := idemJob(t, in, &out, t.TempDir(), 2, false)
	const keys, racers = 200, 8
	var mu sync.Mutex
	dups := map[string]int{}
	var wg sync.WaitGroup
	for g := range racers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for _, k := range rng.Perm(keys) {
				o := order{ID: fmt.Sprint("k", k), Amount: 1}
				d, err := in.PushDedup(context.Background(), o)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				dups[o.ID] += d
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	stopJob(t, j, done)
	got := countIDs(out.get())
	for k := range keys {
		id := fmt.Sprint("k", k)
		if got[id] != 1 || dups[id] != racers-1 {
			t.Errorf("%s: reached the sink %d times, %d of %d pushes acknowledged as duplicates; want once and %d", id, got[id], dups[id], racers, racers-1)
		}
	}
}

// A push that fails takes nothing, so its keys are not seen: rows refused
// because the job stopped, or for a bad row, enter when pushed again.
func TestPushDedupFailedPushLeavesKeysFree(t *testing.T) {
	type timed struct {
		ID string
		TS time.Time
	}
	in := push.New(push.Config[timed]{IdempotencyKey: func(r timed) string { return r.ID }})
	var out collector[timed]
	dir := t.TempDir()
	start := func() (*arkflow.Job, chan error) {
		return startJob(t, arkflow.NewJob("timed").
			Source("in", in, arkflow.Durable(job.Durability{}), arkflow.EventTime{Field: "TS"}).
			Sink("out", out.sink()), arkflow.WithDataDir(dir))
	}
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	j, done := start()
	// A zero event time refuses the call whole: "a" is not seen.
	if err := in.Push(ctx, timed{"a", t0}, timed{"b", time.Time{}}); err == nil || !strings.Contains(err.Error(), "zero time.Time") {
		t.Fatalf("push of a row without an event time: %v, want it refused", err)
	}
	if d, err := in.PushDedup(ctx, timed{"a", t0}); err != nil || d != 0 {
		t.Fatalf("push of a after a refused call: %d duplicates, %v; want 0, nil", d, err)
	}
	stopJob(t, j, done)
	// The job stopped: nothing taken, "c" is not seen.
	if err := in.Push(ctx, timed{"c", t0}); !errors.Is(err, push.ErrStopped) {
		t.Fatalf("push after the stop: %v, want ErrStopped", err)
	}
	j, done = start()
	// Until the new run connects, pushes fail as after the stop.
	d, err := in.PushDedup(ctx, timed{"c", t0}, timed{"a", t0})
	for errors.Is(err, push.ErrStopped) {
		time.Sleep(time.Millisecond)
		d, err = in.PushDedup(ctx, timed{"c", t0}, timed{"a", t0})
	}
	if err != nil || d != 1 {
		t.Fatalf("push of c and a after a restart: %d duplicates, %v; want 1 (a), nil", d, err)
	}
	stopJob(t, j, done)
	if got := countIDs(slicesMap(out.get(), func(r timed) order { return order{ID: r.ID} })); !maps.Equal(got, map[string]int{"a": 1, "c": 1}) {
		t.Fatalf("the sink got %v, want a and c once each", got)
	}
}

// idCount is a running count of the rows of one ID.
type idCount struct {
	ID    string
	Count int64
}

// The keys seen survive the process: a new Source on the same data
// directory, as after a restart of the service, takes every key pushed
// before for a duplicate, and the running count of every key ends at 1.
// With and without checkpoints (a held WAL), and across changes of
// parallelism (the logs are redistributed and the keys' file goes with
// them).
func TestPushDedupAcrossRestarts(t *testing.T) {
	for _, tc := range []struct {
		name string
		ckpt bool
		pars []int
	}{{"wal", false, []int{1, 1, 1}}, {"checkpoints", true, []int{1, 1, 1}}, {"rescaled", true, []int{1, 3, 2}}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var out collector[idCount]
			var pushed []order
			for run, par := range tc.pars {
				in := push.New(push.Config[order]{IdempotencyKey: orderID, Partitions: 3, PartitionKey: orderID})
				b := arkflow.NewJob("orders").Parallelism(par).
					// Small segments: the WAL lets go of the rows of
					// earlier runs, whose keys then live in the keys' file.
					Source("orders", in, arkflow.Durable(job.Durability{SegmentBytes: 4096})).
					KeyBy("ID").Aggregate("count", job.Running(job.Count("Count"))).
					Sink("out", out.sink())
				if tc.ckpt {
					b = b.Checkpoint(job.Checkpoint{IntervalMS: 3_600_000, ObjectStoreURI: "file://" + dir + "/store"})
				}
				j, done := startJob(t, b, arkflow.WithDataDir(dir))
				ctx := context.Background()
				// Everything pushed in earlier runs again: all duplicates.
				if len(pushed) > 0 {
					if d, err := in.PushDedup(ctx, pushed...); err != nil || d != len(pushed) {
						t.Fatalf("run %d: pushing the %d rows of earlier runs again: %d duplicates, %v", run, len(pushed), d, err)
					}
				}
				for i := range 20 {
					o := order{ID: fmt.Sprintf("r%d-%d", run, i), Amount: int64(i)}
					if err := in.Push(ctx, o); err != nil {
						t.Fatal(err)
					}
					pushed = append(pushed, o)
				}
				if tc.ckpt {
					if _, err := j.Checkpoint(ctx); err != nil {
						t.Fatal(err)
					}
				}
				stopJob(t, j, done)
			}
			count := map[string]int64{}
			for _, r := range out.get() {
				count[r.ID] = max(count[r.ID], r.Count)
			}
			for _, o := range pushed {
				if count[o.ID] != 1 {
					t.Errorf("%s counted %d times, want once", o.ID, count[o.ID])
				}
			}
		})
	}
}

// Idempotency needs the WAL: without Durable, Build refuses the job,
// naming the source, the option and the field.
func TestPushDedupNeedsDurable(t *testing.T) {
	in := push.New(push.Config[order]{IdempotencyKey: orderID})
	var out collector[order]
	_, err := arkflow.NewJob("orders").Source("orders", in).Sink("out", out.sink()).Build()
	var verrs job.ValidationErrors
	if !errors.As(err, &verrs) || len(verrs) != 1 || verrs[0].Operator != "orders" ||
		!strings.Contains(err.Error(), "Config.IdempotencyKey") || !strings.Contains(err.Error(), "arkflow.Durable") {
		t.Fatalf("Build without a WAL: %v, want one validation error of operator orders naming Config.IdempotencyKey and arkflow.Durable", err)
	}
	if err := push.New(push.Config[order]{IdempotencyKey: orderID, IdempotencyRetention: -1}).Push(context.Background(), order{ID: "x"}); err == nil || !strings.Contains(err.Error(), "IdempotencyRetention") {
		t.Fatalf("Push with a negative retention: %v, want an error naming IdempotencyRetention", err)
	}
}

func slicesMap[A, B any](in []A, f func(A) B) []B {
	out := make([]B, len(in))
	for i, a := range in {
		out[i] = f(a)
	}
	return out
}
