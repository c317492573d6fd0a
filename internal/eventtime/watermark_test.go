package eventtime_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/job"
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

func runSteps(t *testing.T, tr *eventtime.Tracker, steps []wmStep) {
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

const none = eventtime.NoWatermark

// The watermark is the minimum over active partitions of max
// event time - out_of_orderness.
func TestWatermarkIsMinimumOverPartitions(t *testing.T) {
	t.Parallel()
	tr := eventtime.NewTracker(bounded(100, 0), []int{0, 1, 2}, 0)
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

// The monotonous strategy uses the max event time itself, with
// no out_of_orderness subtracted (even if one is set).
func TestMonotonousUsesMaxEventTime(t *testing.T) {
	t.Parallel()
	tr := eventtime.NewTracker(&job.Watermark{Strategy: job.Monotonous, OutOfOrdernessMS: 500}, []int{0}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 1000, now: 0, wm: 1000, advanced: true},
		{op: "observe", part: 0, maxEvent: 999, now: 0, wm: 1000},
		{op: "observe", part: 0, maxEvent: 1001, now: 0, wm: 1001, advanced: true},
	})
	// Bounded: max - out_of_orderness.
	tr = eventtime.NewTracker(bounded(500, 0), []int{0}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 1000, now: 0, wm: 500, advanced: true},
	})
	// No declaration at all (nil): out_of_orderness 0, never idle.
	tr = eventtime.NewTracker(nil, []int{0}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 7, now: 0, wm: 7, advanced: true},
		{op: "tick", now: math.MaxInt64 / 2, wm: 7},
	})
}

