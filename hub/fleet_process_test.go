package hub_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/leaktest"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// fleetProc is a child process (the Hub or an Agent) whose combined
// output goes to a log file that the test prints if it fails.
type fleetProc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startFleetProc(t *testing.T, name, logPath string, env []string, bin string, args ...string) *fleetProc {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	p := &fleetProc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() { p.signal(syscall.SIGKILL) })
	return p
}

// signal sends sig and waits for the process to exit.
func (p *fleetProc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	<-p.done
}

var fleetBins struct {
	once          sync.Once
	dir           string
	err           error
	hub, arkflow  string
	buildOutput   []byte
	buildDuration time.Duration
}

// buildFleetBinaries builds cmd/arkflow-hub and cmd/arkflow once per test
// binary run (so -count=2 builds them once).
func buildFleetBinaries(t *testing.T) (hubBin, agentBin string) {
	t.Helper()
	fleetBins.once.Do(func() {
		start := time.Now()
		fleetBins.dir, fleetBins.err = os.MkdirTemp("", "arkflow-fleet-bin")
		if fleetBins.err != nil {
			return
		}
		fleetBins.hub = filepath.Join(fleetBins.dir, "arkflow-hub")
		fleetBins.arkflow = filepath.Join(fleetBins.dir, "arkflow")
		cmd := exec.Command("go", "build", "-o", fleetBins.dir+string(os.PathSeparator),
			"github.com/arkflow-rs/arkflow-go/cmd/arkflow-hub", "github.com/arkflow-rs/arkflow-go/cmd/arkflow")
		fleetBins.buildOutput, fleetBins.err = cmd.CombinedOutput()
		fleetBins.buildDuration = time.Since(start)
	})
	if fleetBins.err != nil {
		t.Fatalf("go build: %v\n%s", fleetBins.err, fleetBins.buildOutput)
	}
	return fleetBins.hub, fleetBins.arkflow
}

// TestMain runs the tests, fails if a goroutine outlives them (a Hub, an
// Agent or a job not stopped on Close or a cancelled context), and removes
// the binaries buildFleetBinaries built.
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if fleetBins.dir != "" {
			os.RemoveAll(fleetBins.dir)
		}
		os.Exit(code)
	}))
}

// freeLoopbackAddr returns a loopback address nothing listens on right
// now; the Hub is started on it, and started again on it after a restart.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// fleetGet is call for a GET that may hit a Hub that is down: it returns
// ok=false on a connection error instead of failing the test.
func fleetGet(url, token string) (int, []byte, bool) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, false
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), true
}

// fleetDeadline is how long a test of real processes (a Hub and Agents
// that build, start, restart and converge on a loaded machine) waits for
// one step before it fails; nothing asserts how long a step takes.
const fleetDeadline = 2 * time.Minute

