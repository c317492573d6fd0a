// Package queries holds Nexmark queries written with arkflow's public API
// (push source, typed operators, windows, joins, funcsink), each beside a
// hand-written Go loop that computes the same result: the baseline the
// engine is measured against.
package queries

import (
	"context"
	"errors"
	"sync"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/push"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// BatchSize is how many rows each Push call (and each batch of the hand
// loops) carries: the same unit of work on both sides.
const BatchSize = 1024

// handChanDepth is the hand loops' channel capacity, in batches: a bounded
// hand-off as a careful service would write it, as the engine's bounded
// channels are.
const handChanDepth = 16

// eventTime reads a source's event time from date_time, classifying each
// row on its own: the generated rows are in event-time order, so none is
// late however they are batched.
var eventTime = []arkflow.SourceOption{arkflow.EventTime{Field: "date_time", PerRow: true}}

// runJob pushes bids into a job made of the source "bids", the operators
// mid adds and a funcsink of Out calling emit, and waits for its end.
func runJob[Out any](ctx context.Context, id string, bids []nexmark.Bid, src []arkflow.SourceOption,
	mid func(*arkflow.Builder) *arkflow.Builder, emit func([]Out)) error {
	in := push.New(push.Config[nexmark.Bid]{})
	b := mid(arkflow.NewJob(id).Source("bids", in, src...))
	return runPushed(ctx, b.Sink("out", sinkTo(emit)), pusher(in, bids))
}

// sinkTo is a funcsink of Out that hands every batch's rows to emit.
func sinkTo[Out any](emit func([]Out)) funcsink.Func[Out] {
	return func(_ context.Context, rows []Out) error {
		emit(rows)
		return nil
	}
}

// pusher returns a function that pushes rows into src in calls of
// BatchSize and closes src when done, or on the first error.
func pusher[T any](src *push.Source[T], rows []T) func(context.Context) error {
	return func(ctx context.Context) error {
		defer src.Close()
		for i := 0; i < len(rows); i += BatchSize {
			if err := src.Push(ctx, rows[i:min(i+BatchSize, len(rows))]...); err != nil {
				return err
			}
		}
		return nil
	}
}

// runPushed builds the job b ends, runs it, and runs each push function
// in a goroutine of its own (one per source, so that a source the job
// waits on is never held back by another's full queue). The pushes'
// context ends when the job does, so that a job that fails does not leave
// a push waiting. It returns the job's error, or else the pushes' first.
func runPushed(ctx context.Context, b *arkflow.Builder, pushes ...func(context.Context) error) error {
	j, err := b.Build()
	if err != nil {
		return err
	}
	pushCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- j.Run(ctx)
		cancel()
	}()
	errs := make([]error, len(pushes))
	var wg sync.WaitGroup
	for i, p := range pushes {
		wg.Go(func() { errs[i] = p(pushCtx) })
	}
	wg.Wait()
	if err := <-done; err != nil {
		return err
	}
	return errors.Join(errs...)
}

// feed is the hand loops' producer: a goroutine sends the rows in batches
// of BatchSize over a bounded channel, as a service would hand them from
// the goroutine that receives them to the one that processes them.
func feed[T any](rows []T) <-chan []T {
	ch := make(chan []T, handChanDepth)
	go func() {
		for i := 0; i < len(rows); i += BatchSize {
			ch <- rows[i:min(i+BatchSize, len(rows))]
		}
		close(ch)
	}()
	return ch
}

// endOfTime is the watermark of a stream that ended: every window closes.
const endOfTime = 1<<63 - 1

// merge2 is the hand loops' consumer of two streams in event time: it
// takes batches from as and bs as they come, hands each to onA or onB,
// then calls advance with the event time both streams have reached (the
// smaller of their last rows' times; endOfTime for a stream that ended),
// as an event-time join must, since a stream may run ahead of the other.
// The rows of each stream are in event-time order.
func merge2[A, B any](as <-chan []A, bs <-chan []B, timeA func(A) int64, timeB func(B) int64,
	onA func([]A), onB func([]B), advance func(watermark int64)) {
	wmA, wmB := int64(-1<<63), int64(-1<<63)
	for as != nil || bs != nil {
		select {
		case batch, ok := <-as:
			if !take(batch, ok, onA, timeA, &wmA) {
				as = nil
			}
		case batch, ok := <-bs:
			if !take(batch, ok, onB, timeB, &wmB) {
				bs = nil
			}
		}
		advance(min(wmA, wmB))
	}
}

// take handles what merge2 received from one stream: a batch, which goes
// to on and moves the stream's watermark *wm to its last row's time, or
// the stream's end (ok false), which moves it to endOfTime and returns
// false.
func take[T any](batch []T, ok bool, on func([]T), time func(T) int64, wm *int64) bool {
	if !ok {
		*wm = endOfTime
		return false
	}
	on(batch)
	if len(batch) > 0 {
		*wm = time(batch[len(batch)-1])
	}
	return true
}
