package hubwire

import "encoding/json"

// CapabilityDetails says what the declared capabilities mean on this Agent,
// so the Hub can place a job only where it fits.
//
// Extension: the whole type is absent from ArkFlow v1, where capabilities
// are bare names.
type CapabilityDetails struct {
	// JobRuntimeVersion is the version of the job runtime, e.g. the
	// arkflow-go module version.
	JobRuntimeVersion string `json:"job_runtime_version,omitempty"`
	// StateBackends lists the state backends the Agent can open, e.g.
	// "memory", "pebble".
	StateBackends []string `json:"state_backends,omitempty"`
	// StateFormatVersions lists the state snapshot format versions the Agent
	// can restore.
	StateFormatVersions []uint32 `json:"state_format_versions,omitempty"`
	// CheckpointProtocolVersion is the version of the checkpoint and
	// savepoint protocol (manifest layout, two-phase commit) it speaks.
	CheckpointProtocolVersion uint32 `json:"checkpoint_protocol_version,omitempty"`
	// Connectors and Operators list the component kinds registered in the
	// Agent's process, so a spec naming a connector or Go operator is placed
	// only on Agents that have it.
	Connectors []string `json:"connectors,omitempty"`
	Operators  []string `json:"operators,omitempty"`
}

// RegisterRequest is the body of POST /agent/register.
type RegisterRequest struct {
	NodeID string `json:"node_id"`
	// NodeToken is the shared node secret. v1 sends it in the body; our Hub
	// also accepts it as a Bearer token.
	NodeToken       string   `json:"node_token"`
	ProtocolVersion string   `json:"protocol_version"`
	Capabilities    []string `json:"capabilities"`

	// Extension: the process boot identity (a random id per process), known
	// to the Hub from registration on rather than from the first report.
	BootID string `json:"boot_id,omitempty"`
	// Extension: the Agent's software version (v1 sends it only in
	// heartbeats and reports).
	SoftwareVersion string `json:"software_version,omitempty"`
	// Extension: capability details.
	CapabilityDetails *CapabilityDetails `json:"capability_details,omitempty"`
}

// MarshalJSON encodes nil slices as [].
func (r RegisterRequest) MarshalJSON() ([]byte, error) {
	type plain RegisterRequest
	p := plain(r)
	p.Capabilities = strs(p.Capabilities)
	return json.Marshal(p)
}

// RegisterResponse is the 200 body of POST /agent/register.
type RegisterResponse struct {
	NodeID          string `json:"node_id"`
	SessionToken    string `json:"session_token"`
	LeaseTTLMs      uint64 `json:"lease_ttl_ms"`
	PollIntervalMs  uint64 `json:"poll_interval_ms"`
	ProtocolVersion string `json:"protocol_version"`

	// Extension: how often the Hub wants heartbeats; absent means
	// lease_ttl_ms/3 as in v1.
	HeartbeatIntervalMs uint64 `json:"heartbeat_interval_ms,omitempty"`
}

// HeartbeatRequest is the body of POST /agent/heartbeat (204 on success).
type HeartbeatRequest struct {
	NodeID       string `json:"node_id"`
	SessionToken string `json:"session_token"`
	// State is online, starting or draining.
	State           string   `json:"state"`
	ProtocolVersion string   `json:"protocol_version,omitempty"`
	SoftwareVersion string   `json:"software_version,omitempty"`
	Capabilities    []string `json:"capabilities"`
	RolloutID       string   `json:"rollout_id,omitempty"`

	// Extension: the boot identity, so a heartbeat from a restarted process
	// that reuses a session is recognised.
	BootID string `json:"boot_id,omitempty"`
	// Extension: capability details.
	CapabilityDetails *CapabilityDetails `json:"capability_details,omitempty"`
}

// MarshalJSON encodes nil slices as [].
func (r HeartbeatRequest) MarshalJSON() ([]byte, error) {
	type plain HeartbeatRequest
	p := plain(r)
	p.Capabilities = strs(p.Capabilities)
	return json.Marshal(p)
}

