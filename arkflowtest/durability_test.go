package arkflowtest_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/arkflowtest"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// windowSteps is a deterministic input for a tumbling count of 1 s: step k
// pushes a few batches whose rows all lie in [k s, k+1 s), spread over the
// partitions, so that no row is late and only the watermark advance at the
// end of the step closes window k.
func windowSteps(steps, partitions int) [][]pushed {
	users := []string{"ann", "bob", "cid"}
	x := uint32(7)
	next := func(n int) int { // a fixed linear congruential sequence
		x = x*1664525 + 1013904223
		return int(x>>16) % n
	}
	out := make([][]pushed, steps)
	for k := range out {
		for b := 0; b < 2+next(3); b++ {
			p := pushed{partition: next(partitions)}
			ts := int64(k*1000 + next(500))
			for r := 0; r < 1+next(4); r++ {
				p.rows = append(p.rows, click{users[next(len(users))], ts})
				ts += int64(next(100)) // in order within the batch
			}
			out[k] = append(out[k], p)
		}
	}
	return out
}

type pushed struct {
	partition int
	rows      []click
}

// windowCounts is the reference: per step, the sorted results of window
// k, counted by a loop over the rows pushed in that step.
func windowCounts(steps [][]pushed) [][]string {
	out := make([][]string, len(steps))
	for k, step := range steps {
		n := map[string]int{}
		for _, p := range step {
			for _, r := range p.rows {
				n[r.User]++
			}
		}
		for u, c := range n {
			out[k] = append(out[k], fmt.Sprintf("%s[%d,%d)=%d", u, k*1000, (k+1)*1000, c))
		}
		sort.Strings(out[k])
	}
	return out
}

// runSteps pushes each step to in, advances the harness's watermark to
// the step's end and returns the sorted rows out received for it.
func runSteps(h *arkflowtest.Harness, in *arkflowtest.Input[click], out *arkflowtest.Output[count], steps [][]pushed) [][]string {
	return runStepsFrom(h, in, out, steps, 0)
}

// runStepsFrom is runSteps for steps that start with step first.
func runStepsFrom(h *arkflowtest.Harness, in *arkflowtest.Input[click], out *arkflowtest.Output[count], steps [][]pushed, first int) [][]string {
	got := make([][]string, len(steps))
	for k, step := range steps {
		for _, p := range step {
			in.Push(p.partition, p.rows...)
		}
		h.AdvanceWatermark(int64(first+k+1) * 1000)
		for _, r := range out.Take() {
			got[k] = append(got[k], r.String())
		}
		sort.Strings(got[k])
	}
	return got
}

func sameSteps(t *testing.T, what string, got, want [][]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: windows per watermark step\n got: %v\nwant: %v", what, got, want)
	}
}

// The harness's watermark advances reach the job through a source's
// write-ahead log as they do without one: with Durable (on the source or
// job-wide), the same windows fire at the same advances, with the same
// counts, as a loop over the pushed rows says.
func TestAdvanceWatermarkDurable(t *testing.T) {
	steps := windowSteps(6, 2)
	want := windowCounts(steps)
	for _, c := range []struct {
		name string
		job  func(*arkflowtest.Input[click], *arkflowtest.Output[count]) *arkflow.Builder
	}{
		{"plain", func(in *arkflowtest.Input[click], out *arkflowtest.Output[count]) *arkflow.Builder {
			return counts(in, window.Tumbling(time.Second, job.Count("n")), out)
		}},
		{"durable source", func(in *arkflowtest.Input[click], out *arkflowtest.Output[count]) *arkflow.Builder {
			return arkflow.NewJob("clicks").Source("in", in, eventTime("ts"), arkflow.Durable(job.Durability{Sync: job.SyncAlways})).
				KeyBy("user").Window("w", window.Tumbling(time.Second, job.Count("n"))).Sink("out", out)
		}},
		{"durable job, parallelism 2", func(in *arkflowtest.Input[click], out *arkflowtest.Output[count]) *arkflow.Builder {
			return counts(in, window.Tumbling(time.Second, job.Count("n")), out).Durability(job.Durability{}).Parallelism(2)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, out := arkflowtest.NewInput[click](2), arkflowtest.NewOutput[count]()
			h := arkflowtest.New(t, c.job(in, out))
			sameSteps(t, c.name, runSteps(h, in, out, steps), want)
			if n := h.Counter("w", "windows_fired"); n != int64(countRows(want)) {
				t.Fatalf("windows_fired = %d, want %d", n, countRows(want))
			}
			in.Push(1, click{"ann", 99_500})
			h.Finish() // the final watermark passes the WAL too
			expect(t, out.Take(), "ann[99000,100000)=1")
		})
	}
}

func countRows(steps [][]string) int {
	n := 0
	for _, s := range steps {
		n += len(s)
	}
	return n
}

// Snapshot and Restore work on a job whose source has a write-ahead log:
// the restored job fires the windows the snapshot held open with the rows
// pushed before and after it, as the reference counts them, both when the
// restore reuses the job's builder and when it starts a new one.
func TestSnapshotRestoreDurable(t *testing.T) {
	steps := windowSteps(4, 2)
	want := windowCounts(steps)
	durableJob := func(in *arkflowtest.Input[click], out *arkflowtest.Output[count]) *arkflow.Builder {
		return counts(in, window.Tumbling(time.Second, job.Count("n")), out).Durability(job.Durability{})
	}
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("same builder %v", same), func(t *testing.T) {
			in, out := arkflowtest.NewInput[click](2), arkflowtest.NewOutput[count]()
			b := durableJob(in, out)
			h := arkflowtest.New(t, b)
			got := runSteps(h, in, out, steps[:2])
			// Half of step 2 before the snapshot, half after.
			half := len(steps[2]) / 2
			for _, p := range steps[2][:half] {
				in.Push(p.partition, p.rows...)
			}
			snap := h.Snapshot()
			h.Stop()
			if !same {
				in, out = arkflowtest.NewInput[click](2), arkflowtest.NewOutput[count]()
				b = durableJob(in, out)
			}
			h = arkflowtest.Restore(t, b, snap)
			out.Take() // what the first job wrote
			rest := append([][]pushed{steps[2][half:]}, steps[3:]...)
			got = append(got, runStepsFrom(h, in, out, rest, 2)...)
			sameSteps(t, "restored", got, want)
		})
	}
}
