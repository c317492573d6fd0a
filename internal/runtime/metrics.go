package runtime

// This file holds the runtime's counters: per-task traffic (taskMetrics,
// and TaskMetrics snapshots returned by Metrics), the state size of each
// stateful operator (StateBytes) and the sources' acknowledged positions
// (Positions).

import (
	"sort"
	"sync/atomic"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
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

// StateBytes returns the bytes of state each stateful operator keeps
// (R-STATE-2), by operator ID.
func (r *Runtime) StateBytes() map[string]int64 {
	r.mu.Lock()
	st, last := r.store, r.lastStateBytes
	r.mu.Unlock()
	if last != nil {
		return last
	}
	if st == nil {
		return map[string]int64{}
	}
	return r.stateBytes(st)
}

func (r *Runtime) stateBytes(st statestore.Backend) map[string]int64 {
	out := map[string]int64{}
	for _, op := range r.g.Spec.Operators {
		if op.Stateful || r.g.Ops[op.ID].State {
			if n, err := st.Size(stateJob(r.g.Spec), op.ID); err == nil {
				out[op.ID] = n
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