// NodeReport is the body of POST /agent/report (B.4; 204 on success, also
// for a stale replay).
type NodeReport struct {
	NodeID       string            `json:"node_id"`
	SessionToken string            `json:"session_token"`
	Version      string            `json:"version"`
	State        string            `json:"state"`
	Capabilities []string          `json:"capabilities"`
	Streams      []StreamStatus    `json:"streams"`
	Operations   []OperationRecord `json:"operations"`
	Events       []ControlEvent    `json:"events"`
	// Metrics holds node totals; v1 keeps only ReportMetricNames.
	Metrics map[string]float64 `json:"metrics"`
	// Configuration is the node's redacted configuration, kept opaque.
	Configuration        json.RawMessage `json:"configuration,omitempty"`
	ConfigurationVersion string          `json:"configuration_version,omitempty"`
	// BootID and ReportSeq order reports; see CheckReport.
	BootID    string `json:"boot_id,omitempty"`
	ReportSeq uint64 `json:"report_seq"`

	// Extension: per-job observations of this node, so the Hub sees
	// assignment state and recovery progress without the separate
	// job-observations call.
	Jobs []JobStatus `json:"jobs,omitempty"`
	// Extension: the base URL of the node's state routes (GET
	// {query_addr}/api/v1/jobs/{id}/state/{operator}), to which the Hub
	// routes state queries; absent when the node serves none.
	QueryAddr string `json:"query_addr,omitempty"`
}

// MarshalJSON encodes nil slices and maps as [] and {}.
func (r NodeReport) MarshalJSON() ([]byte, error) {
	type plain NodeReport
	p := plain(r)
	p.Capabilities = strs(p.Capabilities)
	if p.Streams == nil {
		p.Streams = []StreamStatus{}
	}
	if p.Operations == nil {
		p.Operations = []OperationRecord{}
	}
	if p.Events == nil {
		p.Events = []ControlEvent{}
	}
	if p.Metrics == nil {
		p.Metrics = map[string]float64{}
	}
	return json.Marshal(p)
}

// StreamStatus is one stream in a NodeReport, and the base of the operator
// stream views.
type StreamStatus struct {
	ID                    string        `json:"id"`
	State                 string        `json:"state"`
	DesiredState          string        `json:"desired_state,omitempty"`
	DesiredGeneration     uint64        `json:"desired_generation"`
	DesiredConfigVersion  string        `json:"desired_config_version,omitempty"`
	ObservedGeneration    *uint64       `json:"observed_generation,omitempty"`
	ObservedConfigVersion string        `json:"observed_config_version,omitempty"`
	Convergence           string        `json:"convergence"`
	IntentID              string        `json:"intent_id,omitempty"`
	AttemptID             string        `json:"attempt_id,omitempty"`
	LastCompletedActionID string        `json:"last_completed_action_id,omitempty"`
	RetryCount            uint64        `json:"retry_count"`
	NextRetryAtMs         *uint64       `json:"next_retry_at_ms,omitempty"`
	TransitionStartedAtMs *uint64       `json:"transition_started_at_ms,omitempty"`
	ActiveOperationID     string        `json:"active_operation_id,omitempty"`
	NodeID                string        `json:"node_id,omitempty"`
	StartedAtMs           *uint64       `json:"started_at_ms,omitempty"`
	LastError             *StreamError  `json:"last_error,omitempty"`
	Metrics               StreamMetrics `json:"metrics"`
}

// StreamError is StreamStatus.last_error.
type StreamError struct {
	OccurredAtMs uint64 `json:"occurred_at_ms"`
	Stage        string `json:"stage"`
	Message      string `json:"message"`
}

// StreamMetrics is StreamStatus.metrics.
type StreamMetrics struct {
	InputBatches     uint64 `json:"input_batches"`
	InputMessages    uint64 `json:"input_messages"`
	ProcessingErrors uint64 `json:"processing_errors"`
	OutputBatches    uint64 `json:"output_batches"`
	OutputMessages   uint64 `json:"output_messages"`
	InputErrors      uint64 `json:"input_errors"`
	InputReconnects  uint64 `json:"input_reconnects"`
	OutputErrors     uint64 `json:"output_errors"`
	Restarts         uint64 `json:"restarts"`
}

// OperationRecord is one entry of NodeReport.operations: the Agent's own
// record of an operation it ran. The reference gives no field list for it
// and the v1 Hub does not interpret it, so it is carried opaquely: a v1
// report always decodes and re-encodes unchanged.
type OperationRecord = json.RawMessage

