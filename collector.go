package arkflow

// This file exposes a job's metrics as a prometheus.Collector (issue 21,
// R-OPS-1). The collector counts nothing of its own: each scrape reads the
// counters the runtime keeps anyway and turns them into const metrics, so
// a job pays for Prometheus only when it is scraped, never per row or per
// batch. The one expensive reading, the size of the state (a walk over
// every key, under the memory backend's lock), is rate-limited.

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
)

// Collector returns a prometheus.Collector of the job's metrics, for the
// service to register in its own registry (the library registers nothing
// globally and serves no HTTP). Each scrape reads the job's live counters,
// as Metrics does; nothing is recorded between scrapes, so the pipeline
// pays nothing for it until a scrape. It can be registered before Run and
// stays valid after the job ended (its last values).
//
// Every series carries the label job (the job's ID), so the collectors of
// several jobs can share a registry; registering two jobs with the same ID
// in one registry fails (prometheus.AlreadyRegisteredError or a duplicate
// descriptor error). Per-task series add operator and subtask ("0", "1",
// …). The families, with Prometheus's base units:
//
//	arkflow_job_status{status}                 1 for the job's status, 0 for the others
//	arkflow_rows_in_total, arkflow_rows_out_total, arkflow_batches_in_total,
//	arkflow_batches_out_total{operator,subtask}  a task's traffic
//	arkflow_watermark_seconds{operator,subtask}  a task's input watermark, Unix time
//	arkflow_watermark_lag_seconds{operator,subtask}  wall clock minus that watermark
//	arkflow_windows_fired_total, arkflow_open_windows{operator,subtask}
//	arkflow_late_rows_total{operator,subtask,action}  action: dropped, routed, updated
//	arkflow_null_timestamp_rows_total{operator,subtask,action}  action: dropped, routed
//	arkflow_wal_replayed_entries_total, arkflow_wal_parked_timeouts_total,
//	arkflow_wal_last_sequence, arkflow_wal_cursor_sequence,
//	arkflow_wal_cursor_lag_entries{operator,subtask}  a source's write-ahead log
//	arkflow_state_bytes{operator}              a stateful operator's state (see below)
//	arkflow_checkpoints_completed_total, arkflow_checkpoints_failed_total,
//	arkflow_checkpoint_consecutive_failures, arkflow_checkpoint_healthy,
//	arkflow_checkpoint_last_duration_seconds, arkflow_checkpoint_last_pause_seconds,
//	arkflow_checkpoint_last_size_bytes, arkflow_checkpoint_last_success_timestamp_seconds
//	arkflow_restore_done, arkflow_restore_restored_bytes, arkflow_restore_size_bytes,
//	arkflow_restore_restored_keys, arkflow_restore_restored_snapshots, arkflow_restore_snapshots
//
// The watermark families are absent for a task before its first watermark
// and after its bounded input ended; the checkpoint and restore families
// only for a job with a checkpoint block, and the last success time only
// after one committed. An operator counter or gauge without a family of
// its own (see TaskMetrics) appears as
// arkflow_operator_events_total{operator,subtask,metric} or
// arkflow_operator_value{operator,subtask,metric}.
//
// Measuring the state walks every key of it (Metrics.StateBytes does the
// same), so while the job runs a collector measures it at most once a
// minute, and less often when a measurement takes longer than 1 % of the
// time since the last; scrapes in between repeat the last value. Every
// other value is read at each scrape, cheaply (atomic counters).
//
// Collect is safe to call concurrently with Run and with other scrapes.
func (j *Job) Collector() prometheus.Collector {
	c := &collector{j: j, subtask: map[string]string{}, now: time.Now, readState: j.rt.StateBytes}
	for _, t := range j.plan.Tasks {
		c.subtask[t.ID] = strconv.Itoa(t.Subtask)
	}
	c.d = newDescs(j.spec.ID)
	return c
}

// collector is the job's prometheus.Collector; see Job.Collector.
type collector struct {
	j *Job
	// subtask is the subtask index of each task ID, as a label value.
	subtask map[string]string
	// now is the wall clock watermark lag is measured against.
	now func() time.Time
	d   descs

	// readState measures the state (Runtime.StateBytes); state is its
	// last result, stateNext when it may be measured again.
	readState func() map[string]int64
	stateMu   sync.Mutex
	state     map[string]int64
	stateNext time.Time
}

