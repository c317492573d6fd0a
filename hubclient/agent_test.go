package hubclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// fakeHub serves the agent endpoints of the Hub protocol from memory, so
// the tests see every call the Agent makes. It is not the Hub: it checks
// tokens and records, nothing more.
type fakeHub struct {
	t     *testing.T
	mu    sync.Mutex
	srv   *httptest.Server
	lease time.Duration

	sessions   map[string]bool // valid session tokens
	registers  []hubwire.RegisterRequest
	heartbeats []hubwire.HeartbeatRequest
	reports    []hubwire.NodeReport
	queue      []hubwire.AgentCommand
	results    []hubwire.CommandResult
	n          int
}

func newFakeHub(t *testing.T, lease time.Duration) *fakeHub {
	h := &fakeHub{t: t, lease: lease, sessions: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/agent/register", h.register)
	mux.HandleFunc("POST /api/v1/agent/heartbeat", h.heartbeat)
	mux.HandleFunc("POST /api/v1/agent/report", h.report)
	mux.HandleFunc("GET /api/v1/agent/commands", h.commands)
	mux.HandleFunc("POST /api/v1/agent/commands/{id}/result", h.result)
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	return h
}

func (h *fakeHub) authorized(r *http.Request) bool {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[tok]
}

func (h *fakeHub) register(w http.ResponseWriter, r *http.Request) {
	var req hubwire.RegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	h.mu.Lock()
	h.n++
	tok := fmt.Sprintf("session-%d", h.n)
	h.sessions[tok] = true
	h.registers = append(h.registers, req)
	h.mu.Unlock()
	_ = json.NewEncoder(w).Encode(hubwire.RegisterResponse{NodeID: req.NodeID, SessionToken: tok,
		LeaseTTLMs: uint64(h.lease.Milliseconds()), PollIntervalMs: 10, ProtocolVersion: hubwire.ProtocolVersion})
}

func (h *fakeHub) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req hubwire.HeartbeatRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	if !h.authorized(r) || !h.sessions[req.SessionToken] {
		w.WriteHeader(401)
		return
	}
	h.mu.Lock()
	h.heartbeats = append(h.heartbeats, req)
	h.mu.Unlock()
	w.WriteHeader(204)
}

func (h *fakeHub) report(w http.ResponseWriter, r *http.Request) {
	if !h.authorized(r) {
		w.WriteHeader(401)
		return
	}
	var rep hubwire.NodeReport
	if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	h.mu.Lock()
	h.reports = append(h.reports, rep)
	h.mu.Unlock()
	w.WriteHeader(204)
}

func (h *fakeHub) commands(w http.ResponseWriter, r *http.Request) {
	if !h.authorized(r) || r.URL.Query().Get("session_token") == "" {
		w.WriteHeader(401)
		return
	}
	h.mu.Lock()
	q := h.queue
	h.queue = nil
	h.mu.Unlock()
	if q == nil {
		q = []hubwire.AgentCommand{}
	}
	_ = json.NewEncoder(w).Encode(q)
}

func (h *fakeHub) result(w http.ResponseWriter, r *http.Request) {
	if !h.authorized(r) {
		w.WriteHeader(401)
		return
	}
	var res hubwire.CommandResult
	if err := json.NewDecoder(r.Body).Decode(&res); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	h.mu.Lock()
	h.results = append(h.results, res)
	h.mu.Unlock()
	w.WriteHeader(200)
	_, _ = w.Write([]byte("{}"))
}

// send queues a command for the next poll.
func (h *fakeHub) send(c hubwire.AgentCommand) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.NodeID = "n1"
	if c.OperationID == "" {
		c.OperationID = "op-" + c.ID
	}
	h.queue = append(h.queue, c)
}

// revoke invalidates every session, as a Hub that forgot them would.
func (h *fakeHub) revoke() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.sessions)
}

// terminal returns the terminal results of command id.
func (h *fakeHub) terminal(id string) []hubwire.CommandResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hubwire.CommandResult
	for _, r := range h.results {
		if r.CommandID == id && r.State.Terminal() {
			out = append(out, r)
		}
	}
	return out
}

