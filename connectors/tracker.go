package connectors

import (
	"sort"
	"sync"
)

// Tracker keeps a source's positions as contiguous acknowledged frontiers:
// for every partition, the offset below which every
// delivered record has been acknowledged. Acknowledgements may arrive in any
// order (fan-out, filters, parallel sinks); a later range acknowledged
// before an earlier one waits, so the frontier never skips a gap. A failed
// acknowledgement leaves its range unacknowledged, so the frontier stops
// there and a restart replays it.
//
// Ranges must be delivered in offset order within a partition, which is how
// sources read. A Tracker is safe for concurrent use.
type Tracker struct {
	mu    sync.Mutex
	parts map[int32]*partition
	topic string
}

type partition struct {
	frontier int64
	pending  []*span // delivered, not yet acknowledged, in offset order
}

type span struct {
	start, end int64
	acked      bool
}

// NewTracker returns an empty tracker. topic is copied into Positions.
func NewTracker(topic string) *Tracker {
	return &Tracker{parts: map[int32]*partition{}, topic: topic}
}

// Start sets the frontier of a partition (its resume offset after a seek or
// at connect), forgetting anything pending.
func (t *Tracker) Start(part int32, offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.parts[part] = &partition{frontier: offset}
}

// Deliver records that records [start, end) of a partition entered the
// graph and returns the function that acknowledges them: call it once with
// nil on success. A range that starts after the frontier with nothing
// pending (a gap the source skipped, such as compacted offsets) is joined to
// it.
func (t *Tracker) Deliver(part int32, start, end int64) func(error) {
	t.mu.Lock()
	p := t.parts[part]
	if p == nil {
		p = &partition{frontier: start}
		t.parts[part] = p
	}
	if len(p.pending) == 0 && start > p.frontier {
		p.frontier = start
	}
	s := &span{start: start, end: end}
	p.pending = append(p.pending, s)
	t.mu.Unlock()
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			if err != nil {
				return
			}
			t.mu.Lock()
			defer t.mu.Unlock()
			s.acked = true
			// Advance over the acknowledged prefix.
			i := 0
			for i < len(p.pending) && p.pending[i].acked {
				if p.pending[i].end > p.frontier {
					p.frontier = p.pending[i].end
				}
				i++
			}
			if i > 0 {
				p.pending = append(p.pending[:0], p.pending[i:]...)
			}
		})
	}
}

// Positions returns the frontier of every partition, sorted by partition.
func (t *Tracker) Positions() []Position {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Position, 0, len(t.parts))
	for id, p := range t.parts {
		out = append(out, Position{Topic: t.topic, Partition: id, Offset: p.frontier})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

// Frontier returns the frontier of one partition and whether it is known.
func (t *Tracker) Frontier(part int32) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.parts[part]
	if !ok {
		return 0, false
	}
	return p.frontier, true
}

// Pending returns the number of delivered, unacknowledged ranges.
func (t *Tracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.parts {
		n += len(p.pending)
	}
	return n
}
