package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/logformat"
	"github.com/arkflow-rs/arkflow-go/internal/opsrv"
)

// agentCmd runs a stand-alone Agent: the jobs the Hub assigns to this
// node run in this process, with the connectors compiled into it.
func agentCmd(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
	var hub, node, token, dataDir, metricsAddr, stateAddr, stateURL string
	var verbose bool
	var logFormat logformat.Format
	fs.StringVar(&hub, "hub", "", "the Hub's base `URL`, e.g. http://127.0.0.1:8080 (required)")
	fs.StringVar(&node, "node-id", os.Getenv("ARKFLOW_NODE_ID"), "this Agent's node `ID`: stable across restarts, unique in the fleet (default $ARKFLOW_NODE_ID)")
	fs.StringVar(&token, "node-token", "", "the Hub's node token (default $ARKFLOW_NODE_TOKEN; a flag shows in the process list)")
	fs.StringVar(&dataDir, "data-dir", defaultDataDir, "keep the jobs' state and write-ahead logs in `DIR`")
	fs.StringVar(&metricsAddr, "metrics-addr", "", "serve /metrics, /healthz, /readyz and /status over HTTP on `HOST:PORT` (no authentication: bind it to loopback or an internal network)")
	fs.StringVar(&stateAddr, "state-addr", "", stateAddrUsage+"; the Hub routes its state queries of this Agent's jobs here")
	fs.StringVar(&stateURL, "state-url", "", "the base `URL` the Hub reaches --state-addr at (default http://HOST:PORT of --state-addr, the port it listens on)")
	fs.BoolVar(&verbose, "v", false, "debug logging")
	fs.Var(&logFormat, "log-format", logformat.Usage)
	return func(args []string, _, stderr io.Writer) error {
		if len(args) > 0 {
			return usagef("takes no arguments (got %s)", strings.Join(args, " "))
		}
		if hub == "" {
			return usagef("--hub URL is required")
		}
		if metricsAddr != "" {
			if err := checkMetricsAddr(metricsAddr); err != nil {
				return err
			}
		}
		if token == "" {
			token = os.Getenv("ARKFLOW_NODE_TOKEN")
		}
		logger := logformat.New(stderr, logFormat, verbose)
		if stateURL != "" && stateAddr == "" {
			return usagef("--state-url needs --state-addr")
		}
		var agent atomic.Pointer[http.Handler] // the Agent's state routes, once it exists
		if stateAddr != "" {
			url, stopState, err := serveState(stateAddr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if h := agent.Load(); h != nil {
					(*h).ServeHTTP(w, r)
					return
				}
				http.Error(w, `{"error":"the Agent is starting"}`, http.StatusServiceUnavailable)
			}), logger)
			if err != nil {
				return err
			}
			defer stopState()
			if stateURL == "" {
				stateURL = url
			}
		}
		a, err := hubclient.New(hubclient.Config{HubURL: hub, NodeID: node, NodeToken: token, DataDir: dataDir, Logger: logger, QueryAddr: stateURL})
		if err != nil {
			return usagef("%v", err)
		}
		routes := a.QueryHandler(os.Getenv(stateTokenEnv))
		agent.Store(&routes)
		if metricsAddr != "" {
			// Listening before Run: /readyz is 503 until the Agent has
			// registered and its jobs run.
			h, err := opsrv.Handler(opsrv.Routes{
				Collectors: []prometheus.Collector{a.Collector()},
				Ready:      func() (bool, map[string]any) { return agentReadiness(a.Status()) },
				Status:     func() any { return a.Status() },
				Logger:     logger,
			})
			if err != nil {
				return fmt.Errorf("--metrics-addr: %w", err)
			}
			stopMetrics, err := opsrv.Serve(metricsAddr, h, logger)
			if err != nil {
				return err
			}
			defer stopMetrics()
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return a.Run(ctx)
	}
}

// agentReadiness is the Agent's /readyz: ready once registered with the
// Hub and while every job it holds runs as `arkflow run`'s /readyz would
// have it (running, checkpoints not failing readyMaxCheckpointFailures
// rounds in a row); a job the Hub stopped is no longer assigned and does
// not count. A job is held from the moment its start command arrives
// (hubclient.Status.Jobs: starting until it is built), so an Agent the
// Hub just gave a job is not ready; the Hub's placement reaches the Agent
// with its next poll. Not ready names the first job that is not, and why
// (a restore with its bytes).
func agentReadiness(s hubclient.Status) (bool, map[string]any) {
	if !s.Registered {
		return false, map[string]any{"reason": "not registered with the hub at " + s.HubURL}
	}
	for _, j := range s.Jobs {
		if j.State == "stopped" {
			continue
		}
		if ok, why := readiness(agentJobStatus[j.State], j.Checkpoints); !ok {
			if j.Error != "" {
				why += ": " + j.Error
			}
			return false, map[string]any{"job": j.JobID, "state": j.State, "reason": "job " + j.JobID + ": " + why}
		}
	}
	return true, map[string]any{"jobs": len(s.Jobs)}
}

// agentJobStatus maps the states an Agent reports (hubclient.JobStatus)
// to the job's lifecycle status.
var agentJobStatus = map[string]arkflow.Status{
	"starting": arkflow.Starting, "recovering": arkflow.Starting, "running": arkflow.Running,
	"stopping": arkflow.Stopping, "stopped": arkflow.Stopped, "failed": arkflow.Failed,
}
