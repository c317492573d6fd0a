package arkflowtest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/arkflowtest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// A join driven through two Inputs, one per side, against the rows a plain
// nested loop over the same input says it must emit. The inputs are
// random (a fixed seed), out of order within the sources' bound, pushed
// in small batches to random partitions with the two sides interleaved,
// and the watermark is advanced now and then as far as the rows still to
// come allow, so windows fire and stream rows wait while the input goes
// on.

// leftRow and rightRow are the rows of the two sides; every row carries
// a value of its own (its index), so an output row says which rows made
// it. Deleted is the delete marker of a temporal join's table (a plain
// column to the other joins).
type leftRow struct {
	K  string `arkflow:"k"`
	LV int64  `arkflow:"lv"`
	TS int64  `arkflow:"ts"`
}

type rightRow struct {
	K       string `arkflow:"k"`
	RV      int64  `arkflow:"rv"`
	Deleted bool   `arkflow:"deleted"`
	TS      int64  `arkflow:"ts"`
}

// windowJoined is a window join's output row: the key, the window, the
// left row's columns and the right row's (null for an unmatched left row
// of an outer join). Both sides have ts, so each is prefixed.
type windowJoined struct {
	K     string    `arkflow:"k"`
	Start time.Time `arkflow:"window_start"`
	End   time.Time `arkflow:"window_end"`
	LV    int64     `arkflow:"lv"`
	LTS   int64     `arkflow:"left_ts"`
	RV    *int64    `arkflow:"rv"`
	RTS   *int64    `arkflow:"right_ts"`
}

func (r windowJoined) String() string {
	return fmt.Sprintf("%s [%d,%d) %s", r.K, r.Start.UnixMilli(), r.End.UnixMilli(), pairString(r.LV, r.LTS, r.RV, r.RTS))
}

// joined is an interval or temporal join's output row: no window.
type joined struct {
	K   string `arkflow:"k"`
	LV  int64  `arkflow:"lv"`
	LTS int64  `arkflow:"left_ts"`
	RV  *int64 `arkflow:"rv"`
	RTS *int64 `arkflow:"right_ts"`
}

func (r joined) String() string { return r.K + " " + pairString(r.LV, r.LTS, r.RV, r.RTS) }

func pairString(lv, lts int64, rv, rts *int64) string {
	if rv == nil || rts == nil {
		return fmt.Sprintf("l%d@%d r-", lv, lts)
	}
	return fmt.Sprintf("l%d@%d r%d@%d", lv, lts, *rv, *rts)
}

// expected is a row the join must emit, by its String, and the watermark
// from which on it must have been emitted.
type expected struct {
	row string
	due int64
}

// joinOOO is the sources' out-of-orderness; the rows of each side are
// out of order by up to it.
const joinOOO = 500

// joinInput returns n rows of each side over keys k0..k3, in push order:
// times rise by up to 300 ms a row and each is less than joinOOO behind,
// so no row is behind its source's watermark. Times are multiples of
// 50 ms, so that rows meet the bounds of windows and intervals, and
// each other, exactly. Right rows are deletes with probability deletes;
// no two right rows of a key share a time (a table has one version of a
// key at a time).
func joinInput(rng *rand.Rand, n int, deletes float64) ([]leftRow, []rightRow) {
	key := func() string { return fmt.Sprintf("k%d", rng.IntN(4)) }
	ts := func(base *int64) int64 {
		*base += rng.Int64N(300)
		t := *base - rng.Int64N(joinOOO-50)
		return t - t%50
	}
	var ls []leftRow
	var rs []rightRow
	lb, rb := int64(10_000), int64(10_000)
	for i := range n {
		ls = append(ls, leftRow{K: key(), LV: int64(i), TS: ts(&lb)})
	}
	seen := map[[2]any]bool{}
	for i := range n {
		r := rightRow{K: key(), RV: int64(i), Deleted: rng.Float64() < deletes, TS: ts(&rb)}
		if seen[[2]any{r.K, r.TS}] {
			continue
		}
		seen[[2]any{r.K, r.TS}] = true
		rs = append(rs, r)
	}
	return ls, rs
}

// windowReference is what a window join of size and slide must emit: per
// window, every left row with every right row of its key in the window,
// and under outer a left row without one with nulls. Due when the
// watermark reaches the window's end.
func windowReference(ls []leftRow, rs []rightRow, size, slide int64, outer bool) []expected {
	var want []expected
	for _, l := range ls {
		for start := l.TS - l.TS%slide; start > l.TS-size; start -= slide {
			end := start + size
			matched := false
			for _, r := range rs {
				if r.K == l.K && r.TS >= start && r.TS < end {
					matched = true
					want = append(want, expected{windowJoined{l.K, time.UnixMilli(start), time.UnixMilli(end), l.LV, l.TS, &r.RV, &r.TS}.String(), end})
				}
			}
			if outer && !matched {
				want = append(want, expected{windowJoined{K: l.K, Start: time.UnixMilli(start), End: time.UnixMilli(end), LV: l.LV, LTS: l.TS}.String(), end})
			}
		}
	}
	return want
}

