package hub

// This file drives checkpoints and savepoints of jobs on Agents. For a job
// whose assignments name plan tasks (Agents with placement_units) it is
// v1's two-phase protocol, which commits only with every expected
// assignment: the Hub picks the id and
// sends job_checkpoint (job_savepoint) to every node of the generation;
// each cuts its own tasks and writes a part manifest; when every expected
// assignment succeeded, one node gets job_checkpoint_commit with the list
// of parts and seals the whole manifest, and only its success completes
// the record. A node that is offline, fails or times out fails the round:
// the previous checkpoint stays the one restores use. For an Agent that
// runs the whole job (no placement_units), its one result completes the
// record, as before.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/hubhttp"
	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/jobdefaults"
	"github.com/arkflow-rs/arkflow-go/job"
)

// defaultCheckpointTimeout bounds a round's commands: a node that has not
// answered by then fails the round.
const defaultCheckpointTimeout = 2 * time.Minute

// twoPhase says the generation's assignments name plan tasks, so its
// checkpoints are cut in parts and committed by the Hub.
func twoPhase(as []hubstore.Assignment) bool {
	if len(as) == 0 {
		return false
	}
	for _, a := range as {
		if len(assignmentTasks(a).Tasks) == 0 {
			return false
		}
	}
	return true
}

// nextCheckpointID is the id of a two-phase checkpoint: a decimal number
// (the checkpoint catalog's id format) above every earlier one of the job
// and at least the Hub clock in milliseconds, so that it also sorts after
// the ids a process counted up on its own.
func (h *Hub) nextCheckpointID(ctx context.Context, jobID string) (string, error) {
	cps, err := h.store.ListCheckpoints(ctx, jobID, hubstore.KindCheckpoint)
	if err != nil {
		return "", err
	}
	next := uint64(h.cfg.Clock().UnixMilli())
	for _, c := range cps {
		if n, err := strconv.ParseUint(c.CheckpointID, 10, 64); err == nil && n >= next {
			next = n + 1
		}
	}
	return fmt.Sprintf("%020d", next), nil
}

// errNotRunning is a trigger refused because the job is not observed
// running.
var errNotRunning = errors.New("the job is not observed running")

// triggerCheckpoint starts a round of kind for the job's current
// generation and returns its record id. name is a savepoint's name ("" for
// a generated one).
func (h *Hub) triggerCheckpoint(ctx context.Context, j hubstore.Job, kind, name, correlation string) (string, *hubhttp.Error) {
	// A job without a checkpoint block has nowhere to write one: refused
	// now, not as a command every Agent then fails.
	v, err := h.store.GetVersion(ctx, j.JobID, j.CurrentVersion)
	if err != nil {
		return "", hubhttp.Internal()
	}
	pp, err := physicalPlan(v)
	if err != nil {
		return "", hubhttp.NewError(http.StatusInternalServerError, hubwire.CodeInvalidPersistedJob, "the stored spec does not plan: "+err.Error())
	}
	if pp.Spec.Checkpoint == nil {
		return "", hubhttp.NewError(http.StatusConflict, hubwire.CodeCheckpointsNotConfigured,
			fmt.Sprintf("job %s has no checkpoint block (spec.checkpoint), so it takes no %ss: submit a version with "+
				`"checkpoint":{"object_store_uri":…} (and a state block) to take them`, j.JobID, kind)).WithField("spec.checkpoint")
	}
	agg, err := h.observe(ctx, j)
	if err != nil {
		return "", hubhttp.Internal()
	}
	if j.DesiredState != hubstore.DesiredRunning || agg.State != hubstore.ObservedRunning {
		return "", hubhttp.NewError(http.StatusConflict, hubwire.CodeSavepointNotReady, errNotRunning.Error()+": no "+kind+" can be taken")
	}
	as, err := h.store.Assignments(ctx, j.JobID, j.Generation)
	if err != nil {
		return "", hubhttp.Internal()
	}
	two := twoPhase(as)
	cpID := fmt.Sprintf("%s-%d-%d", kind, j.Generation, h.cfg.Clock().UnixMilli())
	if two && kind == hubstore.KindCheckpoint {
		if cpID, err = h.nextCheckpointID(ctx, j.JobID); err != nil {
			return "", hubhttp.Internal()
		}
	}
	op := hubstore.OpJobCheckpoint
	if kind == hubstore.KindSavepoint {
		op = hubstore.OpJobSavepoint
		if name == "" {
			name = cpID
		}
	}
	if _, err := h.store.CreateCheckpoint(ctx, hubstore.Checkpoint{JobID: j.JobID, CheckpointID: cpID, Kind: kind,
		Generation: j.Generation, VersionID: j.CurrentVersion, FormatVersion: 1}); err != nil {
		return "", hubhttp.Internal()
	}
	now := h.cfg.Clock()
	for _, a := range as {
		if ag, err := h.store.GetAgent(ctx, a.NodeID); err != nil || !ag.Online(now) {
			msg := fmt.Sprintf("node %s is offline: the previous checkpoint stays in use", a.NodeID)
			if _, err := h.store.FinishCheckpoint(ctx, j.JobID, cpID, hubstore.CheckpointFailed, "", msg); err != nil {
				h.log.Warn("failing a checkpoint record", "job", j.JobID, "checkpoint", cpID, "error", err)
			} else {
				h.metrics.countCheckpoint(kind, hubstore.CheckpointFailed)
			}
			h.log.Warn(kind+" failed before it started", "job", j.JobID, "checkpoint", cpID, "reason", msg)
			return cpID, nil
		}
	}
	deadline := now.Add(min(h.cfg.CommandTimeout, defaultCheckpointTimeout))
	for _, a := range as {
		payload, _ := json.Marshal(hubwire.CheckpointPayload{JobID: j.JobID, CheckpointID: cpID, Name: name,
			Assignments: taskAttempts(a, v, pp, j.Generation, hubwire.TaskRunning)})
		if _, err := h.store.EnqueueCommand(ctx, hubstore.Command{ID: fmt.Sprintf("cmd-%s-%s-%s", j.JobID, cpID, a.NodeID), NodeID: a.NodeID,
			Operation: op, JobID: j.JobID, Generation: j.Generation, AssignmentID: a.AssignmentID, CheckpointID: cpID,
			CorrelationID: correlation, Payload: payload, ExpiresAt: deadline}); err != nil {
			return "", hubhttp.Internal()
		}
	}
	h.log.Info(kind+" started", "job", j.JobID, "generation", j.Generation, "checkpoint", cpID, "nodes", len(as), "two_phase", two)
	return cpID, nil
}

