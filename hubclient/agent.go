package hubclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/harness"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Config configures an Agent. HubURL, NodeID and DataDir are required.
type Config struct {
	// HubURL is the Hub's base URL, e.g. "http://127.0.0.1:8080"; the
	// agent API lives under its /api/v1.
	HubURL string
	// NodeID names this Agent in the fleet: stable across restarts of the
	// process, unique among running Agents.
	NodeID string
	// NodeToken is the Hub's node token (empty when the Hub has none).
	NodeToken string
	// DataDir is where jobs keep their state and write-ahead logs
	// (arkflow.WithDataDir).
	DataDir string
	// Jobs are Builders whose Go values bind the operators of Hub-shipped
	// specs with the same job ID, by operator ID.
	Jobs []*arkflow.Builder
	// Environment holds the connectors specs may name (default: the
	// process-wide registry).
	Environment *connectors.Environment
	// CheckpointStore configures s3:// checkpoint stores of the jobs.
	CheckpointStore checkpoint.StoreOptions
	// Logger receives the Agent's and its jobs' logs (default: discard).
	Logger *slog.Logger
	// HTTPClient makes the calls to the Hub (default: a client with a 30 s
	// timeout).
	HTTPClient *http.Client
	// QueryAddr is the base URL at which the service serves the Agent's
	// QueryHandler (e.g. "http://10.0.0.7:9091"), reported to the Hub so
	// that it routes state queries of the Agent's jobs there. Empty: the
	// Hub routes none here.
	QueryAddr string
}

// Agent is a registered member of a Hub's fleet. Create it with New and
// run it with Run.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	http     *http.Client
	base     string
	bootID   string
	bindings map[string]map[string]any // job ID → operator ID → Go value
	seq      atomic.Uint64             // report sequence: grows for the whole process

	mu      sync.Mutex
	jobs    map[string]*runningJob               // by job ID
	started map[string]startCommand              // job starts the Agent was sent and holds no job of yet, by job ID
	specs   map[string]*job.Spec                 // the last spec each job was started with (commits)
	results map[string]hubwire.CommandResult     // terminal results by command id
	active  map[string]bool                      // commands being executed
	jobLock map[string]*sync.Mutex               // serialises the commands of one job
	wg      sync.WaitGroup                       // command goroutines
	jobsWG  sync.WaitGroup                       // job Run goroutines
	changed chan struct{}                        // a job's status changed: report soon
	backoff func(attempt int) time.Duration      // tests shorten it
	sleep   func(context.Context, time.Duration) // tests shorten it
	// wrapStore, when set (by tests, export_test.go), wraps the checkpoint
	// store of every job the Agent builds (fault injection); under mu.
	wrapStore func(ckptstore.Store) ckptstore.Store
	// commands counts terminal command results (Collector); under mu.
	commands map[commandKey]uint64

	// What Collector and Status report of the sessions.
	registered                     atomic.Bool // holds a session
	registrations                  atomic.Uint64
	heartbeatsOK, heartbeatsFailed atomic.Uint64
}

// maxResults bounds the cache of terminal results kept for redelivered
// commands.
const maxResults = 4096

// New checks cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	var problems []string
	if cfg.HubURL == "" {
		problems = append(problems, "HubURL: required (e.g. http://127.0.0.1:8080)")
	} else if u, err := url.Parse(cfg.HubURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems = append(problems, fmt.Sprintf("HubURL: want http(s)://host[:port] (got %q)", cfg.HubURL))
	}
	if cfg.NodeID == "" {
		problems = append(problems, "NodeID: required, stable across restarts")
	}
	if cfg.DataDir == "" {
		problems = append(problems, "DataDir: required: jobs keep their state and WALs there")
	}
	bindings := map[string]map[string]any{}
	for i, b := range cfg.Jobs {
		if b == nil {
			problems = append(problems, fmt.Sprintf("Jobs[%d]: nil Builder", i))
			continue
		}
		id := b.Spec().ID
		if _, dup := bindings[id]; dup {
			problems = append(problems, fmt.Sprintf("Jobs[%d]: a second Builder of job %q", i, id))
			continue
		}
		bindings[id] = harness.Bindings(b)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("hubclient: %s", strings.Join(problems, "; "))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	return &Agent{
		cfg: cfg, log: log.With("node", cfg.NodeID), http: client,
		base:     strings.TrimRight(cfg.HubURL, "/") + "/api/v1",
		bootID:   uuid.NewString(),
		bindings: bindings,
		jobs:     map[string]*runningJob{},
		started:  map[string]startCommand{},
		specs:    map[string]*job.Spec{},
		results:  map[string]hubwire.CommandResult{},
		active:   map[string]bool{},
		jobLock:  map[string]*sync.Mutex{},
		commands: map[commandKey]uint64{},
		changed:  make(chan struct{}, 1),
		backoff:  jitteredBackoff,
		sleep:    sleepCtx,
	}, nil
}

