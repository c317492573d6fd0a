package connectors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
)

// model is the reference for one partition: the delivered ranges in order
// and their states.
type model struct {
	start  int64 // frontier before the first delivery
	ranges []modelRange
}

type modelRange struct {
	start, end int64
	acked      bool // acknowledged successfully
	failed     bool // acknowledged with an error: never counts
}

// frontier is the end of the longest fully acknowledged prefix of the
// delivered ranges (the initial offset when the first range is not).
func (m *model) frontier() int64 {
	f := m.start
	for _, r := range m.ranges {
		if !r.acked {
			break
		}
		f = r.end
	}
	return f
}

// firstUnacked is the start of the first range that is not acknowledged,
// or -1 when every range is.
func (m *model) firstUnacked() int64 {
	for _, r := range m.ranges {
		if !r.acked {
			return r.start
		}
	}
	return -1
}

func TestTrackerProperty(t *testing.T) {
	boom := errors.New("sink failed")
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		tr := NewTracker("topic")
		parts := 1 + rng.IntN(3)
		models := make([]*model, parts)
		type pendingAck struct {
			part int
			idx  int
			ack  func(error)
		}
		var outstanding []pendingAck
		for p := range models {
			start := rng.Int64N(1000)
			if rng.IntN(2) == 0 {
				tr.Start(int32(p), start)
			} // else: the first Deliver sets the start
			models[p] = &model{start: start}
		}
		next := make([]int64, parts)
		for p := range next {
			next[p] = models[p].start
		}
		check := func(step int, what string) {
			t.Helper()
			for p, m := range models {
				got, ok := tr.Frontier(int32(p))
				if !ok {
					if len(m.ranges) == 0 {
						continue // neither started nor delivered yet
					}
					t.Fatalf("seed %d step %d (%s): partition %d unknown", seed, step, what, p)
				}
				if want := m.frontier(); got != want {
					t.Fatalf("seed %d step %d (%s): partition %d frontier %d, want %d (ranges %+v)", seed, step, what, p, got, want, m.ranges)
				}
				if u := m.firstUnacked(); u >= 0 && got > u {
					t.Fatalf("seed %d step %d: frontier %d passed unacknowledged offset %d", seed, step, got, u)
				}
			}
			wantPending := 0
			for _, m := range models {
				// Everything from the first unacknowledged range on is pending.
				for i, r := range m.ranges {
					if !r.acked {
						wantPending += len(m.ranges) - i
						break
					}
				}
			}
			if got := tr.Pending(); got != wantPending {
				t.Fatalf("seed %d step %d (%s): Pending %d, want %d", seed, step, what, got, wantPending)
			}
		}
		steps := 20 + rng.IntN(80)
		for step := 0; step < steps; step++ {
			if len(outstanding) == 0 || rng.IntN(3) == 0 {
				p := rng.IntN(parts)
				size := int64(rng.IntN(5)) // empty deliveries too
				if rng.IntN(4) == 0 {
					size = int64(rng.IntN(10000))
				}
				start := next[p]
				ack := tr.Deliver(int32(p), start, start+size)
				next[p] += size
				m := models[p]
				m.ranges = append(m.ranges, modelRange{start: start, end: start + size})
				outstanding = append(outstanding, pendingAck{part: p, idx: len(m.ranges) - 1, ack: ack})
				check(step, fmt.Sprintf("deliver p%d [%d,%d)", p, start, start+size))
				continue
			}
			k := rng.IntN(len(outstanding))
			a := outstanding[k]
			outstanding = append(outstanding[:k], outstanding[k+1:]...)
			r := &models[a.part].ranges[a.idx]
			if rng.IntN(5) == 0 {
				a.ack(boom)
				r.failed = true
			} else {
				a.ack(nil)
				r.acked = true
			}
			// A second call is ignored, whatever it says.
			if rng.IntN(4) == 0 {
				if r.failed {
					a.ack(nil)
				} else {
					a.ack(boom)
				}
			}
			check(step, fmt.Sprintf("ack p%d #%d failed=%v", a.part, a.idx, r.failed))
		}
		// Acknowledge the rest in a random order.
		rng.Shuffle(len(outstanding), func(i, j int) { outstanding[i], outstanding[j] = outstanding[j], outstanding[i] })
		for i, a := range outstanding {
			a.ack(nil)
			models[a.part].ranges[a.idx].acked = true
			check(steps+i, "drain")
		}
		// Positions agree with the frontiers, sorted by partition.
		var want []Position
		for p, m := range models {
			if _, ok := tr.Frontier(int32(p)); ok {
				want = append(want, Position{Topic: "topic", Partition: int32(p), Offset: m.frontier()})
			}
		}
		if got := tr.Positions(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("seed %d: Positions %+v, want %+v", seed, got, want)
		}
	}
}

