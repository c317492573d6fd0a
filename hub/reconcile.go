package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
)

// outboxLease is how long the reconciler holds a claimed outbox entry; a
// Hub that dies mid-way leaves it to be claimed again after it.
const outboxLease = 30 * time.Second

// reconcileLoop turns desired state into commands: it runs on every
// change (poke) and every ReconcileInterval, until ctx ends.
func (h *Hub) reconcileLoop(ctx context.Context) {
	t := time.NewTicker(h.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		h.reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.wake:
		}
	}
}

// reconcile is one pass: the expiry sweep, then every claimable outbox
// entry.
func (h *Hub) reconcile(ctx context.Context) {
	if ids, err := h.store.ExpireCommands(ctx); err != nil {
		if ctx.Err() == nil {
			h.log.Warn("expiring commands", "error", err)
		}
	} else if len(ids) > 0 {
		h.log.Warn("commands timed out", "commands", ids)
	}
	h.sweepAgents(ctx)
	h.converge(ctx)
	h.retry(ctx)
	h.advanceCheckpoints(ctx)
	h.periodicCheckpoints(ctx)
	for ctx.Err() == nil {
		entries, err := h.store.ClaimOutbox(ctx, "reconciler", outboxLease, 16)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("claiming the outbox", "error", err)
			}
			return
		}
		if len(entries) == 0 {
			return
		}
		for _, e := range entries {
			if err := h.handleOutbox(ctx, e); err != nil && ctx.Err() == nil {
				h.log.Warn("reconciling", "job", e.JobID, "intent", e.IntentID, "event", e.EventType, "error", err)
				// Try again later rather than spin on it.
				if err := h.store.DeferOutbox(ctx, e.ID, h.cfg.Clock().Add(h.cfg.ReconcileInterval*5)); err != nil {
					h.log.Warn("deferring an outbox entry", "error", err)
				}
			}
		}
	}
}

// handleOutbox dispatches one intent: job_start of the generation's
// assignments for desired running (and job_stop to nodes of the previous
// generation that left the placement), job_stop to them for desired
// stopped. Commands are queued and the entry completed in one
// transaction.
func (h *Hub) handleOutbox(ctx context.Context, e hubstore.OutboxEntry) error {
	if e.IntentID == "" || (e.EventType != "reconcile_intent" && e.EventType != "retry_intent" && e.EventType != "recovery") {
		_, err := h.store.CompleteOutbox(ctx, e.ID)
		return err
	}
	in, err := h.store.GetIntent(ctx, e.IntentID)
	if errors.Is(err, hubstore.ErrNotFound) {
		_, err = h.store.CompleteOutbox(ctx, e.ID)
		return err
	}
	if err != nil {
		return err
	}
	j, err := h.store.GetJob(ctx, in.JobID)
	if err != nil {
		return err
	}
	if in.Generation != j.Generation || in.State == "superseded" || in.State == "converged" {
		_, err := h.store.CompleteOutbox(ctx, e.ID)
		return err
	}
	as, err := h.store.Assignments(ctx, j.JobID, in.Generation)
	if err != nil {
		return err
	}
	prev, err := h.store.Assignments(ctx, j.JobID, in.Generation-1)
	if err != nil {
		return err
	}
	deadline := h.cfg.Clock().Add(h.cfg.CommandTimeout)
	base := hubstore.Command{JobID: j.JobID, Generation: in.Generation, IntentID: in.IntentID, ActionID: in.ActionID,
		CorrelationID: in.CorrelationID, ExpiresAt: deadline}
	var cmds []hubstore.Command
	if in.DesiredState == hubstore.DesiredRunning {
		v, pp, err := h.versionPlan(ctx, j.JobID, in.VersionID)
		if err != nil {
			return err
		}
		served, err := servedPlan(v)
		if err != nil {
			return err
		}
		recovery, err := h.pendingRecovery(ctx, in)
		if err != nil {
			return err
		}
		held := map[string]bool{}
		for _, a := range as {
			held[a.NodeID] = true
			payload, err := json.Marshal(hubwire.JobCommandPayload{JobID: j.JobID, Spec: v.Spec, Plan: served,
				Assignments: taskAttempts(a, v, pp, in.Generation, hubwire.TaskQueued),
				Generation:  uint64(in.Generation), Recovery: recovery, Restart: in.Kind == "restart"})
			if err != nil {
				return err
			}
			c := base
			c.ID, c.NodeID, c.Operation, c.AssignmentID, c.Payload = commandID(in, a.NodeID, "start"), a.NodeID, hubstore.OpJobStart, a.AssignmentID, payload
			cmds = append(cmds, c)
		}
		for _, a := range prev {
			if held[a.NodeID] {
				continue
			}
			held[a.NodeID] = true
			payload, _ := json.Marshal(hubwire.JobCommandPayload{JobID: j.JobID})
			c := base
			c.ID, c.NodeID, c.Operation, c.Payload = commandID(in, a.NodeID, "leave"), a.NodeID, hubstore.OpJobStop, payload
			cmds = append(cmds, c)
		}
	} else {
		for _, a := range as {
			v, pp, err := h.versionPlan(ctx, j.JobID, a.VersionID)
			if err != nil {
				return err
			}
			payload, _ := json.Marshal(hubwire.JobCommandPayload{JobID: j.JobID, Generation: uint64(in.Generation),
				Assignments: taskAttempts(a, v, pp, in.Generation, hubwire.TaskStopping)})
			c := base
			c.ID, c.NodeID, c.Operation, c.AssignmentID, c.Payload = commandID(in, a.NodeID, "stop"), a.NodeID, hubstore.OpJobStop, a.AssignmentID, payload
			cmds = append(cmds, c)
		}
	}
	queued, done, err := h.store.DispatchOutbox(ctx, e.ID, cmds)
	if err != nil {
		return err
	}
	if done {
		h.log.Info("intent dispatched", "job", j.JobID, "generation", in.Generation, "desired", in.DesiredState, "commands", len(queued))
		if err := h.store.UpdateIntent(ctx, hubstore.IntentUpdate{IntentID: in.IntentID, State: "converging", Convergence: hubwire.ConvergenceConverging}); err != nil &&
			!errors.Is(err, hubstore.ErrStaleGeneration) {
			return err
		}
	}
	return nil
}

