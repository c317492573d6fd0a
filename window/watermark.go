package window

import (
	"math"
	"sort"

	"github.com/arkflow-rs/arkflow-go/job"
)

// Watermark values.
const (
	// NoWatermark is the watermark before any is known.
	NoWatermark = math.MinInt64
	// EndOfTime is the watermark of an ended input: every window fires.
	EndOfTime = math.MaxInt64
)

// Tracker computes a source subtask's watermark from the event times of
// its partitions (R-TIME-1, R-TIME-10). It is deterministic and does no
// I/O: callers pass the time in ms ("now", from an injectable clock) with
// every call.
//
// Each partition's candidate is its max event time − out_of_orderness
// (monotonous: its max event time). The watermark is the minimum candidate
// over active partitions, and never moves backwards. A partition that has
// produced no data yet holds the watermark back until it turns idle. A
// partition turns idle when it delivered nothing for idle_timeout_ms, and
// active again with its next data.
//
// When every partition is idle the watermark stays where it is. It does not
// jump to the newest candidate, nor follow the clock: a lull in the input
// would otherwise fire windows whose data is merely delayed, and turn it
// into late data when it arrives (Flink's withIdleness behaves the same).
// The cost is that open windows wait for new data, or for the end of a
// bounded input, to fire.
type Tracker struct {
	ooo       int64
	monotone  bool
	idleMS    int64 // 0: partitions never turn idle
	parts     map[int]*partition
	watermark int64
}

type partition struct {
	candidate int64 // NoWatermark until the first event
	lastData  int64 // ms of the last data (or of creation)
	idle      bool
}

// NewTracker returns a tracker for the given partitions (more join when
// they deliver data), created at time now.
func NewTracker(w *job.Watermark, partitions []int, now int64) *Tracker {
	t := &Tracker{parts: map[int]*partition{}, watermark: NoWatermark}
	if w != nil {
		t.ooo = w.OutOfOrdernessMS
		t.monotone = w.Strategy == job.Monotonous
		if w.IdleTimeoutMS != nil {
			t.idleMS = *w.IdleTimeoutMS
		}
	}
	for _, p := range partitions {
		t.parts[p] = &partition{candidate: NoWatermark, lastData: now}
	}
	return t
}

// Watermark returns the current watermark.
func (t *Tracker) Watermark() int64 { return t.watermark }

// IdleTimeout returns the idle timeout in ms (0: none).
func (t *Tracker) IdleTimeout() int64 { return t.idleMS }

// Observe records that partition p delivered events whose largest event
// time is maxEvent, at time now, and returns the watermark and whether it
// advanced.
func (t *Tracker) Observe(p int, maxEvent, now int64) (int64, bool) {
	pt := t.parts[p]
	if pt == nil {
		pt = &partition{candidate: NoWatermark}
		t.parts[p] = pt
	}
	c := maxEvent
	if !t.monotone {
		c = satSub(maxEvent, t.ooo)
	}
	if c > pt.candidate {
		pt.candidate = c
	}
	pt.lastData = now
	pt.idle = false
	return t.recompute()
}

// Touch records that partition p delivered data without event times (all
// null) at time now: it is active, but its candidate does not move.
func (t *Tracker) Touch(p int, now int64) (int64, bool) {
	pt := t.parts[p]
	if pt == nil {
		pt = &partition{candidate: NoWatermark}
		t.parts[p] = pt
	}
	pt.lastData = now
	pt.idle = false
	return t.recompute()
}

// Tick marks partitions silent for idle_timeout_ms as idle, at time now,
// and returns the watermark and whether it advanced.
func (t *Tracker) Tick(now int64) (int64, bool) {
	if t.idleMS > 0 {
		for _, pt := range t.parts {
			if !pt.idle && now-pt.lastData >= t.idleMS {
				pt.idle = true
			}
		}
	}
	return t.recompute()
}

// Idle returns the idle partitions, sorted.
func (t *Tracker) Idle() []int {
	var out []int
	for p, pt := range t.parts {
		if pt.idle {
			out = append(out, p)
		}
	}
	sort.Ints(out)
	return out
}

// Restore raises the watermark to wm, as a checkpoint recorded it: rows
// older than the restored watermark are late, as they were when the
// checkpoint was taken, so a replay after a restore does not reopen
// windows that had already fired.
func (t *Tracker) Restore(wm int64) {
	if wm > t.watermark {
		t.watermark = wm
	}
}

func (t *Tracker) recompute() (int64, bool) {
	low := int64(math.MaxInt64)
	active := false
	for _, pt := range t.parts {
		if pt.idle {
			continue
		}
		active = true
		low = min(low, pt.candidate)
	}
	if !active || low <= t.watermark {
		return t.watermark, false
	}
	t.watermark = low
	return low, true
}

func satSub(a, b int64) int64 {
	if b > 0 && a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}
