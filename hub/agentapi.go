package hub

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/hubhttp"
	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
)

// maxClaim is how many commands one poll claims at most.
const maxClaim = 16

func (h *Hub) agentRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/agent/register", h.register)
	mux.HandleFunc("POST /api/v1/agent/heartbeat", h.heartbeat)
	mux.HandleFunc("POST /api/v1/agent/report", h.report)
	mux.HandleFunc("GET /api/v1/agent/commands", h.commands)
	mux.HandleFunc("POST /api/v1/agent/commands/{id}/result", h.commandResult)
	mux.HandleFunc("POST /api/v1/agent/job-observations", h.jobObservation)
}

func capabilitiesOf(names []string, d *hubwire.CapabilityDetails) hubstore.Capabilities {
	c := hubstore.Capabilities{Features: hubwire.FilterCapabilities(names)}
	if d != nil {
		c.JobRuntimeVersion, c.StateBackends, c.CheckpointProtocol = d.JobRuntimeVersion, d.StateBackends, int(d.CheckpointProtocolVersion)
		c.Connectors, c.Operators = d.Connectors, d.Operators
	}
	return c
}

// register opens a session. The node token, when the Hub has one, comes
// in the body (v1) or as a Bearer token, and is compared in constant time.
func (h *Hub) register(w http.ResponseWriter, r *http.Request) {
	var req hubwire.RegisterRequest
	if e := hubhttp.DecodeJSON(w, r, &req); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	if h.nodeToken != nil {
		presented := req.NodeToken
		if b, ok := hubhttp.BearerToken(r); ok && presented == "" {
			presented = b
		}
		if !h.nodeToken.Matches(presented) {
			h.auditAgent(r, req.NodeID, "agent.register", hubwire.CodeUnauthorized, "node token refused")
			hubhttp.WriteError(w, r, hubhttp.Unauthorized("node token refused"))
			return
		}
	}
	if req.NodeID == "" {
		hubhttp.WriteError(w, r, hubhttp.InvalidQuery("node_id", "node_id must not be empty"))
		return
	}
	if req.ProtocolVersion != hubwire.ProtocolVersion {
		h.auditAgent(r, req.NodeID, "agent.register", hubwire.AuditIncompatibleProtocol, "protocol "+req.ProtocolVersion)
		hubhttp.WriteError(w, r, hubhttp.InvalidQuery("protocol_version", "unsupported protocol version: "+req.ProtocolVersion))
		return
	}
	if err := hubwire.ValidateCapabilities(req.Capabilities); err != nil {
		hubhttp.WriteError(w, r, hubhttp.InvalidQuery("capabilities", err.Error()))
		return
	}
	s, err := h.store.RegisterAgent(r.Context(), hubstore.Registration{NodeID: req.NodeID, BootID: req.BootID,
		ProtocolVersion: req.ProtocolVersion, SoftwareVersion: req.SoftwareVersion,
		Capabilities: capabilitiesOf(req.Capabilities, req.CapabilityDetails)})
	if err != nil {
		h.storeError(w, r, err, "")
		return
	}
	h.log.Info("agent registered", "node", req.NodeID, "boot_id", req.BootID, "epoch", s.Epoch, "new_boot", s.NewBoot)
	if s.NewBoot && req.BootID != "" {
		h.restartOnNewBoot(r.Context(), req.NodeID, req.BootID)
	}
	h.poke()
	hubhttp.WriteJSON(w, http.StatusOK, hubwire.RegisterResponse{NodeID: req.NodeID, SessionToken: s.Token,
		LeaseTTLMs: uint64(h.cfg.Lease.Milliseconds()), PollIntervalMs: uint64(h.cfg.PollInterval.Milliseconds()),
		ProtocolVersion: hubwire.ProtocolVersion, HeartbeatIntervalMs: uint64((h.cfg.Lease / 3).Milliseconds())})
}

func (h *Hub) auditAgent(r *http.Request, node, action, code, msg string) {
	if err := h.store.Audit(r.Context(), hubstore.AuditRecord{Actor: "node:" + node, Action: action, ResourceType: "node",
		ResourceID: node, Outcome: "rejected", FailureCode: code, Message: msg,
		CorrelationID: hubhttp.CorrelationID(r.Context())}); err != nil {
		h.log.Warn("writing an audit row", "error", err)
	}
}

