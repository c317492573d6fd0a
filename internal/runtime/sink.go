package runtime

// This file holds the sink subtask's operator, sinkOp: it writes each
// batch to the connector (timing the write and counting failures for the
// job's metrics) and then acknowledges it, with up to
// maxAsyncWrites writes in flight for a connectors.AsyncSink, and waits
// for them on Close.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/metrics"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
)

// sinkOp is the operator instance of a sink subtask: it writes and then
// acknowledges. A connectors.AsyncSink has up to maxAsyncWrites writes in
// flight, each acknowledged when it completes.
type sinkOp struct {
	task string
	snk  connectors.Sink
	m    *taskMetrics

	async    connectors.AsyncSink
	slots    chan struct{} // one per write in flight
	inflight sync.WaitGroup
	ctx      context.Context // the chain's, from the last Process
	gone     atomic.Bool     // the chain ended without waiting: acks stay unreleased
	errMu    sync.Mutex
	err      error // the first failed asynchronous write
}

// maxAsyncWrites bounds the writes an AsyncSink has in flight.
const maxAsyncWrites = 4

func newSinkOp(task string, snk connectors.Sink, m *taskMetrics) *sinkOp {
	m.sinkWrites = metrics.NewDurationHistogram(metrics.LatencyBuckets)
	s := &sinkOp{task: task, snk: snk, m: m}
	if a, ok := snk.(connectors.AsyncSink); ok {
		s.async, s.slots = a, make(chan struct{}, maxAsyncWrites)
	}
	return s
}

// failed returns the error of a failed asynchronous write.
func (s *sinkOp) failed() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

func (s *sinkOp) Process(ctx context.Context, b ops.Batch, _ ops.Emitter) error {
	if s.async != nil {
		return s.processAsync(ctx, b)
	}
	rows, size := b.Rec.NumRows(), recordBytes(b.Rec)
	start := time.Now()
	err := s.snk.Write(ctx, b.Rec)
	s.m.sinkWrites.ObserveDuration(time.Since(start))
	b.Rec.Release()
	if err != nil {
		s.m.sinkErrors.Add(1)
		b.Ack.Release(err)
		return fmt.Errorf("writing sink %s: %w", s.task, err)
	}
	s.m.rowsOut.Add(rows)
	s.m.batchesOut.Add(1)
	s.m.bytesOut.Add(size)
	b.Ack.Release(nil)
	return nil
}

// processAsync hands the batch to an AsyncSink once a slot is free. A
// failed write fails the chain at the next batch, watermark or its end,
// and its rows are never acknowledged as written (their acknowledgement
// carries the error).
func (s *sinkOp) processAsync(ctx context.Context, b ops.Batch) error {
	if err := s.failed(); err != nil {
		b.Rec.Release()
		b.Ack.Release(err)
		return err
	}
	s.ctx = ctx
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		b.Rec.Release()
		b.Ack.Release(ctx.Err())
		return ctx.Err()
	}
	rows, size := b.Rec.NumRows(), recordBytes(b.Rec)
	s.inflight.Add(1)
	start := time.Now()
	err := s.async.WriteAsync(ctx, b.Rec, func(err error) {
		defer s.inflight.Done()
		defer func() { <-s.slots }()
		s.m.sinkWrites.ObserveDuration(time.Since(start))
		if err != nil {
			s.m.sinkErrors.Add(1)
			err = fmt.Errorf("writing sink %s: %w", s.task, err)
			s.errMu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.errMu.Unlock()
		} else {
			s.m.rowsOut.Add(rows)
			s.m.batchesOut.Add(1)
			s.m.bytesOut.Add(size)
		}
		if !s.gone.Load() {
			b.Ack.Release(err)
		}
	})
	b.Rec.Release()
	if err != nil {
		s.m.sinkErrors.Add(1)
		<-s.slots
		s.inflight.Done()
		b.Ack.Release(err)
		return fmt.Errorf("writing sink %s: %w", s.task, err)
	}
	return nil
}

func (s *sinkOp) Watermark(context.Context, int64, ops.Emitter) error {
	return s.failed()
}

// Close waits for the writes in flight, so that every acknowledgement is
// released before the sources close — unless the chain was
// cancelled: then they are abandoned, and their rows replay after a
// restart.
func (s *sinkOp) Close() error {
	if s.async == nil {
		return nil
	}
	if s.ctx != nil && s.ctx.Err() != nil {
		s.gone.Store(true)
		return s.failed()
	}
	s.inflight.Wait()
	return s.failed()
}
