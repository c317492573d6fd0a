package hubhttp

import (
	"context"
	"net/http"
)

// Readiness reasons ArkFlow reports.
const (
	ReasonStartupRecovery    = "startup_recovery"
	ReasonStorageUnavailable = "storage_unavailable"
)

// HealthOptions injects what the health routes report.
type HealthOptions struct {
	// Ready reports whether the Hub serves requests, and if not why
	// (ReasonStartupRecovery, ReasonStorageUnavailable, …). nil means
	// always ready.
	Ready func(ctx context.Context) (ready bool, reason string)
	// Nodes returns the number of known nodes for /health; nil means 0.
	Nodes func(ctx context.Context) int
}

type healthBody struct {
	Status string `json:"status"`
	Nodes  int    `json:"nodes"`
	Ready  bool   `json:"ready"`
}

type readinessBody struct {
	Status string `json:"status"`
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

type livenessBody struct {
	Status string `json:"status"`
	Alive  bool   `json:"alive"`
}

func (o HealthOptions) ready(ctx context.Context) (bool, string) {
	if o.Ready == nil {
		return true, ""
	}
	ok, reason := o.Ready(ctx)
	if !ok && reason == "" {
		reason = ReasonStartupRecovery
	}
	return ok, reason
}

// HealthHandler serves /health: 200 {status:"healthy",nodes,ready:true}
// or 503 {status:"degraded",nodes,ready:false}.
func HealthHandler(o HealthOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, _ := o.ready(r.Context())
		b := healthBody{Status: "healthy", Ready: ok}
		if o.Nodes != nil {
			b.Nodes = o.Nodes(r.Context())
		}
		status := http.StatusOK
		if !ok {
			b.Status, status = "degraded", http.StatusServiceUnavailable
		}
		w.Header().Set("Cache-Control", "no-store")
		WriteJSON(w, status, b)
	})
}

// ReadinessHandler serves /readiness: 200 {status:"ready",ready:true} or
// 503 {status:"not_ready",ready:false,reason}.
func ReadinessHandler(o HealthOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, reason := o.ready(r.Context())
		w.Header().Set("Cache-Control", "no-store")
		if ok {
			WriteJSON(w, http.StatusOK, readinessBody{Status: "ready", Ready: true})
			return
		}
		WriteJSON(w, http.StatusServiceUnavailable, readinessBody{Status: "not_ready", Reason: reason})
	})
}

// LivenessHandler serves /liveness: 200 {status:"alive",alive:true}.
func LivenessHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		WriteJSON(w, http.StatusOK, livenessBody{Status: "alive", Alive: true})
	})
}

// RegisterHealth registers GET /health, /readiness and /liveness on mux
// (outside the API prefix, without authentication, as in ArkFlow).
func RegisterHealth(mux *http.ServeMux, o HealthOptions) {
	mux.Handle("GET /health", HealthHandler(o))
	mux.Handle("GET /readiness", ReadinessHandler(o))
	mux.Handle("GET /liveness", LivenessHandler())
}
