package hubclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/harness"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/job"
)

// runningJob is a job the Hub started on this Agent.
type runningJob struct {
	id          string
	generation  uint64
	job         *arkflow.Job
	payload     hubwire.JobCommandPayload
	assignments []string
	cancel      context.CancelFunc
	done        chan struct{} // closed when Run returned
	err         error         // Run's error, once done
	checkpoint  string        // the last checkpoint it completed on command; under Agent.mu
}

// status is the job's observation for a report.
func (r *runningJob) status() hubwire.JobStatus {
	s := hubwire.JobStatus{JobID: r.id, Generation: r.generation, AssignmentIDs: r.assignments,
		CheckpointID: r.checkpoint, ObservedAtMs: uint64(time.Now().UnixMilli())}
	select {
	case <-r.done:
		if r.err != nil {
			s.State, s.Error = hubwire.JobFailed, r.err.Error()
		} else {
			s.State = hubwire.JobStopped
		}
		return s
	default:
	}
	switch r.job.Status() {
	case arkflow.Running:
		s.State = hubwire.JobRunning
	case arkflow.Created, arkflow.Starting:
		s.State = hubwire.JobStarting
		if p := r.job.Metrics().Checkpoints.Recovery; !p.Done && p.BytesTotal > 0 {
			pct := uint8(min(100, p.BytesRestored*100/p.BytesTotal))
			s.RecoveryProgress = &pct
			s.State = hubwire.JobRecovering
		}
	case arkflow.Stopping:
		s.State = hubwire.JobStopping
	case arkflow.Failed:
		s.State = hubwire.JobFailed
	default:
		s.State = hubwire.JobStopped
	}
	return s
}

// statuses are the observations of every job the Agent holds, by job ID.
func (a *Agent) statuses() []hubwire.JobStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]hubwire.JobStatus, 0, len(a.jobs))
	for _, r := range a.jobs {
		out = append(out, r.status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].JobID < out[j].JobID })
	return out
}

// dispatch runs command c on its own goroutine, so that a long start,
// checkpoint or stop never holds up heartbeats or other jobs' commands.
// A command already running (a redelivery while it runs) is ignored; one
// already finished gets its result again.
func (a *Agent) dispatch(ctx context.Context, s *session, c hubwire.AgentCommand) {
	a.mu.Lock()
	if res, ok := a.results[c.ID]; ok {
		a.mu.Unlock()
		a.postResult(ctx, s, res)
		return
	}
	if a.active[c.ID] {
		a.mu.Unlock()
		return
	}
	a.active[c.ID] = true
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		res := a.execute(ctx, s, c)
		a.mu.Lock()
		delete(a.active, c.ID)
		if len(a.results) >= maxResults {
			clear(a.results)
		}
		a.results[c.ID] = res
		a.mu.Unlock()
		a.postResult(ctx, s, res)
	}()
}

// postResult sends res, best effort: the Hub delivers the command again
// when its result does not arrive, and the Agent answers from its cache.
func (a *Agent) postResult(ctx context.Context, s *session, res hubwire.CommandResult) {
	if err := a.call(ctx, "POST", "/agent/commands/"+res.CommandID+"/result", s.token, res, nil); err != nil && ctx.Err() == nil {
		a.log.Warn("posting a command result", "command", res.CommandID, "state", res.State, "error", err)
	}
}

