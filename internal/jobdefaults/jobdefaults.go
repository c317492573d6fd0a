// Package jobdefaults holds the values a job spec gets for the fields it
// leaves out, and the bounds validation holds them to. Package job fills
// them in (job.ApplyDefaults) and documents them on each field; the engine
// reads them here for the specs it builds itself.
package jobdefaults

// MaxParallelism is the number of key groups a job gets when its spec
// does not set max_parallelism. It matches ArkFlow v1, so both plan the
// same key-group ranges for the same spec.
const MaxParallelism = 128

// MaxMaxParallelism bounds max_parallelism: key groups are planned into a
// table of that size for every keyed edge, and Flink uses the same limit.
const MaxMaxParallelism = 32768

// Version is the version number given to a spec that omits version.
// ArkFlow v1 requires the field; we accept its absence (extension) and
// fill in this value, so the canonical form and digest always carry a
// version.
const Version = 1

// Checkpoint and state defaults, as in ArkFlow v1.
const (
	CheckpointIntervalMS = 30000
	CheckpointRetention  = 3
	StateFormatVersion   = 1
)
