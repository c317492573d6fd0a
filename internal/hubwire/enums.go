package hubwire

// ProtocolVersion is the only agent protocol version ArkFlow v1 accepts; it
// is sent on register and heartbeat and echoed in the register reply.
const ProtocolVersion = "v1"

// Capability names an Agent declares (B.1). [main] Agents declare
// stream_lifecycle, configuration and metrics; [v1] Agents add job_runtime,
// state_backend and checkpoint_recovery.
const (
	CapabilityJobRuntime         = "job_runtime"
	CapabilityStateBackend       = "state_backend"
	CapabilityCheckpointRecovery = "checkpoint_recovery"
	CapabilityStreamLifecycle    = "stream_lifecycle"
	CapabilityConfiguration      = "configuration"
	CapabilityMetrics            = "metrics"
	// CapabilityPlacementUnits (extension) says the Agent runs a part of a
	// job: the tasks of the placement units its job_start assigns, with
	// checkpoints cut in parts and committed by the Hub's
	// job_checkpoint_commit. Agents without it get whole jobs.
	CapabilityPlacementUnits = "placement_units"
	// CapabilityOnlineLease is not declared by Agents: POST /jobs/validate
	// lists it as missing for a node that is not online.
	CapabilityOnlineLease = "online_lease"
)

// Operation is the name of an AgentCommand's operation.
type Operation string

// Stream and configuration operations ([main]).
const (
	OpStart                 Operation = "start"
	OpStop                  Operation = "stop"
	OpRestart               Operation = "restart"
	OpApplyConfiguration    Operation = "apply_configuration"
	OpRollbackConfiguration Operation = "rollback_configuration"
	// OpReconcile is the operation of a HubOperation derived from a bare
	// intent; it is never sent to an Agent.
	OpReconcile Operation = "reconcile"
)

// Job operations ([v1]). All need job_runtime and state_backend.
const (
	OpJobStart            Operation = "job_start"
	OpJobStop             Operation = "job_stop"
	OpJobRestart          Operation = "job_restart"
	OpJobCheckpoint       Operation = "job_checkpoint"
	OpJobSavepoint        Operation = "job_savepoint"
	OpJobCheckpointCommit Operation = "job_checkpoint_commit"
	OpJobSavepointCommit  Operation = "job_savepoint_commit"
)

// IsJob reports whether op is one of the [v1] job_* operations.
func (op Operation) IsJob() bool {
	switch op {
	case OpJobStart, OpJobStop, OpJobRestart, OpJobCheckpoint, OpJobSavepoint,
		OpJobCheckpointCommit, OpJobSavepointCommit:
		return true
	}
	return false
}

// RequiredCapabilities returns the capabilities v1 requires of a node for
// op (A.3), or nil for an operation it does not know.
func (op Operation) RequiredCapabilities() []string {
	switch op {
	case OpStart, OpStop, OpRestart:
		return []string{CapabilityStreamLifecycle}
	case OpApplyConfiguration, OpRollbackConfiguration:
		return []string{CapabilityConfiguration}
	}
	if op.IsJob() {
		return []string{CapabilityJobRuntime, CapabilityStateBackend}
	}
	return nil
}

// Resource ids of configuration commands: the intent path uses
// ResourceConfigurationIntent, the legacy direct path ResourceConfiguration.
const (
	ResourceConfigurationIntent = "__configuration__"
	ResourceConfiguration       = "configuration"
)

// OperationState is HubOperationState: the state of a HubOperation and of a
// CommandResult.
type OperationState string

// Operation states. Succeeded and the ones after it are terminal.
const (
	OpStateQueued          OperationState = "queued"
	OpStateDispatched      OperationState = "dispatched"
	OpStateAcknowledged    OperationState = "acknowledged"
	OpStateRunning         OperationState = "running"
	OpStateSucceeded       OperationState = "succeeded"
	OpStateFailed          OperationState = "failed"
	OpStateTimedOut        OperationState = "timed_out"
	OpStateNodeUnavailable OperationState = "node_unavailable"
	OpStateCancelled       OperationState = "cancelled"
	OpStateSuperseded      OperationState = "superseded"
)