// lastJob returns the newest reported status of job id.
func (h *fakeHub) lastJob(id string) (hubwire.JobStatus, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.reports) - 1; i >= 0; i-- {
		for _, j := range h.reports[i].Jobs {
			if j.JobID == id {
				return j, true
			}
		}
	}
	return hubwire.JobStatus{}, false
}

func (h *fakeHub) count(what string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch what {
	case "registers":
		return len(h.registers)
	case "heartbeats":
		return len(h.heartbeats)
	}
	return len(h.reports)
}

// waitResult waits for the terminal result of command id.
func waitResult(t *testing.T, h *fakeHub, id string) hubwire.CommandResult {
	t.Helper()
	var res []hubwire.CommandResult
	polltest.Eventually(t, "the result of "+id, func() bool { res = h.terminal(id); return len(res) > 0 })
	return res[0]
}

// counter is a sink that counts the rows it got.
type counter struct{ n atomic.Int64 }

type row struct{ N int64 }

func (c *counter) sink() funcsink.Func[row] {
	return func(_ context.Context, rows []row) error { c.n.Add(int64(len(rows))); return nil }
}

// ticks is a job with an unbounded, rate-limited generator and a Go sink:
// the sink binds only through the Builder given to the Agent.
func ticks(c *counter) *arkflow.Builder {
	return arkflow.NewJob("ticks").
		Source("gen", generate.Config{RatePerSec: 2000, BatchSize: 50, Fields: []generate.Field{{Name: "N", Type: "int64", Sequence: true}}}).
		Sink("out", c.sink())
}

// startCommand is the job_start command of b at generation gen.
func startCommand(t *testing.T, id string, b *arkflow.Builder, gen uint64) hubwire.AgentCommand {
	t.Helper()
	spec, err := json.Marshal(b.Spec())
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(hubwire.JobCommandPayload{JobID: b.Spec().ID, Spec: spec, Generation: gen,
		Assignments: []hubwire.TaskAttempt{{ID: "t:n1:" + fmt.Sprint(gen), JobID: b.Spec().ID, Generation: gen, NodeID: "n1"}}})
	return hubwire.AgentCommand{ID: id, Operation: hubwire.OpJobStart, ResourceID: b.Spec().ID, Generation: gen, Payload: payload}
}

func jobCommand(id string, op hubwire.Operation, job string, gen uint64) hubwire.AgentCommand {
	payload, _ := json.Marshal(map[string]any{"job_id": job, "checkpoint_id": "sp-" + id, "assignments": []any{}})
	return hubwire.AgentCommand{ID: id, Operation: op, ResourceID: job, Generation: gen, Payload: payload}
}

// runAgent runs an Agent against h until the test ends, and returns it
// with a function that stops it and waits for Run.
func runAgent(t *testing.T, h *fakeHub, cfg hubclient.Config) (*hubclient.Agent, func() error) {
	t.Helper()
	cfg.HubURL, cfg.NodeID = h.srv.URL, "n1"
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	a, err := hubclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return a, stop
}

// The Hub starts a job whose sink is Go code of the service, sees it run
// in the reports, and stops it (results carry the generation).
func TestStartAndStopAJob(t *testing.T) {
	t.Parallel()
	h := newFakeHub(t, time.Second)
	c := &counter{}
	_, stop := runAgent(t, h, hubclient.Config{Jobs: []*arkflow.Builder{ticks(c)}})

	h.send(startCommand(t, "c1", ticks(nil), 1))
	res := waitResult(t, h, "c1")
	if res.State != hubwire.OpStateSucceeded || res.Generation != 1 || res.ObservedGeneration == nil || *res.ObservedGeneration != 1 || res.JobID != "ticks" {
		t.Fatalf("job_start result: %+v", res)
	}
	polltest.Eventually(t, "rows at the service's sink", func() bool { return c.n.Load() > 100 })
	polltest.Eventually(t, "a report of the running job", func() bool {
		s, ok := h.lastJob("ticks")
		return ok && s.State == hubwire.JobRunning && s.Generation == 1 && len(s.AssignmentIDs) == 1
	})

	h.send(jobCommand("c2", hubwire.OpJobStop, "ticks", 1))
	if res := waitResult(t, h, "c2"); res.State != hubwire.OpStateSucceeded {
		t.Fatalf("job_stop result: %+v", res)
	}
	polltest.Eventually(t, "a report of the stopped job", func() bool {
		s, ok := h.lastJob("ticks")
		return ok && s.State == hubwire.JobStopped
	})
	n := c.n.Load()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c.n.Load() != n {
		t.Fatalf("rows arrived after the stop: %d then %d", n, c.n.Load())
	}
}

