package arkflow

// This file exposes a job's metrics as a prometheus.Collector. The
// collector counts nothing of its own: each scrape reads the counters the
// runtime keeps anyway (atomic adds, at most once per batch, and
// lock-free histograms of sink writes, WAL syncs and checkpoints) and
// turns them into const metrics, so a job pays for Prometheus only when
// it is scraped, never per row. The one expensive reading, the size of
// the state (a walk over every key, under the memory backend's lock), is
// rate-limited. METRICS.md, generated from this collector by
// internal/tools/metricsdoc, lists the families.

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/metrics"
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
)

// Collector returns a prometheus.Collector of the job's metrics, for the
// service to register in its own registry (the library registers nothing
// globally and serves no HTTP). Each scrape reads the job's live counters,
// as Metrics does, so the pipeline pays nothing until it is scraped. It
// can be registered before Run and keeps the last values after the job
// ended. Every series carries the label job, the job's ID, so the
// collectors of jobs with different IDs can share a registry. METRICS.md
// lists every family with its type, labels and meaning; README's
// "Operating a job" says what to do about them.
//
// Collect is safe to call concurrently with Run and with other scrapes.
func (j *Job) Collector() prometheus.Collector {
	c := &collector{j: j, subtask: map[string]string{}, now: time.Now, readState: j.rt.StateSizes}
	for _, t := range j.plan.Tasks {
		c.subtask[t.ID] = strconv.Itoa(t.Subtask)
	}
	c.d = newDescs(j.spec.ID)
	c.conn = connectorDescs(j.spec.ID, j.rt.ConnectorFamilies(), c.d.all())
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
	// conn are the descriptors of the families the job's connectors
	// declare, by name.
	conn map[string]connDesc

	// readState measures the state (Runtime.StateSizes); state is its
	// last result, stateNext when it may be measured again.
	readState func() map[string]runtime.StateSize
	stateMu   sync.Mutex
	state     map[string]runtime.StateSize
	stateNext time.Time
}

// connDesc is a connector family's descriptor.
type connDesc struct {
	desc   *prometheus.Desc
	kind   prometheus.ValueType
	labels int
}

// connectorDescs returns the descriptors of the connectors' families;
// those whose name or labels Prometheus refuses, and those named like one
// of the collector's own (own), are left out (and so never collected),
// rather than failing every scrape.
func connectorDescs(jobID string, fams []connectors.MetricFamily, own []*prometheus.Desc) map[string]connDesc {
	taken := map[string]bool{}
	for _, d := range own {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			taken[m[1]] = true
		}
	}
	out := map[string]connDesc{}
	for _, f := range fams {
		if taken["arkflow_"+f.Name] {
			continue
		}
		labels := append([]string{"operator", "subtask"}, f.Labels...)
		desc := prometheus.NewDesc("arkflow_"+f.Name, f.Help, labels, prometheus.Labels{"job": jobID})
		if !validConnectorFamily(f) {
			continue
		}
		kind := prometheus.GaugeValue
		if f.Kind == connectors.Counter {
			kind = prometheus.CounterValue
		}
		out[f.Name] = connDesc{desc: desc, kind: kind, labels: len(f.Labels)}
	}
	return out
}

// validConnectorFamily reports whether a family's name and labels are in
// Prometheus's classic syntax and its labels do not repeat the job's.
func validConnectorFamily(f connectors.MetricFamily) bool {
	if !promName.MatchString(f.Name) {
		return false
	}
	for _, l := range f.Labels {
		switch {
		case l == "job", l == "operator", l == "subtask", !promName.MatchString(l), strings.HasPrefix(l, "__"):
			return false
		}
	}
	return true
}

// fqName finds a descriptor's name in its String.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// promName is the syntax of the names the collector accepts from
// connectors: Prometheus's classic one, without colons.
var promName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

const (
	// stateEvery is the shortest time between two measurements of the
	// state of a running job.
	stateEvery = time.Minute
	// stateCostShare bounds the time spent measuring the state to
	// 1/stateCostShare of the time between measurements.
	stateCostShare = 100
)

