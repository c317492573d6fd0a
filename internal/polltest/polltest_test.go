package polltest

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// Eventually returns once cond holds, polling it again after each sleep,
// and sees a change made by another goroutine.
func TestEventuallyReturnsOnceCondHolds(t *testing.T) {
	t.Parallel()
	var calls int
	Eventually(t, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
	var set atomic.Bool
	go func() { time.Sleep(20 * time.Millisecond); set.Store(true) }()
	Eventually(t, "the flag", set.Load, func() string { return "never called" })
}

// fatalTB records what Fatalf was told and stops its goroutine there, as
// testing.T's Fatalf does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// EventuallyWithin polls until its own deadline, not Deadline, and then
// fails with what it awaited and each explanation on a line of its own;
// a cond that holds returns at once.
func TestEventuallyWithinFailsAfterItsDeadline(t *testing.T) {
	t.Parallel()
	const d = 30 * time.Millisecond
	f := &fatalTB{TB: t}
	calls := 0
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		EventuallyWithin(f, d, "the impossible", func() bool { calls++; return false },
			func() string { return "state: stuck" }, func() string { return "log: empty" })
		t.Error("EventuallyWithin returned although cond never held")
	}()
	<-done
	if want := "timed out after 30ms waiting for the impossible\nstate: stuck\nlog: empty"; f.msg != want {
		t.Fatalf("Fatalf said %q, want %q", f.msg, want)
	}
	if waited := time.Since(start); waited < d {
		t.Errorf("failed after %v, before its deadline of %v", waited, d)
	}
	if calls < 2 {
		t.Errorf("cond called %d times: it was not polled", calls)
	}
	ok := &fatalTB{TB: t}
	EventuallyWithin(ok, time.Hour, "a cond that holds", func() bool { return true })
	if ok.msg != "" {
		t.Fatalf("a cond that holds failed: %s", ok.msg)
	}
}
