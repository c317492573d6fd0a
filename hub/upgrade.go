package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/hubhttp"
	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/job"
)

// recoveryPayload is the payload of an upgrade or rollback intent: where
// the next start of its version restores from.
type recoveryPayload struct {
	Recovery *hubwire.JobRecovery `json:"recovery"`
}

// upgrade is POST /jobs/{id}/upgrades: the job must be stopped
// and converged at expected_generation, the savepoint completed and of
// the new spec's state format, and the new spec's version higher. The new
// version becomes current, the job stays stopped, and its next start
// restores from the savepoint.
func (h *Hub) upgrade(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	var req hubwire.UpgradeRequest
	if e := hubhttp.DecodeJSON(w, r, &req); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	j, cur, err := h.currentVersion(ctx, id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	if int64(req.ExpectedGeneration) != j.Generation {
		hubhttp.WriteError(w, r, hubhttp.GenerationConflict(int64(req.ExpectedGeneration), j.Generation))
		return
	}
	if e := h.mustBeStopped(ctx, j); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	v, err := h.validateSpec(ctx, req.Spec, req.NodeIDs)
	if err != nil {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusBadRequest, hubwire.CodeInvalidJobSpec, err.Error()).WithField("spec"))
		return
	}
	if v.spec.ID != id {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusBadRequest, hubwire.CodeInvalidJobSpec, "upgrade spec id must match the Job id").WithField("spec.id"))
		return
	}
	if len(v.problems) > 0 {
		hubhttp.WriteError(w, r, invalidSpec(v))
		return
	}
	old, err := job.Parse(cur.Spec)
	if err != nil {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusInternalServerError, hubwire.CodeInvalidPersistedJob, "the current version's spec does not parse"))
		return
	}
	if v.spec.Version <= old.Version {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusBadRequest, hubwire.CodeInvalidJobVersion,
			fmt.Sprintf("the new version must be greater than %d (got %d)", old.Version, v.spec.Version)).WithField("spec.version"))
		return
	}
	sp, e := h.completedSavepoint(ctx, id, req.SavepointID)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	if f := formatOf(v.spec); sp.FormatVersion != 0 && f != sp.FormatVersion {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusConflict, hubwire.CodeStateFormatIncompatible,
			fmt.Sprintf("savepoint %s has state format %d, the new version %d", sp.CheckpointID, sp.FormatVersion, f)))
		return
	}
	if ops := fixedParallelism(old, v.spec); len(ops) > 0 {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusConflict, hubwire.CodeStateFormatIncompatible,
			"the new version changes the parallelism of "+strings.Join(ops, ", ")+
				", whose rows arrive partitioned by their source (keyed_by) and whose keyed state is kept per subtask: it cannot be redistributed. "+
				"Keep the parallelism and add Agents (POST /jobs/{id}/actions/rebalance), or re-key through a Kafka topic into a job of the new parallelism").WithField("spec"))
		return
	}
	planJSON, _ := json.Marshal(v.plan)
	sub, err := h.store.SubmitJob(ctx, hubstore.SubmitRequest{JobID: id, Spec: v.specJSON, Plan: planJSON, Actor: actorOf(r),
		CorrelationID: hubhttp.CorrelationID(ctx)})
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	payload, _ := json.Marshal(recoveryPayload{Recovery: &hubwire.JobRecovery{CheckpointID: savepointName(sp), Savepoint: true}})
	expected := j.Generation
	if _, err := h.store.SetDesired(ctx, hubstore.DesiredChange{JobID: id, DesiredState: hubstore.DesiredStopped, VersionID: sub.Version.VersionID,
		Kind: "upgrade", ExpectedGeneration: &expected, Payload: payload, Actor: actorOf(r), CorrelationID: hubhttp.CorrelationID(ctx)}); err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	h.poke()
	rec, err := h.jobRecord(ctx, id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	rec.Convergence = hubwire.ConvergencePendingRecovery
	hubhttp.SetETag(w, int64(rec.Generation))
	hubhttp.WriteJSON(w, http.StatusAccepted, hubwire.UpgradeResponse{UpgradeID: fmt.Sprintf("upgrade-%d", h.cfg.Clock().UnixMilli()),
		State: hubwire.ConvergencePendingRecovery, SavepointID: sp.CheckpointID, Job: rec})
}

// rollback is POST /jobs/{id}/upgrades/{upgrade_id}/rollback: the
// highest version older than the current one becomes current, stopped,
// and its next start restores from its latest completed savepoint (or
// follows its spec's recovery when it has none). upgrade_id is ignored, as
// in v1.
func (h *Hub) rollback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	j, cur, err := h.currentVersion(ctx, id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	if e := h.mustBeStopped(ctx, j); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	vs, err := h.store.ListVersions(ctx, id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	var prev *hubstore.JobVersion
	for i := range vs {
		if vs[i].Number < cur.Number && (prev == nil || vs[i].Number > prev.Number) {
			prev = &vs[i]
		}
	}
	if prev == nil {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusConflict, hubwire.CodeNoPreviousJobVersion, "job "+id+" has no version before "+fmt.Sprint(cur.Number)))
		return
	}
	var payload json.RawMessage
	if sp, err := h.latestSavepoint(ctx, id, prev.VersionID); err == nil {
		payload, _ = json.Marshal(recoveryPayload{Recovery: &hubwire.JobRecovery{CheckpointID: savepointName(sp), Savepoint: true}})
	}
	expected := j.Generation
	if _, err := h.store.SetDesired(ctx, hubstore.DesiredChange{JobID: id, DesiredState: hubstore.DesiredStopped, VersionID: prev.VersionID,
		Kind: "rollback", ExpectedGeneration: &expected, Payload: payload, Actor: actorOf(r), CorrelationID: hubhttp.CorrelationID(ctx)}); err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	h.poke()
	rec, err := h.jobRecord(ctx, id)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeJobNotFound)
		return
	}
	rec.Convergence = hubwire.ConvergencePendingRecovery
	hubhttp.SetETag(w, int64(rec.Generation))
	hubhttp.WriteJSON(w, http.StatusAccepted, rec)
}

