package queries

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"
)

// windowRow is a WindowTotal that compares by value (its start in Unix
// ms, whatever the time.Time's location).
type windowRow struct {
	Key, Start, Clicks, Total int64
}

func windowRows(rows []WindowTotal) []windowRow {
	out := make([]windowRow, len(rows))
	for i, r := range rows {
		out[i] = windowRow{Key: r.Key, Start: r.Start.UnixMilli(), Clicks: r.Clicks, Total: r.Total}
	}
	slices.SortFunc(out, func(a, b windowRow) int { return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Key, b.Key)) })
	return out
}

// windowReference is the window query by its definition, with no
// streaming: every window start a multiple of 10 s from the first click's
// window to the last's, every click tested against every window, a map
// of key to count and sum per window, sorted by start and key.
func windowReference(clicks []Click) []windowRow {
	const size = int64(10_000)
	first, last := clicks[0].TS.UnixMilli(), clicks[len(clicks)-1].TS.UnixMilli()
	var want []windowRow
	for start := first / size * size; start <= last; start += size {
		per := map[int64]*windowRow{}
		for _, c := range clicks {
			if ms := c.TS.UnixMilli(); ms >= start && ms < start+size {
				r := per[c.Key]
				if r == nil {
					r = &windowRow{Key: c.Key, Start: start}
					per[c.Key] = r
				}
				r.Clicks++
				r.Total += c.Amount
			}
		}
		var rows []windowRow
		for _, r := range per {
			rows = append(rows, *r)
		}
		slices.SortFunc(rows, func(a, b windowRow) int { return cmp.Compare(a.Key, b.Key) })
		want = append(want, rows...)
	}
	return want
}

// windowTestClicks are the tests' clicks over keys keys (1 k or 100 k),
// in at least three windows, the first and last partial, each full window
// with every key at least twice: for 1 k keys 30 k clicks 1 ms apart from
// 3.5 s into a window (four windows), for 100 k keys 300 k clicks 50 µs
// apart from 8 s in (three).
func windowTestClicks(keys int) []Click {
	if keys <= 1_000 {
		return Clicks(30_000, keys, 3500*time.Millisecond, time.Millisecond)
	}
	return Clicks(300_000, keys, 8*time.Second, 50*time.Microsecond)
}

// windowChecked is windowReference of clicks, after checking that it
// spans several windows and that some key has several clicks in one, so
// that both the windows and the sums are tested.
func windowChecked(t *testing.T, clicks []Click) []windowRow {
	t.Helper()
	want := windowReference(clicks)
	starts := map[int64]bool{}
	several := false
	for _, r := range want {
		starts[r.Start] = true
		several = several || r.Clicks > 1
	}
	if len(starts) < 3 || !several {
		t.Fatalf("the reference has %d windows, a key with several clicks in one: %v", len(starts), several)
	}
	return want
}

func TestWindow(t *testing.T) {
	for _, keys := range []int{1_000, 100_000} {
		clicks := windowTestClicks(keys)
		want := windowChecked(t, clicks)
		emit, got := collect[WindowTotal]()
		if err := Window(context.Background(), clicks, emit); err != nil {
			t.Fatal(err)
		}
		emitH, gotH := collect[WindowTotal]()
		WindowHand(clicks, emitH)
		for name, rows := range map[string][]WindowTotal{"engine": *got, "hand loop": *gotH} {
			if err := same(windowRows(rows), want); err != nil {
				t.Errorf("%d keys, %s: %v", keys, name, err)
			}
		}
	}
}

// The measured clicks are as the window query defines them: 10 µs apart,
// key i % keys, amount i·7 % 1000, and a million span one window.
func TestMeasuredClicks(t *testing.T) {
	c := clicksFor(testRun(), 1_000)
	if len(c) != testEvents {
		t.Fatalf("%d clicks for %d events", len(c), testEvents)
	}
	for _, i := range []int{0, 1, 999, 1000, 12345} {
		want := Click{Key: int64(i % 1000), Amount: int64(i * 7 % 1000), TS: time.UnixMilli(1_700_000_000_000).Add(time.Duration(i) * 10 * time.Microsecond)}
		if c[i].Key != want.Key || c[i].Amount != want.Amount || !c[i].TS.Equal(want.TS) {
			t.Errorf("click %d is %+v, want %+v", i, c[i], want)
		}
	}
	big := Clicks(1_000_000, 1_000, 0, ClickStep)
	for _, r := range windowReference(big[len(big)-2:]) {
		if r.Start != big[0].TS.UnixMilli() {
			t.Errorf("the last clicks of a million are not in the first window: %+v", r)
		}
	}
}
