package hubstore

import (
	"errors"
	"fmt"
)

// Sentinel errors. The HTTP layer maps them with errors.Is.
var (
	// ErrNotFound: the resource does not exist (404).
	ErrNotFound = errors.New("hubstore: not found")
	// ErrUnauthorized: unknown node or a token that matches no session (401).
	ErrUnauthorized = errors.New("hubstore: unauthorized")
	// ErrStaleSession: the token belongs to an older session of the node;
	// the request is rejected and changes nothing (401 for the agent, which
	// must re-register).
	ErrStaleSession = errors.New("hubstore: session superseded")
	// ErrWrongNode: the command belongs to another node (401/403).
	ErrWrongNode = errors.New("hubstore: command belongs to another node")
	// ErrStaleGeneration: the request names a generation other than the
	// current one.
	ErrStaleGeneration = errors.New("hubstore: stale generation")
	// ErrGenerationConflict: the If-Match generation is not the current
	// one (412/409 generation_conflict). The concrete error is
	// *GenerationConflictError.
	ErrGenerationConflict = errors.New("hubstore: generation conflict")
	// ErrIdempotencyKeyReused: the Idempotency-Key was used before for a
	// different request (409 idempotency_key_reused).
	ErrIdempotencyKeyReused = errors.New("hubstore: idempotency key reused with a different request")
	// ErrInvalid: the request is malformed (400/422).
	ErrInvalid = errors.New("hubstore: invalid request")
	// ErrConflict: the write contradicts an immutable or terminal record
	// (409), e.g. completing a checkpoint already completed with another
	// manifest.
	ErrConflict = errors.New("hubstore: conflict")
)

// GenerationConflictError carries the expected and current generation for
// the 412 body (details.expected_generation, details.current_generation).
type GenerationConflictError struct {
	Resource string
	Expected int64
	Current  int64
}

func (e *GenerationConflictError) Error() string {
	return fmt.Sprintf("hubstore: generation conflict on %s: expected %d, current %d", e.Resource, e.Expected, e.Current)
}

// Is makes errors.Is(err, ErrGenerationConflict) true.
func (e *GenerationConflictError) Is(target error) bool { return target == ErrGenerationConflict }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