func TestTrackerBasics(t *testing.T) {
	tr := NewTracker("")
	if _, ok := tr.Frontier(0); ok {
		t.Fatal("unknown partition has a frontier")
	}
	if got := tr.Positions(); len(got) != 0 {
		t.Fatalf("Positions = %v", got)
	}
	tr.Start(3, 100)
	tr.Start(1, 7)
	if got := tr.Positions(); !reflect.DeepEqual(got, []Position{{Partition: 1, Offset: 7}, {Partition: 3, Offset: 100}}) {
		t.Fatalf("Positions = %+v", got)
	}
	// A gap before the first delivery is joined (compacted offsets).
	a := tr.Deliver(3, 150, 160)
	if f, _ := tr.Frontier(3); f != 150 {
		t.Fatalf("frontier after a gap = %d, want 150", f)
	}
	a(nil)
	if f, _ := tr.Frontier(3); f != 160 {
		t.Fatalf("frontier = %d, want 160", f)
	}
	// A later range acknowledged first waits for the earlier one.
	b := tr.Deliver(3, 160, 170)
	c := tr.Deliver(3, 170, 180)
	c(nil)
	if f, _ := tr.Frontier(3); f != 160 {
		t.Fatalf("frontier = %d, want 160", f)
	}
	b(nil)
	if f, _ := tr.Frontier(3); f != 180 || tr.Pending() != 0 {
		t.Fatalf("frontier = %d pending %d, want 180 and 0", f, tr.Pending())
	}
}

func TestTrackerFailureBlocksFrontier(t *testing.T) {
	tr := NewTracker("t")
	tr.Start(0, 0)
	a := tr.Deliver(0, 0, 10)
	b := tr.Deliver(0, 10, 20)
	a(errors.New("x"))
	a(nil) // the retry of a failed ack does not count
	b(nil)
	if f, _ := tr.Frontier(0); f != 0 {
		t.Fatalf("frontier = %d after a failed first range, want 0", f)
	}
	if tr.Pending() != 2 {
		t.Fatalf("Pending = %d, want 2", tr.Pending())
	}
	// Start (a restart's seek) forgets everything pending.
	tr.Start(0, 0)
	if tr.Pending() != 0 {
		t.Fatalf("Pending after Start = %d", tr.Pending())
	}
	c := tr.Deliver(0, 0, 5)
	c(nil)
	if f, _ := tr.Frontier(0); f != 5 {
		t.Fatalf("frontier = %d, want 5", f)
	}
}

func TestTrackerStaleAckAfterStart(t *testing.T) {
	tr := NewTracker("")
	tr.Start(0, 0)
	old := tr.Deliver(0, 0, 100)
	tr.Start(0, 40)
	old(nil)
	if f, _ := tr.Frontier(0); f != 40 {
		t.Fatalf("frontier = %d, want 40: an ack from before Start moved it", f)
	}
}

func TestTrackerConcurrentAcks(t *testing.T) {
	tr := NewTracker("")
	const parts, per = 4, 200
	acks := make([][]func(error), parts)
	for p := 0; p < parts; p++ {
		tr.Start(int32(p), 0)
		for i := 0; i < per; i++ {
			acks[p] = append(acks[p], tr.Deliver(int32(p), int64(i*3), int64(i*3+3)))
		}
	}
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		for w := 0; w < 4; w++ {
			wg.Go(func() {
				for i := w; i < per; i += 4 {
					acks[p][per-1-i](nil)
					_ = tr.Positions()
				}
			})
		}
	}
	wg.Wait()
	for p := 0; p < parts; p++ {
		if f, _ := tr.Frontier(int32(p)); f != per*3 {
			t.Fatalf("partition %d frontier %d, want %d", p, f, per*3)
		}
	}
	if tr.Pending() != 0 {
		t.Fatalf("Pending = %d", tr.Pending())
	}
}
