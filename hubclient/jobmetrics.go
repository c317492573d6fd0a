package hubclient

// This file measures what a job's report carries for the Hub's detail
// metrics (hubwire.JobMetrics): the node's share of them, which
// the Hub aggregates over the job's nodes. Everything but the state size
// is a read of counters the runtime keeps anyway; the state size is a
// walk over every key, so it is rate-limited (stateEvery).

import (
	"encoding/json"
	"math"
	"sync"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/harness"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
)

// stateEvery is how often at most a job's state is measured for reports
// (its collector measures it once a minute, for scrapes); a measurement
// that took d is not repeated before 100·d either, so the walks take at
// most 1 % of the time.
const stateEvery = 10 * time.Second

// stateMeter rate-limits the measurements of one job's state.
type stateMeter struct {
	mu    sync.Mutex
	has   bool
	bytes uint64
	next  time.Time
}

// stateBytes returns the bytes of rt's state, measured again only when
// the last measurement is old enough.
func (m *stateMeter) stateBytes(rt *runtime.Runtime, now time.Time) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.has && now.Before(m.next) {
		return m.bytes
	}
	start := time.Now()
	var n int64
	for _, sz := range rt.StateSizes() {
		n += sz.Bytes
	}
	took := time.Since(start)
	m.bytes, m.has, m.next = uint64(max(n, 0)), true, now.Add(max(stateEvery, 100*took))
	return m.bytes
}

// measure is the node's share of job r's detail metrics at now; see
// hubwire.JobMetrics for what each field means. It must not be called
// under Agent.mu: it may walk the state.
func (r *runningJob) measure(now time.Time) *hubwire.JobMetrics {
	rt := harness.RuntimeOf(r.job)
	m := &hubwire.JobMetrics{}
	var lag *int64
	for _, t := range rt.Metrics() {
		if t.Watermark == math.MinInt64 || t.Watermark == math.MaxInt64 {
			continue // none yet, or the bounded input ended
		}
		if l := now.UnixMilli() - t.Watermark; lag == nil || l > *lag {
			lag = &l
		}
	}
	m.WatermarkLagMs = lag
	var pressure *float64
	var parts hubwire.PartitionHealth
	for _, d := range rt.Details() {
		if d.InboxCapacity > 0 {
			if p := float64(d.InboxItems) / float64(d.InboxCapacity); pressure == nil || p > *pressure {
				pressure = &p
			}
		}
		for _, p := range d.Partitions {
			if p.Idle {
				parts.Idle++
			} else {
				parts.Healthy++
			}
		}
	}
	m.TaskPressure = pressure
	if parts.Healthy+parts.Idle > 0 {
		m.PartitionHealth, _ = json.Marshal(parts)
	}
	c := rt.CheckpointStatus()
	if c.Enabled {
		f := uint64(max(c.Failures, 0))
		m.CheckpointFailures = &f
		if c.Completed > 0 {
			d := uint64(max(c.LastDuration.Milliseconds(), 0))
			m.CheckpointDurationMs = &d
		}
	}
	progress := 1.0
	if p := c.Recovery; !p.Done && p.BytesTotal > 0 {
		progress = float64(min(p.BytesRestored, p.BytesTotal)) / float64(p.BytesTotal)
	}
	m.RecoveryProgress = &progress
	if r.job.Status() == arkflow.Running {
		b := r.state.stateBytes(rt, now)
		m.StateBytes = &b
	}
	return m
}
