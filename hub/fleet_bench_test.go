package hub_test

// Benchmarks of a job whose placement units run on several in-process
// Agents: throughput against the same job in one process, and failover
// time after an Agent's lease lapses. See docs/benchmarks/fleet.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/hub"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// windowCount is a row of the benchmark job's keyed window.
type windowCount struct {
	User   string
	Start  time.Time `arkflow:"window_start"`
	Clicks int64
}

// fleetBenchWindow is the tumbling window: generate's timestamps step by
// 1 ms per row of a partition, so each partition puts exactly
// fleetBenchWindow/1ms rows in every window.
const fleetBenchWindow = 10 * time.Second

// windowTally counts the rows the windows a sink received summarise, and
// keeps the total per window start to check them.
type windowTally struct {
	rows    atomic.Int64
	mu      sync.Mutex
	byStart map[int64]int64
}

func newWindowTally() *windowTally { return &windowTally{byStart: map[int64]int64{}} }

func (w *windowTally) sink() funcsink.Func[windowCount] {
	return funcsink.Func[windowCount](func(_ context.Context, rows []windowCount) error {
		var n int64
		w.mu.Lock()
		for _, r := range rows {
			n += r.Clicks
			w.byStart[r.Start.UnixMilli()] += r.Clicks
		}
		w.mu.Unlock()
		w.rows.Add(n)
		return nil
	})
}

// check asserts that no window summarises more than partitions ×
// rows-per-window rows (none counted twice) and that the windows
// summarising exactly that many form a prefix of at least 10 windows:
// each subtask emits its windows in order, so only the newest ones may
// still lack a lagging subtask's part; a lost row would leave a hole.
func (w *windowTally) check(b *testing.B, partitions int) {
	b.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var starts []int64
	for s := range w.byStart {
		starts = append(starts, s)
	}
	slices.Sort(starts)
	per := int64(partitions) * fleetBenchWindow.Milliseconds()
	complete, incomplete := 0, 0
	for _, s := range starts {
		switch got := w.byStart[s]; {
		case got > per:
			b.Fatalf("window at %d summarises %d rows, more than %d", s, got, per)
		case got == per && incomplete > 0:
			b.Fatalf("window at %d is complete after %d incomplete ones: rows were lost", s, incomplete)
		case got == per:
			complete++
		default:
			incomplete++
		}
	}
	if complete < 10 {
		b.Fatalf("only %d complete windows of %d", complete, len(starts))
	}
}

// fleetBenchJob is generate (par partitions, no rate limit, KeyedBy
// User) → keyed 10 s tumbling count (co-partitioned: no shuffle, each
// subtask chain its own placement unit) → Go sink.
func fleetBenchJob(par int, rate float64, store string, interval int64, snk funcsink.Func[windowCount]) *arkflow.Builder {
	return arkflow.NewJob("fleetbench").Parallelism(par).
		Source("gen", generate.Config{Partitions: par, RatePerSec: rate, BatchSize: 1024, Fields: []generate.Field{
			{Name: "User", Type: "string", Cardinality: 1000},
			{Name: "TS", Type: "timestamp"},
		}}, arkflow.KeyedBy("User"), arkflow.EventTime{Field: "TS", PerRow: true}).
		KeyBy("User").
		Window("w", window.Tumbling(fleetBenchWindow, job.Count("Clicks"))).
		Sink("out", snk).
		State(job.State{Backend: "memory"}).
		Checkpoint(job.Checkpoint{IntervalMS: interval, ObjectStoreURI: "file://" + store})
}

// cutTransport is an Agent's network: once cut, every call fails, as if
// the Agent's host dropped off the network (its job keeps running).
type cutTransport struct {
	base http.RoundTripper
	cut  atomic.Bool
}

func (c *cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("benchmark: network cut")
	}
	return c.base.RoundTrip(r)
}