const (
	// stateEvery is the shortest time between two measurements of the
	// state of a running job.
	stateEvery = time.Minute
	// stateCostShare bounds the time spent measuring the state to
	// 1/stateCostShare of the time between measurements.
	stateCostShare = 100
)

// stateBytes returns the state size of each stateful operator, measured
// at most every stateEvery, or less often when a measurement is slow,
// while the job runs (before and after, the runtime answers without
// walking the state).
func (c *collector) stateBytes(running bool) map[string]int64 {
	if !running {
		return c.readState()
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	now := c.now()
	if c.state != nil && now.Before(c.stateNext) {
		return c.state
	}
	start := time.Now()
	c.state = c.readState()
	c.stateNext = now.Add(max(stateEvery, stateCostShare*time.Since(start)))
	return c.state
}

// descs are the collector's descriptors, each with the job's ID as the
// constant label job, so that two jobs' collectors describe different
// series and a checked registry takes both.
type descs struct {
	status                                   *prometheus.Desc
	rowsIn, rowsOut, batchesIn, batchesOut   *prometheus.Desc
	watermark, watermarkLag                  *prometheus.Desc
	windowsFired, openWindows                *prometheus.Desc
	lateRows, nullRows                       *prometheus.Desc
	walReplayed, walParked                   *prometheus.Desc
	walLast, walCursor, walCursorLag         *prometheus.Desc
	opEvents, opValue                        *prometheus.Desc
	stateBytes                               *prometheus.Desc
	ckptCompleted, ckptFailed, ckptInARow    *prometheus.Desc
	ckptHealthy, ckptDuration, ckptPause     *prometheus.Desc
	ckptBytes, ckptLastSuccess               *prometheus.Desc
	restoreDone, restoreBytes, restoreTotal  *prometheus.Desc
	restoreKeys, restoreSnaps, restoreSnapsN *prometheus.Desc
}

func newDescs(jobID string) descs {
	job := prometheus.Labels{"job": jobID}
	task := []string{"operator", "subtask"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("arkflow_"+name, help, labels, job)
	}
	t := func(name, help string, extra ...string) *prometheus.Desc {
		return d(name, help, append(append([]string(nil), task...), extra...)...)
	}
	return descs{
		status:     d("job_status", "The job's lifecycle status: 1 for the current one (created, starting, running, stopping, stopped, failed), 0 for the others.", "status"),
		rowsIn:     t("rows_in_total", "Rows a task received (for a source: read)."),
		rowsOut:    t("rows_out_total", "Rows a task emitted (for a sink: written)."),
		batchesIn:  t("batches_in_total", "Record batches a task received."),
		batchesOut: t("batches_out_total", "Record batches a task emitted."),
		watermark:  t("watermark_seconds", "A task's input watermark as Unix time; absent before the first and after a bounded input ended."),
		watermarkLag: t("watermark_lag_seconds",
			"How far a task's input watermark is behind the wall clock of the process; absent when the watermark is."),
		windowsFired: t("windows_fired_total", "Windows a window operator's task fired."),
		openWindows:  t("open_windows", "Windows a window operator's task holds open now."),
		lateRows: t("late_rows_total",
			"Rows behind the watermark a window operator's task handled, by what its late_event_policy did with them: dropped, routed (to the late sink) or updated (a fired window).", "action"),
		nullRows: t("null_timestamp_rows_total",
			"Rows without an event time a window operator's task handled: dropped or routed.", "action"),
		walReplayed:  t("wal_replayed_entries_total", "Write-ahead log entries a source's task replayed after a restart."),
		walParked:    t("wal_parked_timeouts_total", "Times a source's task timed out waiting for parked acknowledgements of its write-ahead log."),
		walLast:      t("wal_last_sequence", "Sequence number of the last entry appended to a source task's write-ahead log."),
		walCursor:    t("wal_cursor_sequence", "Sequence number of the last entry of a source task's write-ahead log acknowledged through (its cursor)."),
		walCursorLag: t("wal_cursor_lag_entries", "Entries appended to a source task's write-ahead log and not yet acknowledged through (last minus cursor)."),
		opEvents:     t("operator_events_total", "An operator's own counter that has no family of its own, by its name.", "metric"),
		opValue:      t("operator_value", "An operator's own gauge that has no family of its own, by its name.", "metric"),
		stateBytes: d("state_bytes",
			"Size of a stateful operator's state: keys and values; measured at most once a minute while the job runs.", "operator"),

		ckptCompleted: d("checkpoints_completed_total", "Checkpoint rounds this run committed."),
		ckptFailed:    d("checkpoints_failed_total", "Checkpoint rounds of this run that failed."),
		ckptInARow:    d("checkpoint_consecutive_failures", "Checkpoint rounds failed since the last one that committed."),
		ckptHealthy:   d("checkpoint_healthy", "1 when the last checkpoint round committed (or none failed yet), 0 when checkpoints are degraded."),
		ckptDuration:  d("checkpoint_last_duration_seconds", "Duration of the newest committed checkpoint, from trigger to commit."),
		ckptPause:     d("checkpoint_last_pause_seconds", "How long the sources were held for the newest committed checkpoint's cut."),
		ckptBytes:     d("checkpoint_last_size_bytes", "State the newest committed checkpoint uploaded."),
		ckptLastSuccess: d("checkpoint_last_success_timestamp_seconds",
			"Unix time the newest checkpoint of this run committed; absent before the first."),
		restoreDone:   d("restore_done", "1 once the restore the run started with finished (or when there was none), 0 while it runs."),
		restoreBytes:  d("restore_restored_bytes", "State bytes restored so far by the restore the run started with."),
		restoreTotal:  d("restore_size_bytes", "State bytes the restore the run started with has to restore."),
		restoreKeys:   d("restore_restored_keys", "Keys restored so far by the restore the run started with."),
		restoreSnaps:  d("restore_restored_snapshots", "State snapshots restored so far by the restore the run started with."),
		restoreSnapsN: d("restore_snapshots", "State snapshots the restore the run started with has to restore."),
	}
}

// all lists every descriptor, for Describe.
func (d *descs) all() []*prometheus.Desc {
	return []*prometheus.Desc{
		d.status, d.rowsIn, d.rowsOut, d.batchesIn, d.batchesOut, d.watermark, d.watermarkLag,
		d.windowsFired, d.openWindows, d.lateRows, d.nullRows,
		d.walReplayed, d.walParked, d.walLast, d.walCursor, d.walCursorLag, d.opEvents, d.opValue, d.stateBytes,
		d.ckptCompleted, d.ckptFailed, d.ckptInARow, d.ckptHealthy, d.ckptDuration, d.ckptPause, d.ckptBytes, d.ckptLastSuccess,
		d.restoreDone, d.restoreBytes, d.restoreTotal, d.restoreKeys, d.restoreSnaps, d.restoreSnapsN,
	}
}

// Describe sends every descriptor the collector can collect.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d.all() {
		ch <- d
	}
}

