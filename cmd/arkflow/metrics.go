package main

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/harness"
	"github.com/arkflow-rs/arkflow-go/internal/opsrv"
)

// `arkflow run --metrics-addr HOST:PORT` serves the job over plain HTTP for
// the tools that operate a service:
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

// checkMetricsAddr checks a --metrics-addr value (opsrv.CheckAddr): a bad
// one is a usage mistake.
func checkMetricsAddr(addr string) error {
	if err := opsrv.CheckAddr(addr); err != nil {
		return usageError(err.Error())
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
		// Restored and Enabled are set once the restore is done; while it runs,
		// Recovery counts its bytes against the total.
		if r := c.Recovery; !r.Done && r.BytesTotal > 0 {
			return false, fmt.Sprintf("restoring the checkpoint's state: %d of %d bytes, %d keys", r.BytesRestored, r.BytesTotal, r.KeysRestored)
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
	return opsrv.Handler(opsrv.Routes{
		Collectors: []prometheus.Collector{j.Collector()},
		Ready: func() (bool, map[string]any) {
			s := j.Status()
			ok, why := readiness(s, checkpoints(j))
			body := map[string]any{"state": s.String()}
			if !ok {
				body["reason"] = why
			}
			return ok, body
		},
		Status: func() any { return statusBody(j) },
		Logger: logger,
	})
}

// serveMetrics listens on addr (checked by checkMetricsAddr) and serves
// metricsHandler for j until stop. It listens at once, before the job
// starts, so /readyz answers 503 while the job starts or restores.
func serveMetrics(addr string, j *arkflow.Job, logger *slog.Logger) (stop func(), err error) {
	h, err := metricsHandler(j, logger)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	return opsrv.Serve(addr, h, logger)
}

// checkpoints is the job's checkpoint status without the state walk
// Metrics does (see harness.CheckpointStatus).
func checkpoints(j *arkflow.Job) arkflow.CheckpointStatus {
	return harness.CheckpointStatus(j).(arkflow.CheckpointStatus)
}
