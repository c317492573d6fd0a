package hubclient

import (
	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
)

// JobOf returns the *arkflow.Job the Agent holds for job id, or nil: a
// test sees whether a command restarted the job (a new Job) or kept it.
func JobOf(a *Agent, id string) *arkflow.Job {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.jobs[id]; r != nil {
		return r.job
	}
	return nil
}

// SetWrapStore makes the Agent wrap the checkpoint store of every job it
// builds from then on (a start, or a commit of a job it does not run)
// with wrap, e.g. a ckpttest.FaultStore: a test fails one Agent's
// uploads while the others' succeed.
func SetWrapStore(a *Agent, wrap func(ckptstore.Store) ckptstore.Store) {
	a.mu.Lock()
	a.wrapStore = wrap
	a.mu.Unlock()
}
