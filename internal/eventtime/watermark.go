package eventtime

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
// its partitions. It is deterministic and does no
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
// When every partition is idle the watermark stays where it is (all_idle
// "hold", the default). It does not jump to the newest candidate, nor
// follow the clock: a lull in the input would otherwise fire windows whose
// data is merely delayed, and turn it into late data when it arrives
// (Flink's withIdleness behaves the same). The cost is that open windows
// wait for new data, or for the end of a bounded input, to fire.
//
// With all_idle "advance" (an arkflow-go extension) the watermark
// follows the clock while no partition is active: at every Tick it becomes
// max(watermark, now − all_idle_delay_ms − out_of_orderness_ms)
// (monotonous: now − all_idle_delay_ms). This assumes event times are
// wall-clock Unix milliseconds and all_idle_delay_ms bounds how long an
// event takes from its timestamp to the source: the clock then stands in
// for the newest event time a busy source would have seen, a lower bound of
// the next event's, and out_of_orderness applies to it as to a real one.
// An event that took longer than the delay to arrive after a quiet spell
// may be late; event times far from the clock (a replay of old data) are
// all late once the watermark followed it.
type Tracker struct {
	ooo       int64
	monotone  bool
	idleMS    int64 // 0: partitions never turn idle
	perRow    bool  // advance per_row (see Cuts)
	idleDelay int64 // > 0: all_idle advance, with this delay
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
		t.perRow = w.Advance == job.AdvancePerRow
		if w.AllIdle == job.AllIdleAdvance {
			t.idleDelay = w.AllIdleDelayMS
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
// and returns the watermark and whether it advanced. With all_idle
// "advance", a tick while no partition is active moves the watermark to
// now − all_idle_delay_ms − out_of_orderness_ms when that is ahead of it.
func (t *Tracker) Tick(now int64) (int64, bool) {
	active := false
	for _, pt := range t.parts {
		if !pt.idle && t.idleMS > 0 && now-pt.lastData >= t.idleMS {
			pt.idle = true
		}
		active = active || !pt.idle
	}
	if t.idleDelay > 0 && !active {
		follow := satSub(now, t.idleDelay)
		if !t.monotone {
			follow = satSub(follow, t.ooo)
		}
		if follow > t.watermark {
			t.watermark = follow
			return follow, true
		}
		return t.watermark, false
	}
	return t.recompute()
}

// PerRow reports whether the watermark advances per row (advance
// "per_row"): the caller splits each batch at the rows Cuts returns.
func (t *Tracker) PerRow() bool { return t.perRow }

// Cut is a row of a batch before which the watermark moves to WM, under
// advance "per_row".
type Cut struct {
	Row int
	WM  int64
}

// Cuts returns where a batch of partition p, with event times ts (valid
// marks the non-null ones), must be split for each row to meet the
// watermark in force before it (advance "per_row"): the
// watermark the tracker would have after observing the rows before it in
// the batch, one at a time. The first row meets the watermark of now.
//
// Only a row behind that watermark gets a cut (and only when the
// watermark moved since the last cut): a row at or after the watermark
// is on time for every window it belongs to under any watermark up to
// that one, and a window that would have fired between two rows holds
// none of the later rows, so the rows of a segment may all meet the
// watermark of its first. In-order input gets no cut at all; the batch
// then goes on whole, behind the watermark of before it. Cuts do not
// change the tracker: Observe (or Touch) the whole batch after, which
// gives the same watermark as in advance "batch".
func (t *Tracker) Cuts(p int, ts []int64, valid []bool, dst []Cut) []Cut {
	// The other partitions do not move during the batch: the watermark
	// before row r > 0 (after row 0 made p active) is
	// max(watermark, min(others, p's candidate from the rows before r)).
	others := int64(math.MaxInt64)
	for q, pt := range t.parts {
		if q != p && !pt.idle {
			others = min(others, pt.candidate)
		}
	}
	if others <= t.watermark {
		return dst // the others hold it: no row of p can move it
	}
	c := int64(NoWatermark)
	if pt := t.parts[p]; pt != nil {
		c = pt.candidate
	}
	emitted := t.watermark
	for r, x := range ts {
		if r > 0 && valid[r] {
			if wm := max(t.watermark, min(others, c)); x < wm && wm > emitted {
				dst = append(dst, Cut{Row: r, WM: wm})
				emitted = wm
			}
		}
		if valid[r] {
			cand := x
			if !t.monotone {
				cand = satSub(x, t.ooo)
			}
			c = max(c, cand)
		}
	}
	return dst
}

// Starved returns the partitions that hold the watermark back without
// ever having had a row, sorted: not idle, no event yet, for at least
// after ms by now, while another partition has events. Without an idle
// timeout such a partition keeps every window from firing; the source
// warns about it.
func (t *Tracker) Starved(now, after int64) []int {
	fed := false
	for _, pt := range t.parts {
		fed = fed || pt.candidate != NoWatermark
	}
	if !fed {
		return nil
	}
	var out []int
	for p, pt := range t.parts {
		if !pt.idle && pt.candidate == NoWatermark && now-pt.lastData >= after {
			out = append(out, p)
		}
	}
	sort.Ints(out)
	return out
}

// Partition returns partition p's watermark candidate (the watermark it
// alone allows: its largest event time minus the out-of-orderness;
// NoWatermark before its first event) and whether it is idle; ok is false
// for a partition the tracker does not know.
func (t *Tracker) Partition(p int) (candidate int64, idle, ok bool) {
	pt := t.parts[p]
	if pt == nil {
		return NoWatermark, false, false
	}
	return pt.candidate, pt.idle, true
}

// EachPartition calls fn for every partition the tracker knows, in no
// particular order, with what Partition returns.
func (t *Tracker) EachPartition(fn func(p int, candidate int64, idle bool)) {
	for p, pt := range t.parts {
		fn(p, pt.candidate, pt.idle)
	}
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
