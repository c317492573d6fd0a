package runtime

// This file holds the runtime's counters: per-task traffic (taskMetrics,
// and TaskMetrics snapshots returned by Metrics), the state size of each
// stateful operator (StateBytes) and the sources' acknowledged positions
// (Positions).

import (
	"sort"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/metrics"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
)

// taskMetrics counts one task's traffic.
type taskMetrics struct {
	task, op                               string
	rowsIn, rowsOut, batchesIn, batchesOut atomic.Int64
	watermark                              atomic.Int64
	// finite is the last watermark below the end of time
	// (eventtime.NoWatermark: none): what a checkpoint records after an
	// input ended or drained.
	finite atomic.Int64
	gauges ops.Gauger

	// bytesIn and bytesOut are the Arrow buffer bytes of the batches the
	// task received and emitted (recordBytes).
	bytesIn, bytesOut atomic.Int64
	// sinkWrites times a sink task's writes (nil for other tasks);
	// sinkErrors counts its failed writes.
	sinkWrites *metrics.Histogram
	sinkErrors atomic.Int64
	// inbox is the input channels of a task that heads a chain fed over
	// edges (nil otherwise), read at scrape time for their occupancy.
	inbox *inbox
	// source is the head of a source task (nil otherwise); conn is the
	// task's connector (source or sink) as created, before any WAL wraps
	// it, for its own metrics (connectors.Metered).
	source *sourceHead
	conn   any
}

// Gauges of a source task whose connector implements
// connectors.ProgressReporter, suffixed with its unit ("rows", "bytes"):
// how far it is through its input, and the input's end (absent when not
// known).
const (
	GaugeSourcePosition = "source_position_"
	GaugeSourceEnd      = "source_end_"
)

// sourceProgress reports a source task's gauges: its WAL's, if any, and
// its connector's progress.
type sourceProgress struct {
	wal ops.Gauger // nil without a WAL
	pr  connectors.ProgressReporter
}

func (s sourceProgress) Counters() map[string]int64 {
	if s.wal == nil {
		return nil
	}
	return s.wal.Counters()
}

func (s sourceProgress) Gauges() map[string]int64 {
	out := map[string]int64{}
	if s.wal != nil {
		for k, v := range s.wal.Gauges() {
			out[k] = v
		}
	}
	p := s.pr.Progress()
	unit := p.Unit
	if unit == "" {
		unit = "rows"
	}
	out[GaugeSourcePosition+unit] = p.Position
	if p.End > 0 {
		out[GaugeSourceEnd+unit] = p.End
	}
	return out
}

// TaskMetrics is a snapshot of one task's counters.
type TaskMetrics struct {
	Task       string
	Operator   string
	RowsIn     int64
	RowsOut    int64
	BatchesIn  int64
	BatchesOut int64
	// Watermark is the task's last input watermark in ms (math.MinInt64
	// before the first; math.MaxInt64 after a bounded input ended).
	Watermark int64
	// Counters are the operator's own totals (windows fired, late rows,
	// WAL entries replayed, …), nil when it has none.
	Counters map[string]int64
	// Gauges are the operator's own point-in-time values (open windows,
	// the WAL's cursor, …), nil when it has none.
	Gauges map[string]int64
}

// TaskDetail is what a task measures beyond TaskMetrics (for the
// Prometheus families). It is kept apart so that TaskMetrics stays the
// shape of the public arkflow.TaskMetrics.
type TaskDetail struct {
	Task     string
	Operator string
	// BytesIn and BytesOut are the Arrow buffer bytes of the batches the
	// task received and emitted: the sizes of the buffers each batch
	// references (a slice counts its share of them), measured once per
	// batch without touching the data.
	BytesIn, BytesOut int64
	// SinkWrites is the latency of a sink task's writes (each Write, or
	// each WriteAsync until its done), nil for other tasks; SinkErrors
	// counts the writes that failed.
	SinkWrites *metrics.Snapshot
	SinkErrors int64
	// InboxItems is the number of messages (batches, watermarks, barriers)
	// waiting in the input channels of a task that heads a chain fed over
	// edges, InboxCapacity how many they hold (0 for other tasks). A full
	// inbox backpressures the task's upstream.
	InboxItems, InboxCapacity int
	// Partitions are an event-time source task's partitions, by number.
	Partitions []PartitionWatermark
	// WAL is a source task's write-ahead log (nil without one).
	WAL *walog.Stats
	// Connector is what the task's source or sink reports about itself
	// (connectors.Metered), nil when nothing.
	Connector []connectors.Metric
}

