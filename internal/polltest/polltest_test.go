package polltest

import (
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
