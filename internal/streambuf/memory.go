package streambuf

import "time"

// memBuffer is the memory buffer: it holds batches until they have
// capacity rows, or until the end of a period of timeout (from the start,
// started again whenever the capacity is reached), then emits them all as
// one batch.
type memBuffer struct {
	capacity int64
	tick     periodic
	q        queue
}

// Write queues e and, once capacity rows are queued, emits them all and
// starts the periods again.
func (b *memBuffer) Write(now time.Time, e Entry) ([]Emission, error) {
	if b.q.empty() {
		b.tick.skip(now) // periods passed with nothing to emit
	}
	b.q.push(e)
	if b.q.rows < b.capacity {
		return nil, nil
	}
	b.tick.restart(now)
	return b.q.emitAll()
}

// Deadline is the end of the period, while anything is queued.
func (b *memBuffer) Deadline() (time.Time, bool) { return b.tick.next, !b.q.empty() }

// Tick emits everything queued at the end of a period.
func (b *memBuffer) Tick(now time.Time) ([]Emission, error) {
	if !b.tick.due(now) {
		return nil, nil
	}
	b.tick.skip(now)
	return b.q.emitAll()
}

// Flush emits everything queued.
func (b *memBuffer) Flush(time.Time) ([]Emission, error) { return b.q.emitAll() }

// Close drops everything queued.
func (b *memBuffer) Close() { b.q.drop(errClosed) }
