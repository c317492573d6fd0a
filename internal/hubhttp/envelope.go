package hubhttp

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error codes of the envelope, as ArkFlow v1 spells them.
const (
	CodeUnauthorized         = "unauthorized"
	CodeForbidden            = "forbidden"
	CodeNotFound             = "not_found"
	CodeValidationFailed     = "validation_failed"
	CodeGenerationConflict   = "generation_conflict"
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodeInvalidQuery         = "invalid_query"
	CodeInternal             = "internal"
	// CodePayloadTooLarge and CodeUnsupportedMediaType are ours: ArkFlow
	// answers these two as plain text, which breaks "every error is an
	// envelope".
	CodePayloadTooLarge      = "payload_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeInvalidBody is ours too: a request body that is not one JSON
	// value. ArkFlow folds it into invalid_query, which sends a client
	// looking at its query string.
	CodeInvalidBody = "invalid_body"
)

// Error is the error envelope of every Hub response with status >= 400:
// {code, message, field?, stream_id?, correlation_id?, details?}. Absent
// options are omitted, as in ArkFlow's ApiError. It is field-compatible
// with the full wire type held elsewhere; Status is the HTTP status and is
// not serialised.
type Error struct {
	Status        int    `json:"-"`
	Code          string `json:"code"`
	Message       string `json:"message"`
	Field         string `json:"field,omitempty"`
	StreamID      string `json:"stream_id,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	Details       any    `json:"details,omitempty"`
}

// Error makes *Error an error, so handlers can return it through layers
// that speak error and errors.As can find it again.
func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (%d): %s [field %s]", e.Code, e.Status, e.Message, e.Field)
	}
	return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message)
}

// NewError returns an envelope with the given status, code and message.
func NewError(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// WithField returns e with Field set; it modifies and returns e.
func (e *Error) WithField(field string) *Error { e.Field = field; return e }

// WithDetails returns e with Details set; it modifies and returns e.
func (e *Error) WithDetails(details any) *Error { e.Details = details; return e }

// WithStreamID returns e with StreamID set; it modifies and returns e.
func (e *Error) WithStreamID(id string) *Error { e.StreamID = id; return e }

// Unauthorized is 401 unauthorized: no valid credential was presented.
func Unauthorized(message string) *Error {
	if message == "" {
		message = "Authentication required"
	}
	return NewError(http.StatusUnauthorized, CodeUnauthorized, message)
}

// Forbidden is 403 forbidden with ArkFlow's message "Operator is not
// authorized for <Action>".
func Forbidden(action Action) *Error {
	return NewError(http.StatusForbidden, CodeForbidden, "Operator is not authorized for "+action.title())
}

// NotFound is 404. ArkFlow names the missing thing in the code
// (job_not_found, stream_not_found, operation_not_found); an empty code
// means not_found.
func NotFound(code, message string) *Error {
	if code == "" {
		code = CodeNotFound
	}
	return NewError(http.StatusNotFound, code, message)
}

// ValidationFailed is 422 validation_failed naming the offending field
// (a JSON field or a header name).
func ValidationFailed(field, message string) *Error {
	return NewError(http.StatusUnprocessableEntity, CodeValidationFailed, message).WithField(field)
}

// GenerationPreconditionFailed is 412 generation_conflict: an If-Match
// precondition failed. Details are ArkFlow's
// {expected_generation, current_generation}; callers may add "resource".
func GenerationPreconditionFailed(expected, current int64) *Error {
	return NewError(http.StatusPreconditionFailed, CodeGenerationConflict,
		fmt.Sprintf("expected generation %d, current generation is %d", expected, current)).
		WithDetails(map[string]any{"expected_generation": expected, "current_generation": current})
}

// GenerationConflict is 409 generation_conflict: an expected_generation
// carried in a request body (job upgrades, §A.4) is not the current one.
// Details are ArkFlow's {expected, current}.
func GenerationConflict(expected, current int64) *Error {
	return NewError(http.StatusConflict, CodeGenerationConflict,
		fmt.Sprintf("expected generation %d, current generation is %d", expected, current)).
		WithDetails(map[string]any{"expected": expected, "current": current})
}

// IdempotencyKeyReused is 409 idempotency_key_reused: the key was used
// before with a different request.
func IdempotencyKeyReused() *Error {
	return NewError(http.StatusConflict, CodeIdempotencyKeyReused,
		"Idempotency-Key was already used for a different request").WithField(HeaderIdempotencyKey)
}

// InvalidQuery is 400 invalid_query, ArkFlow's code for a query string or
// a request field it cannot accept.
func InvalidQuery(field, message string) *Error {
	if message == "" {
		message = "Request query or body is invalid"
	}
	return NewError(http.StatusBadRequest, CodeInvalidQuery, message).WithField(field)
}

// InvalidBody is 400 invalid_body: the request body is empty, is not
// JSON, or holds more than one JSON value.
func InvalidBody(message string) *Error {
	return NewError(http.StatusBadRequest, CodeInvalidBody, message)
}

// Internal is 500 internal. The message is fixed so that no internal
// detail (paths, SQL, secrets) reaches a client; log the cause with the
// correlation id instead.
func Internal() *Error {
	return NewError(http.StatusInternalServerError, CodeInternal, "Internal server error")
}

// WriteError writes e as the JSON body with e.Status (500 if unset). The
// envelope always carries the request's correlation id: the one
// Correlation put in r's context, else the one already on the response
// header, else a fresh one, which is then also set on the header. A nil
// e writes Internal().
func WriteError(w http.ResponseWriter, r *http.Request, e *Error) {
	if e == nil {
		e = Internal()
	}
	out := *e
	if out.Status < 400 || out.Status > 599 {
		out.Status = http.StatusInternalServerError
	}
	if out.CorrelationID == "" {
		out.CorrelationID = responseCorrelationID(w, r)
	}
	if out.Details != nil {
		if _, err := json.Marshal(out.Details); err != nil {
			out.Details = nil // keep the envelope (and its correlation id)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, out.Status, &out)
}

// WriteJSON writes v as JSON with the given status and
// Content-Type: application/json. An encoding failure after the header is
// sent cannot be reported to the client and is dropped.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"code":"internal","message":"Internal server error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
