package arkflow

import (
	"context"
	"time"

	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/internal/blob"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
)

// CheckpointStatus is a job's checkpoint health and recovery progress.
// Its JSON (the checkpoints of `arkflow run`'s and an Agent's /status)
// has snake_case names, durations in nanoseconds (_ns) and no
// last_completed before the first commit.
type CheckpointStatus struct {
	// Enabled is false when the spec has no checkpoint block.
	Enabled bool `json:"enabled"`
	// Healthy is false after a failed round, until one succeeds
	// ("degraded": the previous checkpoint is still the one a restart
	// uses).
	Healthy bool `json:"healthy"`
	// Completed and Failures count this run's checkpoint rounds. A round
	// cancelled before it committed (the job ended or stopped during it,
	// or the caller of Checkpoint cancelled its context) is neither: it is
	// logged as abandoned and leaves the health as it was.
	Completed int64 `json:"completed"`
	Failures  int64 `json:"failures"`
	// ConsecutiveFailures counts the rounds failed since the last one that
	// succeeded (0 when Healthy): how long checkpoints have been degraded.
	ConsecutiveFailures int64 `json:"consecutive_failures"`
	// LastError is the error of the last failed round ("" when none).
	LastError string `json:"last_error,omitempty"`
	// LastID is the newest checkpoint this run committed.
	LastID string `json:"last_id,omitempty"`
	// LastDuration is how long it took, from trigger to commit.
	LastDuration time.Duration `json:"last_duration_ns"`
	// LastPause is how long the sources were held for its cut.
	LastPause time.Duration `json:"last_pause_ns"`
	// LastBytes is the size of the state it uploaded.
	LastBytes int64 `json:"last_bytes"`
	// LastCompleted is when that checkpoint committed (zero when this run
	// committed none).
	LastCompleted time.Time `json:"last_completed,omitzero"`
	// Restored names the checkpoint or savepoint the run started from
	// ("" when none).
	Restored string `json:"restored,omitempty"`
	// Recovery is the progress of the restore the run started with.
	Recovery RecoveryProgress `json:"recovery"`
}

// RecoveryProgress counts a restore's state: bytes and keys restored of
// the total, reported before the job reports Running.
type RecoveryProgress struct {
	BytesRestored     int64 `json:"bytes_restored"`
	BytesTotal        int64 `json:"bytes_total"`
	KeysRestored      int64 `json:"keys_restored"`
	SnapshotsRestored int   `json:"snapshots_restored"`
	SnapshotsTotal    int   `json:"snapshots_total"`
	// Done is true once the restore has finished (or there was none).
	Done bool `json:"done"`
}

func checkpointStatus(c runtime.CheckpointStatus) CheckpointStatus {
	return CheckpointStatus{
		Enabled: c.Enabled, Healthy: c.Healthy, Completed: c.Completed, Failures: c.Failures,
		ConsecutiveFailures: c.ConsecutiveFailures, LastError: c.LastError,
		LastID: c.LastID, LastDuration: c.LastDuration, LastPause: c.LastPause, LastBytes: c.LastBytes,
		LastCompleted: c.LastCompleted, Restored: c.Restored,
		Recovery: RecoveryProgress(c.Recovery),
	}
}

// ErrNoCheckpoints is returned by Checkpoint and Savepoint for a job whose
// spec has no checkpoint block.
var ErrNoCheckpoints = runtime.ErrNoCheckpoints

// WithSavepoint starts the job from the named savepoint instead of
// following spec.recovery: how an upgraded (or rolled back) version takes
// over the state of the one before it. An empty name means
// none: the job follows spec.recovery. A job without a checkpoint block
// has no savepoints: Build, FromSpec and Validate report the option.
func WithSavepoint(name string) Option {
	return optionFunc(func(o *options) { o.fromSavepoint = name })
}

// WithCheckpointStore sets the endpoint and credentials of an s3://
// checkpoint store; fields left empty come from AWS_ENDPOINT_URL,
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
func WithCheckpointStore(opts checkpoint.StoreOptions) Option {
	return optionFunc(func(o *options) { o.store = opts })
}

// Checkpoint takes a checkpoint now (besides the periodic ones of
// spec.checkpoint.interval_ms) and returns its id. The sources pause only
// for the cut; the state uploads while the job runs.
func (j *Job) Checkpoint(ctx context.Context) (string, error) { return j.rt.Checkpoint(ctx) }

// Savepoint takes a named savepoint: a checkpoint that retention never
// deletes. To upgrade, take a savepoint, stop the job, and start the new
// version WithSavepoint(name); to roll back, start the old version from its
// own savepoint.
func (j *Job) Savepoint(ctx context.Context, name string) error { return j.rt.Savepoint(ctx, name) }

// storeOptions is the engine's form of a checkpoint.StoreOptions.
// (checkpoint.Open makes the same conversion.)
func storeOptions(o checkpoint.StoreOptions) ckptstore.StoreOptions {
	return ckptstore.StoreOptions{
		Options: blob.Options{Endpoint: o.Endpoint, Region: o.Region, AccessKeyID: o.AccessKeyID,
			SecretAccessKey: o.SecretAccessKey, AllowHTTP: o.AllowHTTP},
		PartSize: o.PartSize, UploadConcurrency: o.UploadConcurrency, DownloadConcurrency: o.DownloadConcurrency,
	}
}
