package hubclient

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
)

// QueryHandler returns an http.Handler that serves the state queries of
// the Agent's jobs as the Hub forwards them (see Config.QueryAddr):
//
//	GET /api/v1/jobs/{id}/state/{operator}?key=K
//
// and the scans without key, each answered by the job's
// arkflow.Job.QueryHandler (the same JSON and statuses). A job the Agent
// does not run is a 404. A key kept by another Agent's part of the job is
// a 404 too (421 when this Agent can tell which task keeps it): the Hub
// asks every Agent that runs a part. A non-empty token
// makes every request need "Authorization: Bearer <token>", which the
// Hub sends (hub.Config.StateToken).
func (a *Agent) QueryHandler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/jobs/{id}/state/{operator}", func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if token != "" && (!ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="arkflow state"`)
			writeError(w, http.StatusUnauthorized, "state queries need the bearer token")
			return
		}
		id := r.PathValue("id")
		a.mu.Lock()
		rj := a.jobs[id]
		a.mu.Unlock()
		if rj == nil {
			writeError(w, http.StatusNotFound, "this Agent runs no job "+id)
			return
		}
		http.StripPrefix("/api/v1/jobs/"+id+"/state", rj.job.QueryHandler(token)).ServeHTTP(w, r)
	})
	return mux
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