// benchFleet is a Hub on loopback and in-process Agents.
type benchFleet struct {
	b      *testing.B
	api    string
	nets   map[string]*cutTransport
	stops  []func()
	closed bool
}

func newBenchFleet(b *testing.B, cfg hub.Config) *benchFleet {
	cfg.DataDir = b.TempDir()
	cfg.InsecureNoAuth = true
	cfg.Logger = slog.New(slog.DiscardHandler)
	h, err := hub.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler())
	f := &benchFleet{b: b, api: srv.URL + "/api/v1", nets: map[string]*cutTransport{}}
	f.stops = append(f.stops, func() { srv.Close(); h.Close() })
	return f
}

// agent starts an Agent named node that binds builder.
func (f *benchFleet) agent(node string, builder *arkflow.Builder) {
	net := &cutTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
	a, err := hubclient.New(hubclient.Config{HubURL: f.api[:len(f.api)-len("/api/v1")], NodeID: node, DataDir: f.b.TempDir(),
		Jobs: []*arkflow.Builder{builder}, HTTPClient: &http.Client{Transport: net, Timeout: 10 * time.Second}})
	if err != nil {
		f.b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	f.nets[node] = net
	f.stops = append(f.stops, func() { cancel(); <-done })
}

// close stops the Agents (in parallel), then the Hub.
func (f *benchFleet) close() {
	if f.closed {
		return
	}
	f.closed = true
	var wg sync.WaitGroup
	for _, stop := range f.stops[1:] {
		wg.Add(1)
		go func() { defer wg.Done(); stop() }()
	}
	wg.Wait()
	f.stops[0]()
}

func (f *benchFleet) do(method, path string, body, out any, want int) {
	f.b.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, f.api+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		f.b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			f.b.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

func (f *benchFleet) detail(jobID string) hubwire.JobDetail {
	var d hubwire.JobDetail
	f.do("GET", "/jobs/"+jobID+"/detail", nil, &d, 200)
	return d
}

func (f *benchFleet) node(id string) hubwire.HubNode {
	var p hubwire.Page[hubwire.HubNode]
	f.do("GET", "/nodes", nil, &p, 200)
	for _, n := range p.Items {
		if n.ID == id {
			return n
		}
	}
	f.b.Fatalf("node %s is not listed", id)
	return hubwire.HubNode{}
}

// runOnAgents submits builder's job running and waits until every one of
// units assignments is observed running; it returns the time from the
// submission to that.
func (f *benchFleet) runOnAgents(builder *arkflow.Builder, online, units int) time.Duration {
	polltest.Eventually(f.b, "the Agents online", func() bool {
		var p hubwire.Page[hubwire.HubNode]
		f.do("GET", "/nodes", nil, &p, 200)
		n := 0
		for _, x := range p.Items {
			if x.State == hubwire.NodeOnline {
				n++
			}
		}
		return n == online
	})
	spec, _ := json.Marshal(builder.Spec())
	start := time.Now()
	f.do("POST", "/jobs", map[string]any{"spec": json.RawMessage(spec), "desired_state": "running"}, nil, 202)
	polltest.Eventually(f.b, "the job running on the Agents", func() bool {
		d := f.detail(builder.Spec().ID)
		if d.Job.ObservedState == hubwire.JobFailed {
			f.b.Fatalf("the job failed: %+v", d.Job)
		}
		if d.Job.ObservedState != hubwire.JobRunning || len(d.Assignments) != units {
			return false
		}
		for _, a := range d.Assignments {
			if a.State != "running" {
				return false
			}
		}
		return true
	})
	return time.Since(start)
}

// measureRows waits until warm rows went through, then times the next
// rows ones and returns rows per second and the process's CPU seconds per
// second over them (of 2 on this machine).
func measureRows(b *testing.B, counter *atomic.Int64, warm, rows int64) (rate, cpu float64) {
	polltest.EventuallyWithin(b, 2*time.Minute, "the warm-up rows", func() bool { return counter.Load() >= warm })
	t0, c0, u0 := time.Now(), counter.Load(), cpuTime()
	polltest.EventuallyWithin(b, 5*time.Minute, "the measured rows", func() bool { return counter.Load() >= c0+rows })
	t1, c1, u1 := time.Now(), counter.Load(), cpuTime()
	secs := t1.Sub(t0).Seconds()
	return float64(c1-c0) / secs, (u1 - u0).Seconds() / secs
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const (
	fleetWarmRows  = 2_000_000
	fleetBenchRows = 50_000_000
)

// BenchmarkFleetThroughput runs the same keyed job (generate with three
// partitions → co-partitioned keyed 10 s tumbling count → Go sink
// counting the rows the windows summarise) three ways, side by side:
//
//   - process-p3: one process, one runtime, parallelism 3 (the baseline);
//   - process-p1: one process, parallelism 1 (one placement unit alone);
//   - agents-3: a Hub and three in-process Agents, one unit each, with
//     Hub-driven two-phase checkpoints.
//
// Each reports rows/s over fleetBenchRows rows after fleetWarmRows of
// warm-up, the process's CPU seconds per second over them (everything in
// the process: the Hub and the Agents' HTTP too) and rows per CPU second.
// The ratios (docs/benchmarks/fleet.md) are agents-3 / process-p3 (the cost of
// running the units as separate Agents), per wall second and per CPU
// second, and the per-Agent scaling efficiency agents-3 / (3 × process-p1).
func BenchmarkFleetThroughput(b *testing.B) {
	process := func(b *testing.B, par int) {
		var sum, cpus float64
		for range b.N {
			tally := newWindowTally()
			j, err := fleetBenchJob(par, 0, b.TempDir(), 60_000, tally.sink()).Build(arkflow.WithDataDir(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- j.Run(ctx) }()
			rate, cpu := measureRows(b, &tally.rows, fleetWarmRows, fleetBenchRows)
			if err := j.Stop(context.Background()); err != nil {
				b.Fatal(err)
			}
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				b.Fatal(err)
			}
			tally.check(b, par)
			sum, cpus = sum+rate, cpus+cpu
		}
		b.ReportMetric(sum/float64(b.N), "rows/s")
		b.ReportMetric(cpus/float64(b.N), "cpu-s/s")
		b.ReportMetric(sum/cpus, "rows/cpu-s")
	}
	b.Run("process-p3", func(b *testing.B) { process(b, 3) })
	b.Run("process-p1", func(b *testing.B) { process(b, 1) })
	b.Run("agents-3", func(b *testing.B) {
		var sum, cpus float64
		for range b.N {
			f := newBenchFleet(b, hub.Config{})
			store := b.TempDir()
			var tallies []*windowTally
			var total atomic.Int64
			var builder *arkflow.Builder
			for _, n := range []string{"a", "b", "c"} {
				t := newWindowTally()
				tallies = append(tallies, t)
				sink := t.sink()
				builder = fleetBenchJob(3, 0, store, 60_000, func(ctx context.Context, rows []windowCount) error {
					err := sink(ctx, rows)
					var n int64
					for _, r := range rows {
						n += r.Clicks
					}
					total.Add(n)
					return err
				})
				f.agent(n, builder)
			}
			f.runOnAgents(builder, 3, 3)
			rate, cpu := measureRows(b, &total, fleetWarmRows, fleetBenchRows)
			f.close()
			for _, t := range tallies {
				if t.rows.Load() == 0 {
					b.Fatal("an Agent's unit emitted nothing")
				}
				t.check(b, 1)
			}
			sum, cpus = sum+rate, cpus+cpu
		}
		b.ReportMetric(sum/float64(b.N), "rows/s")
		b.ReportMetric(cpus/float64(b.N), "cpu-s/s")
		b.ReportMetric(sum/cpus, "rows/cpu-s")
	})
}

// BenchmarkFleetFailover measures failover with a 5 s lease: three
// in-process Agents each run one unit of a rate-limited keyed job (Hub
// defaults otherwise: 1 s polls, 1 s sweeps, Hub-driven checkpoints
// every 2 s); once a checkpoint completed, one Agent's network is cut
// (its job keeps running; its heartbeats stop). Measured from the lease's
// expiry on the Hub (the node's lease_expires_at_ms) to the job observed
// running at the new generation with every assignment running (the moved
// unit restored from the last completed checkpoint on another Agent).
// Each iteration is a fresh fleet, with random delays that sample the
// phases of the Hub's and the Agents' 1 s ticks; the metrics are the
// distribution over the iterations (run with -benchtime=Nx; Go runs one
// more iteration first, logged separately).
func BenchmarkFleetFailover(b *testing.B) {
	const lease = 5 * time.Second
	var total, detect, moved, first []time.Duration
	for range b.N {
		f := newBenchFleet(b, hub.Config{Lease: lease})
		store := b.TempDir()
		var builder *arkflow.Builder
		// The Hub sweeps leases every second and the Agents poll every
		// second: a random delay before the Agents start, and another
		// before the cut, sample the phases of those ticks against each
		// other and against the heartbeats (every lease/3), which a fresh
		// fleet would otherwise repeat run after run.
		time.Sleep(rand.N(time.Second))
		for _, n := range []string{"a", "b", "c"} {
			builder = fleetBenchJob(3, 2000, store, 2_000, newWindowTally().sink())
			f.agent(n, builder)
		}
		first = append(first, f.runOnAgents(builder, 3, 3))
		polltest.Eventually(b, "a completed checkpoint", func() bool {
			h := f.detail("fleetbench").CheckpointHealth
			return h != nil && h.LastCompletedCheckpointID != ""
		})
		g0 := f.detail("fleetbench").Job.Generation
		time.Sleep(rand.N(lease/3 + time.Second))
		f.nets["c"].cut.Store(true)
		var newGen time.Time
		polltest.Eventually(b, "the job running again at a new generation", func() bool {
			d := f.detail("fleetbench")
			if d.Job.Generation <= g0 {
				return false
			}
			if newGen.IsZero() {
				newGen = time.Now()
			}
			if d.Job.ObservedState != hubwire.JobRunning {
				return false
			}
			for _, a := range d.Assignments {
				if a.Generation != d.Job.Generation || a.State != "running" || a.NodeID == "c" {
					return false
				}
			}
			return len(d.Assignments) == 2
		})
		running := time.Now()
		expiry := time.UnixMilli(int64(f.node("c").LeaseExpiresAtMs))
		f.close()
		total = append(total, running.Sub(expiry))
		detect = append(detect, newGen.Sub(expiry))
		moved = append(moved, running.Sub(newGen))
	}
	pct := func(ds []time.Duration, p float64) float64 {
		s := slices.Clone(ds)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[min(len(s)-1, int(p*float64(len(s))))].Seconds()
	}
	b.ReportMetric(pct(total, 0), "s-min")
	b.ReportMetric(pct(total, 0.5), "s-p50")
	b.ReportMetric(pct(total, 1), "s-max")
	b.ReportMetric(pct(detect, 0.5), "s-p50-expiry-to-newgen")
	b.ReportMetric(pct(moved, 0.5), "s-p50-newgen-to-running")
	// The baseline, from the same fleets: submission to every unit running.
	b.ReportMetric(pct(first, 0.5), "s-p50-first-start")
	b.Logf("%d runs: lease expiry → running at the new generation %v; expiry → new generation %v; new generation → running %v; first start (baseline) %v",
		len(total), total, detect, moved, first)
	if m := pct(total, 1); m >= 10 {
		b.Logf("target < 10 s NOT met: max %.2f s", m)
	}
}
