// Package hub is the ArkFlow control plane: it keeps jobs, their versions
// and desired state in a SQLite file, places each job's placement units on
// the Agents that fit (see package hubclient), turns desired state into
// commands the Agents poll, takes the jobs' checkpoints in two phases (one
// part per Agent, sealed only with all of them) and moves the units of an
// Agent whose lease lapsed to the others. Its HTTP API is ArkFlow v1's under /api/v1; a read-only operator
// page at /ui/ shows jobs, versions, assignments, checkpoints, Agents and
// the audit log over that API.
package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/hubhttp"
	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
)

// Config configures a Hub. Only DataDir is required; without Tokens the
// Hub refuses every operator request unless InsecureNoAuth is set.
type Config struct {
	// DataDir holds the Hub's SQLite file (hub.db); it is created if
	// missing. One Hub at a time may use it.
	DataDir string
	// Tokens are the operator bearer tokens, each "id|role|secret[|scopes]"
	// with role admin, operator or viewer. With none, every operator
	// request is refused (401) unless InsecureNoAuth is set.
	Tokens []string
	// InsecureNoAuth lets every operator request in as an admin. It is
	// logged as a warning and cannot be combined with Tokens.
	InsecureNoAuth bool
	// NodeToken is the secret Agents register with; empty accepts any
	// Agent.
	NodeToken string
	// Lease is how long a registration or heartbeat keeps an Agent online
	// (default 15 s).
	Lease time.Duration
	// PollInterval is how often Agents poll for commands (default 1 s).
	PollInterval time.Duration
	// ReconcileInterval is how often the reconciler looks for work besides
	// being woken by a change (default 1 s).
	ReconcileInterval time.Duration
	// CommandTimeout is how long a command may wait for an Agent to take it
	// before it times out (default 5 min).
	CommandTimeout time.Duration
	// Secrets resolves the ${secret:NAME} references of specs when a job
	// is started on an Agent (default os.LookupEnv: the Hub's
	// environment). Specs are stored with the references.
	Secrets func(name string) (string, bool)
	// Clock returns the current time (default time.Now).
	Clock func() time.Time
	// Logger receives the Hub's logs (default: discarded).
	Logger *slog.Logger
	// StateToken is the bearer token the Hub sends to the Agents' state
	// routes when it forwards a state query (GET
	// /api/v1/jobs/{id}/state/{operator}); the token those routes were
	// given (hubclient's Agent.QueryHandler). Empty: none.
	StateToken string
}

// Hub is a running control plane. Create it with New, serve Handler (or
// call Run) and Close it when done.
type Hub struct {
	cfg       Config
	log       *slog.Logger
	store     *hubstore.Store
	auth      *hubhttp.Authenticator
	nodeToken *hubhttp.SecretHash
	handler   http.Handler
	wake      chan struct{}
	metrics   *hubMetrics

	// stateClient forwards state queries to Agents.
	stateClient *http.Client

	staleMu sync.Mutex
	online  map[string]bool   // node id → online at the last sweep
	blocked map[string]string // job → why it cannot fail over (logged once)

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
}

// New opens (or creates) the Hub's store in cfg.DataDir, recovers the
// intents accepted before a restart and starts the reconciler.
func New(cfg Config) (*Hub, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("hub: Config.DataDir is required")
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 15 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = time.Second
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Secrets == nil {
		cfg.Secrets = os.LookupEnv
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tokens, err := hubhttp.ParseTokens(cfg.Tokens)
	if err != nil {
		return nil, fmt.Errorf("hub: operator tokens: %w", err)
	}
	h := &Hub{cfg: cfg, log: logger, wake: make(chan struct{}, 1), online: map[string]bool{}, metrics: newHubMetrics(), stateClient: &http.Client{Timeout: 15 * time.Second}}
	if cfg.NodeToken != "" {
		nt := hubhttp.HashSecret(cfg.NodeToken)
		h.nodeToken = &nt
	}
	h.auth, err = hubhttp.NewAuthenticator(hubhttp.AuthOptions{Tokens: tokens, InsecureNoAuth: cfg.InsecureNoAuth,
		Logger: logger, OnDenied: h.denied})
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	h.store, err = hubstore.Open(filepath.Join(cfg.DataDir, "hub.db"), hubstore.Options{Clock: cfg.Clock, LeaseTTL: cfg.Lease,
		OnWrite: func(d time.Duration) { h.metrics.storeWrite.Observe(d.Seconds()) }})
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	n, err := h.store.RecoverIntents(context.Background())
	if err != nil {
		h.store.Close()
		return nil, fmt.Errorf("hub: recovering intents: %w", err)
	}
	if n > 0 {
		logger.Info("recovered open intents", "count", n)
	}
	h.handler = h.routes()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		h.reconcileLoop(ctx)
	}()
	return h, nil
}

