// Command arkflow-hub runs an ArkFlow Hub: the control plane that keeps
// jobs in a SQLite file under --data-dir and runs them on the Agents that
// register with it (`arkflow agent --hub URL`, or a Go service using
// package hubclient). Its API is ArkFlow v1's under /api/v1.
//
//	arkflow-hub --data-dir ./hub-data --token 'alice|operator|SECRET'
//
// Operator tokens are "id|role|secret[|scopes]" (role admin, operator or
// viewer; secret at least 16 bytes), given by repeated --token flags or in
// $ARKFLOW_OPERATOR_TOKENS separated by ';' or newlines. Without any token
// every operator request is refused (401) unless --insecure-no-auth is
// given, which lets everyone in as admin and is logged as a warning.
// Agents register with --node-token (default $ARKFLOW_NODE_TOKEN); without
// one any Agent may register. A spec's ${secret:NAME} references are
// resolved from this process's environment when a job is sent to an Agent.
//
// GET /api/v1/jobs/{id}/state/{operator}?key=K is a state query, which the
// Hub forwards to the Agents running the job (those started with
// `arkflow agent --state-addr`), sending $ARKFLOW_STATE_TOKEN as their
// bearer token when it is set; an Agent that may hold the key and is down
// makes it a 503 that names the Agent.
//
// With --metrics-addr HOST:PORT it also serves, on a listener apart from
// the API's and without authentication (bind it to loopback or an
// internal network), the routes `arkflow run` and `arkflow agent` serve:
// /metrics (Prometheus: jobs by desired and observed state, nodes by
// state, HTTP requests by route pattern and code with their latency,
// checkpoint rounds, failovers, plus the Go runtime and the process),
// /healthz, /readyz (200 while the store answers and the API listener
// serves) and /status (version, jobs by state, nodes).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go/hub"
	"github.com/arkflow-rs/arkflow-go/internal/logformat"
	"github.com/arkflow-rs/arkflow-go/internal/opsrv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr, nil)
	stop()
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "arkflow-hub:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "arkflow-hub:", err)
		os.Exit(1)
	}
}

type usageError struct{ error }

// tokens is the repeatable --token flag.
type tokens []string

func (t *tokens) String() string     { return fmt.Sprintf("%d tokens", len(*t)) }
func (t *tokens) Set(v string) error { *t = append(*t, v); return nil }

// run parses args, opens the Hub and serves it until ctx ends. ready, if
// set, gets the address it listens on.
func run(ctx context.Context, args []string, stderr io.Writer, ready func(addr string)) error {
	fs := flag.NewFlagSet("arkflow-hub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var toks tokens
	dataDir := fs.String("data-dir", "./arkflow-hub-data", "keep the Hub's SQLite file (hub.db) in `DIR`")
	listen := fs.String("listen", envOr("ARKFLOW_HUB_ADDRESS", "127.0.0.1:8080"), "listen on `ADDR` ($ARKFLOW_HUB_ADDRESS when set)")
	fs.Var(&toks, "token", "an operator token `id|role|secret[|scopes]`; repeatable (default $ARKFLOW_OPERATOR_TOKENS, ';'-separated)")
	nodeToken := fs.String("node-token", "", "the secret Agents register with (default $ARKFLOW_NODE_TOKEN; a flag shows in the process list)")
	insecure := fs.Bool("insecure-no-auth", false, "let every operator request in as admin (testing only)")
	lease := fs.Duration("lease", 15*time.Second, "how long a heartbeat keeps an Agent online")
	poll := fs.Duration("poll-interval", time.Second, "how often Agents poll for commands")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics, /healthz, /readyz and /status over HTTP on `HOST:PORT`, a listener apart from the API's, with no authentication: bind it to loopback or an internal network")
	verbose := fs.Bool("v", false, "debug logging")
	var logFormat logformat.Format
	fs.Var(&logFormat, "log-format", logformat.Usage)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("takes no arguments (got %s)", strings.Join(fs.Args(), " "))}
	}
	if *metricsAddr != "" {
		if err := opsrv.CheckAddr(*metricsAddr); err != nil {
			return usageError{err}
		}
	}
	if len(toks) == 0 {
		toks = splitTokens(os.Getenv("ARKFLOW_OPERATOR_TOKENS"))
	}
	if *nodeToken == "" {
		*nodeToken = os.Getenv("ARKFLOW_NODE_TOKEN")
	}
	logger := logformat.New(stderr, logFormat, *verbose)
	// --insecure-no-auth is warned about by the Hub itself, once.
	if err := os.MkdirAll(*dataDir, 0o755); err != nil {
		return err
	}
	h, err := hub.New(hub.Config{DataDir: *dataDir, Tokens: toks, InsecureNoAuth: *insecure, NodeToken: *nodeToken,
		Lease: *lease, PollInterval: *poll, Logger: logger, StateToken: os.Getenv("ARKFLOW_STATE_TOKEN")})
	if err != nil {
		return err
	}
	defer h.Close()
	// serving is set while the API listener serves: /readyz wants it and
	// the store.
	var serving atomic.Bool
	if *metricsAddr != "" {
		stopMetrics, err := serveMetrics(*metricsAddr, h, &serving, logger)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	logger.Info("hub listening", "addr", ln.Addr().String(), "page", "http://"+ln.Addr().String()+"/", "data_dir", *dataDir, "operator_tokens", len(toks), "node_token", *nodeToken != "")
	if ready != nil {
		ready(ln.Addr().String())
	}
	serving.Store(true)
	defer serving.Store(false)
	return h.Run(ctx, ln)
}

// serveMetrics serves the Hub's --metrics-addr routes, those of
// `arkflow run` and `arkflow agent`: /metrics (the
// Hub's collector, the Go runtime's and the process's), /healthz,
// /readyz (200 while the store answers and the API listener serves) and
// /status (hub.Status).
func serveMetrics(addr string, h *hub.Hub, serving *atomic.Bool, logger *slog.Logger) (stop func(), err error) {
	handler, err := opsrv.Handler(opsrv.Routes{
		Collectors: []prometheus.Collector{h.Collector()},
		Ready:      func() (bool, map[string]any) { return hubReadiness(h, serving.Load()) },
		Status: func() any {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := h.Status(ctx)
			if err != nil {
				return map[string]any{"version": s.Version, "error": err.Error()}
			}
			return s
		},
		Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	return opsrv.Serve(addr, handler, logger)
}

// hubReadiness is the Hub's /readyz: its store answers (a read of the
// jobs and nodes) and its API listener serves.
func hubReadiness(h *hub.Hub, serving bool) (bool, map[string]any) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.Status(ctx); err != nil {
		return false, map[string]any{"reason": "the store cannot be read: " + err.Error()}
	}
	if !serving {
		return false, map[string]any{"reason": "the API listener is not serving"}
	}
	return true, map[string]any{}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// splitTokens splits $ARKFLOW_OPERATOR_TOKENS on ';' and newlines.
func splitTokens(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == '\n' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