// Terminal reports whether s ends an operation.
func (s OperationState) Terminal() bool {
	switch s {
	case OpStateSucceeded, OpStateFailed, OpStateTimedOut, OpStateNodeUnavailable,
		OpStateCancelled, OpStateSuperseded:
		return true
	}
	return false
}

// FailureClass classifies a failed operation; the Hub's retry decision
// depends on it (C.2).
type FailureClass string

// Failure classes.
const (
	FailureValidation         FailureClass = "validation"
	FailureAuthorization      FailureClass = "authorization"
	FailureNodeUnavailable    FailureClass = "node_unavailable"
	FailureTransport          FailureClass = "transport"
	FailureTemporaryExecution FailureClass = "temporary_execution"
	FailurePermanentExecution FailureClass = "permanent_execution"
	FailureAmbiguous          FailureClass = "ambiguous"
	FailureStaleGeneration    FailureClass = "stale_generation"
	FailureRepository         FailureClass = "repository"
)

// Retryable reports whether the Hub retries an intent whose attempt failed
// with class c (C.2: temporary_execution, transport, node_unavailable).
func (c FailureClass) Retryable() bool {
	switch c {
	case FailureTemporaryExecution, FailureTransport, FailureNodeUnavailable:
		return true
	}
	return false
}

// Node states (HubNode.state). v1 never assigns NodeOffline.
const (
	NodeOnline   = "online"
	NodeStale    = "stale"
	NodeOffline  = "offline"
	NodeDraining = "draining"
	// NodeStarting is sent by an Agent in heartbeats while its engine is not
	// running; the Hub treats it as online.
	NodeStarting = "starting"
)

// Node maintenance states (HubNode.maintenance_state).
const (
	MaintenanceActive   = "active"
	MaintenanceDraining = "draining"
	Maintenance         = "maintenance"
)

// Stream states (StreamStatus.state).
const (
	StreamCreated    = "created"
	StreamStarting   = "starting"
	StreamRunning    = "running"
	StreamStopping   = "stopping"
	StreamStopped    = "stopped"
	StreamFailed     = "failed"
	StreamRestarting = "restarting"
)

// Job states. v1 stores desired stopped|running and observed draft,
// validated, starting, running, stopped, failed; the core enum also has
// stopping, recovering and cancelled. JobConverging is our aggregate state
// while any expected assignment is pending or retryably degraded.
const (
	JobDraft      = "draft"
	JobValidated  = "validated"
	JobStarting   = "starting"
	JobRunning    = "running"
	JobStopping   = "stopping"
	JobStopped    = "stopped"
	JobRecovering = "recovering"
	JobFailed     = "failed"
	JobCancelled  = "cancelled"
	// JobConverging is an extension value of observed_state.
	JobConverging = "converging"
)

// Convergence values of jobs, intents and streams.
const (
	ConvergenceUnknown         = "unknown"
	ConvergencePending         = "pending"
	ConvergenceReconciling     = "reconciling"
	ConvergenceConverged       = "converged"
	ConvergencePendingRecovery = "pending_recovery"
	ConvergenceConverging      = "converging"
	ConvergenceDegraded        = "degraded"
	ConvergenceBlocked         = "blocked"
	ConvergenceInSync          = "in_sync"
	ConvergenceApplying        = "applying"
)

// Task attempt states (TaskAttempt.state).
const (
	TaskQueued     = "queued"
	TaskStarting   = "starting"
	TaskRunning    = "running"
	TaskStopping   = "stopping"
	TaskSucceeded  = "succeeded"
	TaskFailed     = "failed"
	TaskCancelled  = "cancelled"
	TaskSuperseded = "superseded"
)

// Checkpoint record kinds and statuses (JobCheckpointRecord).
const (
	KindCheckpoint = "checkpoint"
	KindSavepoint  = "savepoint"

	CheckpointPending   = "pending"
	CheckpointCompleted = "completed"
	CheckpointFailed    = "failed"
)

