package hubwire

import (
	"encoding/json"
	"fmt"
)

// ApiError is the error envelope of every 4xx/5xx JSON reply. Absent options
// are omitted; the Hub fills CorrelationID when the handler did not.
type ApiError struct {
	Code          string          `json:"code"`
	Message       string          `json:"message"`
	Field         string          `json:"field,omitempty"`
	StreamID      string          `json:"stream_id,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Details       json.RawMessage `json:"details,omitempty"`
}

// Error returns "code: message", with the field when there is one.
func (e *ApiError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return e.Code + ": " + e.Message
}

// GenerationConflictDetails is ApiError.details of a 412 generation_conflict
// on a stream's desired state.
type GenerationConflictDetails struct {
	ExpectedGeneration uint64       `json:"expected_generation"`
	CurrentGeneration  uint64       `json:"current_generation"`
	Resource           *ResourceRef `json:"resource,omitempty"`
}

// ResourceRef names a stream.
type ResourceRef struct {
	NodeID   string `json:"node_id"`
	StreamID string `json:"stream_id"`
}

// JobGenerationConflictDetails is ApiError.details of a 409
// generation_conflict on a job upgrade (v1 names the fields differently
// from the stream form).
type JobGenerationConflictDetails struct {
	Expected uint64 `json:"expected"`
	Current  uint64 `json:"current"`
}

// Page is a paged list reply. Page counts from 1; PageSize is 1..100.
type Page[T any] struct {
	Items    []T    `json:"items"`
	Page     uint64 `json:"page"`
	PageSize uint64 `json:"page_size"`
	Total    uint64 `json:"total"`
}

// MarshalJSON encodes nil Items as [].
func (p Page[T]) MarshalJSON() ([]byte, error) {
	type plain Page[T]
	q := plain(p)
	if q.Items == nil {
		q.Items = []T{}
	}
	return json.Marshal(q)
}

// Paging defaults and bounds (A.0).
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// HubOperation is the operator view of a command or intent.
type HubOperation struct {
	ID                   string         `json:"id"`
	IntentID             string         `json:"intent_id,omitempty"`
	CommandID            string         `json:"command_id"`
	NodeID               string         `json:"node_id"`
	Operation            Operation      `json:"operation"`
	ResourceID           string         `json:"resource_id"`
	Generation           uint64         `json:"generation"`
	AttemptID            string         `json:"attempt_id,omitempty"`
	ConfigVersionID      string         `json:"config_version_id,omitempty"`
	State                OperationState `json:"state"`
	Progress             uint8          `json:"progress"`
	CreatedAtMs          uint64         `json:"created_at_ms"`
	DispatchedAtMs       *uint64        `json:"dispatched_at_ms,omitempty"`
	AcknowledgedAtMs     *uint64        `json:"acknowledged_at_ms,omitempty"`
	FinishedAtMs         *uint64        `json:"finished_at_ms,omitempty"`
	CorrelationID        string         `json:"correlation_id,omitempty"`
	Error                string         `json:"error,omitempty"`
	FailureClass         FailureClass   `json:"failure_class,omitempty"`
	IntentState          string         `json:"intent_state,omitempty"`
	ConvergenceState     string         `json:"convergence_state,omitempty"`
	RetryCount           uint64         `json:"retry_count"`
	NextRetryAtMs        *uint64        `json:"next_retry_at_ms,omitempty"`
	SupersededByIntentID string         `json:"superseded_by_intent_id,omitempty"`
	SupersededGeneration *uint64        `json:"superseded_generation,omitempty"`
	ObservedGeneration   *uint64        `json:"observed_generation,omitempty"`
	ObservedState        string         `json:"observed_state,omitempty"`
	CheckpointID         string         `json:"checkpoint_id,omitempty"`

	// Extension: the job and task attempt ids of a job command.
	JobID         string   `json:"job_id,omitempty"`
	AssignmentIDs []string `json:"assignment_ids,omitempty"`
}

// HubNode is the operator view of an Agent.
type HubNode struct {
	ID               string   `json:"id"`
	ProtocolVersion  string   `json:"protocol_version"`
	Version          string   `json:"version"`
	State            string   `json:"state"`
	Capabilities     []string `json:"capabilities"`
	LastSeenAtMs     uint64   `json:"last_seen_at_ms"`
	LeaseExpiresAtMs uint64   `json:"lease_expires_at_ms"`
	StreamsTotal     uint64   `json:"streams_total"`
	StreamsRunning   uint64   `json:"streams_running"`
	StreamsFailed    uint64   `json:"streams_failed"`
	MaintenanceState string   `json:"maintenance_state"`

	// Extension: the current boot identity.
	BootID string `json:"boot_id,omitempty"`
	// Extension: capability details.
	CapabilityDetails *CapabilityDetails `json:"capability_details,omitempty"`
}

// MarshalJSON encodes nil slices as [].
func (n HubNode) MarshalJSON() ([]byte, error) {
	type plain HubNode
	p := plain(n)
	p.Capabilities = strs(p.Capabilities)
	return json.Marshal(p)
}

// AcceptedIntentResponse is the 202 body of a stream desired-state change.
// OperationID equals IntentID.
type AcceptedIntentResponse struct {
	OperationID   string `json:"operation_id"`
	IntentID      string `json:"intent_id"`
	NodeID        string `json:"node_id"`
	StreamID      string `json:"stream_id"`
	Generation    uint64 `json:"generation"`
	DesiredState  string `json:"desired_state"`
	ConfigVersion string `json:"config_version,omitempty"`
	ActionID      string `json:"action_id,omitempty"`
	// IntentState is "accepted" and Convergence "pending" when returned.
	IntentState string `json:"intent_state"`
	Convergence string `json:"convergence"`
}

// StreamDesiredStateRequest is the body of PUT
// /nodes/{n}/streams/{s}/desired-state.
type StreamDesiredStateRequest struct {
	// State is running or stopped.
	State         string `json:"state"`
	ConfigVersion string `json:"config_version,omitempty"`
	ActionID      string `json:"action_id,omitempty"`
}

// AuditRecord is one row of the audit log (GET /audit, a
// Page[AuditRecord], newest first): who did what to which resource, and
// whether it was accepted or rejected. Denied requests are audited too.
type AuditRecord struct {
	EventID       int64  `json:"event_id"`
	Actor         string `json:"actor"`
	Action        string `json:"action"`
	ResourceType  string `json:"resource_type"`
	ResourceID    string `json:"resource_id"`
	NodeID        string `json:"node_id,omitempty"`
	StreamID      string `json:"stream_id,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Outcome is accepted or rejected.
	Outcome     string `json:"outcome"`
	FailureCode string `json:"failure_code,omitempty"`
	// Message is cut to 256 bytes.
	Message      string `json:"message"`
	OccurredAtMs uint64 `json:"occurred_at_ms"`
}

