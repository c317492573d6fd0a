package hubclient_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// statusOf returns the Agent's status of job id.
func statusOf(a *hubclient.Agent, id string) (hubclient.JobStatus, bool) {
	for _, j := range a.Status().Jobs {
		if j.JobID == id {
			return j, true
		}
	}
	return hubclient.JobStatus{}, false
}

// The Agent knows a job from the moment its start command arrives, not
// from when the job is built: while the build waits (here, on an input
// factory held closed), Status, and the report to the Hub, say the job
// is starting at the command's generation, so /readyz is not ready; then
// running. A start that fails before its job is built stays failed, with
// its error, until a stop of the job.
func TestStatusHoldsAJobFromItsStartCommand(t *testing.T) {
	t.Parallel()
	h := newFakeHub(t, time.Second)
	env := connectors.NewEnvironment()
	entered, release := make(chan struct{}), make(chan struct{})
	in := &blockingInput{release: make(chan struct{})}
	close(in.release) // its source connects at once; the build is what waits
	if err := env.RegisterInput("blocking", func(connectors.BuildContext) (connectors.Input, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return in, nil
	}); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	b := arkflow.NewJob("gated").Source("in", blockingConfig{}).Sink("out", funcsink.Func[row](func(context.Context, []row) error { return nil }))
	a, _ := runAgent(t, h, hubclient.Config{Environment: env, Jobs: []*arkflow.Builder{b}})
	t.Cleanup(open) // before the Agent's stop: a failed check must not leave the build waiting
	polltest.Eventually(t, "the agent registered", func() bool { return a.Status().Registered })
	if len(a.Status().Jobs) != 0 {
		t.Fatalf("jobs before any command: %+v", a.Status().Jobs)
	}

	h.send(startCommand(t, "g3", b, 3))
	<-entered // the command arrived and its job is being built
	if j, ok := statusOf(a, "gated"); !ok || j.State != hubwire.JobStarting || j.Generation != 3 {
		t.Fatalf("while the start builds the job: %+v (listed %v), want starting at generation 3", j, ok)
	}
	polltest.Eventually(t, "a report of the start", func() bool {
		s, ok := h.lastJob("gated")
		return ok && s.State == hubwire.JobStarting && s.Generation == 3
	})
	open()
	if res := waitResult(t, h, "g3"); res.State != hubwire.OpStateSucceeded {
		t.Fatalf("start: %+v", res)
	}
	if j, _ := statusOf(a, "gated"); j.State != hubwire.JobRunning || j.Generation != 3 {
		t.Fatalf("after the start: %+v", j)
	}

	// A start whose job cannot be built (no such input in the Agent).
	broken := arkflow.NewJob("broken").Source("in", missingConfig{}).Sink("out", funcsink.Func[row](func(context.Context, []row) error { return nil }))
	h.send(startCommand(t, "b1", broken, 1))
	if res := waitResult(t, h, "b1"); res.State != hubwire.OpStateFailed {
		t.Fatalf("start of a job that cannot be built: %+v", res)
	}
	if j, ok := statusOf(a, "broken"); !ok || j.State != hubwire.JobFailed || j.Generation != 1 || j.Error == "" {
		t.Fatalf("after the failed start: %+v (listed %v), want failed with its error", j, ok)
	}
	h.send(jobCommand("s1", hubwire.OpJobStop, "broken", 2))
	if res := waitResult(t, h, "s1"); res.State != hubwire.OpStateSucceeded {
		t.Fatalf("stop: %+v", res)
	}
	if j, ok := statusOf(a, "broken"); ok {
		t.Fatalf("after the stop: %+v, want the job gone", j)
	}
}

type missingConfig struct{}

func (missingConfig) InputType() string { return "not-in-this-agent" }