// taskFamilies maps an operator's own counters and gauges (TaskMetrics)
// to their families; an extra label value, if any, follows the task's.
var (
	counterFamilies = map[string]func(*descs) (*prometheus.Desc, string){
		windowop.MetricWindowsFired: func(d *descs) (*prometheus.Desc, string) { return d.windowsFired, "" },
		windowop.MetricLateDropped:  func(d *descs) (*prometheus.Desc, string) { return d.lateRows, "dropped" },
		windowop.MetricLateRouted:   func(d *descs) (*prometheus.Desc, string) { return d.lateRows, "routed" },
		windowop.MetricLateUpdated:  func(d *descs) (*prometheus.Desc, string) { return d.lateRows, "updated" },
		windowop.MetricNullDropped:  func(d *descs) (*prometheus.Desc, string) { return d.nullRows, "dropped" },
		windowop.MetricNullRouted:   func(d *descs) (*prometheus.Desc, string) { return d.nullRows, "routed" },
		"wal_replayed":              func(d *descs) (*prometheus.Desc, string) { return d.walReplayed, "" },
		"wal_parked_timeouts":       func(d *descs) (*prometheus.Desc, string) { return d.walParked, "" },
	}
	gaugeFamilies = map[string]func(*descs) *prometheus.Desc{
		windowop.MetricOpenWindows: func(d *descs) *prometheus.Desc { return d.openWindows },
		"wal_last":                 func(d *descs) *prometheus.Desc { return d.walLast },
		"wal_cursor":               func(d *descs) *prometheus.Desc { return d.walCursor },
	}
)

