// Package polltest waits, in tests, for what other goroutines or
// processes do: a job reaching a state, rows reaching a sink, a file
// appearing. It is the one polling loop the engine's tests share.
//
// Only the outcome is asserted, never how fast it came: the deadline is
// generous, because CI runs every package with -race on two cores and
// a slow machine must not fail a test that would pass.
package polltest

import (
	"strings"
	"testing"
	"time"
)

// Deadline is how long Eventually polls before it fails the test.
const Deadline = time.Minute

// Eventually polls cond until it returns true. If cond has not held
// after Deadline, it fails the test with t.Fatalf, naming what was
// awaited ("timed out after 1m0s waiting for <what>") and adding, one per
// line, what each explain returns then (the state of what was awaited, a
// log), so the failure says how far things got.
//
// cond is first called at once, then after sleeps that grow from 1 ms to
// 10 ms: a condition that holds soon is seen soon without a busy loop.
// cond and explain run in the test's goroutine; a cond that reads what
// other goroutines write must synchronize (an atomic, a lock, a method
// of a concurrency-safe type).
func Eventually(t testing.TB, what string, cond func() bool, explain ...func() string) {
	t.Helper()
	EventuallyWithin(t, Deadline, what, cond, explain...)
}

// EventuallyWithin is Eventually with a deadline of d instead of
// Deadline, for a wait that is known to take longer than Deadline on a
// slow machine (processes that start, build or restart, a fleet that
// converges): d is how long it polls before it fails the test, never a
// bound the test asserts. Everything else is as in Eventually.
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool, explain ...func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	sleep := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, e := range explain {
				b.WriteString("\n")
				b.WriteString(e())
			}
			t.Fatalf("timed out after %v waiting for %s%s", d, what, b.String())
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, 10*time.Millisecond)
	}
}