// intervalReference is what an interval join must emit: every pair of
// one key with l.ts in [r.ts + lower, r.ts + upper], due once both rows
// are in (every row before the watermark has been pushed).
func intervalReference(ls []leftRow, rs []rightRow, lower, upper int64) []expected {
	var want []expected
	for _, l := range ls {
		for _, r := range rs {
			if r.K == l.K && l.TS >= r.TS+lower && l.TS <= r.TS+upper {
				want = append(want, expected{joined{l.K, l.LV, l.TS, &r.RV, &r.TS}.String(), max(l.TS, r.TS) + 1})
			}
		}
	}
	return want
}

// temporalReference is what a temporal join must emit: every left row
// with the right row of its key of the greatest time at or before its
// own, unless there is none or that row deletes the key (then, under
// outer, with nulls). Due once the watermark has passed the left row.
func temporalReference(ls []leftRow, rs []rightRow, outer bool) []expected {
	var want []expected
	for _, l := range ls {
		var version *rightRow
		for i, r := range rs {
			if r.K == l.K && r.TS <= l.TS && (version == nil || r.TS > version.TS) {
				version = &rs[i]
			}
		}
		switch {
		case version != nil && !version.Deleted:
			want = append(want, expected{joined{l.K, l.LV, l.TS, &version.RV, &version.TS}.String(), l.TS + 1})
		case outer:
			want = append(want, expected{joined{K: l.K, LV: l.LV, LTS: l.TS}.String(), l.TS + 1})
		}
	}
	return want
}

func TestJoinsAgainstNestedLoops(t *testing.T) {
	const n = 80
	// The sides, by their Inputs' source IDs, and their keys.
	sides := func(typ string, outer bool) job.Join {
		return job.Join{Type: typ, Left: "left", LeftKey: "k", Right: "right", RightKey: "k", Outer: outer}
	}
	tumbling := sides(job.JoinWindow, false)
	tumbling.Size = 2 * time.Second
	tumblingOuter := tumbling
	tumblingOuter.Outer = true
	sliding := sides(job.JoinWindow, true)
	sliding.Size, sliding.Slide = 3*time.Second, time.Second
	interval := sides(job.JoinInterval, false)
	interval.Lower, interval.Upper = -400*time.Millisecond, 300*time.Millisecond
	temporal, temporalOuter := sides(job.JoinTemporal, false), sides(job.JoinTemporal, true)
	temporal.DeletedField, temporalOuter.DeletedField = "deleted", "deleted"
	for i, tc := range []struct {
		name    string
		join    job.Join
		deletes float64 // the share of right rows that are deletes
		want    func([]leftRow, []rightRow) []expected
		copart  bool // sources KeyedBy their keys, each key in one partition on both sides: no shuffle
	}{
		{"window tumbling inner", tumbling, 0,
			func(ls []leftRow, rs []rightRow) []expected { return windowReference(ls, rs, 2000, 2000, false) }, false},
		{"window tumbling outer", tumblingOuter, 0,
			func(ls []leftRow, rs []rightRow) []expected { return windowReference(ls, rs, 2000, 2000, true) }, false},
		{"window sliding outer", sliding, 0,
			func(ls []leftRow, rs []rightRow) []expected { return windowReference(ls, rs, 3000, 1000, true) }, false},
		{"interval inner", interval, 0,
			func(ls []leftRow, rs []rightRow) []expected { return intervalReference(ls, rs, -400, 300) }, false},
		{"temporal inner", temporal, 0.2,
			func(ls []leftRow, rs []rightRow) []expected { return temporalReference(ls, rs, false) }, false},
		{"temporal outer", temporalOuter, 0.2,
			func(ls []leftRow, rs []rightRow) []expected { return temporalReference(ls, rs, true) }, false},
		{"window tumbling outer co-partitioned", tumblingOuter, 0,
			func(ls []leftRow, rs []rightRow) []expected { return windowReference(ls, rs, 2000, 2000, true) }, true},
		{"interval inner co-partitioned", interval, 0,
			func(ls []leftRow, rs []rightRow) []expected { return intervalReference(ls, rs, -400, 300) }, true},
		{"temporal outer co-partitioned", temporalOuter, 0.2,
			func(ls []leftRow, rs []rightRow) []expected { return temporalReference(ls, rs, true) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(30, uint64(i)))
			ls, rs := joinInput(rng, n, tc.deletes)
			want := tc.want(ls, rs)
			if len(want) < n/4 {
				t.Fatalf("the reference has %d rows: the data does not test the join", len(want))
			}
			if tc.join.Type == job.JoinTemporal {
				checkTemporalData(t, ls, rs)
			}
			if tc.join.Type == job.JoinWindow {
				out := arkflowtest.NewOutput[windowJoined]()
				driveJoin(t, tc.join, ls, rs, out, want, tc.copart)
			} else {
				out := arkflowtest.NewOutput[joined]()
				driveJoin(t, tc.join, ls, rs, out, want, tc.copart)
			}
		})
	}
}