// A partition that has produced no data holds the
// watermark back until it turns idle (idle_timeout_ms after the tracker was
// created); once idle it stops holding it back.
func TestSilentPartitionHoldsWatermarkUntilIdle(t *testing.T) {
	t.Parallel()
	tr := eventtime.NewTracker(bounded(0, 1000), []int{0, 1}, 10_000)
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

// A partition silent for idle_timeout_ms stops holding the
// watermark back (Tick), and rejoins when data arrives (Observe); the
// watermark never moves backwards, also when a rejoining partition is
// behind.
func TestIdlePartitionStopsHoldingAndRejoins(t *testing.T) {
	t.Parallel()
	tr := eventtime.NewTracker(bounded(0, 500), []int{0, 1}, 0)
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

// Touch (a batch with only null event times) keeps a partition
// active without moving its candidate.
func TestTouchKeepsPartitionActive(t *testing.T) {
	t.Parallel()
	tr := eventtime.NewTracker(bounded(0, 100), []int{0, 1}, 0)
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

// Documented behaviour: when ALL partitions are idle the
// watermark does not jump to the newest candidate nor follow the clock; it
// stays where it is until data arrives.
func TestAllPartitionsIdleWatermarkDoesNotJump(t *testing.T) {
	t.Parallel()
	tr := eventtime.NewTracker(bounded(0, 100), []int{0, 1}, 0)
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
	tr = eventtime.NewTracker(bounded(0, 10), []int{0, 1}, 0)
	runSteps(t, tr, []wmStep{
		{op: "tick", now: 10, wm: none, idle: []int{0, 1}},
	})
}

// A partition the tracker was not created with joins with its
// first data (a source that discovers partitions).
func TestUnknownPartitionJoins(t *testing.T) {
	t.Parallel()
	tr := eventtime.NewTracker(bounded(0, 0), []int{0}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 100, now: 0, wm: 100, advanced: true},
		{op: "observe", part: 7, maxEvent: 50, now: 0, wm: 100},
		{op: "observe", part: 0, maxEvent: 300, now: 0, wm: 100},
		{op: "observe", part: 7, maxEvent: 200, now: 0, wm: 200, advanced: true},
	})
	// Touch of an unknown partition: it joins without a candidate and
	// holds the watermark (NoWatermark) until it has data.
	tr = eventtime.NewTracker(bounded(0, 0), []int{0}, 0)
	runSteps(t, tr, []wmStep{
		{op: "touch", part: 3, now: 0, wm: none},
		{op: "observe", part: 0, maxEvent: 100, now: 0, wm: none},
		{op: "observe", part: 3, maxEvent: 100, now: 0, wm: 100, advanced: true},
	})
}

// Out_of_orderness near the ends of int64 saturates instead of
// wrapping around.
func TestWatermarkCandidateSaturates(t *testing.T) {
	t.Parallel()
	tr := eventtime.NewTracker(bounded(1000, 0), []int{0}, 0)
	wm, adv := tr.Observe(0, math.MinInt64+10, 0)
	if wm != none || adv {
		t.Fatalf("min event - ooo: watermark %d advanced %v, want NoWatermark", wm, adv)
	}
	wm, _ = tr.Observe(0, math.MaxInt64, 0)
	if wm != math.MaxInt64-1000 {
		t.Fatalf("max event: watermark %d", wm)
	}
}

// The watermark never moves backwards and always
// equals the minimum candidate over active partitions when that minimum is
// ahead, under any random sequence of calls (checked against a model).
func TestWatermarkPropertyAgainstModel(t *testing.T) {
	t.Parallel()
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
		tr := eventtime.NewTracker(w, ids, 0)
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

// perRow is a bounded out-of-orderness watermark with advance per_row.
func perRow(ooo int64) *job.Watermark {
	w := bounded(ooo, 0)
	w.Advance = job.AdvancePerRow
	return w
}

// Under advance per_row a batch is cut before each row that is
// behind the watermark its earlier rows give; in-order rows never cause a
// cut, and a cut needs the watermark to have moved since the last one.
func TestPerRowCuts(t *testing.T) {
	t.Parallel()
	const null = math.MinInt64 // marks a null event time below
	for _, c := range []struct {
		name  string
		w     *job.Watermark
		setup func(*eventtime.Tracker)
		ts    []int64
		want  []eventtime.Cut
	}{
		{name: "2100 then 100", w: perRow(0), ts: []int64{2100, 100}, want: []eventtime.Cut{{Row: 1, WM: 2100}}},
		{name: "in order", w: perRow(0), ts: []int64{100, 200, 999, 1000, 2100}},
		{name: "equal times", w: perRow(0), ts: []int64{500, 500, 500}},
		{name: "two steps back", w: perRow(0), ts: []int64{100, 2100, 150, 2200, 160, 170},
			want: []eventtime.Cut{{Row: 2, WM: 2100}, {Row: 4, WM: 2200}}},
		{name: "nulls neither cut nor move", w: perRow(0), ts: []int64{2100, null, 100}, want: []eventtime.Cut{{Row: 2, WM: 2100}}},
		{name: "within out_of_orderness", w: perRow(500), ts: []int64{2100, 1700, 1600}},
		{name: "beyond out_of_orderness", w: perRow(500), ts: []int64{2100, 1000}, want: []eventtime.Cut{{Row: 1, WM: 1600}}},
		{name: "monotonous ignores out_of_orderness", w: &job.Watermark{Strategy: job.Monotonous, OutOfOrdernessMS: 500, Advance: job.AdvancePerRow},
			ts: []int64{2100, 2000}, want: []eventtime.Cut{{Row: 1, WM: 2100}}},
		{name: "behind the watermark before the batch", w: perRow(0),
			setup: func(tr *eventtime.Tracker) { tr.Observe(0, 5000, 0) }, ts: []int64{100, 200}},
		{name: "a partition without data holds it", w: perRow(0),
			setup: func(tr *eventtime.Tracker) { tr.Touch(1, 0) }, ts: []int64{2100, 100}},
		{name: "another partition completes it", w: perRow(0),
			setup: func(tr *eventtime.Tracker) { tr.Observe(1, 1000, 0) }, ts: []int64{2100, 100}, want: []eventtime.Cut{{Row: 1, WM: 1000}}},
		{name: "another partition bounds it", w: perRow(0),
			setup: func(tr *eventtime.Tracker) { tr.Observe(1, 1500, 0); tr.Observe(0, 1000, 0) },
			ts:    []int64{2100, 100}, want: []eventtime.Cut{{Row: 1, WM: 1500}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := eventtime.NewTracker(c.w, []int{0}, 0)
			if !tr.PerRow() {
				t.Fatal("PerRow() is false")
			}
			if c.setup != nil {
				c.setup(tr)
			}
			before := tr.Watermark()
			ts := slices.Clone(c.ts)
			valid := make([]bool, len(ts))
			for i, x := range ts {
				valid[i] = x != null
			}
			got := tr.Cuts(0, ts, valid, nil)
			if !slices.Equal(got, c.want) {
				t.Fatalf("cuts %v, want %v", got, c.want)
			}
			if tr.Watermark() != before {
				t.Fatalf("Cuts moved the watermark from %d to %d", before, tr.Watermark())
			}
		})
	}
	if eventtime.NewTracker(bounded(0, 0), nil, 0).PerRow() {
		t.Fatal("PerRow() without advance per_row")
	}
}

// Advance per_row against a model: each row's segment (the rows from a cut, or
// the batch's start, to the next cut) meets a watermark that classifies it
// exactly as the watermark a tracker had after observing the rows before
// it one at a time: equal when the row is behind it, not ahead of it
// otherwise. Observing the whole batch after gives the one-at-a-time
// tracker's watermark.
func TestPerRowCutsAgainstOneRowAtATime(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(17, 4))
	totalCuts := 0 // the runs must exercise cuts, not only in-order batches
	defer func() {
		if totalCuts == 0 {
			t.Error("no run had a cut")
		}
	}()
	for run := 0; run < 500; run++ {
		parts := 1 + r.IntN(3)
		w := perRow(r.Int64N(100))
		idle := 1 + r.Int64N(30)
		w.IdleTimeoutMS = &idle
		if r.IntN(4) == 0 {
			w.Strategy = job.Monotonous
		}
		ids := []int{}
		for i := 0; i < parts; i++ {
			ids = append(ids, i)
		}
		a, b := eventtime.NewTracker(w, ids, 0), eventtime.NewTracker(w, ids, 0)
		now := int64(0)
		for step := 0; step < 30; step++ {
			now += r.Int64N(10)
			p := r.IntN(parts)
			if r.IntN(4) == 0 {
				a.Tick(now)
				b.Tick(now)
				continue
			}
			n := 1 + r.IntN(8)
			ts, valid := make([]int64, n), make([]bool, n)
			maxTS, anyValid := int64(none), false
			for i := range ts {
				ts[i], valid[i] = r.Int64N(1000), r.IntN(8) != 0
				if valid[i] {
					maxTS, anyValid = max(maxTS, ts[i]), true
				}
			}
			cuts := a.Cuts(p, ts, valid, nil)
			totalCuts += len(cuts)
			seg, k := a.Watermark(), 0
			for i := range ts {
				if k < len(cuts) && cuts[k].Row == i {
					seg = cuts[k].WM
					k++
				}
				exact := b.Watermark()
				if valid[i] && ts[i] < exact && seg != exact {
					t.Fatalf("run %d step %d row %d (ts %d): segment watermark %d, one at a time %d (cuts %v, batch %v)", run, step, i, ts[i], seg, exact, cuts, ts)
				}
				if seg > exact {
					t.Fatalf("run %d step %d row %d: segment watermark %d ahead of %d", run, step, i, seg, exact)
				}
				if valid[i] {
					b.Observe(p, ts[i], now)
				} else {
					b.Touch(p, now)
				}
			}
			if anyValid {
				a.Observe(p, maxTS, now)
			} else {
				a.Touch(p, now)
			}
			if a.Watermark() != b.Watermark() {
				t.Fatalf("run %d step %d: after the batch %d, one at a time %d", run, step, a.Watermark(), b.Watermark())
			}
		}
	}
}

// With all_idle advance, a tick while every partition is idle
// moves the watermark to now - all_idle_delay_ms - out_of_orderness_ms
// (never back); with hold (the default) it stays. A partition that
// delivers again is active: the clock no longer moves the watermark, and
// its older events do not move it back.
func TestAllIdleAdvanceFollowsTheClock(t *testing.T) {
	t.Parallel()
	advance := func(w *job.Watermark, delay int64) *job.Watermark {
		w.AllIdle, w.AllIdleDelayMS = job.AllIdleAdvance, delay
		return w
	}
	tr := eventtime.NewTracker(advance(bounded(200, 1000), 5000), []int{0, 1}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 10_000, now: 0, wm: none},
		{op: "observe", part: 1, maxEvent: 12_000, now: 0, wm: 9800, advanced: true},
		{op: "tick", now: 999, wm: 9800},
		// Both idle, but the clock is behind the watermark: it holds.
		{op: "tick", now: 1000, wm: 9800, idle: []int{0, 1}},
		{op: "tick", now: 15_000, wm: 9800, idle: []int{0, 1}},
		// 20,000 - 5,000 - 200.
		{op: "tick", now: 20_000, wm: 14_800, advanced: true, idle: []int{0, 1}},
		{op: "tick", now: 20_001, wm: 14_801, advanced: true, idle: []int{0, 1}},
		// Partition 0 delivers an old event: active again, no step back.
		{op: "observe", part: 0, maxEvent: 13_000, now: 20_002, wm: 14_801, idle: []int{1}},
		// One partition is active: the clock does not move it.
		{op: "tick", now: 20_500, wm: 14_801, idle: []int{1}},
		{op: "observe", part: 0, maxEvent: 16_000, now: 20_600, wm: 15_800, advanced: true, idle: []int{1}},
	})
	// Monotonous: no out_of_orderness.
	tr = eventtime.NewTracker(advance(&job.Watermark{Strategy: job.Monotonous, OutOfOrdernessMS: 200, IdleTimeoutMS: ptr(int64(10))}, 5000), []int{0}, 0)
	runSteps(t, tr, []wmStep{
		{op: "tick", now: 10, wm: 10 - 5000, advanced: true, idle: []int{0}},
	})
	// hold: the same sequence leaves it where the data put it.
	tr = eventtime.NewTracker(bounded(200, 1000), []int{0, 1}, 0)
	runSteps(t, tr, []wmStep{
		{op: "observe", part: 0, maxEvent: 10_000, now: 0, wm: none},
		{op: "observe", part: 1, maxEvent: 12_000, now: 0, wm: 9800, advanced: true},
		{op: "tick", now: 20_000, wm: 9800, idle: []int{0, 1}},
	})
}

func ptr[T any](v T) *T { return &v }
