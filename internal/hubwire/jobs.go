package hubwire

import "encoding/json"

// ValidateJobRequest is the body of POST /jobs/validate.
type ValidateJobRequest struct {
	Spec    json.RawMessage `json:"spec"`
	NodeIDs []string        `json:"node_ids"`
}

// MarshalJSON encodes nil slices as [].
func (r ValidateJobRequest) MarshalJSON() ([]byte, error) {
	type plain ValidateJobRequest
	p := plain(r)
	p.NodeIDs = strs(p.NodeIDs)
	return json.Marshal(p)
}

// ValidateJobResponse is the 200 body of POST /jobs/validate.
type ValidateJobResponse struct {
	Valid                bool                `json:"valid"`
	Plan                 json.RawMessage     `json:"plan"`
	RequiredCapabilities []string            `json:"required_capabilities"`
	Nodes                []NodeCompatibility `json:"nodes"`
	Warnings             []string            `json:"warnings"`

	// Extension: every validation problem, each naming the operator and
	// config field at fault. v1 reports only the first, as a 422.
	Errors []ValidationIssue `json:"errors,omitempty"`
}

// MarshalJSON encodes nil slices as [] and a nil plan as null.
func (r ValidateJobResponse) MarshalJSON() ([]byte, error) {
	type plain ValidateJobResponse
	p := plain(r)
	if p.Plan == nil {
		p.Plan = json.RawMessage("null")
	}
	p.RequiredCapabilities = strs(p.RequiredCapabilities)
	if p.Nodes == nil {
		p.Nodes = []NodeCompatibility{}
	}
	p.Warnings = strs(p.Warnings)
	return json.Marshal(p)
}

// ValidationIssue is one problem found by validation.
//
// Extension: absent from v1.
type ValidationIssue struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Operator string `json:"operator,omitempty"`
	Field    string `json:"field,omitempty"`
}

// NodeCompatibility says whether a node can run the validated plan.
type NodeCompatibility struct {
	NodeID       string   `json:"node_id"`
	State        string   `json:"state"`
	Capabilities []string `json:"capabilities"`
	Compatible   bool     `json:"compatible"`
	// MissingCapabilities names what the node lacks; a node that is not
	// online lists CapabilityOnlineLease.
	MissingCapabilities []string `json:"missing_capabilities"`

	// Extension: what exactly is required and what the node offers, for
	// each missing capability.
	Mismatches []CapabilityMismatch `json:"mismatches,omitempty"`
}

// MarshalJSON encodes nil slices as [].
func (n NodeCompatibility) MarshalJSON() ([]byte, error) {
	type plain NodeCompatibility
	p := plain(n)
	p.Capabilities = strs(p.Capabilities)
	p.MissingCapabilities = strs(p.MissingCapabilities)
	return json.Marshal(p)
}

// CapabilityMismatch explains one missing capability, e.g. capability
// "state_backend", required "pebble", offered ["memory"].
//
// Extension: absent from v1.
type CapabilityMismatch struct {
	Capability string   `json:"capability"`
	Required   string   `json:"required"`
	Offered    []string `json:"offered,omitempty"`
}

// SubmitJobRequest is the body of POST /jobs. DesiredState defaults to
// stopped.
type SubmitJobRequest struct {
	Spec         json.RawMessage `json:"spec"`
	NodeIDs      []string        `json:"node_ids"`
	DesiredState string          `json:"desired_state,omitempty"`
}

// MarshalJSON encodes nil slices as [].
func (r SubmitJobRequest) MarshalJSON() ([]byte, error) {
	type plain SubmitJobRequest
	p := plain(r)
	p.NodeIDs = strs(p.NodeIDs)
	return json.Marshal(p)
}

// JobRecord is a job as the operator API returns it.
type JobRecord struct {
	JobID   string `json:"job_id"`
	Version uint64 `json:"version"`
	// SpecJSON is the spec as a JSON string, not an object (v1's shape).
	SpecJSON      string   `json:"spec_json"`
	DesiredState  string   `json:"desired_state"`
	ObservedState string   `json:"observed_state"`
	Convergence   string   `json:"convergence"`
	Generation    uint64   `json:"generation"`
	NodeIDs       []string `json:"node_ids"`
	CheckpointID  string   `json:"checkpoint_id,omitempty"`
	LastError     string   `json:"last_error,omitempty"`
	UpdatedAtMs   uint64   `json:"updated_at_ms"`

	// Extension: the content digest of the current version.
	Digest string `json:"digest,omitempty"`
}

// MarshalJSON encodes nil slices as [].
func (r JobRecord) MarshalJSON() ([]byte, error) {
	type plain JobRecord
	p := plain(r)
	p.NodeIDs = strs(p.NodeIDs)
	return json.Marshal(p)
}

