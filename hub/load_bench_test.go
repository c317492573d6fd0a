package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/hub"
)

// BenchmarkHubLoad is the Hub's load test: 1,000 simulated v1 Agents
// (raw HTTP, one connection each at most) heartbeating every 5 s, each
// heartbeat followed by a report, and polling for commands at the Hub's
// poll interval (1 s), plus 100 jobs set running (the Agents acknowledge
// and succeed their job_start commands) and operator GETs (10 job details
// and 1 node page per second), against one Hub serving on loopback with
// SQLite on disk. After a warm-up of one heartbeat period, every request
// of a steady window is timed.
//
// The sibling "baseline" sends the same schedule of requests with the
// same bodies over the same HTTP stack to a trivial net/http handler
// (204, or [] to polls), so the ratio says what the Hub adds. Both run
// the load generator in the same process: CPU and heap are the process's,
// and the baseline's are the generator's share.
//
//	go test -run '^$' -bench BenchmarkHubLoad -benchtime=1x -count=1 -timeout=10m ./hub/
//
// ARKFLOW_BENCH_LOAD_WINDOW (a Go duration, default 20s) sets the window;
// ARKFLOW_BENCH_LOAD_POLL (default 1s, the Hub's default) sets the Hub's
// poll interval and the Agents' polling period.
func BenchmarkHubLoad(b *testing.B) {
	if testing.Short() {
		b.Skip("load benchmark: not with -short")
	}
	window := 20 * time.Second
	if s := os.Getenv("ARKFLOW_BENCH_LOAD_WINDOW"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	if s := os.Getenv("ARKFLOW_BENCH_LOAD_POLL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatal(err)
		}
		loadPoll = d
	}
	b.Run("baseline", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			runLoad(b, false, window)
		}
	})
	b.Run("hub", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			runLoad(b, true, window)
		}
	})
}

const (
	loadAgents    = 1000
	loadJobs      = 100
	loadHeartbeat = 5 * time.Second
	loadDetailHz  = 10
	loadNodesHz   = 1
)

// loadPoll is the Hub's poll interval and the Agents' polling period.
var loadPoll = time.Second

// loadKinds are the request kinds timed, in report order.
var loadKinds = []string{"heartbeat", "report", "poll", "result", "detail", "nodes"}

type loadStats struct {
	mu     sync.Mutex
	on     bool // inside the window
	lat    map[string][]time.Duration
	errors atomic.Int64
	n      atomic.Int64
}

func (s *loadStats) record(kind string, d time.Duration) {
	s.mu.Lock()
	if s.on {
		s.lat[kind] = append(s.lat[kind], d)
	}
	s.mu.Unlock()
}

type loadClient struct {
	c     *http.Client
	api   string
	stats *loadStats
}