// mustBeStopped is 409 job_must_be_stopped unless the job is desired and
// observed stopped.
func (h *Hub) mustBeStopped(ctx context.Context, j hubstore.Job) *hubhttp.Error {
	agg, err := h.observe(ctx, j)
	if err != nil {
		return hubhttp.Internal()
	}
	if j.DesiredState != hubstore.DesiredStopped || agg.State != hubstore.ObservedStopped {
		return hubhttp.NewError(http.StatusConflict, hubwire.CodeJobMustBeStopped, "the job must be stopped and converged first")
	}
	return nil
}

// completedSavepoint finds the savepoint an upgrade names, by record id or
// by name: 409 savepoint_not_ready unless it is completed.
func (h *Hub) completedSavepoint(ctx context.Context, jobID, id string) (hubstore.Checkpoint, *hubhttp.Error) {
	cps, err := h.store.ListCheckpoints(ctx, jobID, hubstore.KindSavepoint)
	if err != nil {
		return hubstore.Checkpoint{}, hubhttp.Internal()
	}
	for _, c := range cps {
		if id == "" || c.CheckpointID == id || savepointName(c) == id {
			if c.Status == hubstore.CheckpointCompleted {
				return c, nil
			}
			if id != "" {
				break
			}
		}
	}
	return hubstore.Checkpoint{}, hubhttp.NewError(http.StatusConflict, hubwire.CodeSavepointNotReady, "no completed savepoint "+id+" of job "+jobID)
}

// latestSavepoint is the newest completed savepoint taken of version.
func (h *Hub) latestSavepoint(ctx context.Context, jobID, version string) (hubstore.Checkpoint, error) {
	cps, err := h.store.ListCheckpoints(ctx, jobID, hubstore.KindSavepoint)
	if err != nil {
		return hubstore.Checkpoint{}, err
	}
	for _, c := range cps {
		if c.VersionID == version && c.Status == hubstore.CheckpointCompleted {
			return c, nil
		}
	}
	return hubstore.Checkpoint{}, hubstore.ErrNotFound
}

// savepointName is the name the Agent restores a savepoint by: our Agents
// report it as the observed checkpoint id, which the Hub keeps as the
// record's manifest URI.
func savepointName(c hubstore.Checkpoint) string {
	// A committed savepoint's manifest is "{job}/savepoints/{name}/manifest.json"
	// in the job's store; a whole-job Agent reports the name itself.
	if rest, ok := strings.CutPrefix(c.ManifestURI, c.JobID+"/savepoints/"); ok {
		if name, ok := strings.CutSuffix(rest, "/manifest.json"); ok && name != "" && !strings.Contains(name, "/") {
			return name
		}
	}
	if c.ManifestURI != "" {
		return c.ManifestURI
	}
	return c.CheckpointID
}

// fixedParallelism names the operators keyed by co-partitioning in old
// whose parallelism next changes ("op from 2 to 3").
func fixedParallelism(old, next *job.Spec) []string {
	cp := build.CoPartitioned(old)
	var out []string
	for i := range old.Operators {
		op := &old.Operators[i]
		if !build.CoPartitionedKeyed(old, op, cp) {
			continue
		}
		if n, _ := next.Operator(op.ID); n != nil && planner.OperatorParallelism(next, n) != planner.OperatorParallelism(old, op) {
			out = append(out, fmt.Sprintf("%s from %d to %d", op.ID, planner.OperatorParallelism(old, op), planner.OperatorParallelism(next, n)))
		}
	}
	return out
}

func formatOf(s *job.Spec) int {
	if s.State == nil || s.State.FormatVersion == 0 {
		return 1
	}
	return s.State.FormatVersion
}

// pendingRecovery returns where the start of intent in restores from: the
// recovery of the upgrade or rollback that made its version current, as
// long as no start of that version has succeeded since (after one, the
// job's own checkpoints are newer).
func (h *Hub) pendingRecovery(ctx context.Context, in hubstore.Intent) (*hubwire.JobRecovery, error) {
	if in.Kind == "failover" || in.Kind == "rebalance" {
		// The move chose where its moved units restore from.
		var p recoveryPayload
		if len(in.Payload) > 0 {
			if err := json.Unmarshal(in.Payload, &p); err != nil {
				return nil, err
			}
		}
		return p.Recovery, nil
	}
	ins, err := h.store.ListIntents(ctx, in.JobID)
	if err != nil {
		return nil, err
	}
	for _, o := range ins { // newest generation first
		if o.Generation >= in.Generation {
			continue
		}
		if o.VersionID != in.VersionID {
			return nil, nil
		}
		if o.Kind == "upgrade" || o.Kind == "rollback" {
			var p recoveryPayload
			if len(o.Payload) > 0 {
				if err := json.Unmarshal(o.Payload, &p); err != nil {
					return nil, err
				}
			}
			return p.Recovery, nil
		}
		if o.DesiredState == hubstore.DesiredRunning {
			cmds, err := h.store.ListCommands(ctx, in.JobID, o.Generation)
			if err != nil {
				return nil, err
			}
			for _, c := range cmds {
				if c.Operation == hubstore.OpJobStart && c.State == hubstore.CommandSucceeded {
					return nil, nil
				}
			}
		}
	}
	return nil, nil
}