// JobDesiredStateRequest is the body of PUT /jobs/{id}/desired-state; the
// expected generation travels in If-Match.
type JobDesiredStateRequest struct {
	// State is running or stopped.
	State string `json:"state"`
}

// JobPlanResponse is the body of GET /jobs/{id}/plan.
type JobPlanResponse struct {
	JobID   string          `json:"job_id"`
	Version uint64          `json:"version"`
	Plan    json.RawMessage `json:"plan"`
}

// JobDetail is the body of GET /jobs/{id}/detail.
type JobDetail struct {
	Job JobRecord `json:"job"`
	// Plan is v1's JobPlan {spec, tasks} (with added fields).
	Plan json.RawMessage `json:"plan"`
	// Tasks are the task attempts of the current generation, one per plan
	// task of each assignment.
	Tasks      []TaskAttempt  `json:"tasks"`
	Nodes      []HubNode      `json:"nodes"`
	Operations []HubOperation `json:"operations"`
	// Checkpoints holds both checkpoints and savepoints.
	Checkpoints []JobCheckpointRecord `json:"checkpoints"`
	Metrics     JobMetrics            `json:"metrics"`

	// Extension: observed state per expected assignment.
	Assignments []AssignmentStatus `json:"assignments,omitempty"`
	// Extension: checkpoint health.
	CheckpointHealth *CheckpointHealth `json:"checkpoint_health,omitempty"`
}

// MarshalJSON encodes nil slices as [] and a nil plan as null.
func (d JobDetail) MarshalJSON() ([]byte, error) {
	type plain JobDetail
	p := plain(d)
	if p.Plan == nil {
		p.Plan = json.RawMessage("null")
	}
	if p.Tasks == nil {
		p.Tasks = []TaskAttempt{}
	}
	if p.Nodes == nil {
		p.Nodes = []HubNode{}
	}
	if p.Operations == nil {
		p.Operations = []HubOperation{}
	}
	if p.Checkpoints == nil {
		p.Checkpoints = []JobCheckpointRecord{}
	}
	return json.Marshal(p)
}

// JobMetrics is JobDetail.metrics, and (JobStatus.Metrics) one node's
// share of it. The reference names the fields but not their types; each
// is optional, so a metric nobody measured is absent rather than a
// misleading zero. What each means, for a node and for the job (the Hub's
// aggregation over the nodes of the current generation):
type JobMetrics struct {
	// WatermarkLagMs is the wall clock minus the input watermark of the
	// task furthest behind, in ms, as measured when the node reported
	// (negative: event time ahead of the clock). The job's is the largest
	// of its nodes'. Absent while no task has a watermark (processing
	// time, before the first event, or every bounded input ended).
	WatermarkLagMs *int64 `json:"watermark_lag_ms,omitempty"`
	// StateBytes is the committed state of the stateful operators, in
	// bytes (a node measures it at most once a minute: it walks every
	// key). The job's is the sum of its nodes'.
	StateBytes *uint64 `json:"state_bytes,omitempty"`
	// CheckpointDurationMs is how long the node's last completed
	// checkpoint (or part of one) took, trigger to commit. The job's is
	// the largest of its nodes': a round cut in parts is as slow as its
	// slowest part.
	CheckpointDurationMs *uint64 `json:"checkpoint_duration_ms,omitempty"`
	// CheckpointFailures counts the failed checkpoint rounds of the
	// node's run of the current generation. The job's is the larger of
	// the largest node's count (a round cut in parts fails on every node
	// whose part failed, so a sum would count it once per node) and the
	// rounds of the generation the Hub recorded failed (those it drove,
	// including the ones an offline node failed before they started).
	CheckpointFailures *uint64 `json:"checkpoint_failures,omitempty"`
	// RecoveryProgress is the restore the run started with, as a fraction
	// of its state's bytes: 0 to 1, 1 once done (or when it restored
	// nothing). The job's is its slowest node's (the smallest).
	RecoveryProgress *float64 `json:"recovery_progress,omitempty"`
	// TaskPressure is the fill of the fullest task inbox, 0 to 1:
	// messages waiting in a task's input channels over what they hold
	// before its upstream blocks (1 is backpressure). The job's is the
	// largest of its nodes'. Absent when no task receives over channels
	// (a job of one chain).
	TaskPressure *float64 `json:"task_pressure,omitempty"`
	// PartitionHealth is a PartitionHealth: the input partitions of the
	// event-time sources, summed over the nodes. It is carried as raw
	// JSON because the reference gives it no shape. Absent without
	// event-time sources.
	PartitionHealth json.RawMessage `json:"partition_health,omitempty"`
}

// PartitionHealth counts the input partitions the event-time source
// tasks read (JobMetrics.partition_health).
type PartitionHealth struct {
	// Healthy partitions hold the watermark as they should: they had data
	// within the source's idle timeout.
	Healthy uint64 `json:"healthy"`
	// Idle partitions have had no data for the idle timeout: they no
	// longer hold the source's watermark back.
	Idle uint64 `json:"idle"`
}