// BootID returns the random identity of this process the Agent registers
// with: a restarted process has another.
func (a *Agent) BootID() string { return a.bootID }

// Run registers with the Hub and serves it until ctx ends; then it stops
// the Agent's jobs gracefully (30 s at most each), tells the Hub it is
// draining, and returns nil. A Hub that cannot be reached is retried with
// a jittered backoff; only ctx ends Run.
func (a *Agent) Run(ctx context.Context) error {
	defer a.shutdown()
	for attempt := 0; ; attempt++ {
		s, err := a.register(ctx)
		if err == nil {
			attempt = -1
			a.registrations.Add(1)
			a.registered.Store(true)
			err = a.serve(ctx, s)
			a.registered.Store(false)
			a.drainHeartbeat(s, ctx.Err() != nil)
		}
		if ctx.Err() != nil {
			return nil
		}
		a.log.Warn("hub session ended; registering again", "error", err)
		a.sleep(ctx, a.backoff(max(attempt, 0)))
	}
}

// session is one registration.
type session struct {
	token      string
	lease      time.Duration
	poll       time.Duration
	heartbeat  time.Duration
	registered time.Time
}

// errSession ends a session: the Hub refused its token.
var errSession = errors.New("the hub refused the session token")

func (a *Agent) register(ctx context.Context) (*session, error) {
	req := hubwire.RegisterRequest{
		NodeID: a.cfg.NodeID, NodeToken: a.cfg.NodeToken, ProtocolVersion: hubwire.ProtocolVersion,
		Capabilities: capabilities, BootID: a.bootID, SoftwareVersion: softwareVersion,
		CapabilityDetails: a.details(),
	}
	var resp hubwire.RegisterResponse
	if err := a.call(ctx, http.MethodPost, "/agent/register", a.cfg.NodeToken, req, &resp); err != nil {
		return nil, fmt.Errorf("registering: %w", err)
	}
	s := &session{token: resp.SessionToken, registered: time.Now(),
		lease: time.Duration(resp.LeaseTTLMs) * time.Millisecond, poll: time.Duration(resp.PollIntervalMs) * time.Millisecond}
	if s.lease <= 0 {
		s.lease = 15 * time.Second
	}
	if s.poll <= 0 {
		s.poll = time.Second
	}
	s.heartbeat = time.Duration(resp.HeartbeatIntervalMs) * time.Millisecond
	if s.heartbeat <= 0 {
		s.heartbeat = s.lease / 3
	}
	a.log.Info("registered with the hub", "hub", a.cfg.HubURL, "boot_id", a.bootID, "lease", s.lease)
	return s, nil
}

// serve runs the heartbeat and the command poll of session s until one
// fails for good or ctx ends.
func (a *Agent) serve(ctx context.Context, s *session) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a.heartbeatLoop(ctx, cancel, s) }()
	go func() { defer wg.Done(); a.pollLoop(ctx, cancel, s) }()
	wg.Wait()
	return context.Cause(ctx)
}

// maxFailures is how many consecutive failed calls of one loop end the
// session.
const maxFailures = 3

