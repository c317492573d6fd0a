package durable

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/fsutil"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Keeper is a wrapped source that keeps, beside its WAL, something of
// every row the WAL took (push's idempotency keys, mqtt's redelivery
// marks), which must hold every row accepted, across a crash at any
// point, while the WAL deletes the entries its cursor passed. The source
// gives it the two halves:
//
//   - Logged, at Connect and before the wrapped source connects, with every
//     entry the WAL holds (those after the cursor, and for a held log those
//     from its floor): what was accepted and not yet deleted;
//   - SaveKept, before the WAL persists a cursor (which deletes the
//     entries behind it): the keeper makes what it keeps of every row
//     accepted so far durable in its own file, at the path OpenKeeper gave.
//
// Only the local backend keeps such files: Open refuses a Keeper on the
// object-store one.
type Keeper interface {
	// OpenKeeper is called by Open, once the WAL is open, with the path of
	// the keeper's file: one per source, shared by its subtasks, in the
	// directory of their logs (Reshard carries it along).
	OpenKeeper(path string, lg *slog.Logger) error
	// Logged is called with a batch the WAL holds; rec stays the caller's.
	Logged(rec arrow.RecordBatch)
	// SaveKept makes durable what the keeper keeps of the rows accepted so
	// far. It cannot fail the cursor save: a keeper reports its failures
	// itself (the push source fails its pushes).
	SaveKept()
}

// keysFile is the name of a Keeper's file in the directory of the
// source's logs, beside PARALLELISM.
const keysFile = "KEYS"

var errKeeperObjectStore = errors.New("the source keeps a file beside its WAL (the idempotency keys of a push source with push.Config.IdempotencyKey or of an http input with an idempotency block; the mqtt input's redelivery marks), which only the local backend can: " +
	"use durability with a local path (or no idempotency)")

// openKeeper opens the wrapped source's Keeper at the source's keys file.
func (s *Source) openKeeper(cfg *job.Durability, dataDir string, info connectors.TaskInfo) error {
	dir, err := Dir(cfg, dataDir, info.JobID, info.OperatorID, info.Subtask)
	if err != nil {
		return err
	}
	return s.keeper.OpenKeeper(filepath.Join(filepath.Dir(dir), keysFile), s.lg)
}

// carryKeys copies the keys file of the logs in dir, if any, to staging:
// a redistribution keeps it with the logs.
func carryKeys(dir, staging string) error {
	b, err := os.ReadFile(filepath.Join(dir, keysFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fsutil.WriteFile(staging, keysFile, b)
}
