package hub

// This file exposes the Hub to the tools that operate it: a
// prometheus.Collector of the fleet's state and of the Hub's own work,
// and a Status summary. `arkflow-hub --metrics-addr` serves both on a
// listener of its own.

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
)

// softwareVersion is the Hub's version in Status.
const softwareVersion = "arkflow-go/0"

// hubMetrics are the Hub's counters, updated as it works.
type hubMetrics struct {
	requests    *prometheus.CounterVec   // route, code
	duration    *prometheus.HistogramVec // route, code
	checkpoints *prometheus.CounterVec   // kind, result
	failovers   prometheus.Counter
	storeWrite  prometheus.Histogram
}

func newHubMetrics() *hubMetrics {
	return &hubMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "arkflow_hub_http_requests_total",
			Help: "HTTP requests the Hub answered, by route pattern (unmatched for none) and status code."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "arkflow_hub_http_request_duration_seconds",
			Help:    "Time the Hub took to answer an HTTP request, by route pattern and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"route", "code"}),
		checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "arkflow_hub_checkpoint_rounds_total",
			Help: "Checkpoint and savepoint rounds the Hub drove across Agents that ended, by kind (checkpoint, savepoint) and result (completed, failed)."},
			[]string{"kind", "result"}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "arkflow_hub_failovers_total",
			Help: "Jobs the Hub moved off Agents whose lease lapsed (a new generation each)."}),
		storeWrite: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "arkflow_hub_store_write_duration_seconds",
			Help:    "Time a write transaction of the Hub's store took, BEGIN to COMMIT with its fsync (a group commit's batch counts once).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}),
	}
}

// countCheckpoint counts a round of kind that ended with status
// (hubstore.CheckpointCompleted or failed).
func (m *hubMetrics) countCheckpoint(kind, status string) {
	result := "failed"
	if status == hubstore.CheckpointCompleted {
		result = "completed"
	}
	m.checkpoints.WithLabelValues(kind, result).Inc()
}

// instrument counts and times every request next answers, labelled by
// the route pattern the mux matched: the label set is bounded by the
// routes, never by the paths clients send. next must be the ServeMux
// itself, which sets Request.Pattern on the request it is given.
func (m *hubMetrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			code := strconv.Itoa(sw.code)
			m.requests.WithLabelValues(route, code).Inc()
			m.duration.WithLabelValues(route, code).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter records the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer
// (flushes, deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Status is a summary of a Hub: what `arkflow-hub --metrics-addr` serves
// on /status.
type Status struct {
	Version string `json:"version"`
	// Jobs counts the jobs by observed state (validated, starting,
	// running, stopping, stopped, failed), as GET /api/v1/jobs reports it.
	Jobs map[string]int `json:"jobs"`
	// Nodes are the Agents the Hub knows, by node ID.
	Nodes []NodeStatus `json:"nodes"`
}

// NodeStatus is one Agent in Status.
type NodeStatus struct {
	NodeID string `json:"node_id"`
	// State is online, draining or stale (its lease lapsed), as GET
	// /api/v1/nodes reports it.
	State    string    `json:"state"`
	LastSeen time.Time `json:"last_seen"`
}

// jobCount is one job's desired and observed state.
type jobCount struct{ desired, observed string }

// Status reads the summary from the Hub's store. An error means the store
// cannot be read (or the Hub is closed): the Hub is not ready.
func (h *Hub) Status(ctx context.Context) (Status, error) {
	s := Status{Version: softwareVersion, Jobs: map[string]int{}, Nodes: []NodeStatus{}}
	jobs, nodes, err := h.fleet(ctx)
	if err != nil {
		return s, err
	}
	for k, n := range jobs {
		s.Jobs[k.observed] += n
	}
	s.Nodes = nodes
	return s, nil
}

// fleet counts the jobs by desired and observed state and lists the
// nodes with their state.
func (h *Hub) fleet(ctx context.Context) (map[jobCount]int, []NodeStatus, error) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil, nil, fmt.Errorf("hub: closed")
	}
	js, err := h.store.ListJobs(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("hub: reading the jobs: %w", err)
	}
	jobs := map[jobCount]int{}
	for _, j := range js {
		rec, err := h.jobRecord(ctx, j.JobID)
		if err != nil {
			return nil, nil, fmt.Errorf("hub: reading job %s: %w", j.JobID, err)
		}
		jobs[jobCount{rec.DesiredState, rec.ObservedState}]++
	}
	as, err := h.store.ListAgents(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("hub: reading the nodes: %w", err)
	}
	now := h.cfg.Clock()
	nodes := make([]NodeStatus, 0, len(as))
	for _, a := range as {
		nodes = append(nodes, NodeStatus{NodeID: a.NodeID, State: nodeState(a, now), LastSeen: a.LastSeen})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].NodeID < nodes[j].NodeID })
	return jobs, nodes, nil
}

// nodeStates are the values of arkflow_hub_nodes's label state, each
// reported at every scrape.
var nodeStates = []string{"online", "draining", "stale"}

var (
	descHubJobs = prometheus.NewDesc("arkflow_hub_jobs",
		"Jobs the Hub keeps, by desired state (running, stopped) and observed state (validated, starting, running, stopping, stopped, failed).",
		[]string{"desired_state", "observed_state"}, nil)
	descHubNodes = prometheus.NewDesc("arkflow_hub_nodes",
		"Agents the Hub knows, by state: online, draining, or stale (the lease lapsed).", []string{"state"}, nil)
	descHubUp = prometheus.NewDesc("arkflow_hub_store_up",
		"1 when the last scrape read the Hub's store, 0 when it failed (then the job and node families are absent).", nil, nil)
)

// Collector returns a prometheus.Collector of the Hub, for a registry of
// the caller's (nothing is registered globally): the fleet's jobs and
// nodes, read from the store at each scrape, and the Hub's own work
// (requests to Handler, the checkpoint rounds it drives, failovers, the
// store's writes), counted from New on. METRICS.md lists the families.
//
// Collect is safe to call concurrently with everything else; it reads
// the store (a few queries per job), so scrape it every few seconds at
// most, not in a loop.
func (h *Hub) Collector() prometheus.Collector { return hubCollector{h} }

type hubCollector struct{ h *Hub }

func (c hubCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descHubJobs
	ch <- descHubNodes
	ch <- descHubUp
	m := c.h.metrics
	m.requests.Describe(ch)
	m.duration.Describe(ch)
	m.checkpoints.Describe(ch)
	m.failovers.Describe(ch)
	m.storeWrite.Describe(ch)
}

func (c hubCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.h.metrics
	m.requests.Collect(ch)
	m.duration.Collect(ch)
	m.checkpoints.Collect(ch)
	m.failovers.Collect(ch)
	m.storeWrite.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jobs, nodes, err := c.h.fleet(ctx)
	if err != nil {
		c.h.log.Warn("metrics: reading the fleet", "error", err)
		ch <- prometheus.MustNewConstMetric(descHubUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descHubUp, prometheus.GaugeValue, 1)
	for k, n := range jobs {
		ch <- prometheus.MustNewConstMetric(descHubJobs, prometheus.GaugeValue, float64(n), k.desired, k.observed)
	}
	byState := map[string]int{}
	for _, n := range nodes {
		byState[n.State]++
	}
	for _, s := range nodeStates {
		ch <- prometheus.MustNewConstMetric(descHubNodes, prometheus.GaugeValue, float64(byState[s]), s)
	}
}
