package arkflowtest_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/arkflowtest"
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
