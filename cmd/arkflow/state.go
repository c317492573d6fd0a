package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/arkflow-rs/arkflow-go"
)

// stateTokenEnv names the environment variable that holds the bearer
// token of the state routes (a flag would show in the process list).
const stateTokenEnv = "ARKFLOW_STATE_TOKEN"

// stateAddrUsage is the help of --state-addr.
const stateAddrUsage = "serve the state queries GET /api/v1/jobs/{id}/state/{operator}?key=K (and scans without key) over HTTP on `HOST:PORT`; state is data: give $" + stateTokenEnv + " to require it as a bearer token"

// serveState listens on addr and serves h until stop; it returns the
// base URL it listens at (port 0 resolved) and logs whether requests need
// a token.
func serveState(addr string, h http.Handler, logger *slog.Logger) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--state-addr %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("state server", "error", err)
		}
	}()
	url = "http://" + ln.Addr().String()
	if os.Getenv(stateTokenEnv) == "" {
		logger.Warn("state routes listening without a token: anyone who reaches them reads the jobs' state", "addr", ln.Addr().String(), "fix", "set "+stateTokenEnv)
	} else {
		logger.Info("state routes listening", "addr", ln.Addr().String())
	}
	return url, func() { srv.Close() }, nil
}

// jobStateHandler serves one job's state routes under the path the Hub
// and the Agents use.
func jobStateHandler(j *arkflow.Job, jobID string) http.Handler {
	mux := http.NewServeMux()
	prefix := "/api/v1/jobs/" + jobID + "/state"
	mux.Handle(prefix+"/", http.StripPrefix(prefix, j.QueryHandler(os.Getenv(stateTokenEnv))))
	return mux
}