// checkTemporalData fails the test unless some left row joins a key's
// second version or later (an update), and some left row finds its key
// deleted.
func checkTemporalData(t *testing.T, ls []leftRow, rs []rightRow) {
	t.Helper()
	updated, deleted := false, false
	for _, l := range ls {
		versions, last := 0, (*rightRow)(nil)
		for i, r := range rs {
			if r.K == l.K && r.TS <= l.TS {
				versions++
				if last == nil || r.TS > last.TS {
					last = &rs[i]
				}
			}
		}
		updated = updated || versions > 1 && !last.Deleted
		deleted = deleted || last != nil && last.Deleted
	}
	if !updated || !deleted {
		t.Fatalf("the data tests no update (%v) or no delete (%v) of the table", updated, deleted)
	}
}

// driveJoin runs the join j of an input "left" and an input "right", of 2
// partitions each, at parallelism 2, pushes ls and rs interleaved at
// random in batches of 1-3 rows, and advances the watermark every few
// batches to the earliest time still to come. After each advance the
// rows written must be among want, and include every row of want due by
// then; at the end they must be want.
func driveJoin[T fmt.Stringer](t *testing.T, j job.Join, ls []leftRow, rs []rightRow, out *arkflowtest.Output[T], want []expected, copart bool) {
	t.Helper()
	left, right := arkflowtest.NewInput[leftRow](2), arkflowtest.NewInput[rightRow](2)
	et := arkflow.EventTime{Field: "ts", OutOfOrderness: joinOOO * time.Millisecond, PerRow: true}
	leftOpts, rightOpts := []arkflow.SourceOption{et}, []arkflow.SourceOption{et}
	if copart {
		leftOpts, rightOpts = append(leftOpts, arkflow.KeyedBy("k")), append(rightOpts, arkflow.KeyedBy("k"))
	}
	b := arkflow.NewJob("join").
		Parallelism(2).
		Source("left", left, leftOpts...).
		Source("right", right, rightOpts...).
		Join("j", j).
		Sink("out", out)
	for _, e := range b.Spec().Edges {
		if e.To == "j" && e.Partitioned == copart {
			t.Fatalf("edge %s → j: partitioned %v, with sources co-partitioned %v", e.From, e.Partitioned, copart)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(len(ls)), uint64(len(rs))))
	h := arkflowtest.New(t, b)
	// Co-partitioned inputs hold each key in the same partition on both
	// sides (k0 and k2 in 0, k1 and k3 in 1); otherwise rows go anywhere.
	partition := func(k string) int {
		if copart {
			return int(k[len(k)-1]-'0') % 2
		}
		return rng.IntN(2)
	}
	all := map[string]int{}
	for _, w := range want {
		all[w.row]++
	}
	check := func(wm int64) {
		t.Helper()
		got := map[string]int{}
		for _, r := range out.Rows() {
			got[r.String()]++
		}
		for row, c := range got {
			if c > all[row] {
				t.Errorf("watermark %d: row %q written %d times, the nested loop says %d", wm, row, c, all[row])
			}
		}
		due := map[string]int{}
		for _, w := range want {
			if w.due <= wm {
				due[w.row]++
			}
		}
		for row, c := range due {
			if got[row] < c {
				t.Errorf("watermark %d: row %q written %d times, the nested loop says %d by now", wm, row, got[row], c)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	for i, l, r := 0, 0, 0; l < len(ls) || r < len(rs); i++ {
		n := 1 + rng.IntN(3)
		if r == len(rs) || l < len(ls) && rng.IntN(2) == 0 {
			n = min(n, len(ls)-l)
			for _, row := range ls[l : l+n] {
				left.Push(partition(row.K), row)
			}
			l += n
		} else {
			n = min(n, len(rs)-r)
			for _, row := range rs[r : r+n] {
				right.Push(partition(row.K), row)
			}
			r += n
		}
		if i%7 == 6 && l < len(ls) && r < len(rs) {
			// Every row before the earliest one to come is in.
			wm := min(slices.MinFunc(ls[l:], func(a, b leftRow) int { return int(a.TS - b.TS) }).TS,
				slices.MinFunc(rs[r:], func(a, b rightRow) int { return int(a.TS - b.TS) }).TS)
			h.AdvanceWatermark(wm)
			check(wm)
		}
	}
	end := int64(1) << 40
	h.AdvanceWatermark(end)
	check(end)
	if got := len(out.Rows()); got != len(want) {
		t.Errorf("%d rows written, the nested loop says %d", got, len(want))
	}
}
