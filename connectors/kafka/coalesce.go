package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// An exactly-once output without offset_commit_group (L2) writes several
// batches in one transaction: the first batch begins it, each batch's
// records are produced at once (the chain goes on reading while they are
// delivered), and the transaction commits when it holds
// maxCoalescedWrites batches, or txnLinger after it began, whichever
// comes first. Every batch in it is acknowledged when it commits, or
// fails with it, so each batch is still acknowledged only once its rows
// are committed, and a crash replays the batches of the transaction it
// interrupted. A batch per transaction made each one wait for its commit
// (the records' flush, the broker's markers) before the next was read:
// the output ran at 0.5-0.66 of a bare produce loop.
const maxCoalescedWrites = 4 // the runtime's writes in flight (runtime.maxAsyncWrites)

// txnLinger is how long a coalesced transaction stays open for more
// batches (a variable for the tests).
var txnLinger = 20 * time.Millisecond

// coalesced is an open transaction holding the batches written into it.
type coalesced struct {
	values, keys [][]byte      // every record, for a retry in a new transaction
	ws           []*writeState // the batches' delivery reports
	dones        []func(error)
	err          error // a failed produce: the transaction is retried at commit
	timer        *time.Timer
	ctx          context.Context // the last writer's
}

// writeCoalesced writes rec's records into the open transaction (it
// begins one if none is open), and commits it when it is full; done is
// called with the transaction's outcome.
func (s *Sink) writeCoalesced(ctx context.Context, rec arrow.RecordBatch, done func(error)) error {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	b, err := s.admit(rec, done)
	if err != nil || b == nil {
		return err
	}
	c := s.pending
	if c == nil {
		if c, err = s.begin(ctx); err != nil {
			// No transaction could begin: this batch alone goes the way
			// of a synchronous write, with its retries.
			done(s.writeTxn(ctx, b.values, b.keys, nil, 1))
			return nil
		}
	}
	c.ctx = ctx
	// The values share the sink's buffer, and the keys the batch's
	// columns: a retry needs copies.
	c.values, c.keys = appendCopies(c.values, b.values), appendCopies(c.keys, b.keys)
	c.dones = append(c.dones, done)
	w := newWriteState(len(b.values))
	c.ws = append(c.ws, w)
	if c.err == nil {
		if err := s.produce(ctx, b.values, b.keys, w); err != nil {
			c.err = err
		}
	}
	if len(c.dones) >= maxCoalescedWrites {
		s.commitPending(ctx)
	}
	return nil
}

// begin opens a transaction for coalesced writes, with its linger timer.
func (s *Sink) begin(ctx context.Context) (*coalesced, error) {
	if s.producer == nil {
		if err := s.open(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.producer.BeginTransaction(); err != nil {
		return nil, err
	}
	s.inTxn = true
	c := &coalesced{}
	c.timer = time.AfterFunc(txnLinger, func() {
		s.txnMu.Lock()
		defer s.txnMu.Unlock()
		if s.pending == c {
			s.commitPending(c.ctx)
		}
	})
	s.pending = c
	return c, nil
}

// commitPending commits the open coalesced transaction and reports its
// outcome to each of its batches. A transaction that fails is retried as
// writeTxn retries one: aborted, and its records written again in a new
// transaction.
func (s *Sink) commitPending(ctx context.Context) {
	c := s.pending
	s.pending = nil
	c.timer.Stop()
	err := c.err
	if err == nil {
		err = s.finishTxn(ctx, nil, c.ws, 1)
		if err == nil {
			s.committed()
		}
	}
	if err != nil {
		if stop := s.failedAttempt(err, 1); stop != nil {
			err = stop
		} else {
			err = s.writeTxn(ctx, c.values, c.keys, nil, 2)
		}
	}
	for _, done := range c.dones {
		done(err)
	}
}

// dropPending fails the batches of the open coalesced transaction at
// Close (the caller holds txnMu and aborts the transaction): they were
// not acknowledged, and are written again after a restart.
func (s *Sink) dropPending() {
	c := s.pending
	if c == nil {
		return
	}
	s.pending = nil
	c.timer.Stop()
	err := errors.New("kafka: the sink closed before its transaction committed")
	for _, done := range c.dones {
		done(err)
	}
}

// appendCopies appends copies of vs to dst, their bytes in one allocation;
// a nil vs (no keys) appends nils.
func appendCopies(dst, vs [][]byte) [][]byte {
	n := 0
	for _, v := range vs {
		n += len(v)
	}
	buf := make([]byte, 0, n)
	for _, v := range vs {
		if v == nil {
			dst = append(dst, nil)
			continue
		}
		buf = append(buf, v...)
		dst = append(dst, buf[len(buf)-len(v):len(buf):len(buf)])
	}
	return dst
}
