package window_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

func bounded(ooo int64, idle int64) *job.Watermark {
	w := &job.Watermark{Strategy: job.BoundedOutOfOrderness, OutOfOrdernessMS: ooo}
	if idle > 0 {
		w.IdleTimeoutMS = &idle
	}
	return w
}

// wmStep is one call on a Tracker and what it must return.
type wmStep struct {
	op       string // "observe", "touch", "tick"
	part     int
	maxEvent int64
	now      int64
	wm       int64
	advanced bool
	idle     []int // idle partitions after the call
}

func runSteps(t *testing.T, tr *window.Tracker, steps []wmStep) {
	t.Helper()
	for i, s := range steps {
		var wm int64
		var adv bool
		switch s.op {
		case "observe":
			wm, adv = tr.Observe(s.part, s.maxEvent, s.now)
		case "touch":
			wm, adv = tr.Touch(s.part, s.now)
		case "tick":
			wm, adv = tr.Tick(s.now)
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
		if wm != s.wm || adv != s.advanced {
			t.Fatalf("step %d (%s p%d max=%d now=%d): watermark %d advanced %v, want %d %v", i, s.op, s.part, s.maxEvent, s.now, wm, adv, s.wm, s.advanced)
		}
		if tr.Watermark() != wm {
			t.Fatalf("step %d: Watermark() = %d, the call returned %d", i, tr.Watermark(), wm)
		}
		if idle := tr.Idle(); !slices.Equal(idle, s.idle) {
			t.Fatalf("step %d: idle partitions %v, want %v", i, idle, s.idle)
		}
	}
}

const none = window.NoWatermark

// R-TIME-1: the watermark is the minimum over active partitions of max
// event time - out_of_orderness.
func TestRTime1WatermarkIsMinimumOverPartitions(t *testing.T) {
	tr := window.NewTracker(bounded(100, 0), []int{0, 1, 2}, 0)
	if tr.Watermark() != none || tr.IdleTimeout() != 0 {
		t.Fatalf("new tracker: watermark %d idle timeout %d", tr.Watermark(), tr.IdleTimeout())
	}
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 1000, now: 1, wm: none},
		{op: "observe", part: 1, maxEvent: 500, now: 2, wm: none},
		// Partition 2 completes the set: min(900, 400, 1900) = 400.
		{op: "observe", part: 2, maxEvent: 2000, now: 3, wm: 400, advanced: true},
		{op: "observe", part: 1, maxEvent: 3000, now: 4, wm: 900, advanced: true},
		// A partition's candidate is its max: an older event does not lower it.
		{op: "observe", part: 0, maxEvent: 10, now: 5, wm: 900},
		{op: "observe", part: 0, maxEvent: 1500, now: 6, wm: 1400, advanced: true},
		{op: "observe", part: 0, maxEvent: 5000, now: 7, wm: 1900, advanced: true},
	})
}

// R-TIME-10: the monotonous strategy uses the max event time itself, with
// no out_of_orderness subtracted (even if one is set).
func TestRTime10MonotonousUsesMaxEventTime(t *testing.T) {
	tr := window.NewTracker(&job.Watermark{Strategy: job.Monotonous, OutOfOrdernessMS: 500}, []int{0}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 1000, now: 0, wm: 1000, advanced: true},
		{op: "observe", part: 0, maxEvent: 999, now: 0, wm: 1000},
		{op: "observe", part: 0, maxEvent: 1001, now: 0, wm: 1001, advanced: true},
	})
	// Bounded: max - out_of_orderness.
	tr = window.NewTracker(bounded(500, 0), []int{0}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 1000, now: 0, wm: 500, advanced: true},
	})
	// No declaration at all (nil): out_of_orderness 0, never idle.
	tr = window.NewTracker(nil, []int{0}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 7, now: 0, wm: 7, advanced: true},
		{op: "tick", now: math.MaxInt64 / 2, wm: 7},
	})
}

