package arkflow

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
)

// QueryHandler returns an http.Handler that answers Job.Query over HTTP,
// for a service to mount (under a prefix, with http.StripPrefix):
//
//	GET /{operator}?key=K  →  {"key": "K", "operator": …, "rows": [{…}]}
//	GET /{operator}?prefix=P&from=A&to=B&limit=N&after=C  →  {…, "next": "D", "rows": [{…}]}
//
// The first is Query, the second Scan (every parameter optional). Keys
// are text, parsed as the key column's type; rows are JSON objects,
// column name to value, as the file sink writes them. A non-empty token
// makes every request need "Authorization: Bearer <token>" (401
// without). Errors are JSON {"error": …}: 404 for an unknown operator,
// one not queried (ErrNotQueryable) and a key without state, 400 for a
// key of the wrong type or a bad scan parameter, 503 while the job is not
// running or replaying its logs. A request waits at most 10 s.
func (j *Job) QueryHandler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{operator}", func(w http.ResponseWriter, r *http.Request) {
		if !bearerOK(r, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="arkflow state"`)
			writeJSONError(w, http.StatusUnauthorized, "state queries need the bearer token")
			return
		}
		op, q := r.PathValue("operator"), r.URL.Query()
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		head := map[string]string{"operator": op}
		var rec arrow.RecordBatch
		var err error
		if q.Has("key") {
			head["key"] = q.Get("key")
			rec, err = j.Query(ctx, op, q.Get("key"))
		} else {
			var opts ScanOptions
			if opts, err = scanOptions(q); err == nil {
				rec, head["next"], err = j.Scan(ctx, op, opts)
			}
		}
		if err != nil {
			writeJSONError(w, queryStatus(err), err.Error())
			return
		}
		defer rec.Release()
		if q.Has("key") && rec.NumRows() == 0 {
			writeJSONError(w, http.StatusNotFound, "operator "+op+" keeps no state for key "+q.Get("key"))
			return
		}
		writeRows(w, head, rec)
	})
	return mux
}

// scanOptions reads a scan's options from a URL's query: prefix, from,
// to, limit and after.
func scanOptions(q url.Values) (ScanOptions, error) {
	opts := ScanOptions{Prefix: q.Get("prefix"), After: q.Get("after")}
	if q.Has("from") {
		opts.From = q.Get("from")
	}
	if q.Has("to") {
		opts.To = q.Get("to")
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil {
			return opts, fmt.Errorf("%w: limit %q is not a number", errBadRequest, q.Get("limit"))
		}
		opts.Limit = n
	}
	return opts, nil
}

// errBadRequest marks a request's own mistakes (400).
var errBadRequest = errors.New("bad request")

// writeRows writes head's fields and the rows of rec as one JSON object.
func writeRows(w http.ResponseWriter, head map[string]string, rec arrow.RecordBatch) {
	lines, err := rowjson.AppendRecord(nil, rec)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	rows := strings.Join(strings.Split(strings.TrimSuffix(string(lines), "\n"), "\n"), ",")
	obj, _ := json.Marshal(head)
	w.Header().Set("Content-Type", "application/json")
	w.Write(obj[:len(obj)-1])
	w.Write([]byte(`,"rows":[` + rows + "]}\n"))
}

// queryStatus is the HTTP status of a query's error.
func queryStatus(err error) int {
	switch {
	case errors.Is(err, ErrNotQueryable):
		return http.StatusNotFound
	case errors.Is(err, ErrKeyType), errors.Is(err, ErrBadCursor), errors.Is(err, errBadRequest), errors.Is(err, runtime.ErrScanLimit):
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
