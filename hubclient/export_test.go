package hubclient

import "github.com/arkflow-rs/arkflow-go"

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