// R-TIME-1, R-TIME-10: a partition that has produced no data holds the
// watermark back until it turns idle (idle_timeout_ms after the tracker was
// created); once idle it stops holding it back.
func TestRTime1SilentPartitionHoldsWatermarkUntilIdle(t *testing.T) {
	tr := window.NewTracker(bounded(0, 1000), []int{0, 1}, 10_000)
	if tr.IdleTimeout() != 1000 {
		t.Fatalf("IdleTimeout() = %d", tr.IdleTimeout())
	}
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 5000, now: 10_100, wm: none},
		// 999 ms after creation: partition 1 is not idle yet.
		{op: "tick", now: 10_999, wm: none},
		// Partition 0 delivered at 10_100, so it is not idle at 11_000;
		// partition 1 (created at 10_000, no data) is.
		{op: "tick", now: 11_000, wm: 5000, advanced: true, idle: []int{1}},
	})
}

// R-TIME-1: a partition silent for idle_timeout_ms stops holding the
// watermark back (Tick), and rejoins when data arrives (Observe); the
// watermark never moves backwards, also when a rejoining partition is
// behind.
func TestRTime1IdlePartitionStopsHoldingAndRejoins(t *testing.T) {
	tr := window.NewTracker(bounded(0, 500), []int{0, 1}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 1000, now: 0, wm: none},
		{op: "observe", part: 1, maxEvent: 200, now: 0, wm: 200, advanced: true},
		{op: "observe", part: 0, maxEvent: 3000, now: 400, wm: 200},
		// Partition 1 last delivered at 0: idle at 500. Partition 0 is not
		// (it delivered at 400).
		{op: "tick", now: 499, wm: 200},
		{op: "tick", now: 500, wm: 3000, advanced: true, idle: []int{1}},
		// Partition 1 rejoins with old data: it is active again, but the
		// watermark does not move back.
		{op: "observe", part: 1, maxEvent: 250, now: 600, wm: 3000},
		// Now partition 1 holds it: partition 0 moving on does not move it.
		{op: "observe", part: 0, maxEvent: 4000, now: 700, wm: 3000},
		{op: "observe", part: 1, maxEvent: 3500, now: 800, wm: 3500, advanced: true},
		// Partition 0 idle at 700+500; then only partition 1 counts.
		{op: "observe", part: 1, maxEvent: 6000, now: 1100, wm: 4000, advanced: true},
		{op: "tick", now: 1200, wm: 6000, advanced: true, idle: []int{0}},
		// Partition 0 rejoins ahead: the watermark stays at 6000
		// (min(6000, 7000)).
		{op: "observe", part: 0, maxEvent: 7000, now: 1300, wm: 6000},
	})
}

// R-TIME-1: Touch (a batch with only null event times) keeps a partition
// active without moving its candidate.
func TestRTime1TouchKeepsPartitionActive(t *testing.T) {
	tr := window.NewTracker(bounded(0, 100), []int{0, 1}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 50, now: 0, wm: none},
		{op: "touch", part: 1, now: 90, wm: none},
		// At 100, partition 0 (last data at 0) is idle, partition 1
		// (touched at 90) is not, and it has no candidate: still held.
		{op: "tick", now: 100, wm: none, idle: []int{0}},
		// Partition 1 idle too at 190: every partition idle, no jump.
		{op: "tick", now: 190, wm: none, idle: []int{0, 1}},
		// Touch makes partition 1 active again.
		{op: "touch", part: 1, now: 200, wm: none, idle: []int{0}},
		{op: "observe", part: 1, maxEvent: 30, now: 210, wm: 30, advanced: true, idle: []int{0}},
	})
}

// R-TIME-1 (documented behaviour): when ALL partitions are idle the
// watermark does not jump to the newest candidate nor follow the clock; it
// stays where it is until data arrives.
func TestRTime1AllPartitionsIdleWatermarkDoesNotJump(t *testing.T) {
	tr := window.NewTracker(bounded(0, 100), []int{0, 1}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 1000, now: 0, wm: none},
		{op: "observe", part: 1, maxEvent: 400, now: 0, wm: 400, advanced: true},
		{op: "observe", part: 0, maxEvent: 2000, now: 50, wm: 400},
		// Partition 1 idle at 100: the watermark moves to partition 0's 2000.
		{op: "tick", now: 100, wm: 2000, advanced: true, idle: []int{1}},
		// Both idle: nothing moves, however much time passes.
		{op: "tick", now: 150, wm: 2000, idle: []int{0, 1}},
		{op: "tick", now: 1_000_000, wm: 2000, idle: []int{0, 1}},
		// Data brings it back: partition 1 with 5000 is the only active one.
		{op: "observe", part: 1, maxEvent: 5000, now: 1_000_001, wm: 5000, advanced: true, idle: []int{0}},
	})
	// A tracker whose partitions all turn idle before any data keeps
	// NoWatermark.
	tr = window.NewTracker(bounded(0, 10), []int{0, 1}, 0)
	runSteps(t, tr, []wmStep{
		{op: "tick", now: 10, wm: none, idle: []int{0, 1}},
	})
}