// ControlEvent is one entry of NodeReport.events. The v1 Hub rebroadcasts
// agent events as HubEvent with no event_id, so it has HubEvent's fields.
// Messages longer than 512 chars are cut by the Hub.
type ControlEvent struct {
	EventID       *uint64 `json:"event_id,omitempty"`
	NodeID        string  `json:"node_id"`
	OccurredAtMs  uint64  `json:"occurred_at_ms"`
	EventType     string  `json:"event_type"`
	StreamID      string  `json:"stream_id"`
	Outcome       string  `json:"outcome"`
	Message       string  `json:"message"`
	OperationID   string  `json:"operation_id,omitempty"`
	CorrelationID string  `json:"correlation_id,omitempty"`
	Actor         string  `json:"actor,omitempty"`
}

// HubEvent is the operator view of an event (GET /events, SSE).
type HubEvent = ControlEvent

// AgentCommand is one element of the GET /agent/commands reply.
type AgentCommand struct {
	ID          string    `json:"id"`
	OperationID string    `json:"operation_id"`
	NodeID      string    `json:"node_id"`
	Operation   Operation `json:"operation"`
	ResourceID  string    `json:"resource_id"`
	ExpiresAtMs uint64    `json:"expires_at_ms"`
	// Generation fences the command: an Agent rejects a command older than
	// what it runs, and the Hub ignores results of an older generation.
	Generation      uint64 `json:"generation"`
	ActionID        string `json:"action_id,omitempty"`
	ConfigVersionID string `json:"config_version_id,omitempty"`
	AttemptID       string `json:"attempt_id,omitempty"`
	RolloutID       string `json:"rollout_id,omitempty"`
	CorrelationID   string `json:"correlation_id,omitempty"`
	// Payload is a JobCommandPayload, CheckpointPayload, CommitPayload,
	// ConfigCandidate or ConfigRollbackPayload depending on Operation.
	Payload              json.RawMessage `json:"payload,omitempty"`
	RequiredCapabilities []string        `json:"required_capabilities"`

	// Extension: how many times the Hub has delivered this command (1 on the
	// first delivery). A command not acknowledged within its claim lease is
	// delivered again with the same id; results are idempotent by id.
	Delivery uint32 `json:"delivery,omitempty"`
}

// MarshalJSON encodes nil slices as [].
func (c AgentCommand) MarshalJSON() ([]byte, error) {
	type plain AgentCommand
	p := plain(c)
	p.RequiredCapabilities = strs(p.RequiredCapabilities)
	return json.Marshal(p)
}