// resultOf is the last result an Agent posted for command id, decoded.
func (h *Hub) resultOf(ctx context.Context, id string) (hubwire.CommandResult, bool) {
	rs, err := h.store.CommandResults(ctx, id)
	if err != nil || len(rs) == 0 {
		return hubwire.CommandResult{}, false
	}
	var r hubwire.CommandResult
	if json.Unmarshal(rs[len(rs)-1].Details, &r) != nil {
		return hubwire.CommandResult{}, false
	}
	if r.Error == "" {
		r.Error = rs[len(rs)-1].Error
	}
	return r, true
}

// advanceCheckpoints moves every pending record on: failed when a command
// of its round failed or its generation ended, committed by one node when
// every part succeeded, completed when the commit (or, for whole-job
// Agents, every part) succeeded.
func (h *Hub) advanceCheckpoints(ctx context.Context) {
	jobs, err := h.store.ListJobs(ctx)
	if err != nil {
		return
	}
	for _, j := range jobs {
		cps, err := h.store.ListCheckpoints(ctx, j.JobID, "")
		if err != nil {
			continue
		}
		// Oldest first: a round that completes lets a newer one waiting
		// for it (olderRoundOpen) commit in the same pass.
		for i := len(cps) - 1; i >= 0; i-- {
			if cps[i].Status == hubstore.CheckpointPending {
				h.advanceCheckpoint(ctx, j, cps[i])
			}
		}
	}
}

