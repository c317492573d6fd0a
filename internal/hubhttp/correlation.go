package hubhttp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// HeaderCorrelationID is the header that carries the correlation id both
// ways.
const HeaderCorrelationID = "X-Correlation-ID"

// MaxCorrelationIDLen bounds an echoed correlation id; a longer one is
// replaced by a generated id rather than copied into logs, audit rows and
// responses.
const MaxCorrelationIDLen = 128

type ctxKey int

const (
	correlationKey ctxKey = iota
	principalKey
)

// Correlation is the middleware that gives every request a correlation
// id: the request's X-Correlation-ID if it is sane (see
// ValidCorrelationID), else a generated "req-" + 32 hex digits (128
// random bits; ArkFlow's req-<n> counter restarts with the process). The
// id is set on the response header before next runs and put in the
// request context (CorrelationID reads it).
func Correlation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderCorrelationID)
		if !ValidCorrelationID(id) {
			id = NewCorrelationID()
		}
		w.Header().Set(HeaderCorrelationID, id)
		next.ServeHTTP(w, r.WithContext(WithCorrelationID(r.Context(), id)))
	})
}

// ValidCorrelationID reports whether id may be echoed: 1 to
// MaxCorrelationIDLen bytes of printable ASCII without spaces (0x21 to
// 0x7e). Control characters, spaces and non-ASCII bytes are refused so
// that an echoed id cannot forge log lines or headers.
func ValidCorrelationID(id string) bool {
	if len(id) == 0 || len(id) > MaxCorrelationIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// NewCorrelationID returns "req-" followed by 32 hex digits of
// crypto/rand.
func NewCorrelationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go >= 1.24)
	return "req-" + hex.EncodeToString(b[:])
}

// WithCorrelationID returns ctx carrying id.
func WithCorrelationID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, correlationKey, id)
}

// CorrelationID returns the correlation id in ctx, or "" if none was set.
func CorrelationID(ctx context.Context) string {
	id, _ := ctx.Value(correlationKey).(string)
	return id
}

// responseCorrelationID returns the id an error envelope should carry:
// the context's, else the response header's, else a new one, which is
// then also set on the response header so body and header agree.
func responseCorrelationID(w http.ResponseWriter, r *http.Request) string {
	if r != nil {
		if id := CorrelationID(r.Context()); id != "" {
			return id
		}
	}
	if id := w.Header().Get(HeaderCorrelationID); id != "" {
		return id
	}
	id := NewCorrelationID()
	w.Header().Set(HeaderCorrelationID, id)
	return id
}
