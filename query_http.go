package arkflow

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
)

// QueryHandler returns an http.Handler that answers Job.Query over HTTP,
// for a service to mount (under a prefix, with http.StripPrefix):
//
//	GET /{operator}?key=K  →  {"operator": …, "key": "K", "rows": [{…}]}
//
// The key is text, parsed as the operator's key column's type; rows are
// JSON objects, column name to value, as the file sink writes them. A
// non-empty token makes every request need "Authorization: Bearer
// <token>" (401 without it). Errors are JSON {"error": …}: 404 for an
// unknown operator, one not queried by key (ErrNotQueryable) and a key
// with no state, 400 for a missing key or one of the wrong type, 503
// while the job is not running or replaying its logs. A query waits at
// most 10 s.
func (j *Job) QueryHandler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{operator}", func(w http.ResponseWriter, r *http.Request) {
		if !bearerOK(r, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="arkflow state"`)
			writeJSONError(w, http.StatusUnauthorized, "state queries need the bearer token")
			return
		}
		op := r.PathValue("operator")
		if !r.URL.Query().Has("key") {
			writeJSONError(w, http.StatusBadRequest, "the query needs ?key=")
			return
		}
		key := r.URL.Query().Get("key")
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		rec, err := j.Query(ctx, op, key)
		if err != nil {
			writeJSONError(w, queryStatus(err), err.Error())
			return
		}
		defer rec.Release()
		if rec.NumRows() == 0 {
			writeJSONError(w, http.StatusNotFound, "operator "+op+" keeps no state for key "+key)
			return
		}
		lines, err := rowjson.AppendRecord(nil, rec)
		if err != nil {
			writeJSONError(w, http.StatusInternalServerError, err.Error())
			return
		}
		rows := strings.Join(strings.Split(strings.TrimSuffix(string(lines), "\n"), "\n"), ",")
		head, _ := json.Marshal(map[string]string{"operator": op, "key": key})
		w.Header().Set("Content-Type", "application/json")
		w.Write(head[:len(head)-1])
		w.Write([]byte(`,"rows":[` + rows + "]}\n"))
	})
	return mux
}

// queryStatus is the HTTP status of a query's error.
func queryStatus(err error) int {
	switch {
	case errors.Is(err, ErrNotQueryable):
		return http.StatusNotFound
	case errors.Is(err, ErrKeyType):
		return http.StatusBadRequest
	case errors.Is(err, runtime.ErrKeyNotLocal):
		return http.StatusMisdirectedRequest
	case errors.Is(err, ErrNotRunning), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// bearerOK reports whether r carries the bearer token (any request when
// token is empty).
func bearerOK(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
