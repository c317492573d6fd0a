package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubhttp"
	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/job"
)

func jobResource(r *http.Request) hubhttp.Resource {
	return hubhttp.Resource{Type: hubhttp.ResourceJob, ID: r.PathValue("id")}
}

func anyJob(*http.Request) hubhttp.Resource { return hubhttp.Resource{Type: hubhttp.ResourceJob} }

func (h *Hub) jobRoutes(mux *http.ServeMux) {
	read := func(f http.HandlerFunc) http.Handler { return h.auth.Require(hubhttp.ActionRead, nil)(f) }
	operate := func(f http.HandlerFunc) http.Handler { return h.auth.Require(hubhttp.ActionOperate, jobResource)(f) }
	configure := func(f http.HandlerFunc) http.Handler { return h.auth.Require(hubhttp.ActionConfigure, anyJob)(f) }

	mux.Handle("POST /api/v1/jobs/validate", configure(h.validateJob))
	mux.Handle("POST /api/v1/jobs", configure(h.submitJob))
	mux.Handle("GET /api/v1/jobs", read(h.listJobs))
	mux.Handle("GET /api/v1/jobs/{id}", read(h.getJob))
	mux.Handle("GET /api/v1/jobs/{id}/status", read(h.getJob))
	mux.Handle("GET /api/v1/jobs/{id}/plan", read(h.getPlan))
	mux.Handle("GET /api/v1/jobs/{id}/detail", read(h.jobDetail))
	mux.Handle("GET /api/v1/jobs/{id}/versions", read(h.jobVersions))
	mux.Handle("PUT /api/v1/jobs/{id}/desired-state", operate(h.setDesired))
	mux.Handle("POST /api/v1/jobs/{id}/actions/{action}", operate(h.jobAction))
	mux.Handle("POST /api/v1/jobs/{id}/savepoints", operate(func(w http.ResponseWriter, r *http.Request) { h.checkpoint(w, r, hubstore.KindSavepoint) }))
	mux.Handle("POST /api/v1/jobs/{id}/checkpoints", operate(func(w http.ResponseWriter, r *http.Request) { h.checkpoint(w, r, hubstore.KindCheckpoint) }))
	mux.Handle("GET /api/v1/jobs/{id}/savepoints", read(h.listCheckpoints))
	mux.Handle("GET /api/v1/jobs/{id}/checkpoints", read(h.listCheckpoints))
	mux.Handle("POST /api/v1/jobs/{id}/upgrades", h.auth.Require(hubhttp.ActionConfigure, jobResource)(http.HandlerFunc(h.upgrade)))
	mux.Handle("POST /api/v1/jobs/{id}/upgrades/{upgrade}/rollback", operate(h.rollback))
	mux.Handle("GET /api/v1/jobs/{id}/state/{operator}", read(h.queryState))
	mux.Handle("GET /api/v1/nodes", read(h.listNodes))
	mux.Handle("GET /api/v1/audit", read(h.listAudit))
}

// validateJob is POST /jobs/validate: the deep validation of the spec (422
// invalid_job_spec naming every problem's operator and field) and the fit
// of every known node, naming what each lacks.
func (h *Hub) validateJob(w http.ResponseWriter, r *http.Request) {
	var req hubwire.ValidateJobRequest
	if e := hubhttp.DecodeJSON(w, r, &req); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	v, err := h.validateSpec(r.Context(), req.Spec, req.NodeIDs)
	if err != nil {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusUnprocessableEntity, hubwire.CodeInvalidJobSpec, err.Error()).WithField("spec"))
		return
	}
	if len(v.problems) > 0 {
		hubhttp.WriteError(w, r, invalidSpec(v))
		return
	}
	agents, err := h.store.ListAgents(r.Context())
	if err != nil {
		h.storeError(w, r, err, "")
		return
	}
	planJSON, _ := json.Marshal(v.plan)
	resp := hubwire.ValidateJobResponse{Valid: true, Plan: planJSON,
		RequiredCapabilities: v.plan.RequiredCapabilities, Nodes: []hubwire.NodeCompatibility{}, Warnings: v.warnings}
	now := h.cfg.Clock()
	for _, a := range agents {
		if len(req.NodeIDs) > 0 && !containsStr(req.NodeIDs, a.NodeID) {
			continue
		}
		resp.Nodes = append(resp.Nodes, h.compatibility(a, v.plan.requirements, now))
	}
	hubhttp.WriteJSON(w, http.StatusOK, resp)
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// invalidSpec is the 422 of a spec that failed validation: every problem,
// each naming the operator and field.
func invalidSpec(v *validation) *hubhttp.Error {
	e := hubhttp.NewError(http.StatusUnprocessableEntity, hubwire.CodeInvalidJobSpec, strings.Join(v.problems, "; "))
	if len(v.fields) > 0 && v.fields[0] != "" {
		e.WithField(v.fields[0])
	}
	return e.WithDetails(map[string]any{"problems": v.problems})
}