// Collect sends the job's metrics as of now: what Job.Metrics returns,
// read part by part so that the state is measured only as stateBytes
// allows.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	rt := c.j.rt
	status := c.j.Status()
	m := Metrics{Status: status, Checkpoints: checkpointStatus(rt.CheckpointStatus())}
	for _, t := range rt.Metrics() {
		m.Tasks = append(m.Tasks, TaskMetrics(t))
	}
	m.StateBytes = c.stateBytes(status == Starting || status == Running || status == Stopping)
	d := &c.d
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, labels...)
	}
	for s := Created; s <= Failed; s++ {
		gauge(d.status, bool01(s == m.Status), s.String())
	}
	now := c.now()
	for _, t := range m.Tasks {
		sub, ok := c.subtask[t.Task]
		if !ok {
			sub = strings.TrimPrefix(t.Task, t.Operator+"-")
		}
		counter(d.rowsIn, float64(t.RowsIn), t.Operator, sub)
		counter(d.rowsOut, float64(t.RowsOut), t.Operator, sub)
		counter(d.batchesIn, float64(t.BatchesIn), t.Operator, sub)
		counter(d.batchesOut, float64(t.BatchesOut), t.Operator, sub)
		if t.Watermark != math.MinInt64 && t.Watermark != math.MaxInt64 {
			wm := time.UnixMilli(t.Watermark)
			gauge(d.watermark, float64(t.Watermark)/1e3, t.Operator, sub)
			gauge(d.watermarkLag, now.Sub(wm).Seconds(), t.Operator, sub)
		}
		for name, v := range t.Counters {
			if f, ok := counterFamilies[name]; ok {
				desc, action := f(d)
				if action != "" {
					counter(desc, float64(v), t.Operator, sub, action)
				} else {
					counter(desc, float64(v), t.Operator, sub)
				}
				continue
			}
			counter(d.opEvents, float64(v), t.Operator, sub, name)
		}
		for name, v := range t.Gauges {
			if f, ok := gaugeFamilies[name]; ok {
				gauge(f(d), float64(v), t.Operator, sub)
				continue
			}
			gauge(d.opValue, float64(v), t.Operator, sub, name)
		}
		last, okLast := t.Gauges["wal_last"]
		cursor, okCursor := t.Gauges["wal_cursor"]
		if okLast && okCursor {
			gauge(d.walCursorLag, float64(max(last-cursor, 0)), t.Operator, sub)
		}
	}
	for op, n := range m.StateBytes {
		gauge(d.stateBytes, float64(n), op)
	}
	ck := m.Checkpoints
	if !ck.Enabled {
		return
	}
	counter(d.ckptCompleted, float64(ck.Completed))
	counter(d.ckptFailed, float64(ck.Failures))
	gauge(d.ckptInARow, float64(ck.ConsecutiveFailures))
	gauge(d.ckptHealthy, bool01(ck.Healthy))
	gauge(d.ckptDuration, ck.LastDuration.Seconds())
	gauge(d.ckptPause, ck.LastPause.Seconds())
	gauge(d.ckptBytes, float64(ck.LastBytes))
	if !ck.LastCompleted.IsZero() {
		gauge(d.ckptLastSuccess, float64(ck.LastCompleted.UnixNano())/1e9)
	}
	r := ck.Recovery
	gauge(d.restoreDone, bool01(r.Done))
	gauge(d.restoreBytes, float64(r.BytesRestored))
	gauge(d.restoreTotal, float64(r.BytesTotal))
	gauge(d.restoreKeys, float64(r.KeysRestored))
	gauge(d.restoreSnaps, float64(r.SnapshotsRestored))
	gauge(d.restoreSnapsN, float64(r.SnapshotsTotal))
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