// commandID is deterministic per intent, node and role, so a dispatch
// retried after a crash queues nothing twice.
func commandID(in hubstore.Intent, node, role string) string {
	return fmt.Sprintf("cmd-%s-%s-%s", in.IntentID, node, role)
}

// converge marks each job's open intent of the current generation
// converged (or failed) once the observed state of every expected
// assignment says so, so a Hub restart does not dispatch it again.
func (h *Hub) converge(ctx context.Context) {
	jobs, err := h.store.ListJobs(ctx)
	if err != nil {
		return
	}
	for _, j := range jobs {
		ins, err := h.store.ListIntents(ctx, j.JobID)
		if err != nil || len(ins) == 0 {
			continue
		}
		in := ins[0]
		if in.Generation != j.Generation || (in.State != "accepted" && in.State != "converging" && in.State != "retrying") {
			continue
		}
		agg, err := h.observe(ctx, j)
		if err != nil {
			continue
		}
		u := hubstore.IntentUpdate{IntentID: in.IntentID}
		switch {
		case agg.State == hubstore.ObservedFailed:
			u.State, u.Convergence = "failed", "failed"
			if agg.Failure != nil {
				u.FailureClass, u.Error = agg.Failure.FailureClass, agg.Failure.Message
			}
		case agg.State != hubstore.ObservedConverging && in.State == "converging":
			u.State, u.Convergence = "converged", hubwire.ConvergenceInSync
		default:
			continue
		}
		if err := h.store.UpdateIntent(ctx, u); err != nil && !errors.Is(err, hubstore.ErrStaleGeneration) {
			h.log.Warn("updating an intent", "intent", in.IntentID, "error", err)
		}
	}
}

// sweepAgents logs Agents whose lease lapsed (and those back online),
// and fails over the jobs that have assignments on lapsed ones. A stale
// Agent gets no new placement; its queued commands wait for it until
// their deadline.
func (h *Hub) sweepAgents(ctx context.Context) {
	agents, err := h.store.ListAgents(ctx)
	if err != nil {
		return
	}
	now := h.cfg.Clock()
	stale := map[string]bool{}
	defer func() { h.failover(ctx, stale) }()
	h.staleMu.Lock()
	defer h.staleMu.Unlock()
	for _, a := range agents {
		online := a.Online(now)
		if !online {
			stale[a.NodeID] = true
		}
		was, known := h.online[a.NodeID]
		if known && was != online {
			if online {
				h.log.Info("agent back online", "node", a.NodeID)
			} else {
				h.log.Warn("agent stale: its lease lapsed", "node", a.NodeID, "last_seen", a.LastSeen)
			}
		}
		h.online[a.NodeID] = online
	}
}

// retryDelay is how long after a retryable failure the Hub sends the
// command again.
const retryDelay = 2 * time.Second

