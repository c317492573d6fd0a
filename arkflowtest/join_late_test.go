package arkflowtest_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/arkflowtest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// A join whose left source routes late rows (RouteLate) sends them, with
// their columns as they came, to the late sink, and does not join them;
// the right source drops its own late rows. The right side is pushed
// first, so the join's watermark (the lower of both sides') is far ahead
// when the left rows come: the ones behind it are late, the others pair.
func TestJoinRoutesLateRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		join job.Join
	}{
		{"window", job.Join{Type: job.JoinWindow, Size: time.Second}},
		{"interval", job.Join{Type: job.JoinInterval, Lower: -time.Second, Upper: time.Second}},
		{"temporal", job.Join{Type: job.JoinTemporal}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := tc.join
			j.Left, j.LeftKey, j.Right, j.RightKey, j.Outer = "left", "k", "right", "k", true
			left, right := arkflowtest.NewInput[leftRow](1), arkflowtest.NewInput[rightRow](1)
			late := arkflowtest.NewOutput[leftRow]()
			out := arkflowtest.NewOutput[joined]()
			h := arkflowtest.New(t, arkflow.NewJob("late").
				Source("left", left, arkflow.EventTime{Field: "ts", RouteLate: "late"}).
				Source("right", right, arkflow.EventTime{Field: "ts"}).
				Join("j", j).
				Sink("out", out).
				LateSink("late", late))
			right.Push(0, rightRow{K: "a", RV: 1, TS: 10_000}, rightRow{K: "a", RV: 2, TS: 20_000})
			left.Push(0, leftRow{K: "a", LV: 1, TS: 20_000}, leftRow{K: "a", LV: 2, TS: 5_000}, leftRow{K: "a", LV: 3, TS: 20_500})
			right.Push(0, rightRow{K: "a", RV: 3, TS: 1_000}) // late on the right: dropped
			h.AdvanceWatermark(1 << 40)
			routed := late.Rows()
			if len(routed) != 1 || routed[0] != (leftRow{K: "a", LV: 2, TS: 5_000}) {
				t.Errorf("the late sink got %v, want the left row at 5000 as it came", routed)
			}
			var lvs []int64
			for _, r := range out.Rows() {
				lvs = append(lvs, r.LV)
				if r.RV != nil && *r.RV == 3 {
					t.Errorf("the late right row was joined: %v", r)
				}
			}
			slices.Sort(lvs)
			if slices.Contains(lvs, 2) || !slices.Contains(lvs, 1) || !slices.Contains(lvs, 3) {
				t.Errorf("joined left rows %v, want 1 and 3 and not the late 2 (%v)", lvs, fmt.Sprint(out.Rows()))
			}
			if n := h.Counter("j", "late_routed"); n != 1 {
				t.Errorf("late_routed = %d, want 1", n)
			}
			if n := h.Counter("j", "late_dropped"); n != 1 {
				t.Errorf("late_dropped = %d, want 1 (the right row)", n)
			}
		})
	}
}
