package arkflowtest_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/arkflowtest"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// recTB records what a harness reports, fatal or not, and collects the
// cleanups it registers for the test to run (cleanup).
type recTB struct {
	testing.TB
	fatal    string
	errors   []string
	cleanups []func()
}

func (r *recTB) Helper() {}
func (r *recTB) Fatal(args ...any) {
	r.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recTB) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// run runs body on r's own goroutine (a fatal report ends it), then r's
// cleanups, last first, as the end of a test does.
func (r *recTB) run(body func(tb testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(r)
	}()
	<-done
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// refused runs body, which must fail the test it is given with a message
// containing want.
func refused(t *testing.T, what, want string, body func(tb testing.TB)) {
	t.Helper()
	r := &recTB{TB: t}
	r.run(body)
	if !strings.Contains(r.fatal, want) {
		t.Errorf("%s: reported %q, want it to contain %q", what, r.fatal, want)
	}
}

// Every harness call that cannot do what it says fails the test, saying
// why, instead of changing nothing.
func TestCannotApplyFails(t *testing.T) {
	tumbling := func(in *arkflowtest.Input[click], opts ...timeOpt) *arkflow.Builder {
		return counts(in, window.Tumbling(time.Second, job.Count("n")), arkflowtest.NewOutput[count](), opts...)
	}
	for _, c := range []struct {
		what, want string
		body       func(tb testing.TB)
	}{
		{"AdvanceWatermark after Stop", "AdvanceWatermark(1000): the job has ended (Stop)", func(tb testing.TB) {
			h := arkflowtest.New(tb, tumbling(arkflowtest.NewInput[click](1)))
			h.Stop()
			h.AdvanceWatermark(1000)
		}},
		{"AdvanceWatermark after Finish", "the job has ended (Finish)", func(tb testing.TB) {
			h := arkflowtest.New(tb, tumbling(arkflowtest.NewInput[click](1)))
			h.Finish()
			h.AdvanceWatermark(1000)
		}},
		{"AdvanceClock after Stop", "AdvanceClock(1s): the job has ended (Stop)", func(tb testing.TB) {
			h := arkflowtest.New(tb, tumbling(arkflowtest.NewInput[click](1), idle(time.Second)))
			h.Stop()
			h.AdvanceClock(time.Second)
		}},
		{"Snapshot after Stop", "Snapshot: the job has ended (Stop)", func(tb testing.TB) {
			h := arkflowtest.New(tb, tumbling(arkflowtest.NewInput[click](1)))
			h.Stop()
			h.Snapshot()
		}},
		{"State after Stop", `State("first", ann): the job has ended (Stop), so its state is closed`, func(tb testing.TB) {
			in := arkflowtest.NewInput[visit](1)
			h := arkflowtest.New(tb, firstVisitsJob(in, arkflowtest.NewOutput[visit]()))
			in.Push(0, visit{"ann", "home"})
			h.Stop()
			arkflowtest.Value(h, "first", "ann", visits)
		}},
		{"Finish after Stop", "its open windows did not fire", func(tb testing.TB) {
			in := arkflowtest.NewInput[click](1)
			h := arkflowtest.New(tb, tumbling(in))
			in.Push(0, click{"ann", 100})
			h.Stop()
			h.Finish()
		}},
		{"AdvanceClock with nothing on the clock", "nothing in the job follows the clock", func(tb testing.TB) {
			arkflowtest.New(tb, tumbling(arkflowtest.NewInput[click](1))).AdvanceClock(time.Second)
		}},
		{"Input.AdvanceWatermark without event time", "has no event time", func(tb testing.TB) {
			in := arkflowtest.NewInput[click](1)
			arkflowtest.New(tb, arkflow.NewJob("clicks").Source("in", in).KeyBy("user").
				Window("w", window.Tumbling(time.Second, job.Count("n"))).Sink("out", arkflowtest.NewOutput[count]()))
			in.AdvanceWatermark(1000)
		}},
		{"Input.AdvanceWatermark without event time, before New", "has no event time", func(tb testing.TB) {
			in := arkflowtest.NewInput[click](1)
			in.AdvanceWatermark(1000)
			arkflowtest.New(tb, arkflow.NewJob("clicks").Source("in", in).Sink("out", arkflowtest.NewOutput[click]()))
		}},
		{"Push without rows", "Push(0) without rows", func(tb testing.TB) {
			in := arkflowtest.NewInput[click](1)
			arkflowtest.New(tb, tumbling(in))
			in.Push(0)
		}},
		{"Counter of an operator the job lacks", `the job has no operator "window"`, func(tb testing.TB) {
			arkflowtest.New(tb, tumbling(arkflowtest.NewInput[click](1))).Counter("window", "windows_fired")
		}},
		{"Counter the operator does not keep", `operator "w" has no counter "window_fired" (it keeps late_dropped, late_routed, late_updated, null_timestamp_dropped, null_timestamp_routed, replayed_skipped, windows_fired)`, func(tb testing.TB) {
			arkflowtest.New(tb, tumbling(arkflowtest.NewInput[click](1))).Counter("w", "window_fired")
		}},
	} {
		refused(t, c.what, c.want, c.body)
	}
}

// What is pushed after a harness's job ended waits for the next harness
// of the builder, which reads it (at offsets from 0, as a new input's);
// pushes no harness reads fail the test when it ends.
func TestPushAfterStop(t *testing.T) {
	type row struct {
		User   string `arkflow:"user"`
		TS     int64  `arkflow:"ts"`
		Offset int64  `arkflow:"__meta_offset"`
	}
	in, out := arkflowtest.NewInput[click](1), arkflowtest.NewOutput[row]()
	b := arkflow.NewJob("pass").Source("in", in).Sink("out", out)
	h := arkflowtest.New(t, b)
	in.Push(0, click{"ann", 1}, click{"bob", 2})
	h.Stop()
	in.Push(0, click{"cid", 3})
	arkflowtest.New(t, b)
	in.Push(0, click{"dan", 4})
	expect(t, out.Rows(), "{cid 3 0}; {dan 4 1}")

	r := &recTB{TB: t}
	r.run(func(tb testing.TB) {
		in := arkflowtest.NewInput[click](1)
		h := arkflowtest.New(tb, arkflow.NewJob("pass").Source("in", in).Sink("out", arkflowtest.NewOutput[click]()))
		h.Stop()
		in.Push(0, click{"ann", 1})
	})
	if r.fatal != "" || len(r.errors) != 1 || !strings.Contains(r.errors[0], `input "in": 1 pushes (Push, AdvanceWatermark) came after its job ended and no harness read them`) {
		t.Fatalf("pushes never read: fatal %q, errors %q", r.fatal, r.errors)
	}
}