// SystemResponse is the body of GET /system.
type SystemResponse struct {
	// ID is "arkflow-control-hub"; State is "running".
	ID           string   `json:"id"`
	Version      string   `json:"version"`
	State        string   `json:"state"`
	NodeCount    uint64   `json:"node_count"`
	OnlineNodes  uint64   `json:"online_nodes"`
	Capabilities []string `json:"capabilities"`
}

// MarshalJSON encodes nil slices as [].
func (r SystemResponse) MarshalJSON() ([]byte, error) {
	type plain SystemResponse
	p := plain(r)
	p.Capabilities = strs(p.Capabilities)
	return json.Marshal(p)
}

// HealthResponse is the body of GET /health: 200 healthy, 503 degraded.
type HealthResponse struct {
	Status string `json:"status"`
	Nodes  uint64 `json:"nodes"`
	Ready  bool   `json:"ready"`
}

// ReadinessResponse is the body of GET /readiness: 200 {status:"ready",
// ready:true}, or 503 {status:"not_ready", ready:false, reason} with reason
// startup_recovery or storage_unavailable.
type ReadinessResponse struct {
	Status string `json:"status"`
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

// LivenessResponse is the body of GET /liveness: {status:"alive",
// alive:true}.
type LivenessResponse struct {
	Status string `json:"status"`
	Alive  bool   `json:"alive"`
}
