package windowop

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/job"
)

// warnInterval is how often, at most, a window operator logs that it
// dropped rows, in ms of the runtime's clock. Rows dropped in
// between are counted and reported with the next warning, or when the
// operator closes.
const warnInterval = 10_000

// dropWarner makes late data visible in the log: the first rows a window
// operator drops (late, or without an event time) log a warning at once,
// and later ones at most every warnInterval, with the count dropped since
// the previous warning. One warner serves all subtasks of an operator, so
// the rate holds per (sources, window operator), whatever the
// parallelism. The counts are also the operator's late_dropped and
// null_timestamp_dropped counters (totals, in Job.Metrics). Rows skipped
// as replays after a restart are not drops: the warner only says once,
// at INFO, that there are some (replayed).
type dropWarner struct {
	op      string
	sources string // the upstream source operators, comma-separated
	lateFix string // what to change, for late rows
	nullFix string // for rows without an event time

	mu         sync.Mutex
	warned     bool
	last       int64 // ms of the last warning
	late, null int64 // dropped since the last warning
	replaying  bool  // the replay line was logged
}

// routeInGo is how a Go job routes late rows, for the warnings' fixes.
const routeInGo = " (arkflow.EventTime{RouteLate: id} and .LateSink(id, ...) in Go)"

func newDropWarner(s *job.Spec, op string) *dropWarner {
	d := &dropWarner{op: op}
	var names, ooo, perRow, route []string
	field := ""
	for _, src := range planner.UpstreamSources(s, op, nil) {
		_, i := s.Source(src.OperatorID)
		at := fmt.Sprintf("sources[%d].time", i)
		names = append(names, src.OperatorID)
		route = append(route, at+".late_event_policy")
		t := src.Time
		if t == nil || t.Mode != job.EventTime || t.Watermark == nil {
			continue
		}
		field = t.TimestampField
		ooo = append(ooo, fmt.Sprintf("%s.watermark.out_of_orderness_ms (%d)", at, t.Watermark.OutOfOrdernessMS))
		if t.Watermark.Advance != job.AdvancePerRow {
			perRow = append(perRow, at+".watermark.advance")
		}
	}
	d.sources = strings.Join(names, ",")
	var fix []string
	if len(ooo) > 0 {
		fix = append(fix, "raise "+strings.Join(ooo, ", ")+" above the event-time span of a batch and the disorder of the input (arkflow.EventTime{OutOfOrderness: d} in Go)")
	}
	if len(perRow) > 0 {
		fix = append(fix, "set "+strings.Join(perRow, ", ")+" to per_row so that in-order rows are never late whatever the batching (arkflow.EventTime{PerRow: true} in Go)")
	}
	fix = append(fix, "route late rows to a sink: "+strings.Join(route, ", ")+" route"+routeInGo)
	d.lateFix = strings.Join(fix, "; or ")
	d.nullFix = fmt.Sprintf("give every row its event time %q, or route rows without one to a sink: %s route%s", field, strings.Join(route, ", "), routeInGo)
	return d
}

// dropped records rows dropped by one batch, at time now (ms of the
// runtime's clock), and warns on log when the last warning is
// warnInterval old.
func (d *dropWarner) dropped(log *slog.Logger, now int64, late, null int64) {
	if d == nil || (late == 0 && null == 0) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.late += late
	d.null += null
	if d.warned && now-d.last < warnInterval {
		return
	}
	d.warned, d.last = true, now
	d.warnLocked(log)
}

// replayed logs, the first time a subtask of the operator skips rows as
// replays after a restart (base.replayOf), that it does: once per
// operator and run, at INFO, for they are expected and need no fix. Their
// count is the replayed_skipped metric.
func (d *dropWarner) replayed(log *slog.Logger) {
	if d == nil {
		return
	}
	d.mu.Lock()
	first := !d.replaying
	d.replaying = true
	d.mu.Unlock()
	if first && log != nil {
		log.Info("window skips rows replayed after the restore that its restored state already holds (their windows fired before the restart; counted in its replayed_skipped metric, not as late)",
			"source", d.sources)
	}
}

// flush warns about rows dropped since the last warning, if any: the
// operator is closing, and they would not be reported otherwise.
func (d *dropWarner) flush(log *slog.Logger) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.warnLocked(log)
}

func (d *dropWarner) warnLocked(log *slog.Logger) {
	late, null := d.late, d.null
	d.late, d.null = 0, 0
	if log == nil || (late == 0 && null == 0) {
		return
	}
	attrs := []any{"source", d.sources} // the operator comes with log
	if late > 0 {
		log.Warn("window dropped late rows (event time behind the watermark; counted in its late_dropped metric)",
			append(attrs, "dropped", late, "fix", d.lateFix)...)
	}
	if null > 0 {
		log.Warn("window dropped rows without an event time (counted in its null_timestamp_dropped metric)",
			append(attrs, "dropped", null, "fix", d.nullFix)...)
	}
}