func (a *Agent) heartbeatLoop(ctx context.Context, end context.CancelCauseFunc, s *session) {
	t := time.NewTicker(s.heartbeat)
	defer t.Stop()
	failures := 0
	for {
		err := a.call(ctx, http.MethodPost, "/agent/heartbeat", s.token, hubwire.HeartbeatRequest{
			NodeID: a.cfg.NodeID, SessionToken: s.token, State: "online", ProtocolVersion: hubwire.ProtocolVersion,
			SoftwareVersion: softwareVersion, Capabilities: capabilities, BootID: a.bootID, CapabilityDetails: a.details(),
		}, nil)
		switch {
		case err == nil:
			a.heartbeatsOK.Add(1)
		case ctx.Err() == nil:
			a.heartbeatsFailed.Add(1)
		}
		if failed(ctx, end, err, &failures, "heartbeat") {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *Agent) pollLoop(ctx context.Context, end context.CancelCauseFunc, s *session) {
	t := time.NewTicker(s.poll)
	defer t.Stop()
	failures := 0
	for {
		var cmds []hubwire.AgentCommand
		q := url.Values{"node_id": {a.cfg.NodeID}, "session_token": {s.token}}
		err := a.call(ctx, http.MethodGet, "/agent/commands?"+q.Encode(), s.token, nil, &cmds)
		if failed(ctx, end, err, &failures, "polling commands") {
			return
		}
		for _, c := range cmds {
			a.dispatch(ctx, s, c)
		}
		if err := a.report(ctx, s); failed(ctx, end, err, &failures, "reporting") {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.changed:
		}
	}
}

// failed counts err against the loop's consecutive failures and ends the
// session when the Hub refused the token or too many calls failed.
func failed(ctx context.Context, end context.CancelCauseFunc, err error, failures *int, what string) bool {
	if err == nil {
		*failures = 0
		return false
	}
	if ctx.Err() != nil {
		return true
	}
	var he *httpError
	if errors.As(err, &he) && he.status == http.StatusUnauthorized {
		end(fmt.Errorf("%s: %w", what, errSession))
		return true
	}
	if *failures++; *failures >= maxFailures {
		end(fmt.Errorf("%s: %w", what, err))
		return true
	}
	return false
}

// drainHeartbeat tells the Hub, best effort, that the Agent is leaving.
func (a *Agent) drainHeartbeat(s *session, leaving bool) {
	if !leaving {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = a.call(ctx, http.MethodPost, "/agent/heartbeat", s.token, hubwire.HeartbeatRequest{
		NodeID: a.cfg.NodeID, SessionToken: s.token, State: "draining", Capabilities: capabilities, BootID: a.bootID,
	}, nil)
}

// report sends the jobs' statuses with the next report sequence number.
func (a *Agent) report(ctx context.Context, s *session) error {
	r := hubwire.NodeReport{
		NodeID: a.cfg.NodeID, SessionToken: s.token, Version: softwareVersion, State: "online",
		Capabilities: capabilities, BootID: a.bootID, ReportSeq: a.seq.Add(1), Jobs: a.statuses(), QueryAddr: a.cfg.QueryAddr,
	}
	return a.call(ctx, http.MethodPost, "/agent/report", s.token, r, nil)
}

// httpError is a reply of the Hub that is not a success.
type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string {
	return fmt.Sprintf("hub answered %d: %s", e.status, e.body)
}

// call sends body as JSON (nil: none) with the session or node token as a
// bearer token and decodes a JSON reply into out (nil: ignore it).
func (a *Agent) call(ctx context.Context, method, path, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return &httpError{status: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out)
}

// The capabilities every Agent declares. placement_units: it runs the
// placement units a Hub assigns, with two-phase checkpoints.
var capabilities = []string{
	hubwire.CapabilityJobRuntime, hubwire.CapabilityStateBackend,
	hubwire.CapabilityCheckpointRecovery, hubwire.CapabilityMetrics,
	hubwire.CapabilityPlacementUnits,
}

// softwareVersion is reported as the Agent's version and job runtime.
const softwareVersion = "arkflow-go/0"

func (a *Agent) details() *hubwire.CapabilityDetails {
	env := a.cfg.Environment
	if env == nil {
		env = connectors.Global()
	}
	d := &hubwire.CapabilityDetails{
		JobRuntimeVersion: softwareVersion, StateBackends: []string{"badger", "memory"},
		StateFormatVersions: []uint32{1}, CheckpointProtocolVersion: 1,
	}
	for _, t := range env.InputTypes() {
		d.Connectors = append(d.Connectors, "input:"+t)
	}
	for _, t := range env.OutputTypes() {
		d.Connectors = append(d.Connectors, "output:"+t)
	}
	for job, ops := range a.bindings {
		for op := range ops {
			d.Operators = append(d.Operators, job+"/"+op)
		}
	}
	return d
}

// jitteredBackoff is 250 ms doubling to 10 s, each wait drawn uniformly
// from its upper half, so that Agents a Hub restart disconnected do not
// come back in step.
func jitteredBackoff(attempt int) time.Duration {
	d := 250 * time.Millisecond << min(attempt, 6)
	d = min(d, 10*time.Second)
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
