package checkpoint

import (
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/corruption"
)

// ErrCorrupt is arkflow.ErrCorrupt, the module's one corruption marker
// (wal.ErrCorrupt is the same value), declared here so that a program
// using this package alone can test for it. It matches, under errors.Is,
// every error about stored data that is not what was written, checkpoint
// or not: a manifest that does not decode or whose checksum does not
// match, a state object whose size or checksum differs from its manifest
// entry (the message names the object's key and what is wrong), whether
// a job's restore, Inspect or Verify met it. A store that cannot be
// reached is not corruption. Its text starts with "arkflow: ", the
// module's, not "checkpoint: ".
var ErrCorrupt = corruption.Err

// ErrNotFound matches, under errors.Is, the error of reading a checkpoint
// object that does not exist, and Inspect's and Verify's for an artifact
// the store does not hold. Restoring skips a checkpoint whose objects are
// missing, so from a job it reaches a program only when nothing older is
// left.
var ErrNotFound = ckptstore.ErrNotFound