// Recovery policies of a job spec.
const (
	RecoveryLatestCheckpoint = "latest_checkpoint"
	RecoveryLatestSavepoint  = "latest_savepoint"
	RecoveryFail             = "fail"
)

// Error codes of ApiError.code.
const (
	// Transport, auth and generic (A.0, A.1, A.2).
	CodeInvalidQuery          = "invalid_query"
	CodeUnauthorized          = "unauthorized"
	CodeForbidden             = "forbidden"
	CodeNotFound              = "not_found"
	CodeValidationFailed      = "validation_failed"
	CodeGenerationConflict    = "generation_conflict"
	CodeIdempotencyKeyReused  = "idempotency_key_reused"
	CodeRepositoryUnavailable = "repository_unavailable"
	CodeAgentRequestRejected  = "agent_request_rejected"
	// CodeInvalidBody: a request body that is empty, not JSON, or more
	// than one JSON value. Extension: v1 answers invalid_query.
	CodeInvalidBody = "invalid_body"

	// Streams, nodes, configuration, operations, rollouts (A.2).
	CodeStreamNotFound               = "stream_not_found"
	CodeInvalidOperation             = "invalid_operation"
	CodeNodeUnavailable              = "node_unavailable"
	CodeCommandRejected              = "command_rejected"
	CodeNodeConfigurationUnavailable = "node_configuration_unavailable"
	CodeInvalidConfiguration         = "invalid_configuration"
	CodeOperationNotFound            = "operation_not_found"
	CodeInvalidRollout               = "invalid_rollout"
	CodeInvalidRolloutAction         = "invalid_rollout_action"

	// Jobs (A.4).
	CodeInvalidJobSpec          = "invalid_job_spec"
	CodeInvalidJobPlan          = "invalid_job_plan"
	CodeInvalidJobState         = "invalid_job_state"
	CodeInvalidJobAction        = "invalid_job_action"
	CodeInvalidJobVersion       = "invalid_job_version"
	CodeInvalidPersistedJob     = "invalid_persisted_job"
	CodeJobNotFound             = "job_not_found"
	CodeJobMustBeStopped        = "job_must_be_stopped"
	CodeSavepointNotReady       = "savepoint_not_ready"
	CodeStateFormatIncompatible = "state_format_incompatible"
	CodeNoPreviousJobVersion    = "no_previous_job_version"
	// CodeCheckpointsNotConfigured refuses a checkpoint or savepoint of a
	// job whose spec has no checkpoint block (field spec.checkpoint).
	// Extension: v1 accepts the request and its Agents fail the command.
	CodeCheckpointsNotConfigured = "checkpoints_not_configured"
	// CodeSavepointExists refuses a savepoint name the job already has
	// (field name). Extension: v1 savepoints take no name.
	CodeSavepointExists = "savepoint_exists"

	// CodeStaleGeneration rejects an Agent's result or observation of a
	// generation older than the current one. Extension: v1
	// ignores such bodies silently or folds them into
	// agent_request_rejected.
	CodeStaleGeneration = "stale_generation"
)

// InvalidQueryMessage is the message of the invalid_query envelope the Hub
// substitutes for a 400 body that is not an ApiError (A.0).
const InvalidQueryMessage = "Request query or body is invalid"

// Audit failure codes (B.7) besides unauthorized and forbidden.
const (
	AuditIncompatibleProtocol   = "incompatible_protocol"
	AuditIncompatibleCapability = "incompatible_capability"
)

// ReportMetricNames is the whitelist of NodeReport.metrics keys the v1 Hub
// keeps (B.4); values must be finite and >= 0.
var ReportMetricNames = []string{
	"input_batches", "input_messages", "processing_errors", "output_batches",
	"output_messages", "input_errors", "input_reconnects", "output_errors",
	"restarts", "streams_total", "streams_running",
}
