package hubhttp

import (
	"log/slog"
	"net/http"
	"runtime/debug"
)

// Recover returns middleware that turns a panic in next into a 500
// internal envelope (if nothing was written yet) and logs the panic
// with the correlation id and stack on logger (nil: not logged). The
// client sees no detail. http.ErrAbortHandler is passed on, as net/http
// expects. Put it inside Correlation so the envelope and the log line
// carry the same id.
func Recover(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tw := &trackingWriter{ResponseWriter: w}
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				id := responseCorrelationID(w, r)
				if logger != nil {
					logger.Error("hub handler panicked", "correlation_id", id,
						"method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				}
				if !tw.wrote {
					WriteError(w, r, Internal())
				}
			}()
			next.ServeHTTP(tw, r)
		})
	}
}

// trackingWriter records whether the response was started.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) {
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer
// (Flush for the SSE route, deadlines).
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