// stateSizes returns the state size of each stateful operator, measured
// at most every stateEvery, or less often when a measurement is slow,
// while the job runs (before and after, the runtime answers without
// walking the state).
func (c *collector) stateSizes(running bool) map[string]runtime.StateSize {
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
	status                                    *prometheus.Desc
	rowsIn, rowsOut, batchesIn, batchesOut    *prometheus.Desc
	bytesIn, bytesOut                         *prometheus.Desc
	watermark, watermarkLag                   *prometheus.Desc
	partWatermark, partWatermarkLag, partIdle *prometheus.Desc
	chanItems, chanCapacity                   *prometheus.Desc
	sinkWrite, sinkErrors                     *prometheus.Desc
	walAppends, walSync, walParkedAcks        *prometheus.Desc
	stateKeys                                 *prometheus.Desc
	ckptDurationH, ckptPauseH, ckptSizeH      *prometheus.Desc
	windowsFired, openWindows                 *prometheus.Desc
	lateRows, nullRows, replayedRows          *prometheus.Desc
	walReplayed, walParked                    *prometheus.Desc
	walLast, walCursor, walCursorLag          *prometheus.Desc
	srcPosRows, srcEndRows                    *prometheus.Desc
	srcPosBytes, srcEndBytes                  *prometheus.Desc
	opEvents, opValue                         *prometheus.Desc
	stateBytes                                *prometheus.Desc
	ckptCompleted, ckptFailed, ckptInARow     *prometheus.Desc
	ckptHealthy, ckptDuration, ckptPause      *prometheus.Desc
	ckptBytes, ckptLastSuccess                *prometheus.Desc
	restoreDone, restoreBytes, restoreTotal   *prometheus.Desc
	restoreKeys, restoreSnaps, restoreSnapsN  *prometheus.Desc
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
		bytesIn:    t("bytes_in_total", "Bytes of the Arrow buffers of the batches a task received (for a source: read)."),
		bytesOut:   t("bytes_out_total", "Bytes of the Arrow buffers of the batches a task emitted (for a sink: written)."),
		partWatermark: t("partition_watermark_seconds",
			"The watermark one partition of an event-time source's task allows (its largest event time minus the out-of-orderness) as Unix time; absent before its first event.", "partition"),
		partWatermarkLag: t("partition_watermark_lag_seconds",
			"How far a source partition's watermark is behind the wall clock of the process; absent when the watermark is.", "partition"),
		partIdle: t("partition_idle",
			"1 while a partition of an event-time source's task is idle (no data for the idle timeout, so it does not hold the watermark back), else 0.", "partition"),
		chanItems:    t("channel_occupancy_items", "Messages (batches, watermarks, barriers) waiting in a task's input channels."),
		chanCapacity: t("channel_capacity_items", "Messages a task's input channels hold before their senders block (backpressure)."),
		sinkWrite:    t("sink_write_duration_seconds", "Latency of a sink task's writes, from the call to its return (for an asynchronous sink, its completion)."),
		sinkErrors:   t("sink_write_errors_total", "Writes of a sink task that failed."),
		walAppends:   t("wal_appends_total", "Entries appended to a source task's write-ahead log."),
		walSync:      t("wal_sync_duration_seconds", "Latency of a source task's write-ahead log syncs (fsync, or an object store upload)."),
		walParkedAcks: t("wal_parked_acks",
			"Acknowledgements of a source task's write-ahead log waiting for an earlier entry's before its cursor can move past them."),
		stateKeys: d("state_keys",
			"Live keys of a stateful operator's state; measured with arkflow_state_bytes.", "operator"),
		ckptDurationH: d("checkpoint_duration_seconds", "Duration of each committed checkpoint of this run, from trigger to commit."),
		ckptPauseH:    d("checkpoint_pause_seconds", "How long the sources were held for each committed checkpoint's cut."),
		ckptSizeH:     d("checkpoint_size_bytes", "State each committed checkpoint uploaded."),
		watermark:     t("watermark_seconds", "A task's input watermark as Unix time; absent before the first and after a bounded input ended."),
		watermarkLag: t("watermark_lag_seconds",
			"How far a task's input watermark is behind the wall clock of the process; absent when the watermark is."),
		windowsFired: t("windows_fired_total", "Windows a window operator's task fired."),
		openWindows:  t("open_windows", "Windows a window operator's task holds open now."),
		lateRows: t("late_rows_total",
			"Rows behind the watermark a window operator's task handled, by what its late_event_policy did with them: dropped, routed (to the late sink) or updated (a fired window).", "action"),
		nullRows: t("null_timestamp_rows_total",
			"Rows without an event time a window operator's task handled: dropped or routed.", "action"),
		replayedRows: t("replayed_skipped_rows_total",
			"Rows a window operator's task skipped after a restart because they were read again and its restored state holds them (their windows fired before the restart); not late rows."),
		walReplayed:  t("wal_replayed_entries_total", "Write-ahead log entries a source's task replayed after a restart."),
		walParked:    t("wal_parked_timeouts_total", "Times a source's task timed out waiting for parked acknowledgements of its write-ahead log."),
		walLast:      t("wal_last_sequence", "Sequence number of the last entry appended to a source task's write-ahead log."),
		walCursor:    t("wal_cursor_sequence", "Sequence number of the last entry of a source task's write-ahead log acknowledged through (its cursor)."),
		walCursorLag: t("wal_cursor_lag_entries", "Entries appended to a source task's write-ahead log and not yet acknowledged through (last minus cursor)."),
		srcPosRows:   t("source_position_rows", "How far a bounded source task is through its input, in rows (generate with a count)."),
		srcEndRows:   t("source_end_rows", "The end of a bounded source task's input, in rows; absent when not known."),
		srcPosBytes:  t("source_position_bytes", "How far a source task is through its input, in bytes (a file)."),
		srcEndBytes:  t("source_end_bytes", "The end of a source task's input, in bytes (a regular file's size); absent when not known."),
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
		d.status, d.rowsIn, d.rowsOut, d.batchesIn, d.batchesOut, d.bytesIn, d.bytesOut, d.watermark, d.watermarkLag,
		d.partWatermark, d.partWatermarkLag, d.partIdle, d.chanItems, d.chanCapacity, d.sinkWrite, d.sinkErrors,
		d.walAppends, d.walSync, d.walParkedAcks, d.stateKeys, d.ckptDurationH, d.ckptPauseH, d.ckptSizeH,
		d.windowsFired, d.openWindows, d.lateRows, d.nullRows, d.replayedRows,
		d.walReplayed, d.walParked, d.walLast, d.walCursor, d.walCursorLag,
		d.srcPosRows, d.srcEndRows, d.srcPosBytes, d.srcEndBytes, d.opEvents, d.opValue, d.stateBytes,
		d.ckptCompleted, d.ckptFailed, d.ckptInARow, d.ckptHealthy, d.ckptDuration, d.ckptPause, d.ckptBytes, d.ckptLastSuccess,
		d.restoreDone, d.restoreBytes, d.restoreTotal, d.restoreKeys, d.restoreSnaps, d.restoreSnapsN,
	}
}