// submitJob is POST /jobs: it stores the validated spec as an immutable,
// content-addressed version. A new job starts stopped at generation 1;
// desired_state running also sets it running.
func (h *Hub) submitJob(w http.ResponseWriter, r *http.Request) {
	var req hubwire.SubmitJobRequest
	if e := hubhttp.DecodeJSON(w, r, &req); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	if req.DesiredState != "" && req.DesiredState != hubstore.DesiredRunning && req.DesiredState != hubstore.DesiredStopped {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusBadRequest, hubwire.CodeInvalidJobState, "desired_state must be running or stopped").WithField("desired_state"))
		return
	}
	key, e := hubhttp.IdempotencyKey(r)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	v, err := h.validateSpec(r.Context(), req.Spec, req.NodeIDs)
	if err != nil {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusBadRequest, hubwire.CodeInvalidJobSpec, err.Error()).WithField("spec"))
		return
	}
	if len(v.problems) > 0 {
		hubhttp.WriteError(w, r, invalidSpec(v))
		return
	}
	planJSON, _ := json.Marshal(v.plan)
	actor := actorOf(r)
	res, err := h.store.SubmitJob(r.Context(), hubstore.SubmitRequest{JobID: v.spec.ID, Spec: v.specJSON, Plan: planJSON,
		Actor: actor, CorrelationID: hubhttp.CorrelationID(r.Context()), IdempotencyKey: key})
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	h.log.Info("job submitted", "job", v.spec.ID, "version", res.Version.Number, "digest", res.Version.VersionID, "new", res.NewVersion)
	if !res.NewJob && res.Version.VersionID != res.Job.CurrentVersion {
		// Another spec for an existing job replaces the current one only
		// while the job is stopped (v1 replaces it silently); a running
		// job changes version through an upgrade, from a savepoint.
		if e := h.mustBeStopped(r.Context(), res.Job); e != nil {
			e.Message = "job " + v.spec.ID + " runs another version: stop it first, or upgrade it from a savepoint (POST /jobs/{id}/upgrades)"
			hubhttp.WriteError(w, r, e)
			return
		}
		cur := res.Job.Generation
		if _, err := h.store.SetDesired(r.Context(), hubstore.DesiredChange{JobID: v.spec.ID, DesiredState: hubstore.DesiredStopped,
			VersionID: res.Version.VersionID, Kind: "replace", ExpectedGeneration: &cur, Actor: actor,
			CorrelationID: hubhttp.CorrelationID(r.Context()), IdempotencyKey: key}); err != nil {
			h.storeError(w, r, err, hubwire.CodeJobNotFound)
			return
		}
	}
	if req.DesiredState == hubstore.DesiredRunning {
		if _, e := h.changeDesired(r, v.spec.ID, hubstore.DesiredRunning, nil, "", "set_state"); e != nil {
			hubhttp.WriteError(w, r, e)
			return
		}
	}
	rec, err := h.jobRecord(r.Context(), v.spec.ID)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	hubhttp.SetETag(w, int64(rec.Generation))
	hubhttp.WriteJSON(w, http.StatusAccepted, rec)
}

func actorOf(r *http.Request) string {
	if p := hubhttp.PrincipalFrom(r.Context()); p != nil {
		return p.ID
	}
	return ""
}

func (h *Hub) listJobs(w http.ResponseWriter, r *http.Request) {
	jobs, err := h.store.ListJobs(r.Context())
	if err != nil {
		h.storeError(w, r, err, "")
		return
	}
	out := make([]hubwire.JobRecord, 0, len(jobs))
	for _, j := range jobs {
		rec, err := h.jobRecord(r.Context(), j.JobID)
		if err != nil {
			h.storeError(w, r, err, hubwire.CodeJobNotFound)
			return
		}
		out = append(out, rec)
	}
	hubhttp.WriteJSON(w, http.StatusOK, out)
}

func (h *Hub) getJob(w http.ResponseWriter, r *http.Request) {
	rec, err := h.jobRecord(r.Context(), r.PathValue("id"))
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	hubhttp.SetETag(w, int64(rec.Generation))
	hubhttp.WriteJSON(w, http.StatusOK, rec)
}

func (h *Hub) getPlan(w http.ResponseWriter, r *http.Request) {
	j, v, err := h.currentVersion(r.Context(), r.PathValue("id"))
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	p, err := servedPlan(v)
	if err != nil {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusInternalServerError, hubwire.CodeInvalidPersistedJob, err.Error()))
		return
	}
	hubhttp.WriteJSON(w, http.StatusOK, hubwire.JobPlanResponse{JobID: j.JobID, Version: uint64(v.Number), Plan: p})
}