// Handler returns the Hub's HTTP handler: the agent and operator APIs
// under /api/v1, the health routes and the operator page at /ui/ (/
// redirects there; the page asks for an operator token and reads the API
// with it).
func (h *Hub) Handler() http.Handler { return h.handler }

// Run serves the Hub on ln until ctx ends, then shuts the server down
// gracefully. It does not Close the Hub.
func (h *Hub) Run(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: h.handler, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops the reconciler and closes the store. Everything the Hub
// acknowledged is already durable.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	<-h.done
	return h.store.Close()
}

// poke wakes the reconciler.
func (h *Hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// denied writes the audit row of a refused operator request.
func (h *Hub) denied(ctx context.Context, d hubhttp.Denial) {
	if err := h.store.Audit(ctx, hubstore.AuditRecord{Actor: d.PrincipalID, Action: "operator." + string(d.Action),
		ResourceType: d.Resource.Type, ResourceID: d.Resource.ID, Outcome: "rejected", FailureCode: d.Code,
		Message: d.Method + " " + d.Path, CorrelationID: d.CorrelationID}); err != nil {
		h.log.Warn("writing an audit row", "error", err)
	}
}

func (h *Hub) routes() http.Handler {
	mux := http.NewServeMux()
	hubhttp.RegisterHealth(mux, hubhttp.HealthOptions{Nodes: func(ctx context.Context) int {
		as, err := h.store.ListAgents(ctx)
		if err != nil {
			return 0
		}
		return len(as)
	}})
	h.agentRoutes(mux)
	h.jobRoutes(mux)
	h.uiRoutes(mux)
	mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		hubhttp.WriteError(w, r, hubhttp.NotFound("", "no such route: "+r.Method+" "+r.URL.Path))
	})
	// instrument wraps the mux itself: it reads the route pattern the mux
	// sets on the request.
	return hubhttp.Correlation(hubhttp.Recover(h.log)(h.metrics.instrument(mux)))
}

// storeError maps a store error to the envelope; unknown errors are
// logged and answered as 500.
func (h *Hub) storeError(w http.ResponseWriter, r *http.Request, err error, notFoundCode string) {
	var gc *hubstore.GenerationConflictError
	switch {
	case errors.As(err, &gc):
		hubhttp.WriteError(w, r, hubhttp.GenerationPreconditionFailed(gc.Expected, gc.Current))
	case errors.Is(err, hubstore.ErrNotFound):
		hubhttp.WriteError(w, r, hubhttp.NotFound(notFoundCode, notFoundMessage(r, err)))
	case errors.Is(err, hubstore.ErrUnauthorized), errors.Is(err, hubstore.ErrStaleSession), errors.Is(err, hubstore.ErrWrongNode):
		hubhttp.WriteError(w, r, hubhttp.Unauthorized("session token refused: register again"))
	case errors.Is(err, hubstore.ErrStaleGeneration):
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusConflict, hubwire.CodeStaleGeneration, err.Error()))
	case errors.Is(err, hubstore.ErrIdempotencyKeyReused):
		hubhttp.WriteError(w, r, hubhttp.IdempotencyKeyReused())
	case errors.Is(err, hubstore.ErrInvalid):
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusUnprocessableEntity, hubhttp.CodeValidationFailed, err.Error()))
	case errors.Is(err, hubstore.ErrConflict):
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusConflict, "conflict", err.Error()))
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusServiceUnavailable, "request_cancelled", "the request was cancelled"))
	default:
		h.log.Error("store", "error", err, "correlation_id", hubhttp.CorrelationID(r.Context()), "path", r.URL.Path)
		hubhttp.WriteError(w, r, hubhttp.Internal())
	}
}

func ms(t time.Time) uint64 {
	if t.IsZero() || t.UnixMilli() < 0 {
		return 0
	}
	return uint64(t.UnixMilli())
}

// notFoundMessage names what is missing: the job of the path, else the
// store's own words.
func notFoundMessage(r *http.Request, err error) string {
	if id := r.PathValue("id"); id != "" && strings.Contains(r.URL.Path, "/jobs/") {
		return "job " + id + " not found"
	}
	return strings.TrimPrefix(err.Error(), "hubstore: ")
}