// execute runs one command and returns its terminal result.
func (a *Agent) execute(ctx context.Context, s *session, c hubwire.AgentCommand) hubwire.CommandResult {
	res := hubwire.CommandResult{CommandID: c.ID, OperationID: c.OperationID, Generation: c.Generation,
		CorrelationID: c.CorrelationID, ActionID: c.ActionID, RolloutID: c.RolloutID, Progress: 100}
	fail := func(class hubwire.FailureClass, format string, args ...any) hubwire.CommandResult {
		res.State, res.FailureClass, res.Error = hubwire.OpStateFailed, class, fmt.Sprintf(format, args...)
		if class == hubwire.FailureStaleGeneration {
			res.State = hubwire.OpStateSuperseded
		}
		a.log.Warn("command failed", "command", c.ID, "operation", c.Operation, "job", res.JobID, "generation", c.Generation, "error", res.Error)
		return res
	}
	if c.ExpiresAtMs != 0 && uint64(time.Now().UnixMilli()) >= c.ExpiresAtMs {
		res.State, res.FailureClass, res.Error = hubwire.OpStateTimedOut, hubwire.FailureTemporaryExecution, "command expired before execution"
		return res
	}
	if !c.Operation.IsJob() {
		return fail(hubwire.FailureValidation, "operation %q is not supported by this agent (it runs jobs)", c.Operation)
	}
	var p struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal(c.Payload, &p); err != nil || p.JobID == "" {
		return fail(hubwire.FailureValidation, "payload: want an object with job_id (%v)", err)
	}
	res.JobID = p.JobID
	unlock := a.lockJob(p.JobID)
	defer unlock()
	// Acknowledge before the work, so the Hub knows the command arrived.
	ack := res
	ack.State, ack.Progress = hubwire.OpStateAcknowledged, 5
	a.postResult(ctx, s, ack)

	var err error
	switch c.Operation {
	case hubwire.OpJobStart, hubwire.OpJobRestart:
		var jp hubwire.JobCommandPayload
		if err := json.Unmarshal(c.Payload, &jp); err != nil {
			return fail(hubwire.FailureValidation, "payload: %v", err)
		}
		res.AssignmentIDs = assignmentIDs(jp)
		err = a.start(c, jp)
	case hubwire.OpJobStop:
		err = a.stop(ctx, p.JobID, c.Generation)
	case hubwire.OpJobCheckpoint, hubwire.OpJobSavepoint:
		var cp hubwire.CheckpointPayload
		if err := json.Unmarshal(c.Payload, &cp); err != nil {
			return fail(hubwire.FailureValidation, "payload: %v", err)
		}
		res.ObservedCheckpointID, err = a.checkpoint(ctx, c, cp)
	default:
		return fail(hubwire.FailureValidation, "operation %q is not supported by this agent yet", c.Operation)
	}
	var stale *staleError
	switch {
	case errors.As(err, &stale):
		res.ObservedGeneration = &stale.running
		return fail(hubwire.FailureStaleGeneration, "%v", err)
	case err != nil:
		return fail(hubwire.FailurePermanentExecution, "%v", err)
	}
	res.State = hubwire.OpStateSucceeded
	g := c.Generation
	res.ObservedGeneration = &g
	a.log.Info("command done", "command", c.ID, "operation", c.Operation, "job", p.JobID, "generation", c.Generation)
	return res
}

// staleError refuses a command older than the job it would touch.
type staleError struct{ command, running uint64 }

func (e *staleError) Error() string {
	return fmt.Sprintf("job generation is stale: the command has generation %d, this agent runs %d", e.command, e.running)
}