func (h *Hub) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req hubwire.HeartbeatRequest
	if e := hubhttp.DecodeJSON(w, r, &req); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	cred, e := hubhttp.SessionCredentials(r, req.NodeID, req.SessionToken)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	if req.ProtocolVersion != "" && req.ProtocolVersion != hubwire.ProtocolVersion {
		hubhttp.WriteError(w, r, hubhttp.InvalidQuery("protocol_version", "unsupported protocol version: "+req.ProtocolVersion))
		return
	}
	state := req.State
	if state == hubwire.NodeStarting {
		state = hubwire.NodeOnline
	}
	hb := hubstore.Heartbeat{State: state, SoftwareVersion: req.SoftwareVersion}
	if len(req.Capabilities) > 0 || req.CapabilityDetails != nil {
		c := capabilitiesOf(req.Capabilities, req.CapabilityDetails)
		if req.CapabilityDetails == nil {
			// A heartbeat without details (a v1 Agent, a draining one)
			// keeps the details registered before.
			if a, err := h.store.GetAgent(r.Context(), cred.NodeID); err == nil {
				f := c.Features
				c = a.Capabilities
				c.Features = f
			}
		}
		hb.Capabilities = &c
	}
	if _, err := h.store.Heartbeat(r.Context(), cred.NodeID, cred.SessionToken, hb); err != nil {
		h.storeError(w, r, err, "")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// report applies a NodeReport. A duplicate or older report of the current
// session is answered 204 too, as v1 does; one of an older session is 401.
func (h *Hub) report(w http.ResponseWriter, r *http.Request) {
	var req hubwire.NodeReport
	if e := hubhttp.DecodeJSON(w, r, &req); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	cred, e := hubhttp.SessionCredentials(r, req.NodeID, req.SessionToken)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	snap, _ := json.Marshal(req)
	rep := hubstore.Report{NodeID: cred.NodeID, SessionToken: cred.SessionToken, BootID: req.BootID, Seq: int64(req.ReportSeq), Snapshot: snap}
	for _, j := range req.Jobs {
		js, _ := json.Marshal(j)
		rep.Jobs = append(rep.Jobs, hubstore.JobObservation{JobID: j.JobID, Generation: int64(j.Generation), State: j.State, Error: j.Error, Snapshot: js})
	}
	if _, err := h.store.RecordReport(r.Context(), rep); err != nil {
		h.storeError(w, r, err, "")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// commands claims the node's commands for a lease: a command not
// acknowledged within it is delivered again, never lost.
func (h *Hub) commands(w http.ResponseWriter, r *http.Request) {
	cred, e := hubhttp.QuerySessionCredentials(r)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	cmds, err := h.store.ClaimCommands(r.Context(), cred.NodeID, cred.SessionToken, h.claimLease(), maxClaim)
	if err != nil {
		h.storeError(w, r, err, "")
		return
	}
	out := make([]hubwire.AgentCommand, 0, len(cmds))
	for _, c := range cmds {
		ac := agentCommand(c)
		if c.Operation == hubstore.OpJobStart {
			// Resolved at delivery, so the secret never lands in the
			// store; a secret unset since validation stays a reference
			// and fails the start on the Agent, naming it.
			ac.Payload, _ = resolveSecrets(ac.Payload, h.cfg.Secrets)
		}
		out = append(out, ac)
	}
	hubhttp.WriteJSON(w, http.StatusOK, out)
}

// claimLease is how long a delivered command waits for its
// acknowledgement before it is delivered again.
func (h *Hub) claimLease() time.Duration { return max(5*h.cfg.PollInterval, 5*time.Second) }

func agentCommand(c hubstore.Command) hubwire.AgentCommand {
	op := hubwire.Operation(c.Operation)
	opID := c.IntentID
	if opID == "" {
		opID = c.ID
	}
	return hubwire.AgentCommand{ID: c.ID, OperationID: opID, NodeID: c.NodeID, Operation: op, ResourceID: c.JobID,
		ExpiresAtMs: ms(c.ExpiresAt), Generation: uint64(max(c.Generation, 0)), ActionID: c.ActionID,
		AttemptID: c.AssignmentID, CorrelationID: c.CorrelationID, Payload: c.Payload,
		RequiredCapabilities: op.RequiredCapabilities(), Delivery: uint32(max(c.DeliveryCount, 0))}
}

// commandResult records an Agent's result, idempotently by command id.
// The command is looked up by the body's command_id (the path's when the
// body has none); node_id may be left out of the query, the command names
// its node and the session token must be that node's.
func (h *Hub) commandResult(w http.ResponseWriter, r *http.Request) {
	var req hubwire.CommandResult
	if e := hubhttp.DecodeJSON(w, r, &req); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	if req.CommandID == "" {
		req.CommandID = r.PathValue("id")
	}
	q := r.URL.Query()
	cmd, err := h.store.GetCommand(r.Context(), req.CommandID)
	if err != nil {
		h.storeError(w, r, err, hubwire.CodeOperationNotFound)
		return
	}
	node := q.Get("node_id")
	if node == "" {
		node = cmd.NodeID
	}
	cred, e := hubhttp.SessionCredentials(r, node, q.Get("session_token"))
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	res := hubstore.CommandResult{CommandID: req.CommandID, Generation: int64(req.Generation), State: hubstore.CommandState(req.State),
		Progress: int(req.Progress), FailureClass: string(req.FailureClass), Error: req.Error}
	if req.ObservedGeneration != nil {
		res.ObservedGeneration = int64(*req.ObservedGeneration)
	}
	res.Details, _ = json.Marshal(req)
	out, err := h.store.RecordCommandResult(r.Context(), cred.NodeID, cred.SessionToken, res)
	if err != nil {
		if errors.Is(err, hubstore.ErrWrongNode) {
			hubhttp.WriteError(w, r, hubhttp.Unauthorized("the command belongs to another node"))
			return
		}
		h.storeError(w, r, err, hubwire.CodeOperationNotFound)
		return
	}
	if !out.Duplicate && out.Command.State.Terminal() {
		h.poke() // the reconciler moves checkpoints on (advanceCheckpoints)
	}
	hubhttp.WriteJSON(w, http.StatusOK, h.operation(out.Command, out.Terminal))
}

// operation is the HubOperation view of a command.
func (h *Hub) operation(c hubstore.Command, term *hubstore.CommandResult) hubwire.HubOperation {
	op := hubwire.HubOperation{ID: c.ID, IntentID: c.IntentID, CommandID: c.ID, NodeID: c.NodeID, Operation: hubwire.Operation(c.Operation),
		ResourceID: c.JobID, Generation: uint64(max(c.Generation, 0)), AttemptID: c.AssignmentID, State: wireState(c.State),
		CreatedAtMs: ms(c.CreatedAt), CorrelationID: c.CorrelationID, CheckpointID: c.CheckpointID, JobID: c.JobID}
	if c.AssignmentID != "" {
		op.AssignmentIDs = []string{c.AssignmentID}
	}
	if c.State.Terminal() {
		op.Progress = 100
		if f := ms(c.FinishedAt); f != 0 {
			op.FinishedAtMs = &f
		}
	}
	if term != nil {
		op.Error, op.FailureClass = term.Error, hubwire.FailureClass(term.FailureClass)
		if term.ObservedGeneration > 0 {
			g := uint64(term.ObservedGeneration)
			op.ObservedGeneration = &g
		}
	}
	return op
}

func wireState(s hubstore.CommandState) hubwire.OperationState {
	if s == hubstore.CommandDelivered {
		return hubwire.OpStateDispatched
	}
	return hubwire.OperationState(s)
}

// jobObservation records v1's unsequenced job observation; one of another
// generation is ignored silently (204), as v1 does.
func (h *Hub) jobObservation(w http.ResponseWriter, r *http.Request) {
	var req hubwire.JobObservation
	if e := hubhttp.DecodeJSON(w, r, &req); e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	cred, e := hubhttp.SessionCredentials(r, req.NodeID, req.SessionToken)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	if req.JobID == "" {
		hubhttp.WriteError(w, r, hubhttp.ValidationFailed("job_id", "job_id must not be empty"))
		return
	}
	snap, _ := json.Marshal(req.JobStatus)
	err := h.store.RecordJobObservation(r.Context(), cred.NodeID, cred.SessionToken, hubstore.JobObservation{JobID: req.JobID,
		Generation: int64(req.Generation), State: req.State, Error: req.Error, Snapshot: snap})
	if err != nil && !errors.Is(err, hubstore.ErrStaleGeneration) && !errors.Is(err, hubstore.ErrNotFound) {
		h.storeError(w, r, err, "")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