func (h *Hub) currentVersion(ctx context.Context, id string) (hubstore.Job, hubstore.JobVersion, error) {
	j, err := h.store.GetJob(ctx, id)
	if err != nil {
		return j, hubstore.JobVersion{}, err
	}
	v, err := h.store.GetVersion(ctx, id, j.CurrentVersion)
	return j, v, err
}

// observe aggregates the job's current generation against its desired
// state, over all its expected assignments.
func (h *Hub) observe(ctx context.Context, j hubstore.Job) (hubstore.Aggregate, error) {
	if j.DesiredState == hubstore.DesiredRunning {
		return h.store.ObserveJob(ctx, j.JobID, hubstore.OpJobStart, hubstore.ObservedRunning)
	}
	return h.store.ObserveJob(ctx, j.JobID, hubstore.OpJobStop, hubstore.ObservedStopped)
}

// jobRecord is the v1 JobRecord of a job, its observed state aggregated
// from every expected assignment of the current generation.
func (h *Hub) jobRecord(ctx context.Context, id string) (hubwire.JobRecord, error) {
	j, v, err := h.currentVersion(ctx, id)
	if err != nil {
		return hubwire.JobRecord{}, err
	}
	agg, err := h.observe(ctx, j)
	if err != nil {
		return hubwire.JobRecord{}, err
	}
	rec := hubwire.JobRecord{JobID: j.JobID, Version: uint64(v.Number), SpecJSON: string(v.Spec), DesiredState: j.DesiredState,
		Generation: uint64(max(j.Generation, 0)), NodeIDs: []string{}, UpdatedAtMs: ms(j.UpdatedAt), Digest: v.VersionID}
	for _, a := range agg.Assignments {
		if !containsStr(rec.NodeIDs, a.NodeID) {
			rec.NodeIDs = append(rec.NodeIDs, a.NodeID)
		}
	}
	sort.Strings(rec.NodeIDs)
	// The checkpoint a restart of this version would restore (the Hub's
	// newest completed one).
	if c, err := h.store.LatestCompleted(ctx, id, hubstore.KindCheckpoint, j.CurrentVersion, 1); err == nil {
		rec.CheckpointID = c.CheckpointID
	}
	// A job that started and failed later is known from the Agents'
	// reports of this generation, not from its start command.
	if agg.State == hubstore.ObservedRunning {
		obs, err := h.store.JobObservations(ctx, id)
		if err != nil {
			return hubwire.JobRecord{}, err
		}
		for _, o := range obs {
			if o.Generation == j.Generation && o.State == hubwire.JobFailed && containsStr(rec.NodeIDs, o.NodeID) {
				rec.ObservedState, rec.Convergence = hubwire.JobFailed, hubwire.ConvergenceDegraded
				rec.LastError = fmt.Sprintf("node %s reports the job failed: %s", o.NodeID, o.Error)
				return rec, nil
			}
		}
	}
	switch {
	case j.Generation <= 1 && agg.Expected == 0:
		rec.ObservedState, rec.Convergence = hubwire.JobValidated, hubwire.ConvergencePending
	case agg.State == hubstore.ObservedFailed:
		rec.ObservedState, rec.Convergence = hubwire.JobFailed, hubwire.ConvergenceDegraded
		if agg.Failure != nil {
			rec.LastError = fmt.Sprintf("node %s, command %s: %s", agg.Failure.NodeID, agg.Failure.CommandID, agg.Failure.Message)
		}
	case agg.State == hubstore.ObservedConverging:
		rec.ObservedState, rec.Convergence = hubwire.JobConverging, hubwire.ConvergenceReconciling
		if j.DesiredState == hubstore.DesiredRunning {
			rec.ObservedState = hubwire.JobStarting
		} else {
			rec.ObservedState = hubwire.JobStopping
		}
	default:
		rec.ObservedState, rec.Convergence = string(agg.State), hubwire.ConvergenceConverged
	}
	return rec, nil
}

// jobDetail is GET /jobs/{id}/detail: the record, the plan (v1's
// JobPlan), the current generation's task attempts (one per plan task of
// each assignment, in the state attemptState gives) and assignments, the
// nodes, the generation's operations and the checkpoints.
func (h *Hub) jobDetail(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	rec, err := h.jobRecord(ctx, id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	j, v, err := h.currentVersion(ctx, id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	agg, err := h.observe(ctx, j)
	if err != nil {
		h.storeError(w, r, err, "")
		return
	}
	d := hubwire.JobDetail{Job: rec}
	if d.Plan, err = servedPlan(v); err != nil {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusInternalServerError, hubwire.CodeInvalidPersistedJob, err.Error()))
		return
	}
	measured, ok := h.detailAssignments(w, r, &d, id, j, v, agg)
	if !ok {
		return
	}
	cmds, err := h.store.ListCommands(ctx, id, j.Generation)
	if err != nil {
		h.storeError(w, r, err, "")
		return
	}
	for _, c := range cmds {
		var term *hubstore.CommandResult
		if c.State.Terminal() {
			if rs, err := h.store.CommandResults(ctx, c.ID); err == nil && len(rs) > 0 {
				term = &rs[len(rs)-1]
			}
		}
		d.Operations = append(d.Operations, h.operation(c, term))
	}
	cps, err := h.store.ListCheckpoints(ctx, id, "")
	if err != nil {
		h.storeError(w, r, err, "")
		return
	}
	for _, c := range cps {
		d.Checkpoints = append(d.Checkpoints, h.checkpointRecord(ctx, c))
	}
	d.CheckpointHealth = checkpointHealth(cps)
	d.Metrics = jobMetrics(measured, failedRounds(cps, j.Generation))
	hubhttp.SetETag(w, int64(rec.Generation))
	hubhttp.WriteJSON(w, http.StatusOK, d)
}

