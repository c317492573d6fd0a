package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/harness"
)

// `arkflow run --metrics-addr HOST:PORT` serves the job over plain HTTP for
// the tools that operate a service (issue 21, R-OPS-1):
//
//	/metrics  the job's Collector (and the Go runtime's and the process's)
//	          in a registry of its own, Prometheus text format
//	/healthz  200 while the process serves (liveness)
//	/readyz   200 while the job runs with checkpoints not failing; 503 with
//	          a JSON reason while it starts or restores, stops, has failed,
//	          or after readyMaxCheckpointFailures failed rounds in a row
//	/status   the control socket's /status JSON

// readyMaxCheckpointFailures is how many checkpoint rounds in a row may
// fail before /readyz reports the job not ready: one or two failed rounds
// are a hiccup the next round repairs, three mean a restart would replay
// ever more input.
const readyMaxCheckpointFailures = 3

// checkMetricsAddr checks a --metrics-addr value: HOST:PORT, PORT a number
// (0 lets the system choose), HOST empty for every interface.
func checkMetricsAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if _, perr := strconv.ParseUint(port, 10, 16); perr != nil {
			err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
		}
	}
	if err != nil {
		return usagef("--metrics-addr %q: %v; want HOST:PORT, such as 127.0.0.1:9090 (port 0: any free port)", addr, err)
	}
	return nil
}

// statusBody is the JSON of /status, on the control socket and on
// --metrics-addr alike. It reads the job's status and checkpoint health
// only (Job.Metrics would measure the state too).
func statusBody(j *arkflow.Job) map[string]any {
	return map[string]any{"job": j.Plan().JobID, "state": j.Status().String(), "checkpoints": checkpoints(j)}
}

// readiness says whether a job in status s with checkpoint health c is
// ready, and if not, why.
func readiness(s arkflow.Status, c arkflow.CheckpointStatus) (bool, string) {
	switch {
	case s < arkflow.Running:
		if c.Enabled && c.Restored != "" && !c.Recovery.Done {
			return false, fmt.Sprintf("restoring from %s: %d of %d bytes", c.Restored, c.Recovery.BytesRestored, c.Recovery.BytesTotal)
		}
		return false, "the job is " + s.String() + ", not yet running"
	case s > arkflow.Running:
		return false, "the job is " + s.String()
	case c.Enabled && c.ConsecutiveFailures >= readyMaxCheckpointFailures:
		return false, fmt.Sprintf("%d checkpoints in a row failed (not ready from %d): %s", c.ConsecutiveFailures, readyMaxCheckpointFailures, c.LastError)
	}
	return true, ""
}

// metricsHandler serves /metrics, /healthz, /readyz and /status for j.
func metricsHandler(j *arkflow.Job, logger *slog.Logger) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		j.Collector(),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	writeJSON := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		Registry: reg, // promhttp_metric_handler_errors_total
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"live": true})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		s := j.Status()
		ok, why := readiness(s, checkpoints(j))
		if ok {
			writeJSON(w, http.StatusOK, map[string]any{"ready": true, "state": s.String()})
			return
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "state": s.String(), "reason": why})
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, statusBody(j))
	})
	return mux, nil
}

// serveMetrics listens on addr (checked by checkMetricsAddr) and serves
// metricsHandler for j until stop. It listens at once, before the job
// starts, so /readyz answers 503 while the job starts or restores.
func serveMetrics(addr string, j *arkflow.Job, logger *slog.Logger) (stop func(), err error) {
	h, err := metricsHandler(j, logger)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("metrics server", "error", err)
		}
	}()
	logger.Info("metrics listening", "addr", ln.Addr().String())
	return func() { srv.Close() }, nil
}

// checkpoints is the job's checkpoint status without the state walk
// Metrics does (see harness.CheckpointStatus).
func checkpoints(j *arkflow.Job) arkflow.CheckpointStatus {
	return harness.CheckpointStatus(j).(arkflow.CheckpointStatus)
}
