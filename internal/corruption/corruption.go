// Package corruption holds the module's one corruption marker, Err, which
// checkpoint, wal and the root package export as ErrCorrupt (the same
// value), and the two ways a store marks its errors with it without
// changing their text. It imports nothing from the module, so every store
// can import it (checkpoint and wal import no public package).
package corruption

import "errors"

// Err matches, under errors.Is, every error a store returns for data that
// is not what it wrote: a checkpoint manifest or state object whose size
// or checksum is wrong (checkpoint), a snapshot that does not parse or a
// damaged state directory (state), a damaged WAL segment or cursor (wal),
// unreadable positions kept with a WAL cursor. It is never matched by an
// I/O error of a store that cannot be reached.
var Err = errors.New("arkflow: corrupt data")

// Sentinel returns a new sentinel error with text msg that also matches
// Err. It is for packages whose own corruption sentinels predate Err
// (statestore.ErrCorrupt, statestore.ErrCorruptSnapshot) and keep their text.
func Sentinel(msg string) error { return &sentinel{msg} }

type sentinel struct{ msg string }

func (e *sentinel) Error() string        { return e.msg }
func (e *sentinel) Is(target error) bool { return target == Err }

// Mark returns an error with err's text that matches Err, and err too
// (it unwraps to err). Mark(nil) is nil.
func Mark(err error) error {
	if err == nil {
		return nil
	}
	return &marked{err}
}

type marked struct{ err error }

func (e *marked) Error() string        { return e.err.Error() }
func (e *marked) Unwrap() error        { return e.err }
func (e *marked) Is(target error) bool { return target == Err }
