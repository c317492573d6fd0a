package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/config"
)

// Stream states, as the health routes report them.
const (
	stateStarting int32 = iota
	stateRunning
	stateEnded
	stateFailed
)

var stateNames = [...]string{"starting", "running", "ended", "failed"}

// serves says whether the health_check block asks for the routes: it
// sets enabled: true or an address. (ArkFlow serves them on
// 127.0.0.1:8080 also without the block.)
func (h *HealthCheck) serves() bool {
	return (h.Enabled == nil && h.Address != "") || (h.Enabled != nil && *h.Enabled)
}

// check adds the block's problems.
func (h *HealthCheck) check(v *validator) {
	if h.Address != "" {
		if _, _, err := net.SplitHostPort(h.Address); err != nil {
			v.add("health_check.address", "must be host:port (got %q)", h.Address)
		}
	}
	for k, p := range map[string]string{"health_path": h.HealthPath, "readiness_path": h.ReadinessPath, "liveness_path": h.LivenessPath} {
		if p != "" && !strings.HasPrefix(p, "/") {
			v.add(config.Join("health_check", k), "must start with / (got %q)", p)
		}
	}
	if h.HubURL != "" {
		v.add("health_check.hub_url", "ArkFlow's agent mode is not available for Stream configs: run the pipeline as a job under arkflow agent --hub URL")
	}
}

// serveHealth serves the health, readiness and liveness routes until ctx
// is done. Health and liveness answer 200 while the process serves;
// readiness answers 200 once every stream's inputs are connected and
// while none has failed, else 503; each answers the streams' states as
// JSON.
func serveHealth(ctx context.Context, h *HealthCheck, runners []*runner, lg *slog.Logger) (stop func(), err error) {
	addr := h.Address
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health_check.address: %w", err)
	}
	states := func() (map[string]string, bool) {
		out := map[string]string{}
		ready := true
		for _, r := range runners {
			s := r.state.Load()
			out[r.id] = stateNames[s]
			ready = ready && (s == stateRunning || s == stateEnded)
		}
		return out, ready
	}
	answer := func(w http.ResponseWriter, status int, body map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	}
	mux := http.NewServeMux()
	alive := func(w http.ResponseWriter, _ *http.Request) {
		s, _ := states()
		answer(w, http.StatusOK, map[string]any{"status": "ok", "streams": s})
	}
	mux.HandleFunc("GET "+orDefault(h.HealthPath, "/health"), alive)
	mux.HandleFunc("GET "+orDefault(h.LivenessPath, "/liveness"), alive)
	mux.HandleFunc("GET "+orDefault(h.ReadinessPath, "/readiness"), func(w http.ResponseWriter, _ *http.Request) {
		s, ready := states()
		if !ready {
			answer(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "streams": s})
			return
		}
		answer(w, http.StatusOK, map[string]any{"status": "ready", "streams": s})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error("health routes", "error", err)
		}
	}()
	lg.Info("health routes served", "address", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// setState records a runner's state for the health routes.
func (r *runner) setState(s int32) { r.state.Store(s) }