// R-TIME-1: a partition the tracker was not created with joins with its
// first data (a source that discovers partitions).
func TestRTime1UnknownPartitionJoins(t *testing.T) {
	tr := window.NewTracker(bounded(0, 0), []int{0}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 100, now: 0, wm: 100, advanced: true},
		{op: "observe", part: 7, maxEvent: 50, now: 0, wm: 100},
		{op: "observe", part: 0, maxEvent: 300, now: 0, wm: 100},
		{op: "observe", part: 7, maxEvent: 200, now: 0, wm: 200, advanced: true},
	})
	// Touch of an unknown partition: it joins without a candidate and
	// holds the watermark (NoWatermark) until it has data.
	tr = window.NewTracker(bounded(0, 0), []int{0}, 0)
	runSteps(t, tr, []wmStep{
		{op: "touch", part: 3, now: 0, wm: none},
		{op: "observe", part: 0, maxEvent: 100, now: 0, wm: none},
		{op: "observe", part: 3, maxEvent: 100, now: 0, wm: 100, advanced: true},
	})
}

// R-TIME-1: out_of_orderness near the ends of int64 saturates instead of
// wrapping around.
func TestRTime1CandidateSaturates(t *testing.T) {
	tr := window.NewTracker(bounded(1000, 0), []int{0}, 0)
	wm, adv := tr.Observe(0, math.MinInt64+10, 0)
	if wm != none || adv {
		t.Fatalf("min event - ooo: watermark %d advanced %v, want NoWatermark", wm, adv)
	}
	wm, _ = tr.Observe(0, math.MaxInt64, 0)
	if wm != math.MaxInt64-1000 {
		t.Fatalf("max event: watermark %d", wm)
	}
}

// R-TIME-1, R-TIME-10: the watermark never moves backwards and always
// equals the minimum candidate over active partitions when that minimum is
// ahead, under any random sequence of calls (checked against a model).
func TestRTime1WatermarkPropertyAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for run := 0; run < 300; run++ {
		parts := 1 + r.IntN(4)
		ooo := r.Int64N(50)
		idle := r.Int64N(40)
		mono := r.IntN(4) == 0
		w := bounded(ooo, idle)
		if mono {
			w.Strategy = job.Monotonous
		}
		ids := make([]int, parts)
		for i := range ids {
			ids[i] = i
		}
		tr := window.NewTracker(w, ids, 0)
		type mp struct {
			cand     int64
			last     int64
			idleFlag bool
		}
		model := make([]mp, parts)
		for i := range model {
			model[i] = mp{cand: none}
		}
		wm := int64(none)
		now := int64(0)
		for step := 0; step < 200; step++ {
			now += r.Int64N(20)
			p := r.IntN(parts)
			var got int64
			switch r.IntN(3) {
			case 0:
				ev := r.Int64N(1000) - 200
				got, _ = tr.Observe(p, ev, now)
				c := ev
				if !mono {
					c -= ooo
				}
				model[p].cand = max(model[p].cand, c)
				model[p].last, model[p].idleFlag = now, false
			case 1:
				got, _ = tr.Touch(p, now)
				model[p].last, model[p].idleFlag = now, false
			default:
				got, _ = tr.Tick(now)
				if idle > 0 {
					for i := range model {
						if now-model[i].last >= idle {
							model[i].idleFlag = true
						}
					}
				}
			}
			low, active := int64(math.MaxInt64), false
			for _, m := range model {
				if !m.idleFlag {
					low, active = min(low, m.cand), true
				}
			}
			want := wm
			if active && low > wm {
				want = low
			}
			if got != want {
				t.Fatalf("run %d step %d: watermark %d, model %d", run, step, got, want)
			}
			if got < wm {
				t.Fatalf("run %d step %d: watermark moved back from %d to %d", run, step, wm, got)
			}
			wm = got
		}
	}
}