// A command older than the job it would touch is refused with the
// running generation, and leaves the job alone.
func TestStaleGenerationIsRefused(t *testing.T) {
	t.Parallel()
	h := newFakeHub(t, time.Second)
	c := &counter{}
	runAgent(t, h, hubclient.Config{Jobs: []*arkflow.Builder{ticks(c)}})
	h.send(startCommand(t, "g2", ticks(nil), 2))
	if res := waitResult(t, h, "g2"); res.State != hubwire.OpStateSucceeded {
		t.Fatalf("start at generation 2: %+v", res)
	}
	for _, cmd := range []hubwire.AgentCommand{startCommand(t, "g1", ticks(nil), 1), jobCommand("s1", hubwire.OpJobStop, "ticks", 1), jobCommand("k1", hubwire.OpJobCheckpoint, "ticks", 1)} {
		h.send(cmd)
		res := waitResult(t, h, cmd.ID)
		if res.State != hubwire.OpStateSuperseded || res.FailureClass != hubwire.FailureStaleGeneration || res.ObservedGeneration == nil || *res.ObservedGeneration != 2 {
			t.Fatalf("%s at generation 1 while 2 runs: %+v", cmd.Operation, res)
		}
	}
	if s, _ := h.lastJob("ticks"); s.Generation != 2 {
		t.Fatalf("the job after stale commands: %+v", s)
	}
	n := c.n.Load()
	polltest.Eventually(t, "rows still flowing", func() bool { return c.n.Load() > n })
}

// blockingInput is a source whose Connect waits until release is closed:
// a start that takes as long as a big restore.
type blockingInput struct{ release chan struct{} }

func (in *blockingInput) Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{{Name: "N", Type: arrow.PrimitiveTypes.Int64}}, nil)
}

func (in *blockingInput) Partitions() int { return 1 }

func (in *blockingInput) NewSource(connectors.TaskInfo) (connectors.Source, error) {
	return &blockingSource{in: in}, nil
}

type blockingSource struct{ in *blockingInput }

func (s *blockingSource) Connect(ctx context.Context) error {
	select {
	case <-s.in.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *blockingSource) Read(ctx context.Context) (connectors.Batch, error) {
	<-ctx.Done()
	return connectors.Batch{}, ctx.Err()
}

func (s *blockingSource) Close(context.Context) error { return nil }

// A start that blocks for many lease periods does not stop heartbeats
// (the lease never lapses during long work).
func TestHeartbeatsContinueDuringALongCommand(t *testing.T) {
	t.Parallel()
	const lease = 150 * time.Millisecond
	h := newFakeHub(t, lease)
	env := connectors.NewEnvironment()
	in := &blockingInput{release: make(chan struct{})}
	if err := env.RegisterInput("blocking", func(connectors.BuildContext) (connectors.Input, error) { return in, nil }); err != nil {
		t.Fatal(err)
	}
	b := arkflow.NewJob("slow").Source("in", blockingConfig{}).Sink("out", funcsink.Func[row](func(context.Context, []row) error { return nil }))
	runAgent(t, h, hubclient.Config{Environment: env, Jobs: []*arkflow.Builder{b}})
	h.send(startCommand(t, "slow", b, 1))
	before := h.count("heartbeats")
	polltest.Eventually(t, "heartbeats while the start blocks", func() bool { return h.count("heartbeats") >= before+10 })
	if len(h.terminal("slow")) != 0 {
		t.Fatal("the start finished before its source connected")
	}
	close(in.release)
	if res := waitResult(t, h, "slow"); res.State != hubwire.OpStateSucceeded {
		t.Fatalf("the start after the source connected: %+v", res)
	}
}

type blockingConfig struct{}

func (blockingConfig) InputType() string { return "blocking" }

// A Hub that forgets the session gets a new registration; the jobs keep
// running, the boot id stays, and report sequence numbers keep growing
// across sessions (ArkFlow's agent restarts them per session).
func TestReconnectKeepsJobsAndReportOrder(t *testing.T) {
	t.Parallel()
	h := newFakeHub(t, time.Second)
	c := &counter{}
	a, _ := runAgent(t, h, hubclient.Config{Jobs: []*arkflow.Builder{ticks(c)}})
	h.send(startCommand(t, "c1", ticks(nil), 1))
	waitResult(t, h, "c1")
	polltest.Eventually(t, "a report", func() bool { return h.count("reports") > 0 })
	h.revoke()
	polltest.Eventually(t, "a second registration", func() bool { return h.count("registers") >= 2 })
	polltest.Eventually(t, "reports of the new session", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.reports) > 0 && h.sessions[h.reports[len(h.reports)-1].SessionToken]
	})
	h.mu.Lock()
	regs, reps := append([]hubwire.RegisterRequest(nil), h.registers...), append([]hubwire.NodeReport(nil), h.reports...)
	h.mu.Unlock()
	for _, r := range regs {
		if r.BootID != a.BootID() || r.BootID == "" {
			t.Fatalf("registration with boot id %q, the agent's is %q", r.BootID, a.BootID())
		}
	}
	for i := 1; i < len(reps); i++ {
		if reps[i].ReportSeq <= reps[i-1].ReportSeq {
			t.Fatalf("report %d has seq %d after %d", i, reps[i].ReportSeq, reps[i-1].ReportSeq)
		}
	}
	n := c.n.Load()
	polltest.Eventually(t, "rows after the reconnect", func() bool { return c.n.Load() > n })
	if s, _ := h.lastJob("ticks"); s.State != hubwire.JobRunning {
		t.Fatalf("the job after the reconnect: %+v", s)
	}
}