// lockJob serialises the commands of one job and returns the unlock.
func (a *Agent) lockJob(id string) func() {
	a.mu.Lock()
	l := a.jobLock[id]
	if l == nil {
		l = &sync.Mutex{}
		a.jobLock[id] = l
	}
	a.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func assignmentIDs(p hubwire.JobCommandPayload) []string {
	var ids []string
	for _, t := range p.Assignments {
		ids = append(ids, t.ID)
	}
	return ids
}

// startTimeout bounds how long a start waits for the job to run (its
// sources and sinks connected, its state restored).
const startTimeout = 2 * time.Minute

// start builds the job of p and runs it, after stopping an older
// generation of it. It returns once the job runs, or failed to start.
func (a *Agent) start(c hubwire.AgentCommand, p hubwire.JobCommandPayload) error {
	if p.Generation == 0 {
		p.Generation = c.Generation
	}
	a.mu.Lock()
	old := a.jobs[p.JobID]
	a.mu.Unlock()
	if old != nil {
		if old.generation > c.Generation {
			return &staleError{command: c.Generation, running: old.generation}
		}
		if old.generation == c.Generation && running(old) {
			return nil // a redelivered start of the job that runs
		}
		if err := a.stopJob(old); err != nil {
			a.log.Warn("stopping the previous generation", "job", p.JobID, "generation", old.generation, "error", err)
		}
	}
	if len(p.Spec) == 0 {
		return errors.New("payload: job_start needs the job's spec")
	}
	spec, err := job.Parse(p.Spec)
	if err != nil {
		return err
	}
	if spec.ID != p.JobID {
		return fmt.Errorf("payload: the spec is of job %q, the command of %q", spec.ID, p.JobID)
	}
	opts := []any{arkflow.WithDataDir(a.cfg.DataDir), arkflow.WithCheckpointStore(a.cfg.CheckpointStore),
		arkflow.WithLogger(a.log.With("job", p.JobID, "generation", c.Generation))}
	if a.cfg.Environment != nil {
		opts = append(opts, arkflow.WithEnvironment(a.cfg.Environment))
	}
	if p.Recovery != nil && p.Recovery.Savepoint && p.Recovery.CheckpointID != "" {
		opts = append(opts, arkflow.WithSavepoint(p.Recovery.CheckpointID))
	}
	built, err := harness.NewJob(spec, a.bindings[spec.ID], opts)
	if err != nil {
		return err
	}
	j := built.(*arkflow.Job)
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningJob{id: p.JobID, generation: c.Generation, job: j, payload: p, assignments: assignmentIDs(p),
		cancel: cancel, done: make(chan struct{})}
	a.mu.Lock()
	a.jobs[p.JobID] = r
	a.mu.Unlock()
	a.jobsWG.Add(1)
	go func() {
		defer a.jobsWG.Done()
		r.err = j.Run(ctx)
		close(r.done)
		a.notify()
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		switch {
		case j.Status() == arkflow.Running:
			a.notify()
			return nil
		case !running(r):
			if r.err != nil {
				return r.err
			}
			return nil // a bounded job that already ended
		case time.Now().After(deadline):
			return fmt.Errorf("the job did not run within %s", startTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func running(r *runningJob) bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// stopTimeout bounds a graceful stop before the job is cancelled.
const stopTimeout = 30 * time.Second

// stop stops the job id when the command is not older than it.
func (a *Agent) stop(ctx context.Context, id string, generation uint64) error {
	a.mu.Lock()
	r := a.jobs[id]
	a.mu.Unlock()
	if r == nil {
		return nil // nothing runs: stopped already
	}
	if r.generation > generation {
		return &staleError{command: generation, running: r.generation}
	}
	return a.stopJob(r)
}

// stopJob stops r gracefully (cancelling it after stopTimeout) and waits
// for Run to return.
func (a *Agent) stopJob(r *runningJob) error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	err := r.job.Stop(ctx)
	if errors.Is(err, arkflow.ErrNotRunning) {
		err = nil
	}
	if err != nil {
		r.cancel()
	}
	<-r.done
	a.notify()
	if err != nil {
		return err
	}
	if r.err != nil && !errors.Is(r.err, context.Canceled) {
		return fmt.Errorf("the job had failed: %w", r.err)
	}
	return nil
}

// checkpoint takes a checkpoint or a named savepoint of the running job,
// which must be of the command's generation.
func (a *Agent) checkpoint(ctx context.Context, c hubwire.AgentCommand, p hubwire.CheckpointPayload) (string, error) {
	a.mu.Lock()
	r := a.jobs[p.JobID]
	a.mu.Unlock()
	if r == nil || !running(r) {
		return "", fmt.Errorf("job %q is not running on this agent", p.JobID)
	}
	if r.generation != c.Generation {
		if r.generation > c.Generation {
			return "", &staleError{command: c.Generation, running: r.generation}
		}
		return "", fmt.Errorf("checkpoint generation %d does not match the running job's %d", c.Generation, r.generation)
	}
	if c.Operation == hubwire.OpJobSavepoint {
		name := p.Name
		if name == "" {
			name = p.CheckpointID
		}
		if name == "" {
			return "", errors.New("payload: a savepoint needs a name or checkpoint_id")
		}
		if err := r.job.Savepoint(ctx, name); err != nil {
			return "", err
		}
		a.setCheckpoint(r, name)
		return name, nil
	}
	id, err := r.job.Checkpoint(ctx)
	if err != nil {
		return "", err
	}
	a.setCheckpoint(r, id)
	return id, nil
}

// setCheckpoint records the checkpoint r completed, under the lock its
// status is read with.
func (a *Agent) setCheckpoint(r *runningJob, id string) {
	a.mu.Lock()
	r.checkpoint = id
	a.mu.Unlock()
}

// notify asks the poll loop to report soon.
func (a *Agent) notify() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// shutdown waits for running commands, then stops every job.
func (a *Agent) shutdown() {
	a.wg.Wait()
	a.mu.Lock()
	jobs := make([]*runningJob, 0, len(a.jobs))
	for _, r := range a.jobs {
		jobs = append(jobs, r)
	}
	a.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.stopJob(r); err != nil {
				a.log.Warn("stopping a job at shutdown", "job", r.id, "error", err)
			}
		}()
	}
	wg.Wait()
	a.jobsWG.Wait()
	a.log.Info("agent stopped", "jobs", strings.Join(jobIDs(jobs), ","))
}

func jobIDs(jobs []*runningJob) []string {
	var ids []string
	for _, r := range jobs {
		ids = append(ids, r.id)
	}
	sort.Strings(ids)
	return ids
}