// detailAssignments fills d's task attempts, assignments and nodes for
// each assignment of the job's current generation (agg), from its
// command's outcome and what its node reported of the generation, and
// returns the job measurements the nodes reported. On a failure it writes
// the error response and reports false.
func (h *Hub) detailAssignments(w http.ResponseWriter, r *http.Request, d *hubwire.JobDetail, id string, j hubstore.Job, v hubstore.JobVersion, agg hubstore.Aggregate) ([]hubwire.JobMetrics, bool) {
	ctx := r.Context()
	rec := d.Job
	action := hubwire.OpJobStop
	if j.DesiredState == hubstore.DesiredRunning {
		action = hubwire.OpJobStart
	}
	now := h.cfg.Clock()
	placed := map[string]hubstore.Assignment{}
	if as, err := h.store.Assignments(ctx, id, j.Generation); err == nil {
		for _, a := range as {
			placed[a.AssignmentID] = a
		}
	}
	obs, err := h.store.JobObservations(ctx, id)
	if err != nil {
		h.storeError(w, r, err, "")
		return nil, false
	}
	reported := map[string]hubstore.StoredObservation{} // by node, of this generation
	for _, o := range obs {
		if o.Generation == j.Generation {
			reported[o.NodeID] = o
		}
	}
	type planned struct {
		v hubstore.JobVersion
		p *job.Plan
	}
	plans := map[string]planned{} // by version id
	var measured []hubwire.JobMetrics
	for _, a := range agg.Assignments {
		pa := placed[a.AssignmentID]
		if pa.VersionID == "" {
			pa.VersionID = v.VersionID
		}
		pv, ok := plans[pa.VersionID]
		if !ok {
			if pv.v, pv.p, err = h.versionPlan(ctx, id, pa.VersionID); err != nil {
				hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusInternalServerError, hubwire.CodeInvalidPersistedJob, "the stored version does not plan: "+err.Error()))
				return nil, false
			}
			plans[pa.VersionID] = pv
		}
		o, ok := reported[a.NodeID]
		ts := attemptState(action, a, o.State, ok)
		// One attempt per plan task the node runs: its placement units,
		// or every task for an Agent that runs the job whole.
		d.Tasks = append(d.Tasks, taskAttempts(pa, pv.v, pv.p, int64(rec.Generation), ts)...)
		as := hubwire.AssignmentStatus{NodeID: a.NodeID, Generation: rec.Generation, Action: action, AssignmentIDs: []string{a.AssignmentID},
			Units: assignmentTasks(pa).Units, Tasks: assignmentTasks(pa).Tasks,
			State: assignmentState(a, ts), CommandID: a.CommandID, Error: a.Error, FailureClass: hubwire.FailureClass(a.FailureClass), UpdatedAtMs: ms(now)}
		if ag, err := h.store.GetAgent(ctx, a.NodeID); err == nil {
			d.Nodes = append(d.Nodes, h.hubNode(ag, now))
			as.Partitions = reportedPartitions(ag.LastReport, id, rec.Generation)
		}
		// What the node last reported of the generation: its restore's
		// progress and its measurements of the job.
		var js hubwire.JobStatus
		if ok && json.Unmarshal(o.Snapshot, &js) == nil {
			as.RecoveryProgress = js.RecoveryProgress
			if js.Metrics != nil {
				measured = append(measured, *js.Metrics)
			}
		}
		d.Assignments = append(d.Assignments, as)
	}
	return measured, true
}