// Describe sends every descriptor the collector can collect.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d.all() {
		ch <- d
	}
	for _, cd := range c.conn {
		ch <- cd.desc
	}
}

// taskFamilies maps an operator's own counters and gauges (TaskMetrics)
// to their families; an extra label value, if any, follows the task's.
var (
	counterFamilies = map[string]func(*descs) (*prometheus.Desc, string){
		windowop.MetricWindowsFired:    func(d *descs) (*prometheus.Desc, string) { return d.windowsFired, "" },
		windowop.MetricLateDropped:     func(d *descs) (*prometheus.Desc, string) { return d.lateRows, "dropped" },
		windowop.MetricLateRouted:      func(d *descs) (*prometheus.Desc, string) { return d.lateRows, "routed" },
		windowop.MetricLateUpdated:     func(d *descs) (*prometheus.Desc, string) { return d.lateRows, "updated" },
		windowop.MetricNullDropped:     func(d *descs) (*prometheus.Desc, string) { return d.nullRows, "dropped" },
		windowop.MetricNullRouted:      func(d *descs) (*prometheus.Desc, string) { return d.nullRows, "routed" },
		windowop.MetricReplayedSkipped: func(d *descs) (*prometheus.Desc, string) { return d.replayedRows, "" },
		"wal_replayed":                 func(d *descs) (*prometheus.Desc, string) { return d.walReplayed, "" },
		"wal_parked_timeouts":          func(d *descs) (*prometheus.Desc, string) { return d.walParked, "" },
	}
	gaugeFamilies = map[string]func(*descs) *prometheus.Desc{
		windowop.MetricOpenWindows:            func(d *descs) *prometheus.Desc { return d.openWindows },
		"wal_last":                            func(d *descs) *prometheus.Desc { return d.walLast },
		"wal_cursor":                          func(d *descs) *prometheus.Desc { return d.walCursor },
		runtime.GaugeSourcePosition + "rows":  func(d *descs) *prometheus.Desc { return d.srcPosRows },
		runtime.GaugeSourceEnd + "rows":       func(d *descs) *prometheus.Desc { return d.srcEndRows },
		runtime.GaugeSourcePosition + "bytes": func(d *descs) *prometheus.Desc { return d.srcPosBytes },
		runtime.GaugeSourceEnd + "bytes":      func(d *descs) *prometheus.Desc { return d.srcEndBytes },
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
	sizes := c.stateSizes(status == Starting || status == Running || status == Stopping)
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
	for _, t := range rt.Details() {
		c.collectDetail(ch, t, now)
	}
	for op, sz := range sizes {
		gauge(d.stateBytes, float64(sz.Bytes), op)
		if sz.Keys >= 0 {
			gauge(d.stateKeys, float64(sz.Keys), op)
		}
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
	hs := rt.CheckpointHistograms()
	histogram(ch, d.ckptDurationH, hs.Duration)
	histogram(ch, d.ckptPauseH, hs.Pause)
	histogram(ch, d.ckptSizeH, hs.Size)
	r := ck.Recovery
	gauge(d.restoreDone, bool01(r.Done))
	gauge(d.restoreBytes, float64(r.BytesRestored))
	gauge(d.restoreTotal, float64(r.BytesTotal))
	gauge(d.restoreKeys, float64(r.KeysRestored))
	gauge(d.restoreSnaps, float64(r.SnapshotsRestored))
	gauge(d.restoreSnapsN, float64(r.SnapshotsTotal))
}

// collectDetail sends a task's families beyond its TaskMetrics.
func (c *collector) collectDetail(ch chan<- prometheus.Metric, t runtime.TaskDetail, now time.Time) {
	d := &c.d
	sub, ok := c.subtask[t.Task]
	if !ok {
		sub = strings.TrimPrefix(t.Task, t.Operator+"-")
	}
	send := func(desc *prometheus.Desc, kind prometheus.ValueType, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, kind, v, append([]string{t.Operator, sub}, extra...)...)
	}
	send(d.bytesIn, prometheus.CounterValue, float64(t.BytesIn))
	send(d.bytesOut, prometheus.CounterValue, float64(t.BytesOut))
	if t.InboxCapacity > 0 {
		send(d.chanItems, prometheus.GaugeValue, float64(t.InboxItems))
		send(d.chanCapacity, prometheus.GaugeValue, float64(t.InboxCapacity))
	}
	if t.SinkWrites != nil {
		histogram(ch, d.sinkWrite, *t.SinkWrites, t.Operator, sub)
		send(d.sinkErrors, prometheus.CounterValue, float64(t.SinkErrors))
	}
	for _, p := range t.Partitions {
		part := strconv.Itoa(p.Partition)
		if p.Watermark != math.MinInt64 {
			send(d.partWatermark, prometheus.GaugeValue, float64(p.Watermark)/1e3, part)
			send(d.partWatermarkLag, prometheus.GaugeValue, now.Sub(time.UnixMilli(p.Watermark)).Seconds(), part)
		}
		send(d.partIdle, prometheus.GaugeValue, bool01(p.Idle), part)
	}
	if w := t.WAL; w != nil {
		send(d.walAppends, prometheus.CounterValue, float64(w.Appends))
		send(d.walParkedAcks, prometheus.GaugeValue, float64(w.ParkedAcks))
		histogram(ch, d.walSync, w.Syncs, t.Operator, sub)
	}
	for _, m := range t.Connector {
		cd, ok := c.conn[m.Name]
		if !ok || len(m.LabelValues) != cd.labels {
			continue // undeclared, or not the family's labels
		}
		send(cd.desc, cd.kind, m.Value, m.LabelValues...)
	}
}

// histogram sends a const histogram of a snapshot.
func histogram(ch chan<- prometheus.Metric, desc *prometheus.Desc, s metrics.Snapshot, labels ...string) {
	ch <- prometheus.MustNewConstHistogram(desc, s.Count, s.Sum, s.Buckets, labels...)
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
