package streambuf

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
)

// sliding is the sliding window, which counts batches, not rows or time:
// whenever size batches are held it emits them as one batch and drops the
// first slide of them. A batch is in several windows: each window holds
// one reference of its acknowledgement, and the queue holds one more
// until the batch leaves it.
type sliding struct {
	size, slide int
	alloc       memory.Allocator
	entries     []Entry
	// emitted is how many of the first entries have been in a window.
	emitted int
}

// Write queues e and emits the window it completes, if any.
func (b *sliding) Write(_ time.Time, e Entry) ([]Emission, error) {
	b.entries = append(b.entries, e)
	var out []Emission
	for len(b.entries) >= b.size {
		win := b.entries[:b.size]
		rec, err := concat(b.alloc, records(win))
		if err != nil {
			b.drop(err)
			return out, err
		}
		parents := acks(win)
		for _, p := range parents {
			p.Retain(1)
		}
		out = append(out, Emission{Rec: rec, Ack: ack.Derive(parents...)})
		release(b.entries[:b.slide], nil)
		b.entries = b.entries[b.slide:]
		b.emitted = b.size - b.slide
	}
	return out, nil
}

// Deadline is never: the interval of ArkFlow's sliding window is only
// how often it looks at its queue.
func (b *sliding) Deadline() (time.Time, bool) { return time.Time{}, false }

// Tick does nothing: a sliding window counts batches.
func (b *sliding) Tick(time.Time) ([]Emission, error) { return nil, nil }

// Flush emits the batches that were never in a window as a last, shorter
// one, and lets go of those that were.
func (b *sliding) Flush(time.Time) ([]Emission, error) {
	seen, rest := b.entries[:b.emitted], b.entries[b.emitted:]
	b.entries, b.emitted = nil, 0
	release(seen, nil)
	if len(rest) == 0 {
		return nil, nil
	}
	return emit(b.alloc, rest)
}

// Close drops every batch queued.
func (b *sliding) Close() { b.drop(errClosed) }

func (b *sliding) drop(err error) {
	release(b.entries, err)
	b.entries, b.emitted = nil, 0
}