// attemptState is the ArkFlow v1 TaskAttempt state of an assignment's
// tasks at the current generation. It comes from the outcome of the
// assignment's command for the action (job_start for a job desired
// running, job_stop for one desired stopped) and, once a start succeeded,
// from what the node reports of the generation since (reported: its
// observation's state, when it sent one):
//
//	start not yet taken by the node (or to be sent again)  queued
//	start taken, running on the node                      starting
//	start succeeded                                       running; failed, or succeeded (its
//	                                                      bounded input ended), when the node
//	                                                      reports failed or stopped since
//	stop not yet succeeded                                stopping
//	stop succeeded                                        cancelled (ended on request)
//	the command failed for good                           failed
//	the node runs a newer generation                      superseded
func attemptState(action hubwire.Operation, a hubstore.AssignmentStatus, reported string, ok bool) string {
	switch {
	case a.Status == "failed":
		return hubwire.TaskFailed
	case a.CommandState == hubstore.CommandSuperseded:
		return hubwire.TaskSuperseded
	case action == hubwire.OpJobStop && a.Status == "succeeded":
		return hubwire.TaskCancelled
	case action == hubwire.OpJobStop:
		return hubwire.TaskStopping
	case a.Status == "succeeded" && ok && reported == hubwire.JobFailed:
		return hubwire.TaskFailed
	case a.Status == "succeeded" && ok && reported == hubwire.JobStopped:
		return hubwire.TaskSucceeded
	case a.Status == "succeeded":
		return hubwire.TaskRunning
	case a.CommandState == hubstore.CommandAcknowledged || a.CommandState == hubstore.CommandRunning:
		return hubwire.TaskStarting
	}
	return hubwire.TaskQueued // no command yet, queued or delivered, or a retryable failure to be sent again
}

// assignmentState is AssignmentStatus.state: the state of its tasks
// (attemptState), except that a retryable failure shows as degraded and
// a stop, or a bounded run, that ended as stopped.
func assignmentState(a hubstore.AssignmentStatus, task string) string {
	switch {
	case a.Status == "degraded":
		return hubwire.ConvergenceDegraded
	case task == hubwire.TaskCancelled || task == hubwire.TaskSucceeded:
		return hubwire.JobStopped
	}
	return task
}

func (h *Hub) jobVersions(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	vs, err := h.store.ListVersions(r.Context(), id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	if len(vs) == 0 {
		hubhttp.WriteError(w, r, hubhttp.NotFound(hubwire.CodeJobNotFound, "job "+id+" not found"))
		return
	}
	out := make([]hubwire.JobVersionRecord, 0, len(vs))
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		out = append(out, hubwire.JobVersionRecord{JobID: id, Version: uint64(v.Number), SpecJSON: string(v.Spec), PlanJSON: string(v.Plan),
			CreatedAtMs: ms(v.CreatedAt), Digest: v.VersionID})
	}
	hubhttp.WriteJSON(w, http.StatusOK, out)
}

// setDesired is PUT /jobs/{id}/desired-state: a generation CAS (If-Match,
// 412 generation_conflict) with Idempotency-Key replay.
func (h *Hub) setDesired(w http.ResponseWriter, r *http.Request) {
	var req hubwire.JobDesiredStateRequest
	if e := hubhttp.DecodeJSONStrict(w, r, &req); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	if req.State != hubstore.DesiredRunning && req.State != hubstore.DesiredStopped {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusBadRequest, hubwire.CodeInvalidJobState, "state must be running or stopped").WithField("state"))
		return
	}
	gen, present, e := hubhttp.IfMatch(r)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	var expected *int64
	if present {
		expected = &gen
	}
	h.respondDesired(w, r, req.State, expected, "set_state")
}

// jobAction is POST /jobs/{id}/actions/{start|stop|restart}.
func (h *Hub) jobAction(w http.ResponseWriter, r *http.Request) {
	state, kind := "", ""
	switch r.PathValue("action") {
	case "start":
		state, kind = hubstore.DesiredRunning, "set_state"
	case "stop":
		state, kind = hubstore.DesiredStopped, "set_state"
	case "restart":
		state, kind = hubstore.DesiredRunning, "restart"
	case "rebalance":
		h.rebalance(w, r)
		return
	default:
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusBadRequest, hubwire.CodeInvalidJobAction, "action must be start, stop, restart or rebalance"))
		return
	}
	gen, present, e := hubhttp.IfMatch(r)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	var expected *int64
	if present {
		expected = &gen
	}
	h.respondDesired(w, r, state, expected, kind)
}