// advanceCheckpoint moves one pending record on: failed when its
// generation ended or a part of its round failed; once every assignment's
// node has its part in, completed (whole-job Agents, whose parts are the
// commit) or handed to advanceCommit (two-phase rounds).
func (h *Hub) advanceCheckpoint(ctx context.Context, j hubstore.Job, c hubstore.Checkpoint) {
	if c.Generation != j.Generation {
		h.finishCheckpoint(ctx, j, c, hubstore.CheckpointFailed, "", fmt.Sprintf("superseded: the job moved to generation %d before every part was committed", j.Generation))
		return
	}
	as, err := h.store.Assignments(ctx, j.JobID, c.Generation)
	if err != nil {
		return
	}
	cmds, err := h.store.ListCommands(ctx, j.JobID, c.Generation)
	if err != nil {
		return
	}
	partOp, commitOp := hubstore.OpJobCheckpoint, hubstore.OpJobCheckpointCommit
	if c.Kind == hubstore.KindSavepoint {
		partOp, commitOp = hubstore.OpJobSavepoint, hubstore.OpJobSavepointCommit
	}
	var parts, commits []hubstore.Command
	for _, m := range cmds {
		if m.CheckpointID != c.CheckpointID {
			continue
		}
		switch m.Operation {
		case partOp:
			parts = append(parts, m)
		case commitOp:
			commits = append(commits, m)
		}
	}
	if len(parts) == 0 {
		return // the trigger is still enqueueing
	}
	// A failed part fails the round.
	for _, m := range parts {
		if m.State.Terminal() && m.State != hubstore.CommandSucceeded {
			h.finishCheckpoint(ctx, j, c, hubstore.CheckpointFailed, "", h.commandFailure(ctx, m))
			return
		}
	}
	done := map[string]hubstore.Command{} // by node
	for _, m := range parts {
		if m.State == hubstore.CommandSucceeded {
			done[m.NodeID] = m
		}
	}
	for _, a := range as {
		if _, ok := done[a.NodeID]; !ok {
			return // a part is still on its way
		}
	}
	if !twoPhase(as) {
		uri := ""
		for _, m := range parts {
			if r, ok := h.resultOf(ctx, m.ID); ok {
				if uri = r.CheckpointManifestURI; uri == "" {
					uri = r.ObservedCheckpointID
				}
			}
		}
		h.finishCheckpoint(ctx, j, c, hubstore.CheckpointCompleted, uri, "")
		return
	}
	h.advanceCommit(ctx, j, c, commits, done, commitOp)
}

// finishCheckpoint records a round's outcome, counts it and logs it.
func (h *Hub) finishCheckpoint(ctx context.Context, j hubstore.Job, c hubstore.Checkpoint, status, uri, msg string) {
	if _, err := h.store.FinishCheckpoint(ctx, j.JobID, c.CheckpointID, status, uri, msg); err != nil {
		h.log.Warn("finishing a checkpoint record", "job", j.JobID, "checkpoint", c.CheckpointID, "error", err)
		return
	}
	h.metrics.countCheckpoint(c.Kind, status)
	if status == hubstore.CheckpointCompleted {
		h.log.Info(c.Kind+" completed", "job", j.JobID, "checkpoint", c.CheckpointID, "manifest", uri)
	} else {
		h.log.Warn(c.Kind+" failed; the previous one stays in use", "job", j.JobID, "checkpoint", c.CheckpointID, "error", msg)
	}
}

// commandFailure says how a command of a round ended, with the error its
// Agent reported.
func (h *Hub) commandFailure(ctx context.Context, m hubstore.Command) string {
	msg := fmt.Sprintf("%s on %s %s", m.Operation, m.NodeID, m.State)
	if r, ok := h.resultOf(ctx, m.ID); ok && r.Error != "" {
		msg += ": " + r.Error
	}
	return msg
}

// advanceCommit moves a two-phase round whose parts are all in (done, by
// node) on. The node whose part finished first merges them. A commit that
// fails (its node restarted and lost the job's spec, or went away) goes
// to the next node with a part; the round fails only when every one of
// them failed to commit. A succeeded commit completes the round.
func (h *Hub) advanceCommit(ctx context.Context, j hubstore.Job, c hubstore.Checkpoint, commits []hubstore.Command, done map[string]hubstore.Command, commitOp string) {
	if len(commits) == 0 && c.Kind == hubstore.KindCheckpoint && h.olderRoundOpen(ctx, c) {
		return // committed after the older one, see olderRoundOpen
	}
	tried := map[string]bool{}
	for _, m := range commits {
		switch {
		case m.State == hubstore.CommandSucceeded:
			r, _ := h.resultOf(ctx, m.ID)
			uri := r.CheckpointManifestURI
			if uri == "" {
				uri = c.CheckpointID
			}
			h.finishCheckpoint(ctx, j, c, hubstore.CheckpointCompleted, uri, "")
			return
		case !m.State.Terminal():
			return // on its way
		}
		tried[m.NodeID] = true
	}
	first, nodes := nextCommitter(done, tried)
	if first == "" {
		h.finishCheckpoint(ctx, j, c, hubstore.CheckpointFailed, "", h.commandFailure(ctx, commits[len(commits)-1]))
		return
	}
	ref := c.CheckpointID
	var part hubwire.CheckpointPayload
	if json.Unmarshal(done[first].Payload, &part) == nil && c.Kind == hubstore.KindSavepoint && part.Name != "" {
		ref = part.Name
	}
	payload, _ := json.Marshal(hubwire.CommitPayload{CheckpointID: ref, ManifestNodes: nodes, JobID: j.JobID})
	id := fmt.Sprintf("cmd-%s-%s-commit", j.JobID, c.CheckpointID)
	if len(commits) > 0 {
		id = fmt.Sprintf("%s-%d", id, len(commits)+1)
	}
	if _, err := h.store.EnqueueCommand(ctx, hubstore.Command{ID: id, NodeID: first,
		Operation: commitOp, JobID: j.JobID, Generation: c.Generation, CheckpointID: c.CheckpointID, CorrelationID: done[first].CorrelationID,
		Payload: payload, ExpiresAt: h.cfg.Clock().Add(min(h.cfg.CommandTimeout, defaultCheckpointTimeout))}); err != nil {
		h.log.Warn("queueing a checkpoint commit", "job", j.JobID, "checkpoint", c.CheckpointID, "error", err)
		return
	}
	h.log.Info(c.Kind+" parts in; committing", "job", j.JobID, "checkpoint", c.CheckpointID, "node", first, "parts", len(nodes))
}

