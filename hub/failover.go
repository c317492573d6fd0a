package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/hubhttp"
	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
)

// failover moves the assignments of Agents whose lease lapsed to other
// Agents that fit, as a new generation of the job (reports of the older
// generation are then rejected):
// placement keeps every other unit where it runs (those Agents adopt the
// new generation without a restart), and the moved units restore from the
// job's last completed checkpoint and read their sources from its
// positions. The Agent that lapsed is fenced by the generation: its
// results and reports of the old one are refused, and it gets job_stop
// when it polls again; a Kafka sink's transactional id moves with its
// unit, so the new producer fences the old one. A job with nowhere to go
// stays where it is and is tried again at the next sweep.
func (h *Hub) failover(ctx context.Context, stale map[string]bool) {
	if len(stale) == 0 {
		return
	}
	for _, j := range h.runningJobs(ctx) {
		as, err := h.store.Assignments(ctx, j.JobID, j.Generation)
		if err != nil {
			continue
		}
		var lost []string
		for _, a := range as {
			if stale[a.NodeID] {
				lost = append(lost, a.NodeID)
			}
		}
		if len(lost) == 0 {
			continue
		}
		if err := h.failoverJob(ctx, j, as, stale); err != nil {
			h.noteFailoverBlocked(j.JobID, err)
			continue
		}
		h.clearFailoverBlocked(j.JobID)
		h.metrics.failovers.Inc()
		h.log.Warn("failing over", "job", j.JobID, "from", lost, "generation", j.Generation+1)
	}
}

func (h *Hub) failoverJob(ctx context.Context, j hubstore.Job, as []hubstore.Assignment, stale map[string]bool) error {
	_, moved, e := h.moveUnits(ctx, j, as, stale, false, "failover", "hub", fmt.Sprintf("failover-%s-%d", j.JobID, j.Generation+1))
	if e != nil {
		return errors.New(e.Message)
	}
	if !moved {
		return errors.New("placement kept every unit where it was")
	}
	return nil
}

// moveUnits places the job's units again as a new generation (kind
// failover or rebalance) whose moved units restore from the last
// completed checkpoint. moved is false, and nothing changes, when the
// placement is the current one.
func (h *Hub) moveUnits(ctx context.Context, j hubstore.Job, as []hubstore.Assignment, exclude map[string]bool, balance bool,
	kind, actor, correlation string) (hubstore.DesiredResult, bool, *hubhttp.Error) {
	v, err := h.store.GetVersion(ctx, j.JobID, j.CurrentVersion)
	if err != nil {
		return hubstore.DesiredResult{}, false, hubhttp.Internal()
	}
	next := j.Generation + 1
	placed, e := h.place(ctx, j, v, next, exclude, balance)
	if e != nil {
		return hubstore.DesiredResult{}, false, e
	}
	if samePlacement(as, placed) {
		return hubstore.DesiredResult{}, false, nil
	}
	payload, _ := json.Marshal(recoveryPayload{Recovery: h.failoverRecovery(ctx, j, as)})
	expected := j.Generation
	res, err := h.store.SetDesired(ctx, hubstore.DesiredChange{JobID: j.JobID, DesiredState: hubstore.DesiredRunning, Kind: kind,
		ExpectedGeneration: &expected, Assignments: placed, Payload: payload, Actor: actor, CorrelationID: correlation})
	if err != nil {
		var gc *hubstore.GenerationConflictError
		if errors.As(err, &gc) {
			return res, false, hubhttp.GenerationPreconditionFailed(gc.Expected, gc.Current)
		}
		return res, false, hubhttp.Internal()
	}
	h.poke()
	return res, true, nil
}

// samePlacement reports whether two generations put the same tasks on the
// same nodes.
func samePlacement(a, b []hubstore.Assignment) bool {
	key := func(as []hubstore.Assignment) string {
		var parts []string
		for _, x := range as {
			parts = append(parts, x.NodeID+"="+strings.Join(assignmentTasks(x).Tasks, ","))
		}
		sort.Strings(parts)
		return strings.Join(parts, ";")
	}
	return len(a) == len(b) && key(a) == key(b)
}

// failoverRecovery is where moved units restore from: the job's newest
// completed checkpoint of its current version taken by the Hub (two-phase
// jobs), else where the current generation itself started from (a
// savepoint after an upgrade), else nothing (the Agents' own recovery:
// the latest checkpoint in the store).
func (h *Hub) failoverRecovery(ctx context.Context, j hubstore.Job, as []hubstore.Assignment) *hubwire.JobRecovery {
	if twoPhase(as) {
		if c, err := h.store.LatestCompleted(ctx, j.JobID, hubstore.KindCheckpoint, j.CurrentVersion, 1); err == nil && c.Generation > 0 {
			return &hubwire.JobRecovery{CheckpointID: c.CheckpointID}
		}
	}
	cmds, err := h.store.ListCommands(ctx, j.JobID, j.Generation)
	if err != nil {
		return nil
	}
	for _, c := range cmds {
		if c.Operation != hubstore.OpJobStart {
			continue
		}
		var p hubwire.JobCommandPayload
		if json.Unmarshal(c.Payload, &p) == nil && p.Recovery != nil {
			return p.Recovery
		}
	}
	return nil
}

func (h *Hub) noteFailoverBlocked(job string, err error) {
	h.staleMu.Lock()
	defer h.staleMu.Unlock()
	if h.blocked == nil {
		h.blocked = map[string]string{}
	}
	if h.blocked[job] != err.Error() {
		h.blocked[job] = err.Error()
		h.log.Warn("cannot fail over yet", "job", job, "error", err)
	}
}

func (h *Hub) clearFailoverBlocked(job string) {
	h.staleMu.Lock()
	defer h.staleMu.Unlock()
	delete(h.blocked, job)
}