// TestFleetProcesses is the Hub's acceptance test on loopback, with
// real processes: a Hub (cmd/arkflow-hub) on a SQLite data dir and three
// Agents (cmd/arkflow agent). A job of built-in connectors (generate →
// drop) is validated, submitted and set running over the operator API.
//
//   - The Hub is SIGTERMed mid-run and started again on the same data dir
//     and port: the job (id, version, digest, generation, desired state,
//     nodes) reads back the same, the three Agents come back online, and
//     the job is observed running again.
//   - The Agent running the job is SIGKILLed and started again with the
//     same node id: it registers a new session with a new boot id, the
//     Hub sends it the job_start again and accepts the new session's
//     results and reports (a second succeeded job_start on that node, the
//     job observed running). Every observed state the test sees while
//     polling is recorded and logged; each must be converging, starting or
//     running, never failed. (The Hub reports a pending start as
//     "starting".)
//   - Old sessions are refused: a real Agent's session token never leaves
//     its process (it is not logged, and the security test shows it is in
//     none of the Hub's files), so the test registers a fourth, pseudo
//     node itself over raw v1 JSON, keeps its session token, shows it
//     still works after the Hub restart, registers again, and shows that
//     a report, heartbeat and job observation with the old token get 401
//     while the new session's get 204.
//   - Stale generations are ignored (staleGenerationResults): a probe job
//     placed on the pseudo node (the only node online then) is started
//     and stopped; a late result of the old generation's job_start and a
//     job_stop result naming the old generation (409 stale_generation)
//     change nothing; the job_stop's own result makes it stopped.
func TestFleetProcesses(t *testing.T) {
	t.Parallel()
	// Not skipped under -short: it takes about 15 s with -race, most of it
	// building the two binaries (about 55 s with an empty build cache).
	hubBin, agentBin := buildFleetBinaries(t)
	tmp := t.TempDir()
	hubData := filepath.Join(tmp, "hub-data")
	addr := freeLoopbackAddr(t)
	base := "http://" + addr
	api := base + "/api/v1"
	const opSecret = "operator-secret-fleet-0123456789"
	hubLog := filepath.Join(tmp, "hub.log")
	var logs []string
	defer func() {
		if t.Failed() {
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("=== %s ===\n%s", filepath.Base(l), b)
			}
		}
	}()
	logs = append(logs, hubLog)
	startHub := func() *fleetProc {
		p := startFleetProc(t, "hub", hubLog, nil, hubBin, "--data-dir", hubData, "--listen", addr,
			"--token", "op|operator|"+opSecret, "--node-token", nodeToken, "--lease", "5s", "--poll-interval", "100ms")
		polltest.EventuallyWithin(t, fleetDeadline, "the Hub answering /health", func() bool {
			req, _ := http.NewRequest("GET", base+"/health", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		return p
	}
	agents := map[string]*fleetProc{}
	startAgent := func(id string) {
		l := filepath.Join(tmp, id+".log")
		if !slices.Contains(logs, l) {
			logs = append(logs, l)
		}
		agents[id] = startFleetProc(t, id, l, []string{"ARKFLOW_NODE_TOKEN=" + nodeToken}, agentBin, "agent",
			"--hub", base, "--node-id", id, "--data-dir", filepath.Join(tmp, id+"-data"))
	}
	nodes := func() map[string]hubwire.HubNode {
		st, b, ok := fleetGet(api+"/nodes", opSecret)
		if !ok || st != 200 {
			return nil
		}
		out := map[string]hubwire.HubNode{}
		for _, n := range decode[hubwire.Page[hubwire.HubNode]](t, b).Items {
			out[n.ID] = n
		}
		return out
	}
	allOnline := func(ids ...string) func() bool {
		return func() bool {
			ns := nodes()
			for _, id := range ids {
				if ns[id].State != hubwire.NodeOnline {
					return false
				}
			}
			return true
		}
	}
	job := func() (hubwire.JobRecord, bool) {
		st, b, ok := fleetGet(api+"/jobs/fleetjob", opSecret)
		if !ok || st != 200 {
			return hubwire.JobRecord{}, false
		}
		return decode[hubwire.JobRecord](t, b), true
	}
	// observed records every observed state seen while polling, in order
	// (consecutive repeats folded), and fails on failed.
	var observed []string
	observe := func() hubwire.JobRecord {
		j, ok := job()
		if !ok {
			return j
		}
		s := fmt.Sprintf("%s@g%d", j.ObservedState, j.Generation)
		if len(observed) == 0 || observed[len(observed)-1] != s {
			observed = append(observed, s)
		}
		if j.ObservedState == hubwire.JobFailed {
			t.Fatalf("the job was observed failed: %+v; states so far %v", j, observed)
		}
		return j
	}

	hubProc := startHub()

	// The pseudo node, registered over raw v1 JSON before the real Agents
	// (so that it is the only node a probe job can be placed on) and before
	// the Hub restart. It sorts after n1..n3, so with equal load the
	// fleet job goes to a real Agent.
	pseudo := &v1Agent{t: t, api: api, nodeID: "zz-pseudo"}
	pseudo.register()
	pseudo.nextReport()
	oldSession := pseudo.session
	staleGenerationResults(t, api, opSecret, pseudo)

	for _, id := range []string{"n1", "n2", "n3"} {
		startAgent(id)
	}
	polltest.EventuallyWithin(t, fleetDeadline, "three Agents online", allOnline("n1", "n2", "n3"))

	spec := `{"id":"fleetjob","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"rate_per_sec":200,"batch_size":10,"fields":[{"name":"n","type":"int64","sequence":true}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`
	st, _, body := call(t, "POST", api+"/jobs/validate", opSecret, map[string]any{"spec": json.RawMessage(spec)})
	if vr := decode[map[string]any](t, body); st != 200 || vr["valid"] != true {
		t.Fatalf("validate: %d %s", st, body)
	}
	st, _, body = call(t, "POST", api+"/jobs", opSecret, map[string]any{"spec": json.RawMessage(spec)})
	if st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	st, _, body = call(t, "PUT", api+"/jobs/fleetjob/desired-state", opSecret, map[string]any{"state": "running"})
	if st != 200 {
		t.Fatalf("desired running: %d %s", st, body)
	}
	polltest.EventuallyWithin(t, fleetDeadline, "the job observed running", func() bool { return observe().ObservedState == hubwire.JobRunning })
	before, _ := job()
	if len(before.NodeIDs) != 1 || !strings.HasPrefix(before.NodeIDs[0], "n") {
		t.Fatalf("the job should run on one real Agent: %+v", before)
	}
	runner := before.NodeIDs[0]
	t.Logf("job running on %s at generation %d; states %v", runner, before.Generation, observed)

	// Hub restart mid-run.
	hubProc.signal(syscall.SIGTERM)
	hubProc = startHub()
	after, ok := job()
	if !ok {
		t.Fatal("the job is gone after the Hub restart")
	}
	if after.JobID != before.JobID || after.Version != before.Version || after.Digest != before.Digest ||
		after.Generation != before.Generation || after.DesiredState != before.DesiredState ||
		!slices.Equal(after.NodeIDs, before.NodeIDs) || after.SpecJSON != before.SpecJSON {
		t.Fatalf("the job changed across the Hub restart:\nbefore %+v\nafter  %+v", before, after)
	}
	polltest.EventuallyWithin(t, fleetDeadline, "the Agents online after the Hub restart", allOnline("n1", "n2", "n3"))
	polltest.EventuallyWithin(t, fleetDeadline, "the job running after the Hub restart", func() bool {
		j := observe()
		return j.ObservedState == hubwire.JobRunning && j.Generation >= before.Generation
	})
	t.Logf("after the Hub restart: states %v", observed)

	// The pseudo node's session from before the restart still works until
	// it registers again; then only the new one does.
	if st := pseudo.heartbeat(oldSession); st != 204 {
		t.Fatalf("the pseudo node's session did not survive the Hub restart: heartbeat %d", st)
	}
	pseudo.register()
	if pseudo.session == oldSession {
		t.Fatal("re-registering kept the session token")
	}
	if st, v := pseudo.report(oldSession, 2); st != 401 {
		t.Fatalf("report with the old session: %d %v", st, v)
	}
	if st := pseudo.heartbeat(oldSession); st != 401 {
		t.Fatalf("heartbeat with the old session: %d", st)
	}
	if st, v := pseudo.raw("POST", "/agent/job-observations", mustJSON(t, map[string]any{"node_id": pseudo.nodeID, "session_token": oldSession,
		"job_id": "fleetjob", "generation": after.Generation, "state": "failed", "error": "late"})); st != 401 {
		t.Fatalf("job observation with the old session: %d %v", st, v)
	}
	pseudo.nextReport()
	if st := pseudo.heartbeat(pseudo.session); st != 204 {
		t.Fatalf("heartbeat with the new session: %d", st)
	}

	// SIGKILL the Agent running the job and start it again.
	oldBoot := nodes()[runner].BootID
	if oldBoot == "" {
		t.Fatalf("no boot id for %s", runner)
	}
	genBeforeKill := observe().Generation
	agents[runner].signal(syscall.SIGKILL)
	startAgent(runner)
	polltest.EventuallyWithin(t, fleetDeadline, "the restarted Agent online with a new boot id", func() bool {
		observe()
		n := nodes()[runner]
		return n.State == hubwire.NodeOnline && n.BootID != "" && n.BootID != oldBoot
	})
	// The Hub sends the job_start again to the new boot (same generation:
	// the desired state did not change) and the job converges running.
	var final hubwire.JobRecord
	polltest.EventuallyWithin(t, fleetDeadline, "the job started again on the restarted Agent and running", func() bool {
		final = observe()
		if final.ObservedState != hubwire.JobRunning || final.Generation < genBeforeKill {
			return false
		}
		st, b, ok := fleetGet(api+"/jobs/fleetjob/detail", opSecret)
		if !ok || st != 200 {
			return false
		}
		starts := 0
		for _, op := range decode[hubwire.JobDetail](t, b).Operations {
			if op.Operation == hubwire.OpJobStart && op.State == hubwire.OpStateSucceeded && op.NodeID == runner {
				starts++
			}
		}
		return starts == 2
	})
	t.Logf("observed states: %v", observed)
	for _, s := range observed {
		state := s[:strings.Index(s, "@")]
		if !slices.Contains([]string{hubwire.JobConverging, hubwire.JobStarting, hubwire.JobRunning}, state) {
			t.Fatalf("observed state %q outside converging/starting/running: %v", state, observed)
		}
	}
}

// staleGenerationResults runs a probe job on the pseudo node and shows
// that results of an older generation change nothing: the job_start of
// generation G is acknowledged but not finished, the operator stops the
// job (generation G+1), and then (1) the old job_start's late "succeeded"
// does not make the job running, (2) a result for the job_stop that names
// generation G is refused with 409 stale_generation and changes nothing,
// and (3) the job_stop's result with generation G+1 makes it stopped.
func staleGenerationResults(t *testing.T, api, opSecret string, a *v1Agent) {
	t.Helper()
	spec := `{"id":"probe","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`
	if st, _, body := call(t, "POST", api+"/jobs", opSecret, map[string]any{"spec": json.RawMessage(spec)}); st != 202 {
		t.Fatalf("submit probe: %d %s", st, body)
	}
	if st, _, body := call(t, "PUT", api+"/jobs/probe/desired-state", opSecret, map[string]any{"state": "running"}); st != 200 {
		t.Fatalf("probe running: %d %s", st, body)
	}
	command := func(op string) map[string]any {
		var found map[string]any
		polltest.EventuallyWithin(t, fleetDeadline, "the probe's "+op, func() bool {
			for _, c := range a.poll() {
				if c["operation"] == op && c["resource_id"] == "probe" {
					found = c
				}
			}
			return found != nil
		})
		return found
	}
	probe := func() hubwire.JobRecord {
		_, _, body := call(t, "GET", api+"/jobs/probe", opSecret, nil)
		return decode[hubwire.JobRecord](t, body)
	}
	start := command("job_start")
	if st, v := a.result(start, "acknowledged", 5, nil); st != 200 {
		t.Fatalf("ack job_start: %d %v", st, v)
	}
	if st, _, body := call(t, "PUT", api+"/jobs/probe/desired-state", opSecret, map[string]any{"state": "stopped"}); st != 200 {
		t.Fatalf("probe stopped: %d %s", st, body)
	}
	stop := command("job_stop")
	if stop["generation"].(float64) <= start["generation"].(float64) {
		t.Fatalf("job_stop generation %v, job_start %v", stop["generation"], start["generation"])
	}
	before := probe()
	if before.Generation != uint64(stop["generation"].(float64)) || before.ObservedState == hubwire.JobStopped {
		t.Fatalf("probe before the results: %+v", before)
	}
	st, v := a.result(start, "succeeded", 100, map[string]any{"observed_generation": start["generation"]})
	t.Logf("late result of the generation-%v job_start: %d %v", start["generation"], st, v)
	if j := probe(); j.ObservedState == hubwire.JobRunning || j.Generation != before.Generation {
		t.Fatalf("a late result of an older generation changed the probe: %+v", j)
	}
	stale := map[string]any{}
	for k, v := range stop {
		stale[k] = v
	}
	stale["generation"] = start["generation"]
	st, v = a.result(stale, "succeeded", 100, nil)
	if m, _ := v.(map[string]any); st != 409 || m["code"] != hubwire.CodeStaleGeneration {
		t.Fatalf("job_stop result naming generation %v: %d %v", start["generation"], st, v)
	}
	if j := probe(); j.ObservedState == hubwire.JobStopped || j.Generation != before.Generation {
		t.Fatalf("a stale-generation result changed the probe: %+v", j)
	}
	if st, v := a.result(stop, "succeeded", 100, map[string]any{"observed_generation": stop["generation"]}); st != 200 {
		t.Fatalf("job_stop result: %d %v", st, v)
	}
	if j := probe(); j.ObservedState != hubwire.JobStopped || j.Generation != before.Generation {
		t.Fatalf("probe after its job_stop result: %+v", j)
	}
}
