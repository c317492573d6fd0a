package runtime

// This file holds the checkpoint coordinator: the status and health
// (CheckpointStatus), the triggers (Checkpoint, Savepoint and the periodic
// checkpointLoop), the catalog the rounds commit to, and what follows a
// committed round (the watermarks it recorded, and releasing the WALs'
// entries it holds). The cut is in barrier.go, a round in take.go, the
// restore in restore.go and carry.go.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/jobdefaults"
	"github.com/arkflow-rs/arkflow-go/internal/metrics"
	"github.com/arkflow-rs/arkflow-go/job"
)

// CheckpointStatus is a runtime's checkpoint health and recovery progress.
type CheckpointStatus struct {
	// Enabled is false when the spec has no checkpoint block.
	Enabled bool
	// Healthy is false after a failed round, until one succeeds
	// ("degraded": the previous checkpoint is still the one a restart
	// uses).
	Healthy   bool
	Completed int64
	Failures  int64
	// ConsecutiveFailures counts the failed rounds since the last one
	// that succeeded (0 when Healthy).
	ConsecutiveFailures int64
	LastError           string
	// Last is the newest committed checkpoint of this run.
	LastID       string
	LastDuration time.Duration
	// LastPause is how long the sources were held for the cut.
	LastPause time.Duration
	LastBytes int64
	// LastCompleted is when the newest committed checkpoint of this run
	// committed (zero when none).
	LastCompleted time.Time
	// Restored names the checkpoint or savepoint the run started from.
	Restored string
	Recovery RecoveryProgress
}

// RecoveryProgress counts a restore's state, reported before the job
// reports healthy.
type RecoveryProgress struct {
	BytesRestored, BytesTotal int64
	KeysRestored              int64
	SnapshotsRestored         int
	SnapshotsTotal            int
	Done                      bool
}

// ErrNoCheckpoints is returned by Checkpoint and Savepoint when the spec
// has no checkpoint block.
var ErrNoCheckpoints = errors.New("arkflow: the job has no checkpoint block (spec.checkpoint with an object_store_uri)")

// statefulOp reports whether an operator may keep keyed state, so that
// checkpoints snapshot it: its factory says it does (ops.Built.State), or
// the spec marks it stateful or keyed.
func (r *Runtime) statefulOp(op *job.Operator) bool {
	switch op.Kind {
	case job.KindSource, job.KindSink:
		return false
	}
	return r.g.Ops[op.ID].State || op.Stateful || op.KeyField != ""
}

// openCatalog opens the checkpoint store of the spec, or returns nil when
// checkpoints are off.
func (r *Runtime) openCatalog(ctx context.Context) (*ckptstore.Catalog, error) {
	cp := r.g.Spec.Checkpoint
	if cp == nil {
		return nil, nil
	}
	store, err := ckptstore.OpenStore(ctx, cp.ObjectStoreURI, r.opts.CheckpointStore)
	if err != nil {
		return nil, fmt.Errorf("opening the checkpoint store: %w", err)
	}
	if r.opts.WrapStore != nil {
		store = r.opts.WrapStore(store)
	}
	return ckptstore.NewCatalog(store, r.g.Spec.ID, ckptstore.Options{Retention: cp.Retention, Logger: r.log})
}

// splitTask splits "op-3" into ("op", 3).
func splitTask(id string) (string, int, bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return id[:i], n, true
}

// checkpointWatermark is ops.Task.CheckpointWatermark: the lowest
// watermark the last completed (or restored) checkpoint recorded for any
// task, a bound below every watermark a restore from it or a later one
// starts a task at.
func (r *Runtime) checkpointWatermark(string) (int64, bool) {
	r.ckpt.mu.Lock()
	defer r.ckpt.mu.Unlock()
	low, ok := int64(0), false
	for _, wm := range r.ckpt.watermarks {
		if !ok || wm < low {
			low, ok = wm, true
		}
	}
	return low, ok
}

// ckptState is the runtime's checkpoint bookkeeping.
type ckptState struct {
	// watermarks are those the last completed checkpoint recorded, by
	// task (see ops.Task.CheckpointWatermark).
	watermarks map[string]int64

	mu      sync.Mutex
	status  CheckpointStatus
	catalog *ckptstore.Catalog
	round   sync.Mutex // one round at a time

	// duration, pause and size are the distributions of every committed
	// round's LastDuration, LastPause and LastBytes (set by New).
	duration, pause, size *metrics.Histogram
}

// CheckpointHistograms are the distributions of the committed rounds'
// durations and pauses (seconds) and the bytes they uploaded.
type CheckpointHistograms struct {
	Duration, Pause, Size metrics.Snapshot
}

// CheckpointHistograms returns the distributions of this run's committed
// checkpoint rounds; their counts equal CheckpointStatus().Completed.
func (r *Runtime) CheckpointHistograms() CheckpointHistograms {
	r.ckpt.mu.Lock()
	defer r.ckpt.mu.Unlock()
	return CheckpointHistograms{Duration: r.ckpt.duration.Snapshot(), Pause: r.ckpt.pause.Snapshot(), Size: r.ckpt.size.Snapshot()}
}

// CheckpointStatus returns the checkpoint health and recovery progress.
func (r *Runtime) CheckpointStatus() CheckpointStatus {
	r.ckpt.mu.Lock()
	defer r.ckpt.mu.Unlock()
	return r.ckpt.status
}

// Checkpoint takes a checkpoint now and returns its id.
func (r *Runtime) Checkpoint(ctx context.Context) (string, error) {
	m, err := r.takeCheckpoint(ctx, ckptstore.KindCheckpoint, "")
	if err != nil {
		return "", err
	}
	return m.CheckpointID, nil
}

// Savepoint takes a named savepoint: a checkpoint that retention never
// deletes, to upgrade or roll back from.
func (r *Runtime) Savepoint(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("a savepoint needs a name")
	}
	if err := ckptstore.ValidKey(name); err != nil || strings.Contains(name, "/") {
		return fmt.Errorf("savepoint name %q: use letters, digits, '-', '_' and '.'", name)
	}
	_, err := r.takeCheckpoint(ctx, ckptstore.KindSavepoint, name)
	return err
}

// restartKind is the kind of artifact a restart restores: savepoints with
// recovery latest_savepoint, else checkpoints.
func (r *Runtime) restartKind() ckptstore.Kind {
	if r.g.Spec.Recovery == job.RecoverLatestSavepoint {
		return ckptstore.KindSavepoint
	}
	return ckptstore.KindCheckpoint
}

// checkpointCompleted tells every source behind a WAL that an artifact a
// restart would restore is committed, with the positions its cut recorded
// for the source's task: a WAL that holds its entries for checkpoints (a
// source that cannot read its input again, connectors.Unrewindable) lets
// go of the entries the artifact holds.
func (r *Runtime) checkpointCompleted(positions map[string][]connectors.Position) {
	r.mu.Lock()
	sources := r.sources
	r.mu.Unlock()
	for _, s := range sources {
		if s.wal != nil {
			s.wal.CheckpointCompleted(positions[s.task])
		}
	}
}

// checkpointLoop takes periodic checkpoints until ctx ends.
func (r *Runtime) checkpointLoop(ctx context.Context) {
	cp := r.g.Spec.Checkpoint
	every := time.Duration(cp.IntervalMS) * time.Millisecond
	if every <= 0 {
		every = time.Duration(jobdefaults.CheckpointIntervalMS) * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := r.takeCheckpoint(ctx, ckptstore.KindCheckpoint, ""); err != nil && ctx.Err() != nil {
				return
			}
		}
	}
}