// Details returns every task's TaskDetail, sorted by task.
func (r *Runtime) Details() []TaskDetail {
	r.mu.Lock()
	tasks := append([]*taskMetrics(nil), r.tasks...)
	r.mu.Unlock()
	out := make([]TaskDetail, 0, len(tasks))
	for _, t := range tasks {
		d := TaskDetail{Task: t.task, Operator: t.op, BytesIn: t.bytesIn.Load(), BytesOut: t.bytesOut.Load()}
		if t.sinkWrites != nil {
			s := t.sinkWrites.Snapshot()
			d.SinkWrites, d.SinkErrors = &s, t.sinkErrors.Load()
		}
		if t.inbox != nil {
			for _, ch := range t.inbox.slots {
				d.InboxItems += len(ch)
				d.InboxCapacity += cap(ch)
			}
		}
		if h := t.source; h != nil {
			d.Partitions = h.time.partitionWatermarks()
			if h.wal != nil {
				s := h.wal.WALStats()
				d.WAL = &s
			}
		}
		if m, ok := t.conn.(connectors.Metered); ok {
			d.Connector = m.Metrics()
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task < out[j].Task })
	return out
}

// recordBytes returns the bytes of the Arrow buffers a batch references:
// per column, the buffers of it and its children and dictionary, and for
// a column that is a slice starting past its buffers' first row, the
// share of them from that row on. It reads only the arrays' headers, so
// it costs the same for any number of rows.
func recordBytes(rec arrow.RecordBatch) int64 {
	if t, ok := rec.(interface{ ArrowBytes() int64 }); ok {
		return t.ArrowBytes() // a typed batch, whose columns may not be encoded
	}
	var n int64
	for _, c := range rec.Columns() {
		d, ok := c.Data().(*array.Data)
		if !ok {
			continue
		}
		size := int64(d.SizeInBytes())
		if off := int64(d.Offset()); off > 0 {
			size = size * int64(d.Len()) / (off + int64(d.Len()))
		}
		n += size
	}
	return n
}

// StateBytes returns the bytes of state each stateful operator keeps,
// by operator ID.
func (r *Runtime) StateBytes() map[string]int64 {
	out := map[string]int64{}
	for op, sz := range r.StateSizes() {
		out[op] = sz.Bytes
	}
	return out
}

// StateSize is the size of one operator's state.
type StateSize struct {
	// Bytes are its keys' and values' bytes; Keys the number of live
	// keys (-1 when the backend does not count them).
	Bytes, Keys int64
}

// StateSizes measures every stateful operator's state, by operator ID:
// while the job runs, a walk over every key (callers rate-limit it);
// before the state opened, nothing; after the job ended, the last sizes.
func (r *Runtime) StateSizes() map[string]StateSize {
	r.mu.Lock()
	st, last := r.store, r.lastStateSizes
	r.mu.Unlock()
	if last != nil {
		return last
	}
	if st == nil {
		return map[string]StateSize{}
	}
	return r.stateSizes(st)
}

func (r *Runtime) stateSizes(st statestore.Backend) map[string]StateSize {
	out := map[string]StateSize{}
	for _, op := range r.g.Spec.Operators {
		if op.Stateful || r.g.Ops[op.ID].State {
			if n, k, err := statestore.Measure(st, stateJob(r.g.Spec), op.ID); err == nil {
				out[op.ID] = StateSize{Bytes: n, Keys: k}
			}
		}
	}
	return out
}

// Positions returns the acknowledged positions of every source subtask that
// reports them (connectors.Positioner), by task ID.
func (r *Runtime) Positions() map[string][]connectors.Position {
	r.mu.Lock()
	sources := r.sources
	r.mu.Unlock()
	out := map[string][]connectors.Position{}
	for _, s := range sources {
		if p, ok := s.src.(connectors.Positioner); ok {
			out[s.task] = p.Positions()
		}
	}
	return out
}

// Metrics returns a snapshot of every task's counters, sorted by task.
func (r *Runtime) Metrics() []TaskMetrics {
	r.mu.Lock()
	tasks := append([]*taskMetrics(nil), r.tasks...)
	r.mu.Unlock()
	out := make([]TaskMetrics, 0, len(tasks))
	for _, t := range tasks {
		tm := TaskMetrics{Task: t.task, Operator: t.op, RowsIn: t.rowsIn.Load(), RowsOut: t.rowsOut.Load(), BatchesIn: t.batchesIn.Load(), BatchesOut: t.batchesOut.Load(), Watermark: t.watermark.Load()}
		if t.gauges != nil {
			tm.Counters, tm.Gauges = t.gauges.Counters(), t.gauges.Gauges()
		}
		out = append(out, tm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task < out[j].Task })
	return out
}

// ConnectorFamilies returns the metric families the job's inputs and
// outputs declare (connectors.MetricFamilies), each name once (the first
// declaration, in the spec's operator order).
func (r *Runtime) ConnectorFamilies() []connectors.MetricFamily {
	var out []connectors.MetricFamily
	seen := map[string]bool{}
	for _, op := range r.g.Spec.Operators {
		var decl any
		if in, ok := r.g.Inputs[op.ID]; ok {
			decl = in
		} else if o, ok := r.g.Outputs[op.ID]; ok {
			decl = o
		}
		mf, ok := decl.(connectors.MetricFamilies)
		if !ok {
			continue
		}
		for _, f := range mf.MetricFamilies() {
			if !seen[f.Name] {
				seen[f.Name] = true
				out = append(out, f)
			}
		}
	}
	return out
}
