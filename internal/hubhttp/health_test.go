package hubhttp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func get(t *testing.T, h http.Handler, path string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s: %v: %s", path, err, rec.Body)
	}
	return rec.Code, m
}

func same(t *testing.T, path string, got, want map[string]any) {
	t.Helper()
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("%s: %s, want %s", path, gb, wb)
	}
}

func TestHealthRoutes(t *testing.T) {
	ready, reason := true, ""
	mux := http.NewServeMux()
	RegisterHealth(mux, HealthOptions{
		Ready: func(context.Context) (bool, string) { return ready, reason },
		Nodes: func(context.Context) int { return 3 },
	})
	code, m := get(t, mux, "/health")
	if code != 200 {
		t.Errorf("health %d", code)
	}
	same(t, "/health", m, map[string]any{"status": "healthy", "nodes": 3, "ready": true})
	code, m = get(t, mux, "/readiness")
	if code != 200 {
		t.Errorf("readiness %d", code)
	}
	same(t, "/readiness", m, map[string]any{"status": "ready", "ready": true})
	code, m = get(t, mux, "/liveness")
	if code != 200 {
		t.Errorf("liveness %d", code)
	}
	same(t, "/liveness", m, map[string]any{"status": "alive", "alive": true})

	ready, reason = false, ReasonStorageUnavailable
	code, m = get(t, mux, "/health")
	if code != 503 {
		t.Errorf("health %d", code)
	}
	same(t, "/health", m, map[string]any{"status": "degraded", "nodes": 3, "ready": false})
	code, m = get(t, mux, "/readiness")
	if code != 503 {
		t.Errorf("readiness %d", code)
	}
	same(t, "/readiness", m, map[string]any{"status": "not_ready", "ready": false, "reason": "storage_unavailable"})
	if code, _ = get(t, mux, "/liveness"); code != 200 {
		t.Errorf("liveness while not ready: %d", code)
	}

	ready, reason = false, ""
	_, m = get(t, mux, "/readiness")
	if m["reason"] != ReasonStartupRecovery {
		t.Errorf("default reason %v", m["reason"])
	}
}

func TestHealthNilFuncs(t *testing.T) {
	mux := http.NewServeMux()
	RegisterHealth(mux, HealthOptions{})
	code, m := get(t, mux, "/health")
	if code != 200 {
		t.Errorf("%d", code)
	}
	same(t, "/health", m, map[string]any{"status": "healthy", "nodes": 0, "ready": true})
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/health", nil))
	if rec.Code != 405 {
		t.Errorf("POST /health: %d", rec.Code)
	}
}
