package hubstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Group commit. Every write waits for its commit's
// fsync (synchronous=FULL), one at a time on the single writer, so under
// 1,000 Agents heartbeats and reports queue behind each other's syncs,
// and one slow sync (a checkpoint, a busy disk) delays every queued
// Agent. writeGrouped lets concurrent small writes share a commit: the
// first caller leads and runs every queued function in ONE transaction,
// each inside its own SAVEPOINT, so a function that fails is rolled back
// alone and its caller gets its own error while the others commit.
// Nothing is returned to any caller before the commit that holds its
// write has synced; a failed commit fails every write of the batch.
//
// A function given to writeGrouped may run more than once (see
// commitGroup) and must set its outputs afresh on every run.

// maxGroup bounds a batch, so a leader's own caller is not kept long.
const maxGroup = 128

type groupCommit struct {
	mu      sync.Mutex
	queue   []*groupItem
	leading bool // a caller is committing batches
	largest int  // the largest batch committed so far (for tests)
}

type groupItem struct {
	ctx  context.Context
	fn   func(tx *cachedTx) error
	wake chan struct{} // closed when done, or when made leader
	// Set before wake is closed:
	lead bool // this caller leads next (it is still queued)
	done bool
	err  error
}

// writeGrouped runs fn in a write transaction it may share with other
// callers' functions; it returns once that transaction has committed
// (fn's writes are durable) or fn's error, or the commit's.
func (s *Store) writeGrouped(ctx context.Context, fn func(tx *cachedTx) error) error {
	// A panic in one caller's function must not strand the others
	// waiting for a leader: it becomes that caller's error.
	safe := func(tx *cachedTx) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("hubstore: panic in a grouped write: %v", r)
			}
		}()
		return fn(tx)
	}
	it := &groupItem{ctx: ctx, fn: safe, wake: make(chan struct{})}
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, it)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if !lead {
		<-it.wake // whatever ctx says: the write may be committed already
		if !it.lead {
			return it.err
		}
	}
	// Leader: commit batches from the head of the queue until this
	// caller's own write is done, then hand the lead to the next waiter.
	for !it.done {
		g.mu.Lock()
		n := min(len(g.queue), maxGroup)
		batch := make([]*groupItem, n)
		copy(batch, g.queue)
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.largest = max(g.largest, n)
		g.mu.Unlock()
		s.commitGroup(batch)
		for _, b := range batch {
			if b != it {
				close(b.wake)
			}
		}
	}
	g.mu.Lock()
	if len(g.queue) > 0 {
		next := g.queue[0]
		next.lead = true
		close(next.wake)
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	return it.err
}

// commitGroup runs a batch on the writer and sets every item's outcome.
func (s *Store) commitGroup(batch []*groupItem) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	defer func() {
		for _, b := range batch {
			b.done = true
		}
	}()
	if len(batch) == 1 {
		batch[0].err = s.writeLocked(batch[0].ctx, batch[0].fn)
		return
	}
	if s.commitBatch(batch) {
		return
	}
	// The batch transaction broke (a function's error aborted it, or a
	// savepoint failed) and was rolled back: nothing of it is committed.
	// Run each write that had not failed on its own again, alone.
	for _, b := range batch {
		if b.err == nil {
			b.err = s.writeLocked(b.ctx, b.fn)
		}
	}
}

var errBatchBroken = errors.New("hubstore: group commit: batch transaction broken")

// commitBatch runs the batch in one transaction, one SAVEPOINT per item.
// It reports false, with the transaction rolled back and the failed items'
// errors set (the others' nil), if the transaction itself broke.
func (s *Store) commitBatch(batch []*groupItem) (ok bool) {
	// The shared transaction is nobody's request: a caller whose context
	// ends fails its own statements only.
	bg := context.Background()
	defer s.timeWrite(time.Now())
	stx, err := s.w.BeginTx(bg, nil)
	if err != nil {
		for _, b := range batch {
			b.err = fmt.Errorf("hubstore: begin: %w", err)
		}
		return true
	}
	defer s.wc.prepareMissed()
	tx := newTx(bg, stx, s.wc)
	broken := func() bool {
		_ = stx.Rollback()
		for _, b := range batch {
			if errors.Is(b.err, errBatchBroken) {
				b.err = nil
			}
		}
		return false
	}
	for _, b := range batch {
		if err := b.ctx.Err(); err != nil {
			b.err = err
			continue
		}
		if _, err := tx.ExecContext(bg, "SAVEPOINT grouped"); err != nil {
			return broken()
		}
		ferr := b.fn(tx)
		if ferr == nil {
			if _, err := tx.ExecContext(bg, "RELEASE grouped"); err != nil {
				return broken()
			}
			b.err = errBatchBroken // until the commit: reset if the batch breaks
			continue
		}
		b.err = ferr
		if _, err := tx.ExecContext(bg, "ROLLBACK TO grouped"); err != nil {
			return broken()
		}
		if _, err := tx.ExecContext(bg, "RELEASE grouped"); err != nil {
			return broken()
		}
	}
	cerr := stx.Commit()
	for _, b := range batch {
		if errors.Is(b.err, errBatchBroken) {
			b.err = nil
			if cerr != nil {
				b.err = fmt.Errorf("hubstore: commit: %w", cerr)
			}
		}
	}
	return true
}
