package checkpoint

import (
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/corruption"
)

// ErrCorrupt matches, under errors.Is, every error about stored data that
// is not what was written, checkpoint or not (a *CorruptError here). It is
// the same value as arkflow.ErrCorrupt and wal.ErrCorrupt. A store that
// cannot be reached is not corruption.
var ErrCorrupt = corruption.Err

// ErrNotFound matches, under errors.Is, the error of reading a checkpoint
// object that does not exist. Restoring skips a checkpoint whose objects
// are missing, so it reaches a program only when nothing older is left.
var ErrNotFound = ckptstore.ErrNotFound

// CorruptError reports a checkpoint object whose bytes are not what they
// should be: a manifest that does not decode or whose checksum does not
// match, a state object whose size or SHA-256 differs from its manifest
// entry. errors.As finds it in the errors of a job's checkpoints.
type CorruptError struct {
	// Key is the object's key in the store (empty if the bytes did not
	// come from a store).
	Key string
	// Reason says what is wrong.
	Reason string
	// Err is the underlying error, if any (e.g. a JSON syntax error).
	Err error
}

// Error names the key (when there is one), the reason and the underlying
// error.
func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString("checkpoint: ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString("corrupt: ")
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns Err, the underlying error (nil if there is none).
func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes a *CorruptError match ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// The store's own corruption errors are not of this package's type (the
// store is internal and does not import it); errors.As on them asks this
// hook to fill a *CorruptError.
func init() {
	ckptstore.AsPublic = func(e *ckptstore.CorruptError, target any) bool {
		p, ok := target.(**CorruptError)
		if ok {
			*p = &CorruptError{Key: e.Key, Reason: e.Reason, Err: e.Err}
		}
		return ok
	}
}
