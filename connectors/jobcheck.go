package connectors

// JobView is a whole job as a JobCheck sees it: every input and output
// built from its spec (the ones that failed to build are absent), with
// where each sits in the spec. Connectors whose configurations constrain
// each other across operators (a transactional output and the input whose
// offsets it commits, say) check them here, at validation and so before a
// start.
type JobView struct {
	JobID   string
	Inputs  []JobInput
	Outputs []JobOutput
	// CheckpointIntervalMS is the job's checkpoint interval (checkpoint
	// block with defaults applied), 0 when the job takes no checkpoints.
	CheckpointIntervalMS int64
}

// JobInput is one built input of a job.
type JobInput struct {
	OperatorID string
	// Path is the source's place in the spec, e.g. "sources[0]".
	Path  string
	Input Input
	// Durable reports whether the source has a write-ahead log (its own
	// durability block or the job's).
	Durable bool
}

// JobOutput is one built output of a job.
type JobOutput struct {
	OperatorID string
	// Path is the sink's place in the spec, e.g. "sinks[0]".
	Path   string
	Output Output
	// Sources are the operator IDs of the sources whose rows can reach
	// the sink, in spec order.
	Sources []string
}

// JobProblem is a problem a JobCheck found: Field is the full path in the
// spec (e.g. "sinks[0].config.offset_commit_group").
type JobProblem struct {
	OperatorID string
	Field      string
	Reason     string
}

// JobCheck checks the inputs and outputs of a whole job together. It must
// have no side effects.
type JobCheck func(JobView) []JobProblem

// RegisterJobCheck adds a check every job build runs once all of its
// components are built. It is meant to be called from init.
func RegisterJobCheck(f JobCheck) { global.RegisterJobCheck(f) }

// JobChecks returns the globally registered job checks, in registration
// order.
func JobChecks() []JobCheck { return global.JobChecks() }
