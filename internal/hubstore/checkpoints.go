package hubstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Checkpoint kinds and statuses.
const (
	KindCheckpoint = "checkpoint"
	KindSavepoint  = "savepoint"

	CheckpointPending   = "pending"
	CheckpointCompleted = "completed"
	CheckpointFailed    = "failed"
)

// Checkpoint is a checkpoint or savepoint record.
type Checkpoint struct {
	JobID         string
	CheckpointID  string
	Kind          string
	Generation    int64
	VersionID     string
	Status        string
	ManifestURI   string
	FormatVersion int
	Error         string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

const checkpointCols = `job_id, checkpoint_id, kind, generation, version_id, status, manifest_uri, format_version, error, created_at_ms, updated_at_ms`

func scanCheckpoint(sc interface{ Scan(...any) error }) (Checkpoint, error) {
	var c Checkpoint
	var cr, up int64
	if err := sc.Scan(&c.JobID, &c.CheckpointID, &c.Kind, &c.Generation, &c.VersionID, &c.Status, &c.ManifestURI, &c.FormatVersion, &c.Error, &cr, &up); err != nil {
		return Checkpoint{}, err
	}
	c.CreatedAt, c.UpdatedAt = time.UnixMilli(cr), time.UnixMilli(up)
	return c, nil
}

// CreateCheckpoint records a pending checkpoint or savepoint. Creating the
// same id again with the same kind, generation and version returns the
// stored record; anything else is ErrConflict.
func (s *Store) CreateCheckpoint(ctx context.Context, c Checkpoint) (Checkpoint, error) {
	if c.JobID == "" || c.CheckpointID == "" {
		return Checkpoint{}, invalidf("checkpoint needs job_id and checkpoint_id")
	}
	if c.Kind != KindCheckpoint && c.Kind != KindSavepoint {
		return Checkpoint{}, invalidf("checkpoint kind %q", c.Kind)
	}
	if c.FormatVersion <= 0 {
		return Checkpoint{}, invalidf("checkpoint format_version must be positive")
	}
	var out Checkpoint
	err := s.write(ctx, func(tx *cachedTx) error {
		old, err := scanCheckpoint(tx.QueryRowContext(ctx, "SELECT "+checkpointCols+" FROM checkpoints WHERE job_id = ? AND checkpoint_id = ?", c.JobID, c.CheckpointID))
		if err == nil {
			if old.Kind != c.Kind || old.Generation != c.Generation || old.VersionID != c.VersionID || old.FormatVersion != c.FormatVersion {
				return fmt.Errorf("%w: checkpoint %s exists with other attributes", ErrConflict, c.CheckpointID)
			}
			out = old
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := getJob(ctx, tx, c.JobID); err != nil {
			return err
		}
		now := s.nowMS()
		c.Status, c.ManifestURI, c.Error = CheckpointPending, "", ""
		c.CreatedAt, c.UpdatedAt = time.UnixMilli(now), time.UnixMilli(now)
		_, err = tx.ExecContext(ctx, "INSERT INTO checkpoints("+checkpointCols+") VALUES (?,?,?,?,?,?,?,?,?,?,?)",
			c.JobID, c.CheckpointID, c.Kind, c.Generation, c.VersionID, c.Status, "", c.FormatVersion, "", now, now)
		out = c
		return err
	})
	return out, err
}

// FinishCheckpoint moves a pending record to completed (with its manifest
// URI) or failed. A terminal record never changes: finishing it again the
// same way is a no-op, another way is ErrConflict.
//
// Completion requires the complete expected assignment set:
// every assignment of the record's generation must have a succeeded
// job_checkpoint / job_savepoint command for this checkpoint id (one
// naming the assignment, or a per-node one naming none). Otherwise it is
// ErrConflict and the record stays pending: partial results of offline
// nodes are never published as recoverable.
func (s *Store) FinishCheckpoint(ctx context.Context, jobID, checkpointID, status, manifestURI, errMsg string) (Checkpoint, error) {
	if status != CheckpointCompleted && status != CheckpointFailed {
		return Checkpoint{}, invalidf("checkpoint status %q is not terminal", status)
	}
	if status == CheckpointCompleted && manifestURI == "" {
		return Checkpoint{}, invalidf("a completed checkpoint needs a manifest URI")
	}
	var out Checkpoint
	err := s.write(ctx, func(tx *cachedTx) error {
		c, err := scanCheckpoint(tx.QueryRowContext(ctx, "SELECT "+checkpointCols+" FROM checkpoints WHERE job_id = ? AND checkpoint_id = ?", jobID, checkpointID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if c.Status != CheckpointPending {
			if c.Status == status && c.ManifestURI == manifestURI {
				out = c
				return nil
			}
			return fmt.Errorf("%w: checkpoint %s is already %s", ErrConflict, checkpointID, c.Status)
		}
		if status == CheckpointCompleted {
			missing, err := uncoveredAssignments(ctx, tx, c)
			if err != nil {
				return err
			}
			if len(missing) > 0 {
				return fmt.Errorf("%w: checkpoint %s lacks a succeeded result for assignments %v", ErrConflict, checkpointID, missing)
			}
		}
		now := s.nowMS()
		if _, err := tx.ExecContext(ctx, "UPDATE checkpoints SET status = ?, manifest_uri = ?, error = ?, updated_at_ms = ? WHERE job_id = ? AND checkpoint_id = ?",
			status, manifestURI, errMsg, now, jobID, checkpointID); err != nil {
			return err
		}
		c.Status, c.ManifestURI, c.Error, c.UpdatedAt = status, manifestURI, errMsg, time.UnixMilli(now)
		out = c
		return nil
	})
	return out, err
}

func uncoveredAssignments(ctx context.Context, tx *cachedTx, c Checkpoint) ([]string, error) {
	op := OpJobCheckpoint
	if c.Kind == KindSavepoint {
		op = OpJobSavepoint
	}
	rows, err := tx.QueryContext(ctx, `SELECT a.assignment_id FROM assignments a WHERE a.job_id = ? AND a.generation = ?
		AND NOT EXISTS (SELECT 1 FROM commands m WHERE m.job_id = a.job_id AND m.generation = a.generation AND m.checkpoint_id = ?
			AND m.operation = ? AND m.state = 'succeeded'
			AND (m.assignment_id = a.assignment_id OR (m.assignment_id = '' AND m.node_id = a.node_id)))
		ORDER BY a.assignment_id`, c.JobID, c.Generation, c.CheckpointID, op)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// GetCheckpoint returns one record or ErrNotFound.
func (s *Store) GetCheckpoint(ctx context.Context, jobID, checkpointID string) (Checkpoint, error) {
	c, err := scanCheckpoint(s.rq.QueryRowContext(ctx, "SELECT "+checkpointCols+" FROM checkpoints WHERE job_id = ? AND checkpoint_id = ?", jobID, checkpointID))
	if errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, ErrNotFound
	}
	return c, err
}

// ListCheckpoints lists a job's records of kind ("" for both), newest first.
func (s *Store) ListCheckpoints(ctx context.Context, jobID, kind string) ([]Checkpoint, error) {
	return queryAll(ctx, s.rq, scanCheckpoint, "SELECT "+checkpointCols+` FROM checkpoints WHERE job_id = ? AND (? = '' OR kind = ?)
		ORDER BY created_at_ms DESC, rowid DESC`, jobID, kind, kind)
}

// LatestCompleted returns the newest completed record of kind for the
// version and format version, or ErrNotFound.
func (s *Store) LatestCompleted(ctx context.Context, jobID, kind, versionID string, formatVersion int) (Checkpoint, error) {
	c, err := scanCheckpoint(s.rq.QueryRowContext(ctx, "SELECT "+checkpointCols+` FROM checkpoints WHERE job_id = ? AND kind = ? AND version_id = ?
		AND format_version = ? AND status = 'completed' ORDER BY created_at_ms DESC, rowid DESC LIMIT 1`, jobID, kind, versionID, formatVersion))
	if errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, ErrNotFound
	}
	return c, err
}
