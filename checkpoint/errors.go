package checkpoint

import (
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/corruption"
)

// ErrCorrupt matches, under errors.Is, every error about stored data that
// is not what was written, checkpoint or not: a manifest that does not
// decode or whose checksum does not match, a state object whose size or
// SHA-256 differs from its manifest entry (the message names the object's
// key and what is wrong). It is
// the same value as arkflow.ErrCorrupt and wal.ErrCorrupt. A store that
// cannot be reached is not corruption. Being the module's, its text
// starts with "arkflow: ", not "checkpoint: ".
var ErrCorrupt = corruption.Err

// ErrNotFound matches, under errors.Is, the error of reading a checkpoint
// object that does not exist. Restoring skips a checkpoint whose objects
// are missing, so it reaches a program only when nothing older is left.
var ErrNotFound = ckptstore.ErrNotFound