func (h *Hub) respondDesired(w http.ResponseWriter, r *http.Request, state string, expected *int64, kind string) {
	id := r.PathValue("id")
	key, e := hubhttp.IdempotencyKey(r)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	if _, e := h.changeDesired(r, id, state, expected, key, kind); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	rec, err := h.jobRecord(r.Context(), id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	hubhttp.SetETag(w, int64(rec.Generation))
	hubhttp.WriteJSON(w, http.StatusOK, rec)
}

// changeDesired places the job and records the change as one store
// transaction (CAS, idempotency, intent, outbox, audit), then wakes the
// reconciler.
func (h *Hub) changeDesired(r *http.Request, id, state string, expected *int64, key, kind string) (hubstore.DesiredResult, *hubhttp.Error) {
	ctx := r.Context()
	j, v, err := h.currentVersion(ctx, id)
	if err != nil {
		return hubstore.DesiredResult{}, h.errorOf(r, err, hubwire.CodeJobNotFound)
	}
	// Without a key, a stale If-Match is refused before placement; with
	// one, the store answers a replay first.
	if expected != nil && *expected != j.Generation && key == "" {
		return hubstore.DesiredResult{}, hubhttp.GenerationPreconditionFailed(*expected, j.Generation)
	}
	next := j.Generation + 1
	var assignments []hubstore.Assignment
	if state == hubstore.DesiredRunning {
		var e *hubhttp.Error
		if assignments, e = h.placement(ctx, j, v, next, nil); e != nil {
			return hubstore.DesiredResult{}, e
		}
	} else {
		prev, err := h.store.Assignments(ctx, id, j.Generation)
		if err != nil {
			return hubstore.DesiredResult{}, h.errorOf(r, err, "")
		}
		if j.DesiredState == hubstore.DesiredRunning {
			// The nodes that ran it stop what each ran: the same tasks.
			for _, a := range prev {
				assignments = append(assignments, hubstore.Assignment{AssignmentID: fmt.Sprintf("%s:%s:%d", id, a.NodeID, next), NodeID: a.NodeID,
					Payload: a.Payload})
			}
		}
	}
	res, err := h.store.SetDesired(ctx, hubstore.DesiredChange{JobID: id, DesiredState: state, Kind: kind, ExpectedGeneration: expected,
		Assignments: assignments, Actor: actorOf(r), CorrelationID: hubhttp.CorrelationID(ctx), IdempotencyKey: key})
	if err != nil {
		return res, h.errorOf(r, err, hubwire.CodeJobNotFound)
	}
	h.log.Info("job desired state", "job", id, "state", state, "generation", res.Generation, "replayed", res.Replayed)
	h.poke()
	return res, nil
}

// errorOf maps a store error like storeError, returning the envelope.
func (h *Hub) errorOf(r *http.Request, err error, notFound string) *hubhttp.Error {
	var gc *hubstore.GenerationConflictError
	switch {
	case errors.As(err, &gc):
		return hubhttp.GenerationPreconditionFailed(gc.Expected, gc.Current)
	case errors.Is(err, hubstore.ErrNotFound):
		return hubhttp.NotFound(notFound, notFoundMessage(r, err))
	case errors.Is(err, hubstore.ErrIdempotencyKeyReused):
		return hubhttp.IdempotencyKeyReused()
	case errors.Is(err, hubstore.ErrInvalid):
		return hubhttp.NewError(http.StatusUnprocessableEntity, hubhttp.CodeValidationFailed, err.Error())
	}
	h.log.Error("store", "error", err, "correlation_id", hubhttp.CorrelationID(r.Context()), "path", r.URL.Path)
	return hubhttp.Internal()
}

func nodeState(a hubstore.Agent, now time.Time) string {
	switch {
	case !a.Online(now):
		return hubwire.NodeStale
	case a.State == hubwire.NodeDraining || a.MaintenanceState == hubstore.MaintenanceDraining:
		return hubwire.NodeDraining
	}
	return hubwire.NodeOnline
}

func (h *Hub) hubNode(a hubstore.Agent, now time.Time) hubwire.HubNode {
	n := hubwire.HubNode{ID: a.NodeID, ProtocolVersion: a.ProtocolVersion, Version: a.SoftwareVersion, State: nodeState(a, now),
		Capabilities: a.Capabilities.Features, LastSeenAtMs: ms(a.LastSeen), LeaseExpiresAtMs: ms(a.LeaseExpires),
		MaintenanceState: a.MaintenanceState, BootID: a.BootID}
	n.StreamsTotal, n.StreamsRunning, n.StreamsFailed = reportedCounts(a.LastReport)
	if c := a.Capabilities; c.JobRuntimeVersion != "" || len(c.StateBackends) > 0 || len(c.Connectors) > 0 || len(c.Operators) > 0 {
		n.CapabilityDetails = &hubwire.CapabilityDetails{JobRuntimeVersion: c.JobRuntimeVersion, StateBackends: c.StateBackends,
			CheckpointProtocolVersion: uint32(max(c.CheckpointProtocol, 0)), Connectors: c.Connectors, Operators: c.Operators}
	}
	return n
}

// reportedCounts counts the streams and jobs of an Agent's last report
// (v1 reports streams, our Agents jobs): in all, running and failed.
func reportedCounts(report json.RawMessage) (total, running, failed uint64) {
	if len(report) == 0 {
		return 0, 0, 0
	}
	var rep struct {
		Streams []struct {
			State string `json:"state"`
		} `json:"streams"`
		Jobs []struct {
			State string `json:"state"`
		} `json:"jobs"`
	}
	if json.Unmarshal(report, &rep) != nil {
		return 0, 0, 0
	}
	count := func(state string) {
		total++
		switch state {
		case hubwire.JobRunning:
			running++
		case hubwire.JobFailed:
			failed++
		}
	}
	for _, s := range rep.Streams {
		count(s.State)
	}
	for _, j := range rep.Jobs {
		count(j.State)
	}
	return total, running, failed
}

// reportedPartitions is what an Agent's last report says its source
// tasks of job (at generation) read.
func reportedPartitions(report json.RawMessage, job string, generation uint64) map[string][]string {
	var rep struct {
		Jobs []hubwire.JobStatus `json:"jobs"`
	}
	if len(report) == 0 || json.Unmarshal(report, &rep) != nil {
		return nil
	}
	for _, j := range rep.Jobs {
		if j.JobID == job && j.Generation == generation {
			return j.Partitions
		}
	}
	return nil
}

// listNodes is GET /nodes, paged.
func (h *Hub) listNodes(w http.ResponseWriter, r *http.Request) {
	pg, e := hubhttp.ParsePaging(r)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	agents, err := h.store.ListAgents(r.Context())
	if err != nil {
		h.storeError(w, r, err, "")
		return
	}
	now := h.cfg.Clock()
	var items []hubwire.HubNode
	for i := int(pg.Offset()); i < len(agents) && len(items) < pg.PageSize; i++ {
		items = append(items, h.hubNode(agents[i], now))
	}
	hubhttp.WriteJSON(w, http.StatusOK, hubhttp.NewPage(pg, items, int64(len(agents))))
}

// checkpoint is POST /jobs/{id}/savepoints (kind savepoint) and
// /checkpoints (kind checkpoint): a pending record and a job_savepoint or
// job_checkpoint command to every node of the running generation. The
// record completes when every expected assignment succeeded.
//
// The body is optional. A savepoint's may name it ({"name": …}: the
// savepoint is stored under that name, and an upgrade or a restore
// refers to it by it); a checkpoint's has no fields. A field either does
// not know is refused, naming it, rather than ignored. A job whose spec
// has no checkpoint block is refused with 409 checkpoints_not_configured
// (field spec.checkpoint).
func (h *Hub) checkpoint(w http.ResponseWriter, r *http.Request, kind string) {
	ctx := r.Context()
	id := r.PathValue("id")
	var req hubwire.SavepointRequest
	var dst any = &req
	if kind == hubstore.KindCheckpoint {
		dst = &struct{}{}
	}
	if _, e := hubhttp.DecodeOptionalJSONStrict(w, r, dst); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	if req.Name != "" {
		if err := ckptstore.ValidSavepointName(req.Name); err != nil {
			hubhttp.WriteError(w, r, hubhttp.ValidationFailed("name", err.Error()))
			return
		}
	}
	j, err := h.store.GetJob(ctx, id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	if req.Name != "" {
		// A savepoint name is never reused (the checkpoint catalog
		// refuses it): say so now, not after the Agents cut it.
		cps, err := h.store.ListCheckpoints(ctx, id, hubstore.KindSavepoint)
		if err != nil {
			h.storeError(w, r, err, "")
			return
		}
		for _, c := range cps {
			if c.Status == hubstore.CheckpointCompleted && savepointName(c) == req.Name {
				hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusConflict, hubwire.CodeSavepointExists,
					fmt.Sprintf("job %s already has a savepoint named %q (%s): savepoint names are never reused", id, req.Name, c.CheckpointID)).WithField("name"))
				return
			}
		}
	}
	cpID, e := h.triggerCheckpoint(ctx, j, kind, req.Name, hubhttp.CorrelationID(ctx))
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	name := ""
	if kind == hubstore.KindSavepoint {
		if name = req.Name; name == "" {
			name = cpID
		}
	}
	if err := h.store.Audit(ctx, hubstore.AuditRecord{Actor: actorOf(r), Action: "job." + kind, ResourceType: "job", ResourceID: id,
		Outcome: "accepted", Message: kind + " " + cpID + " " + name, CorrelationID: hubhttp.CorrelationID(ctx)}); err != nil {
		h.log.Warn("writing an audit row", "error", err)
	}
	rec, err := h.jobRecord(ctx, id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	rec.CheckpointID = cpID
	hubhttp.WriteJSON(w, http.StatusAccepted, rec)
}

// listCheckpoints is GET /jobs/{id}/checkpoints and /savepoints: both
// kinds, newest first, as v1 answers both routes.
func (h *Hub) listCheckpoints(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := h.store.GetJob(r.Context(), id); err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	cps, err := h.store.ListCheckpoints(r.Context(), id, "")
	if err != nil {
		h.storeError(w, r, err, "")
		return
	}
	out := make([]hubwire.JobCheckpointRecord, 0, len(cps))
	for _, c := range cps {
		out = append(out, h.checkpointRecord(r.Context(), c))
	}
	hubhttp.WriteJSON(w, http.StatusOK, out)
}

func (h *Hub) checkpointRecord(ctx context.Context, c hubstore.Checkpoint) hubwire.JobCheckpointRecord {
	rec := hubwire.JobCheckpointRecord{JobID: c.JobID, CheckpointID: c.CheckpointID, Kind: c.Kind, Status: c.Status,
		ManifestURI: c.ManifestURI, FormatVersion: uint32(max(c.FormatVersion, 0)), CreatedAtMs: ms(c.CreatedAt),
		UpdatedAtMs: ms(c.UpdatedAt), Generation: uint64(max(c.Generation, 0)), Error: c.Error}
	if c.Kind == hubstore.KindSavepoint && c.Status == hubstore.CheckpointCompleted {
		rec.Name = savepointName(c)
	}
	if v, err := h.store.GetVersion(ctx, c.JobID, c.VersionID); err == nil {
		rec.JobVersion = uint64(v.Number)
	}
	return rec
}

// rebalance is POST /jobs/{id}/actions/rebalance (extension): a running
// job's placement units are spread again over the Agents that fit, each
// taking at most its share, so Agents added since the job started take
// units from crowded ones (scale-out without a new parallelism). A moved
// unit restores from the job's last completed checkpoint; the others keep
// running. If-Match applies. Already balanced: 200 and nothing changes.
func (h *Hub) rebalance(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	j, err := h.store.GetJob(ctx, id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	gen, present, e := hubhttp.IfMatch(r)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	if present && gen != j.Generation {
		hubhttp.WriteError(w, r, hubhttp.GenerationPreconditionFailed(gen, j.Generation))
		return
	}
	if agg, err := h.observe(ctx, j); err != nil || j.DesiredState != hubstore.DesiredRunning || agg.State != hubstore.ObservedRunning {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusConflict, hubwire.CodeInvalidJobAction, "only a job observed running can be rebalanced"))
		return
	}
	as, err := h.store.Assignments(ctx, id, j.Generation)
	if err != nil {
		h.storeError(w, r, err, "")
		return
	}
	_, moved, e := h.moveUnits(ctx, j, as, nil, true, "rebalance", actorOf(r), hubhttp.CorrelationID(ctx))
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	outcome := "nothing to move"
	if moved {
		outcome = "units moved"
	}
	if err := h.store.Audit(ctx, hubstore.AuditRecord{Actor: actorOf(r), Action: "job.rebalance", ResourceType: "job", ResourceID: id,
		Outcome: "accepted", Message: outcome, CorrelationID: hubhttp.CorrelationID(ctx)}); err != nil {
		h.log.Warn("writing an audit row", "error", err)
	}
	rec, err := h.jobRecord(ctx, id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	hubhttp.SetETag(w, int64(rec.Generation))
	hubhttp.WriteJSON(w, http.StatusOK, rec)
}

// checkpointHealth summarises the checkpoints (not savepoints) the Hub
// recorded, newest first: degraded while the newest ones failed. Nil when
// there are none.
func checkpointHealth(newestFirst []hubstore.Checkpoint) *hubwire.CheckpointHealth {
	var hl *hubwire.CheckpointHealth
	for _, c := range newestFirst {
		if c.Kind != hubstore.KindCheckpoint || c.Status == hubwire.CheckpointPending {
			continue
		}
		if hl == nil {
			hl = &hubwire.CheckpointHealth{State: "healthy"}
		}
		if c.Status == hubwire.CheckpointCompleted {
			hl.LastCompletedCheckpointID, hl.LastCompletedAtMs = c.CheckpointID, ms(c.UpdatedAt)
			break
		}
		hl.ConsecutiveFailures++
		hl.State = "degraded"
		if hl.LastError == "" {
			hl.LastError = c.Error
		}
	}
	return hl
}

// listAudit is GET /audit?resource_id: the audit log, newest first, paged.
// Like v1 it needs only the read action.
func (h *Hub) listAudit(w http.ResponseWriter, r *http.Request) {
	pg, e := hubhttp.ParsePaging(r)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	rows, total, err := h.store.AuditPage(r.Context(), r.URL.Query().Get("resource_id"), int(pg.Offset()), pg.PageSize)
	if err != nil {
		h.storeError(w, r, err, "")
		return
	}
	items := make([]hubwire.AuditRecord, 0, len(rows))
	for _, a := range rows {
		items = append(items, hubwire.AuditRecord{EventID: a.ID, Actor: a.Actor, Action: a.Action, ResourceType: a.ResourceType,
			ResourceID: a.ResourceID, CorrelationID: a.CorrelationID, Outcome: a.Outcome, FailureCode: a.FailureCode,
			Message: a.Message, OccurredAtMs: ms(a.At)})
	}
	hubhttp.WriteJSON(w, http.StatusOK, hubhttp.NewPage(pg, items, total))
}