// A command delivered again after it finished is answered from the cache,
// not run twice.
func TestRedeliveredCommandIsNotRunTwice(t *testing.T) {
	t.Parallel()
	h := newFakeHub(t, time.Second)
	c := &counter{}
	runAgent(t, h, hubclient.Config{Jobs: []*arkflow.Builder{ticks(c)}})
	h.send(jobCommand("sp", hubwire.OpJobSavepoint, "ticks", 1)) // nothing runs: fails
	first := waitResult(t, h, "sp")
	if first.State != hubwire.OpStateFailed || !strings.Contains(first.Error, "not running") {
		t.Fatalf("savepoint of a job that does not run: %+v", first)
	}
	h.send(startCommand(t, "c1", ticks(nil), 1))
	waitResult(t, h, "c1")
	h.send(jobCommand("sp", hubwire.OpJobSavepoint, "ticks", 1)) // redelivered: the same answer
	polltest.Eventually(t, "the second result", func() bool { return len(h.terminal("sp")) == 2 })
	if again := h.terminal("sp")[1]; again.State != first.State || again.Error != first.Error {
		t.Fatalf("redelivery answered %+v, first %+v", again, first)
	}
}

// Run returns when its context ends, after stopping its jobs and telling
// the Hub it drains.
func TestShutdownStopsJobs(t *testing.T) {
	t.Parallel()
	h := newFakeHub(t, time.Second)
	c := &counter{}
	_, stop := runAgent(t, h, hubclient.Config{Jobs: []*arkflow.Builder{ticks(c)}})
	h.send(startCommand(t, "c1", ticks(nil), 1))
	waitResult(t, h, "c1")
	polltest.Eventually(t, "rows", func() bool { return c.n.Load() > 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	n := c.n.Load()
	time.Sleep(50 * time.Millisecond) // a stopped generator writes nothing more
	if c.n.Load() != n {
		t.Fatal("rows after Run returned")
	}
	h.mu.Lock()
	last := h.heartbeats[len(h.heartbeats)-1]
	h.mu.Unlock()
	if last.State != "draining" {
		t.Fatalf("last heartbeat state %q, want draining", last.State)
	}
}

// New names every field it refuses.
func TestNewNamesTheField(t *testing.T) {
	t.Parallel()
	_, err := hubclient.New(hubclient.Config{HubURL: "ftp://x", Jobs: []*arkflow.Builder{nil}})
	for _, want := range []string{"HubURL", "NodeID", "DataDir", "Jobs[0]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v, want it to name %s", err, want)
		}
	}
	var hubErr interface{ Error() string }
	if !errors.As(err, &hubErr) {
		t.Fatal("not an error")
	}
}