// maxAttempts bounds the commands sent for one assignment of one
// generation; after that the assignment stays degraded until an operator
// sets the desired state again.
const maxAttempts = 10

// retry sends the command of an assignment again when its latest attempt
// failed retryably (timed out, node unavailable, a temporary failure) and
// its node is online: the job converges instead of staying degraded.
func (h *Hub) retry(ctx context.Context) {
	jobs, err := h.store.ListJobs(ctx)
	if err != nil {
		return
	}
	now := h.cfg.Clock()
	for _, j := range jobs {
		agg, err := h.observe(ctx, j)
		if err != nil || agg.Degraded == 0 {
			continue
		}
		cmds, err := h.store.ListCommands(ctx, j.JobID, j.Generation)
		if err != nil {
			continue
		}
		for _, a := range agg.Assignments {
			if a.Status != "degraded" || a.CommandID == "" {
				continue
			}
			last, err := h.store.GetCommand(ctx, a.CommandID)
			if err != nil || !last.State.Terminal() || now.Before(last.FinishedAt.Add(retryDelay)) {
				continue
			}
			if ag, err := h.store.GetAgent(ctx, a.NodeID); err != nil || !ag.Online(now) {
				continue
			}
			attempts := 0
			for _, c := range cmds {
				if c.AssignmentID == a.AssignmentID && c.Operation == last.Operation {
					attempts++
				}
			}
			if attempts >= maxAttempts {
				continue
			}
			h.resend(ctx, last, fmt.Sprintf("%s-retry%d", baseID(last.ID), attempts))
		}
	}
}

// baseID strips the retry or boot suffix of a command id.
func baseID(id string) string {
	for _, sep := range []string{"-retry", "-boot-"} {
		if i := strings.Index(id, sep); i > 0 {
			id = id[:i]
		}
	}
	return id
}

// resend queues a copy of c under id (a no-op if id exists).
func (h *Hub) resend(ctx context.Context, c hubstore.Command, id string) {
	n := hubstore.Command{ID: id, NodeID: c.NodeID, Operation: c.Operation, JobID: c.JobID, Generation: c.Generation,
		AssignmentID: c.AssignmentID, IntentID: c.IntentID, CheckpointID: c.CheckpointID, ActionID: c.ActionID,
		CorrelationID: c.CorrelationID, Payload: c.Payload, ExpiresAt: h.cfg.Clock().Add(h.cfg.CommandTimeout)}
	if _, err := h.store.EnqueueCommand(ctx, n); err != nil {
		h.log.Warn("sending a command again", "command", id, "error", err)
		return
	}
	h.log.Info("command sent again", "command", id, "node", c.NodeID, "job", c.JobID, "generation", c.Generation, "operation", c.Operation)
}

// restartOnNewBoot sends job_start again for every job desired running
// with an assignment on node at its current generation: the node's
// process restarted (a new boot id), so the jobs it ran are gone, though
// their starts had succeeded.
func (h *Hub) restartOnNewBoot(ctx context.Context, node, bootID string) {
	for _, j := range h.runningJobs(ctx) {
		cmds, err := h.store.ListCommands(ctx, j.JobID, j.Generation)
		if err != nil {
			continue
		}
		var last *hubstore.Command
		for i, c := range cmds {
			if c.NodeID == node && c.Operation == hubstore.OpJobStart && c.AssignmentID != "" {
				last = &cmds[i]
			}
		}
		if last == nil || !last.State.Terminal() {
			continue // not started yet there, or the start is still on its way
		}
		again := *last
		if last.State == hubstore.CommandSucceeded {
			// The job ran: it restores from its own checkpoints now, not
			// from the savepoint an upgrade started it from.
			var p hubwire.JobCommandPayload
			if err := json.Unmarshal(last.Payload, &p); err == nil && p.Recovery != nil {
				p.Recovery = nil
				if b, err := json.Marshal(p); err == nil {
					again.Payload = b
				}
			}
		}
		h.resend(ctx, again, fmt.Sprintf("%s-boot-%s", baseID(last.ID), bootID))
	}
}

// runningJobs lists the jobs desired running; none when the store fails
// (the next pass tries again).
func (h *Hub) runningJobs(ctx context.Context) []hubstore.Job {
	jobs, err := h.store.ListJobs(ctx)
	if err != nil {
		return nil
	}
	out := jobs[:0]
	for _, j := range jobs {
		if j.DesiredState == hubstore.DesiredRunning {
			out = append(out, j)
		}
	}
	return out
}