// nextCommitter returns the node that commits next: of the nodes with a
// part (done) that have not tried to commit, the one whose part finished
// first (ties by name); "" when every one has tried. nodes are all the
// nodes with a part, sorted.
func nextCommitter(done map[string]hubstore.Command, tried map[string]bool) (first string, nodes []string) {
	nodes = make([]string, 0, len(done))
	var firstAt time.Time
	for n, m := range done {
		nodes = append(nodes, n)
		if tried[n] {
			continue
		}
		if first == "" || m.FinishedAt.Before(firstAt) || (m.FinishedAt.Equal(firstAt) && n < first) {
			first, firstAt = n, m.FinishedAt
		}
	}
	sort.Strings(nodes)
	return first, nodes
}

// olderRoundOpen says whether a checkpoint round of c's job with a lower
// id than c is still pending. Commits of checkpoints go in id order, one
// at a time: a commit's retention deletes the uncommitted checkpoints
// below it, so an older round committed after a newer one would find its
// parts gone and fail (and a restore could never select it anyway).
func (h *Hub) olderRoundOpen(ctx context.Context, c hubstore.Checkpoint) bool {
	n, err := strconv.ParseUint(c.CheckpointID, 10, 64)
	if err != nil {
		return false
	}
	cps, err := h.store.ListCheckpoints(ctx, c.JobID, hubstore.KindCheckpoint)
	if err != nil {
		return true // try again on the next pass
	}
	for _, o := range cps {
		if m, err := strconv.ParseUint(o.CheckpointID, 10, 64); err == nil && m < n && o.Status == hubstore.CheckpointPending {
			return true
		}
	}
	return false
}

// periodicCheckpoints triggers the checkpoints of two-phase jobs every
// spec.checkpoint.interval_ms (their Agents take none on their own), one
// round at a time per job.
func (h *Hub) periodicCheckpoints(ctx context.Context) {
	now := h.cfg.Clock()
	for _, j := range h.runningJobs(ctx) {
		as, err := h.store.Assignments(ctx, j.JobID, j.Generation)
		if err != nil || !twoPhase(as) {
			continue
		}
		v, err := h.store.GetVersion(ctx, j.JobID, j.CurrentVersion)
		if err != nil {
			continue
		}
		spec, err := job.Parse(v.Spec)
		if err != nil || spec.Checkpoint == nil {
			continue
		}
		every := time.Duration(spec.Checkpoint.IntervalMS) * time.Millisecond
		if every <= 0 {
			every = time.Duration(jobdefaults.CheckpointIntervalMS) * time.Millisecond
		}
		cps, err := h.store.ListCheckpoints(ctx, j.JobID, "")
		if err != nil {
			continue
		}
		// Due when no round of either kind is open and the newest
		// checkpoint of this generation is older than the interval.
		due, newest := true, true
		for _, c := range cps { // newest first
			if c.Status == hubstore.CheckpointPending {
				due = false
			}
			if c.Kind == hubstore.KindCheckpoint && newest {
				newest = false
				if c.Generation == j.Generation && now.Sub(c.CreatedAt) < every {
					due = false
				}
			}
		}
		if !due {
			continue
		}
		if agg, err := h.observe(ctx, j); err != nil || agg.State != hubstore.ObservedRunning {
			continue
		}
		if _, e := h.triggerCheckpoint(ctx, j, hubstore.KindCheckpoint, "", ""); e != nil && h.log != nil {
			h.log.Warn("periodic checkpoint not started", "job", j.JobID, "error", e.Message)
		}
	}
}
