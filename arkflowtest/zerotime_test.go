package arkflowtest_test

import (
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/arkflowtest"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// goVisit has a Go time as its event time.
type goVisit struct {
	User string    `arkflow:"user"`
	At   time.Time `arkflow:"at"`
}

// goVisitNoTime is how a sink reads a goVisit whose time is null.
type goVisitNoTime struct {
	User string     `arkflow:"user"`
	At   *time.Time `arkflow:"at"`
}

// A pushed zero time.Time is a row without an event time: the job
// counts it as one (null_timestamp_dropped), never as a year-1 row that
// is late for every window; with route, the late sink gets it with a
// null time.
func TestZeroTimeIsNoEventTime(t *testing.T) {
	t0 := time.UnixMilli(0).UTC()
	t.Run("drop", func(t *testing.T) {
		in, out := arkflowtest.NewInput[goVisit](1), arkflowtest.NewOutput[count]()
		h := arkflowtest.New(t, arkflow.NewJob("visits").Source("in", in, arkflow.EventTime{Field: "at"}).
			KeyBy("user").Window("w", window.Tumbling(time.Second, job.Count("n"))).Sink("out", out))
		in.Push(0, goVisit{"ann", t0.Add(100 * time.Millisecond)}, goVisit{"bob", time.Time{}}, goVisit{"ann", t0.Add(200 * time.Millisecond)})
		h.AdvanceWatermark(1000)
		expect(t, out.Take(), "ann[0,1000)=2")
		if n := h.Counter("w", "null_timestamp_dropped"); n != 1 {
			t.Errorf("null_timestamp_dropped = %d, want 1", n)
		}
		if n := h.Counter("w", "late_dropped"); n != 0 {
			t.Errorf("late_dropped = %d, want 0: a row without a time is not late", n)
		}
	})
	t.Run("route", func(t *testing.T) {
		in, out, late := arkflowtest.NewInput[goVisit](1), arkflowtest.NewOutput[count](), arkflowtest.NewOutput[goVisitNoTime]()
		arkflowtest.New(t, arkflow.NewJob("visits").Source("in", in, arkflow.EventTime{Field: "at", RouteLate: "late"}).
			KeyBy("user").Window("w", window.Tumbling(time.Second, job.Count("n"))).Sink("out", out).LateSink("late", late))
		in.Push(0, goVisit{"ann", t0.Add(100 * time.Millisecond)}, goVisit{"bob", time.Time{}})
		rows := late.Rows()
		if len(rows) != 1 || rows[0].User != "bob" || rows[0].At != nil {
			t.Fatalf("late sink got %+v, want bob with a null time", rows)
		}
	})
}