// AssignmentStatus is the observed state of one expected assignment: one
// node's share of a job at one (generation, action).
//
// Extension: absent from v1, which keeps one last-writer-wins state per job.
type AssignmentStatus struct {
	NodeID        string    `json:"node_id"`
	Generation    uint64    `json:"generation"`
	Action        Operation `json:"action"`
	AssignmentIDs []string  `json:"assignment_ids,omitempty"`
	// Extension: the placement units the node runs
	// and their plan tasks, when the Hub placed the job's units on
	// several nodes (empty: the whole job).
	Units []string `json:"units,omitempty"`
	Tasks []string `json:"tasks,omitempty"`
	// Extension: the input partitions each source task of the
	// node read at its last checkpoint ("topic/partition"), as the node
	// last reported them.
	Partitions map[string][]string `json:"partitions,omitempty"`
	// State is the state of the assignment's tasks (TaskAttempt.state:
	// queued, starting, running, stopping, failed, superseded), except
	// stopped for a stop that succeeded (or a bounded run that ended) and
	// degraded for a failure the Hub retries.
	State        string       `json:"state"`
	CommandID    string       `json:"command_id,omitempty"`
	Error        string       `json:"error,omitempty"`
	FailureClass FailureClass `json:"failure_class,omitempty"`
	// RecoveryProgress is 0-100 while the assignment restores and replays.
	RecoveryProgress *uint8 `json:"recovery_progress,omitempty"`
	UpdatedAtMs      uint64 `json:"updated_at_ms"`
}

// CheckpointHealth summarises recent checkpoints of a job.
//
// Extension: absent from v1.
type CheckpointHealth struct {
	// State is healthy or degraded.
	State                     string `json:"state"`
	ConsecutiveFailures       uint64 `json:"consecutive_failures"`
	LastCompletedCheckpointID string `json:"last_completed_checkpoint_id,omitempty"`
	LastCompletedAtMs         uint64 `json:"last_completed_at_ms,omitempty"`
	LastError                 string `json:"last_error,omitempty"`
}

// JobVersionRecord is one immutable version of a job (GET
// /jobs/{id}/versions, highest first).
type JobVersionRecord struct {
	JobID       string `json:"job_id"`
	Version     uint64 `json:"version"`
	SpecJSON    string `json:"spec_json"`
	PlanJSON    string `json:"plan_json"`
	CreatedAtMs uint64 `json:"created_at_ms"`

	// Extension: the content digest of spec and plan; versions are
	// content-addressed, so resubmitting the same spec yields the same
	// digest.
	Digest string `json:"digest,omitempty"`
}

// JobCheckpointRecord is one checkpoint or savepoint of a job.
type JobCheckpointRecord struct {
	JobID        string `json:"job_id"`
	JobVersion   uint64 `json:"job_version"`
	CheckpointID string `json:"checkpoint_id"`
	// Kind is checkpoint or savepoint; Status pending, completed or failed.
	Kind          string `json:"kind"`
	Status        string `json:"status"`
	ManifestURI   string `json:"manifest_uri,omitempty"`
	FormatVersion uint32 `json:"format_version"`
	CreatedAtMs   uint64 `json:"created_at_ms"`
	UpdatedAtMs   uint64 `json:"updated_at_ms"`

	// Extension: the job generation the checkpoint was taken at.
	Generation uint64 `json:"generation,omitempty"`
	// Extension: the savepoint's operator-given name.
	Name string `json:"name,omitempty"`
	// Extension: why a failed checkpoint failed.
	Error string `json:"error,omitempty"`
}

// SavepointRequest is the optional body of POST /jobs/{id}/savepoints,
// decoded strictly: a field it does not have is refused, naming it.
//
// Extension: v1 takes no body.
type SavepointRequest struct {
	Name string `json:"name,omitempty"`
}

// UpgradeRequest is the body of POST /jobs/{id}/upgrades.
type UpgradeRequest struct {
	Spec               json.RawMessage `json:"spec"`
	NodeIDs            []string        `json:"node_ids"`
	ExpectedGeneration uint64          `json:"expected_generation"`
	SavepointID        string          `json:"savepoint_id"`
}

// MarshalJSON encodes nil slices as [].
func (r UpgradeRequest) MarshalJSON() ([]byte, error) {
	type plain UpgradeRequest
	p := plain(r)
	p.NodeIDs = strs(p.NodeIDs)
	return json.Marshal(p)
}

// UpgradeResponse is the 202 body of POST /jobs/{id}/upgrades. State is
// pending_recovery: the job is stopped and restores from the savepoint when
// set running.
type UpgradeResponse struct {
	UpgradeID   string    `json:"upgrade_id"`
	State       string    `json:"state"`
	SavepointID string    `json:"savepoint_id"`
	Job         JobRecord `json:"job"`
}