// CommandResult is the body of POST /agent/commands/{id}/result; the Hub
// looks the command up by CommandID, not by the path.
type CommandResult struct {
	CommandID   string         `json:"command_id"`
	OperationID string         `json:"operation_id"`
	State       OperationState `json:"state"`
	// Progress is 0-100: acknowledged 5, running 10, terminal 100.
	Progress      uint8  `json:"progress"`
	Error         string `json:"error,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Generation is the command's generation, copied back so the Hub can
	// drop results of an older generation.
	Generation         uint64       `json:"generation"`
	ObservedGeneration *uint64      `json:"observed_generation,omitempty"`
	ActionID           string       `json:"action_id,omitempty"`
	FailureClass       FailureClass `json:"failure_class,omitempty"`
	ConfigVersionID    string       `json:"config_version_id,omitempty"`
	RolloutID          string       `json:"rollout_id,omitempty"`
	// [v1] checkpoint results.
	ObservedCheckpointID  string `json:"observed_checkpoint_id,omitempty"`
	CheckpointManifestURI string `json:"checkpoint_manifest_uri,omitempty"`

	// Extension: correlation metadata of a job command result:
	// the job and the task attempt ids of this node's assignment.
	JobID         string   `json:"job_id,omitempty"`
	AssignmentIDs []string `json:"assignment_ids,omitempty"`
}

// JobStatus is an Agent's observation of one job on its node.
type JobStatus struct {
	JobID      string `json:"job_id"`
	Generation uint64 `json:"generation"`
	State      string `json:"state"`
	Error      string `json:"error,omitempty"`

	// Extension: the task attempt ids this observation covers.
	AssignmentIDs []string `json:"assignment_ids,omitempty"`
	// Extension: restore and replay progress, 0-100, while recovering.
	RecoveryProgress *uint8 `json:"recovery_progress,omitempty"`
	// Extension: the checkpoint the job recovered from or last completed.
	CheckpointID string `json:"checkpoint_id,omitempty"`
	// Extension: when the Agent made the observation.
	ObservedAtMs uint64 `json:"observed_at_ms,omitempty"`
	// Extension: the input partitions each of the node's
	// source tasks read at its last checkpoint, "topic/partition".
	Partitions map[string][]string `json:"partitions,omitempty"`
	// Extension: the node's measurements of the job, which the
	// Hub aggregates into the detail's metrics (see JobMetrics).
	Metrics *JobMetrics `json:"metrics,omitempty"`
}

// JobObservation is the body of [v1] POST /agent/job-observations.
type JobObservation struct {
	NodeID       string `json:"node_id"`
	SessionToken string `json:"session_token"`
	JobStatus

	// Extension: orders observations like a NodeReport (see CheckReport).
	BootID    string  `json:"boot_id,omitempty"`
	ReportSeq *uint64 `json:"report_seq,omitempty"`
}

// TaskAttempt is one task assigned to one node at one generation.
type TaskAttempt struct {
	// ID is "{task}:{node}:{gen}".
	ID         string `json:"id"`
	JobID      string `json:"job_id"`
	JobVersion uint64 `json:"job_version"`
	TaskID     string `json:"task_id"`
	Generation uint64 `json:"generation"`
	NodeID     string `json:"node_id"`
	State      string `json:"state"`
}

// JobRecovery is JobCommandPayload.recovery: where a started job restores
// from.
type JobRecovery struct {
	CheckpointID string `json:"checkpoint_id"`
	Savepoint    bool   `json:"savepoint"`
}

// JobCommandPayload is the payload of job_start and job_stop (and
// job_restart). A job_stop sent because placement changed carries only
// JobID.
type JobCommandPayload struct {
	JobID       string          `json:"job_id"`
	Spec        json.RawMessage `json:"spec,omitempty"`
	Plan        json.RawMessage `json:"plan,omitempty"`
	Assignments []TaskAttempt   `json:"assignments,omitempty"`
	Generation  uint64          `json:"generation,omitempty"`
	Recovery    *JobRecovery    `json:"recovery,omitempty"`

	// Extension: an operator asked for a restart. An Agent that already
	// runs these tasks runs them again instead of adopting the newer
	// generation.
	Restart bool `json:"restart,omitempty"`
}

// CheckpointPayload is the payload of job_checkpoint and job_savepoint.
type CheckpointPayload struct {
	JobID        string          `json:"job_id"`
	Plan         json.RawMessage `json:"plan,omitempty"`
	Assignments  []TaskAttempt   `json:"assignments"`
	CheckpointID string          `json:"checkpoint_id"`

	// Extension: the savepoint's operator-given name.
	Name string `json:"name,omitempty"`
}

// MarshalJSON encodes nil slices as [].
func (p CheckpointPayload) MarshalJSON() ([]byte, error) {
	type plain CheckpointPayload
	q := plain(p)
	if q.Assignments == nil {
		q.Assignments = []TaskAttempt{}
	}
	return json.Marshal(q)
}

// CommitPayload is the payload of job_checkpoint_commit and
// job_savepoint_commit: the node that receives it merges the per-node
// manifests of ManifestNodes into the checkpoint's manifest.
type CommitPayload struct {
	CheckpointID  string   `json:"checkpoint_id"`
	ManifestNodes []string `json:"manifest_nodes"`
	// JobID is not listed for v1's commit payload; the Hub fills it anyway.
	JobID string `json:"job_id,omitempty"`
}

// MarshalJSON encodes nil slices as [].
func (p CommitPayload) MarshalJSON() ([]byte, error) {
	type plain CommitPayload
	q := plain(p)
	q.ManifestNodes = strs(q.ManifestNodes)
	return json.Marshal(q)
}

// ConfigCandidate is the payload of apply_configuration and the body of
// POST /nodes/{n}/configuration/apply.
type ConfigCandidate struct {
	// Format is yaml, json or toml.
	Format  string `json:"format"`
	Content string `json:"content"`
}

// ConfigRollbackPayload is the payload of rollback_configuration.
type ConfigRollbackPayload struct {
	ID string `json:"id"`
}

// strs returns s, or an empty non-nil slice.
func strs(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
