package hubclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/harness"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

// runningJob is a job the Hub started on this Agent.
type runningJob struct {
	id          string
	generation  uint64 // under Agent.mu (adoption changes it)
	job         *arkflow.Job
	payload     hubwire.JobCommandPayload
	assignments []string // under Agent.mu
	// tasks are the plan tasks this node runs when the Hub placed the
	// job's units on several nodes, sorted; nil when the node
	// runs the whole job (a Hub that assigns the job, not its tasks).
	tasks      []string
	digest     string // the plan's digest
	cancel     context.CancelFunc
	done       chan struct{}        // closed when Run returned
	err        error                // Run's error, once done
	checkpoint string               // the last checkpoint it completed on command; under Agent.mu
	metrics    prometheus.Collector // the job's Collector, kept so its rate limit of state measurements holds
	state      stateMeter           // the reports' rate-limited state measurements
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
		s.Partitions = harness.RuntimeOf(r.job).SourcePartitions()
	case arkflow.Created, arkflow.Starting:
		s.State = hubwire.JobStarting
		if p := checkpointsOf(r.job).Recovery; !p.Done && p.BytesTotal > 0 {
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

// checkpointsOf is j's checkpoint status without the walk over its state
// that Job.Metrics does: cheap enough for every report and probe.
func checkpointsOf(j *arkflow.Job) arkflow.CheckpointStatus {
	return harness.CheckpointStatus(j).(arkflow.CheckpointStatus)
}

// statuses are the observations of every job the Agent holds, by job ID,
// each with the node's measurements of it (measure) unless it ended, and
// of every job start it was sent and holds no job of yet (pending).
func (a *Agent) statuses() []hubwire.JobStatus {
	a.mu.Lock()
	out := make([]hubwire.JobStatus, 0, len(a.jobs))
	held := make([]*runningJob, 0, len(a.jobs))
	for _, r := range a.jobs {
		if p, ok := a.pending(r.id); ok {
			out = append(out, p.status(r.id))
			held = append(held, nil)
			continue
		}
		out = append(out, r.status())
		held = append(held, r)
	}
	for id, p := range a.started {
		if a.jobs[id] == nil {
			out = append(out, p.status(id))
			held = append(held, nil)
		}
	}
	a.mu.Unlock()
	now := time.Now()
	for i, r := range held {
		if r != nil && running(r) {
			out[i].Metrics = r.measure(now)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].JobID < out[j].JobID })
	return out
}

// startCommand is a job_start (or job_restart) the Agent was sent of a
// generation it holds no job of: while the command runs, until it built
// the job (starting), or after it failed before that (failed). So the
// Agent's status, and its /readyz, know the job from the moment its
// start arrives, not from when it was built.
type startCommand struct {
	generation uint64
	state      string // hubwire.JobStarting or hubwire.JobFailed
	err        string
}

func (p startCommand) status(id string) hubwire.JobStatus {
	return hubwire.JobStatus{JobID: id, Generation: p.generation, State: p.state, Error: p.err, ObservedAtMs: uint64(time.Now().UnixMilli())}
}

// pending returns the start of job id the Agent was sent and has not
// built a job of yet: one of a newer generation than the job it holds,
// if any. Call it under mu.
func (a *Agent) pending(id string) (startCommand, bool) {
	p, ok := a.started[id]
	if !ok {
		return p, false
	}
	if r := a.jobs[id]; r != nil && r.generation >= p.generation {
		return p, false
	}
	return p, true
}

// noteStart records that a start of c's job arrived; under mu.
func (a *Agent) noteStart(c hubwire.AgentCommand) {
	if c.Operation != hubwire.OpJobStart && c.Operation != hubwire.OpJobRestart {
		return
	}
	var p struct {
		JobID string `json:"job_id"`
	}
	if json.Unmarshal(c.Payload, &p) != nil || p.JobID == "" {
		return
	}
	if cur, ok := a.started[p.JobID]; !ok || cur.generation <= c.Generation {
		a.started[p.JobID] = startCommand{generation: c.Generation, state: hubwire.JobStarting}
	}
}

// settle updates the starts the Agent was sent with c's result res;
// under mu. A start that built its job (or was stale, or expired before
// it ran) leaves nothing pending; one that failed before its job was
// built stays as failed, until a later start or a stop of the job.
func (a *Agent) settle(c hubwire.AgentCommand, res hubwire.CommandResult) {
	p, ok := a.started[res.JobID]
	if !ok || p.generation > c.Generation {
		return // none, or a newer start arrived meanwhile
	}
	switch {
	case c.Operation == hubwire.OpJobStop && res.State == hubwire.OpStateSucceeded:
		delete(a.started, res.JobID)
	case c.Operation != hubwire.OpJobStart && c.Operation != hubwire.OpJobRestart:
	case res.State == hubwire.OpStateFailed:
		if r := a.jobs[res.JobID]; r != nil && r.generation >= c.Generation {
			delete(a.started, res.JobID) // its job is held: its status says why
			return
		}
		a.started[res.JobID] = startCommand{generation: c.Generation, state: hubwire.JobFailed, err: res.Error}
	default: // succeeded, superseded, timed out
		delete(a.started, res.JobID)
	}
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
	a.noteStart(c)
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		res := a.execute(ctx, s, c)
		a.mu.Lock()
		delete(a.active, c.ID)
		a.settle(c, res)
		if len(a.results) >= maxResults {
			clear(a.results)
		}
		a.results[c.ID] = res
		a.countCommand(c, res)
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
		res.ObservedCheckpointID, res.CheckpointManifestURI, err = a.checkpoint(ctx, c, cp)
	case hubwire.OpJobCheckpointCommit, hubwire.OpJobSavepointCommit:
		var cp hubwire.CommitPayload
		if err := json.Unmarshal(c.Payload, &cp); err != nil {
			return fail(hubwire.FailureValidation, "payload: %v", err)
		}
		if cp.JobID == "" {
			cp.JobID = p.JobID
		}
		res.ObservedCheckpointID, res.CheckpointManifestURI, err = a.commit(ctx, c, cp)
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
	var oldGen uint64
	if old != nil {
		oldGen = old.generation
	}
	a.mu.Unlock()
	if old != nil {
		if oldGen > c.Generation {
			return &staleError{command: c.Generation, running: oldGen}
		}
		if oldGen == c.Generation && running(old) {
			return nil // a redelivered start of the job that runs
		}
	}
	spec, plan, tasks, err := startPlan(p)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.specs[p.JobID] = spec
	a.mu.Unlock()
	if old != nil {
		if running(old) && !p.Restart && tasks != nil && old.tasks != nil && slices.Equal(old.tasks, tasks) && old.digest == plan.Digest {
			// A newer generation of the same units on this node (the Hub
			// moved others after a failure): the units are independent,
			// so this node's keep running and adopt the generation.
			a.mu.Lock()
			old.generation, old.assignments, old.payload = c.Generation, assignmentIDs(p), p
			a.mu.Unlock()
			harness.RuntimeOf(old.job).SetGeneration(c.Generation)
			a.log.Info("adopting a new generation without a restart", "job", p.JobID, "generation", c.Generation, "from", oldGen, "tasks", len(tasks))
			a.notify()
			return nil
		}
		if err := a.stopJob(old); err != nil {
			a.log.Warn("stopping the previous generation", "job", p.JobID, "generation", oldGen, "error", err)
		}
	}
	built, err := harness.NewJob(spec, a.bindings[spec.ID], a.jobOptions(c, p, tasks))
	if err != nil {
		return err
	}
	j := built.(*arkflow.Job)
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningJob{id: p.JobID, generation: c.Generation, job: j, payload: p, assignments: assignmentIDs(p),
		tasks: tasks, digest: plan.Digest, cancel: cancel, done: make(chan struct{}), metrics: j.Collector()}
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
	return a.awaitRunning(r)
}

// startPlan reads the job of a start command: its spec (which must be of
// the command's job), its plan and the plan tasks assigned to this node
// (nil: the whole job).
func startPlan(p hubwire.JobCommandPayload) (*job.Spec, *job.Plan, []string, error) {
	if len(p.Spec) == 0 {
		return nil, nil, nil, errors.New("payload: job_start needs the job's spec")
	}
	spec, err := job.Parse(p.Spec)
	if err != nil {
		return nil, nil, nil, err
	}
	if spec.ID != p.JobID {
		return nil, nil, nil, fmt.Errorf("payload: the spec is of job %q, the command of %q", spec.ID, p.JobID)
	}
	plan, err := planner.NewPlan(spec)
	if err != nil {
		return nil, nil, nil, err
	}
	tasks := localTasks(plan, p.Assignments)
	if tasks != nil {
		if err := runtime.ValidateTasks(plan, tasks); err != nil {
			return nil, nil, nil, err
		}
	}
	return spec, plan, tasks, nil
}

// jobOptions are the options a started job is built with: the Agent's
// data directory, checkpoint store, logger and environment, the recovery
// the command asks for (a savepoint, or a checkpoint by id), and the
// runtime's node, generation and assigned tasks.
func (a *Agent) jobOptions(c hubwire.AgentCommand, p hubwire.JobCommandPayload, tasks []string) []any {
	opts := []any{arkflow.WithDataDir(a.cfg.DataDir), arkflow.WithCheckpointStore(a.cfg.CheckpointStore),
		// The job adds its own job key (once); the Agent adds the generation.
		arkflow.WithLogger(a.log.With("generation", c.Generation))}
	if a.cfg.Environment != nil {
		opts = append(opts, arkflow.WithEnvironment(a.cfg.Environment))
	}
	from := ""
	if p.Recovery != nil && p.Recovery.CheckpointID != "" {
		if p.Recovery.Savepoint {
			opts = append(opts, arkflow.WithSavepoint(p.Recovery.CheckpointID))
		} else {
			from = p.Recovery.CheckpointID
		}
	}
	node, gen := a.cfg.NodeID, c.Generation
	a.mu.Lock()
	wrap := a.wrapStore
	a.mu.Unlock()
	return append(opts, harness.Option(func(o *runtime.Options) {
		o.NodeID, o.Generation, o.FromCheckpoint = node, gen, from
		o.WrapStore = wrap
		if tasks != nil {
			o.Tasks, o.HubCheckpoints = tasks, true
		}
	}))
}

// awaitRunning waits, up to startTimeout, until the started job runs or
// has ended (a bounded job may end before it is seen running), and
// returns its failure to start.
func (a *Agent) awaitRunning(r *runningJob) error {
	j := r.job
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

// localTasks returns the plan tasks of assignments, sorted and each once,
// or nil when the Hub assigned the whole job (no assignments, or one
// whose task_id is not a task of the plan: a Hub that places jobs, not
// units, names the job there).
func localTasks(plan *job.Plan, assignments []hubwire.TaskAttempt) []string {
	if len(assignments) == 0 {
		return nil
	}
	var tasks []string
	for _, t := range assignments {
		if _, ok := planner.Task(plan, t.TaskID); !ok {
			return nil
		}
		tasks = append(tasks, t.TaskID)
	}
	slices.Sort(tasks)
	return slices.Compact(tasks)
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
	var gen uint64
	if r != nil {
		gen = r.generation
	}
	a.mu.Unlock()
	if r == nil {
		return nil // nothing runs: stopped already
	}
	if gen > generation {
		return &staleError{command: generation, running: gen}
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
// which must be of the command's generation. It returns the id (or name)
// and, for a job whose units run on several nodes, the key of this
// node's part manifest: the Hub commits the parts (job_*_commit).
func (a *Agent) checkpoint(ctx context.Context, c hubwire.AgentCommand, p hubwire.CheckpointPayload) (id, partKey string, err error) {
	a.mu.Lock()
	r := a.jobs[p.JobID]
	var gen uint64
	if r != nil {
		gen = r.generation
	}
	a.mu.Unlock()
	if r != nil && !running(r) && r.err == nil {
		return "", "", fmt.Errorf("job %q ended on this agent (the input of its tasks here ended, e.g. a source with fewer partitions than subtasks): "+
			"a checkpoint needs every unit running", p.JobID)
	}
	if r == nil || !running(r) {
		return "", "", fmt.Errorf("job %q is not running on this agent", p.JobID)
	}
	if gen != c.Generation {
		if gen > c.Generation {
			return "", "", &staleError{command: c.Generation, running: gen}
		}
		return "", "", fmt.Errorf("checkpoint generation %d does not match the running job's %d", c.Generation, gen)
	}
	if r.tasks != nil {
		return a.checkpointPart(ctx, r, c, p)
	}
	if c.Operation == hubwire.OpJobSavepoint {
		name := p.Name
		if name == "" {
			name = p.CheckpointID
		}
		if name == "" {
			return "", "", errors.New("payload: a savepoint needs a name or checkpoint_id")
		}
		if err := r.job.Savepoint(ctx, name); err != nil {
			return "", "", err
		}
		a.setCheckpoint(r, name)
		return name, "", nil
	}
	id, err = r.job.Checkpoint(ctx)
	if err != nil {
		return "", "", err
	}
	a.setCheckpoint(r, id)
	return id, "", nil
}

// checkpointPart cuts this node's tasks of r for the artifact the Hub
// named and writes their part manifest; it commits nothing.
func (a *Agent) checkpointPart(ctx context.Context, r *runningJob, c hubwire.AgentCommand, p hubwire.CheckpointPayload) (string, string, error) {
	kind, ref := ckptstore.KindCheckpoint, p.CheckpointID
	if c.Operation == hubwire.OpJobSavepoint {
		kind = ckptstore.KindSavepoint
		if p.Name != "" {
			ref = p.Name
		}
	}
	if ref == "" {
		return "", "", fmt.Errorf("payload: %s needs a checkpoint_id (the Hub chooses it when the job's units run on several nodes)", c.Operation)
	}
	// The command's assignments, when it names tasks, must be this
	// node's: a part of other tasks would not match what the Hub merges.
	if named := localTasks(r.job.Plan(), p.Assignments); named != nil && !slices.Equal(named, r.tasks) {
		return "", "", fmt.Errorf("the command names tasks %s, this node runs %s", strings.Join(named, ","), strings.Join(r.tasks, ","))
	}
	key, err := harness.RuntimeOf(r.job).CheckpointPart(ctx, kind, ref)
	if err != nil {
		return "", "", err
	}
	return ref, key, nil
}

// commit merges the part manifests of the nodes the Hub names into the
// artifact's manifest and commits it (sealed only with every planned task): a node's part
// missing, or a task in two parts, fails it and LATEST stays. A node that
// does not run the job commits with the last spec it was sent.
func (a *Agent) commit(ctx context.Context, c hubwire.AgentCommand, p hubwire.CommitPayload) (id, uri string, err error) {
	kind := ckptstore.KindCheckpoint
	if c.Operation == hubwire.OpJobSavepointCommit {
		kind = ckptstore.KindSavepoint
	}
	if p.CheckpointID == "" {
		return "", "", errors.New("payload: a commit needs checkpoint_id (a savepoint's name for job_savepoint_commit)")
	}
	a.mu.Lock()
	r := a.jobs[p.JobID]
	spec := a.specs[p.JobID]
	wrap := a.wrapStore
	a.mu.Unlock()
	var rt *runtime.Runtime
	if r != nil {
		rt = harness.RuntimeOf(r.job)
	} else {
		if spec == nil {
			return "", "", fmt.Errorf("job %q: this agent was never sent its spec, so it does not know its checkpoint store", p.JobID)
		}
		opts := []any{arkflow.WithDataDir(a.cfg.DataDir), arkflow.WithCheckpointStore(a.cfg.CheckpointStore),
			arkflow.WithLogger(a.log)} // the job adds its own job key
		if a.cfg.Environment != nil {
			opts = append(opts, arkflow.WithEnvironment(a.cfg.Environment))
		}
		if wrap != nil {
			opts = append(opts, harness.Option(func(o *runtime.Options) { o.WrapStore = wrap }))
		}
		built, err := harness.NewJob(spec, a.bindings[spec.ID], opts)
		if err != nil {
			return "", "", err
		}
		rt = harness.RuntimeOf(built)
	}
	m, err := rt.CommitParts(ctx, kind, p.CheckpointID, p.ManifestNodes)
	if err != nil {
		return "", "", err
	}
	if r != nil {
		a.setCheckpoint(r, p.CheckpointID)
	}
	key := m.CheckpointID
	if kind == ckptstore.KindSavepoint {
		key = m.Name
	}
	return p.CheckpointID, manifestKey(p.JobID, kind, key), nil
}

// manifestKey is the committed manifest's key in the checkpoint store
// (ckptstore.Catalog.ManifestKey).
func manifestKey(jobID string, kind ckptstore.Kind, dir string) string {
	return jobID + "/" + string(kind) + "s/" + dir + "/manifest.json"
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