// do sends one request, times it to the last byte of the answer and
// returns the status and body.
func (c *loadClient) do(kind, method, path, token, body string) (int, []byte) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.api+path, rd)
	if err != nil {
		panic(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	start := time.Now()
	resp, err := c.c.Do(req)
	if err != nil {
		c.stats.errors.Add(1)
		return 0, nil
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c.stats.record(kind, time.Since(start))
	c.stats.n.Add(1)
	if resp.StatusCode >= 300 {
		c.stats.errors.Add(1)
	}
	return resp.StatusCode, b
}

type loadAgent struct {
	id, session string
	seq         int
}

func (a *loadAgent) q() string {
	return "node_id=" + url.QueryEscape(a.id) + "&session_token=" + url.QueryEscape(a.session)
}

// baselineHandler is the trivial handler: it reads the body and answers
// what the agent loop needs to go on (a session, an empty command list,
// an empty page), else 204.
func baselineHandler(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	switch {
	case strings.HasSuffix(r.URL.Path, "/agent/register"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"session_token":"s"}`))
	case strings.HasSuffix(r.URL.Path, "/agent/commands"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[]`))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func fileMiB(path string) float64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return float64(fi.Size()) / (1 << 20)
}

func runLoad(b *testing.B, useHub bool, window time.Duration) {
	b.StopTimer()
	dir := b.TempDir()
	var handler http.Handler = http.HandlerFunc(baselineHandler)
	var h *hub.Hub
	if useHub {
		var err error
		h, err = hub.New(hub.Config{
			DataDir:      dir,
			Tokens:       []string{"root|admin|" + adminToken, "ops|operator|" + operatorToken, "eyes|viewer|" + viewerToken},
			NodeToken:    nodeToken,
			PollInterval: loadPoll,
			Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		handler = h.Handler()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	stats := &loadStats{lat: map[string][]time.Duration{}}
	tr := &http.Transport{MaxIdleConns: 2 * loadAgents, MaxIdleConnsPerHost: 2 * loadAgents, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	c := &loadClient{c: &http.Client{Transport: tr, Timeout: 30 * time.Second}, api: "http://" + ln.Addr().String() + "/api/v1", stats: stats}

	caps := `["stream_lifecycle","configuration","metrics","job_runtime","state_backend","checkpoint_recovery"]`
	agents := make([]*loadAgent, loadAgents)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range agents {
		a := &loadAgent{id: fmt.Sprintf("load-node-%04d", i)}
		agents[i] = a
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			st, body := c.do("register", "POST", "/agent/register", "", `{"node_id":"`+a.id+`","node_token":"`+nodeToken+
				`","protocol_version":"v1","capabilities":`+caps+`}`)
			var m map[string]any
			_ = json.Unmarshal(body, &m)
			a.session, _ = m["session_token"].(string)
			if st != 200 || a.session == "" {
				b.Errorf("register %s: %d %s", a.id, st, body)
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		return
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var loops sync.WaitGroup
	// every runs f at period, the first time at offset.
	every := func(period, offset time.Duration, f func()) {
		loops.Add(1)
		go func() {
			defer loops.Done()
			next := time.Now().Add(offset)
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				f()
				next = next.Add(period)
				if d := time.Until(next); d < -period {
					next = time.Now() // fell behind a whole period: do not burst
				}
			}
		}()
	}
	for i, a := range agents {
		hbBody := `{"node_id":"` + a.id + `","session_token":"` + a.session +
			`","state":"online","protocol_version":"v1","software_version":"0.5.0","capabilities":` + caps + `}`
		every(loadHeartbeat, time.Duration(i)*loadHeartbeat/loadAgents, func() {
			c.do("heartbeat", "POST", "/agent/heartbeat", "", hbBody)
			a.seq++
			c.do("report", "POST", "/agent/report", "", `{"node_id":"`+a.id+`","session_token":"`+a.session+
				`","version":"0.5.0","state":"online","capabilities":`+caps+`,"streams":[],"operations":[],"events":[],`+
				`"metrics":{"streams_total":0,"streams_running":0},"boot_id":"boot-1","report_seq":`+fmt.Sprint(a.seq)+`}`)
		})
		every(loadPoll, time.Duration(i)*loadPoll/loadAgents, func() {
			st, body := c.do("poll", "GET", "/agent/commands?"+a.q(), "", "")
			if st != 200 {
				return
			}
			var cmds []map[string]any
			_ = json.Unmarshal(body, &cmds)
			for _, cmd := range cmds {
				id, _ := cmd["id"].(string)
				for _, state := range []string{"acknowledged", "succeeded"} {
					res := map[string]any{"command_id": cmd["id"], "operation_id": cmd["operation_id"], "state": state,
						"progress": 100, "generation": cmd["generation"], "correlation_id": cmd["correlation_id"],
						"action_id": cmd["action_id"], "observed_generation": cmd["generation"]}
					rb, _ := json.Marshal(res)
					c.do("result", "POST", "/agent/commands/"+url.PathEscape(id)+"/result?"+a.q(), "", string(rb))
				}
			}
		})
	}

	// 100 jobs, each submitted running: built-in connectors only, so every
	// v1 Agent fits.
	jobIDs := make([]string, loadJobs)
	for j := range jobIDs {
		jobIDs[j] = fmt.Sprintf("load-job-%03d", j)
		spec := `{"id":"` + jobIDs[j] + `","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],` +
			`"edges":[{"id":"e","from":"gen","to":"out"}],` +
			`"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"n","type":"int64"}]}}],` +
			`"sinks":[{"operator_id":"out","output_type":"drop"}]}`
		st, body := c.do("submit", "POST", "/jobs", operatorToken, `{"spec":`+spec+`,"desired_state":"running"}`)
		if st != 202 && st != 204 {
			b.Fatalf("submit %s: %d %s", jobIDs[j], st, body)
		}
	}
	if useHub {
		// Wait until every job is running on an Agent.
		deadline := time.Now().Add(60 * time.Second)
		for {
			running := 0
			for _, id := range jobIDs {
				_, body := c.do("wait", "GET", "/jobs/"+id, viewerToken, "")
				var m map[string]any
				_ = json.Unmarshal(body, &m)
				if m["observed_state"] == "running" {
					running++
				}
			}
			if running == loadJobs {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d jobs running after 60 s", running, loadJobs)
			}
			time.Sleep(time.Second)
		}
	}
	every(time.Second/loadDetailHz, 0, func() {
		c.do("detail", "GET", "/jobs/"+jobIDs[rand.IntN(loadJobs)]+"/detail", viewerToken, "")
	})
	every(time.Second/loadNodesHz, 0, func() {
		c.do("nodes", "GET", "/nodes", viewerToken, "")
	})

	// Warm-up: one heartbeat period, then the window.
	time.Sleep(loadHeartbeat)
	runtime.GC()
	errs0, n0, cpu0 := stats.errors.Load(), stats.n.Load(), cpuSeconds()
	stats.mu.Lock()
	stats.on = true
	stats.mu.Unlock()
	t0 := time.Now()
	b.StartTimer()
	time.Sleep(window)
	b.StopTimer()
	stats.mu.Lock()
	stats.on = false
	stats.mu.Unlock()
	el := time.Since(t0).Seconds()
	cpu := cpuSeconds() - cpu0
	n, errs := stats.n.Load()-n0, stats.errors.Load()-errs0
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	cancel()
	loops.Wait()

	for _, k := range loadKinds {
		l := stats.lat[k]
		if len(l) == 0 {
			continue
		}
		slices.Sort(l)
		p := func(q float64) float64 {
			return float64(l[min(len(l)-1, int(q*float64(len(l))))].Microseconds()) / 1000
		}
		b.ReportMetric(p(0.50), k+"-p50-ms")
		b.ReportMetric(p(0.99), k+"-p99-ms")
	}
	var all []time.Duration
	for _, l := range stats.lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "all-p50-ms")
		b.ReportMetric(float64(all[min(len(all)-1, len(all)*99/100)].Microseconds())/1000, "all-p99-ms")
	}
	b.ReportMetric(float64(n)/el, "req/s")
	b.ReportMetric(float64(errs), "errors")
	b.ReportMetric(cpu/el, "cpu-s/s")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	if useHub {
		b.ReportMetric(fileMiB(filepath.Join(dir, "hub.db")), "db-MiB")
		b.ReportMetric(fileMiB(filepath.Join(dir, "hub.db-wal")), "wal-MiB")
	}
}
