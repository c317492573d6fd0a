package hubclient

// This file exposes what an Agent does to the service that embeds it: a
// prometheus.Collector of the Agent and of every job it runs, and a
// Status snapshot for status pages and readiness probes. `arkflow agent
// --metrics-addr` serves both.

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
)

// Status is a snapshot of an Agent: its registration and the jobs it
// holds. It encodes as the JSON `arkflow agent` serves on /status.
type Status struct {
	NodeID string `json:"node_id"`
	// HubURL is Config.HubURL.
	HubURL string `json:"hub"`
	BootID string `json:"boot_id"`
	// Registered is true while the Agent holds a session with the Hub
	// (from a successful registration until the session ends).
	Registered bool `json:"registered"`
	// Jobs are the jobs the Agent holds, by job ID: those the Hub started
	// on it, including those that stopped or failed since (until the Hub
	// starts them again), and those whose start the Agent was sent: from
	// the moment the command arrives (it polls for commands every poll
	// interval the Hub gives, 1 s by default) "starting" until the job
	// is built, or "failed" when the start failed before that (until a
	// later start or a stop of the job).
	Jobs []JobStatus `json:"jobs"`
}

// JobStatus is one job an Agent holds.
type JobStatus struct {
	JobID string `json:"job"`
	// Generation is the Hub's generation of the job the Agent runs.
	Generation uint64 `json:"generation"`
	// State is what the Agent reports to the Hub: "starting",
	// "recovering" (restoring a checkpoint's state), "running",
	// "stopping", "stopped" or "failed".
	State string `json:"state"`
	// Error is why the job failed ("" unless State is "failed").
	Error string `json:"error,omitempty"`
	// Checkpoints is the job's checkpoint health and, while it starts, the
	// progress of the restore it started with (Recovery).
	Checkpoints arkflow.CheckpointStatus `json:"checkpoints"`
}

// Status returns a snapshot of the Agent. It reads counters only (not
// the size of the jobs' state), so a probe may call it often; it is safe
// to call concurrently with Run.
func (a *Agent) Status() Status {
	s := Status{NodeID: a.cfg.NodeID, HubURL: a.cfg.HubURL, BootID: a.bootID, Registered: a.registered.Load(), Jobs: []JobStatus{}}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.jobs {
		if p, ok := a.pending(r.id); ok {
			s.Jobs = append(s.Jobs, JobStatus{JobID: r.id, Generation: p.generation, State: p.state, Error: p.err})
			continue
		}
		st := r.status()
		s.Jobs = append(s.Jobs, JobStatus{JobID: r.id, Generation: r.generation, State: st.State, Error: st.Error,
			Checkpoints: checkpointsOf(r.job)})
	}
	for id, p := range a.started {
		if a.jobs[id] == nil {
			s.Jobs = append(s.Jobs, JobStatus{JobID: id, Generation: p.generation, State: p.state, Error: p.err})
		}
	}
	sort.Slice(s.Jobs, func(i, j int) bool { return s.Jobs[i].JobID < s.Jobs[j].JobID })
	return s
}

// jobStates are the values of arkflow_agent_jobs's label state, every one
// reported at each scrape (0 when no job is in it).
var jobStates = []string{hubwire.JobStarting, hubwire.JobRecovering, hubwire.JobRunning,
	hubwire.JobStopping, hubwire.JobStopped, hubwire.JobFailed}

// Collector returns a prometheus.Collector of the Agent and of every job
// it holds, for the service to register in its own registry (nothing is
// registered globally). The jobs' series are those of
// arkflow.Job.Collector, told apart by their label job, for the jobs the
// Agent holds at the scrape; because that set changes, the collector is
// unchecked: it describes no series in advance. METRICS.md lists the
// Agent's own families and the jobs'.
//
// Collect is safe to call concurrently with Run and with other scrapes.
func (a *Agent) Collector() prometheus.Collector { return &agentCollector{a: a} }

// agentCollector is the Agent's prometheus.Collector; see Agent.Collector.
type agentCollector struct{ a *Agent }

var (
	descRegistered = prometheus.NewDesc("arkflow_agent_registered",
		"1 while the Agent holds a session with the Hub (registered, heartbeats accepted), 0 otherwise.", nil, nil)
	descRegistrations = prometheus.NewDesc("arkflow_agent_registrations_total",
		"Registrations with the Hub that the Hub accepted.", nil, nil)
	descHeartbeats = prometheus.NewDesc("arkflow_agent_heartbeats_total",
		"Heartbeats the Agent sent to the Hub, by result: ok or failed.", []string{"result"}, nil)
	descCommands = prometheus.NewDesc("arkflow_agent_commands_total",
		"Commands of the Hub the Agent executed, by operation (job_*, or other) and terminal state (succeeded, failed, superseded, timed_out).",
		[]string{"operation", "result"}, nil)
	descGeneration = prometheus.NewDesc("arkflow_agent_job_generation",
		"The Hub's generation of each job the Agent holds.", []string{"job"}, nil)
	descJobs = prometheus.NewDesc("arkflow_agent_jobs",
		"Jobs the Agent holds, by the state it reports to the Hub.", []string{"state"}, nil)
)

// Describe sends nothing: the collector is unchecked (the set of jobs,
// and so of series, changes while it is registered).
func (c *agentCollector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the Agent's families, then every held job's.
func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	registered := 0.0
	if a.registered.Load() {
		registered = 1
	}
	ch <- prometheus.MustNewConstMetric(descRegistered, prometheus.GaugeValue, registered)
	ch <- prometheus.MustNewConstMetric(descRegistrations, prometheus.CounterValue, float64(a.registrations.Load()))
	ch <- prometheus.MustNewConstMetric(descHeartbeats, prometheus.CounterValue, float64(a.heartbeatsOK.Load()), "ok")
	ch <- prometheus.MustNewConstMetric(descHeartbeats, prometheus.CounterValue, float64(a.heartbeatsFailed.Load()), "failed")

	states := map[string]int{}
	var jobs []prometheus.Collector
	a.mu.Lock()
	for k, n := range a.commands {
		ch <- prometheus.MustNewConstMetric(descCommands, prometheus.CounterValue, float64(n), k.operation, k.result)
	}
	for _, r := range a.jobs {
		jobs = append(jobs, r.metrics)
		if p, ok := a.pending(r.id); ok {
			states[p.state]++
			ch <- prometheus.MustNewConstMetric(descGeneration, prometheus.GaugeValue, float64(p.generation), r.id)
			continue
		}
		states[r.status().State]++
		ch <- prometheus.MustNewConstMetric(descGeneration, prometheus.GaugeValue, float64(r.generation), r.id)
	}
	for id, p := range a.started {
		if a.jobs[id] == nil {
			states[p.state]++
			ch <- prometheus.MustNewConstMetric(descGeneration, prometheus.GaugeValue, float64(p.generation), id)
		}
	}
	a.mu.Unlock()
	for _, s := range jobStates {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(states[s]), s)
	}
	// Outside the lock: a job's collector may measure its state.
	for _, j := range jobs {
		j.Collect(ch)
	}
}

// commandKey labels arkflow_agent_commands_total.
type commandKey struct{ operation, result string }

// countCommand counts the terminal result of command c; under a.mu. The
// operations the Agent does not know are counted as "other", so that a
// Hub cannot grow the label set.
func (a *Agent) countCommand(c hubwire.AgentCommand, res hubwire.CommandResult) {
	op := string(c.Operation)
	if !c.Operation.IsJob() {
		op = "other"
	}
	a.commands[commandKey{op, string(res.State)}]++
}
