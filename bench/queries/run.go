// Package queries holds Nexmark queries written with arkflow's public API
// (push source, typed operators, windows, funcsink), each beside a
// hand-written Go loop that computes the same result: the baseline the
// engine is measured against.
package queries

import (
	"context"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/push"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// BatchSize is how many bids each Push call (and each batch of the hand
// loops) carries: the same unit of work on both sides.
const BatchSize = 1024

// handChanDepth is the hand loops' channel capacity, in batches: a bounded
// hand-off as a careful service would write it, as the engine's bounded
// channels are.
const handChanDepth = 16

// runJob pushes bids into a job made of the source "bids", the operators
// mid adds and a funcsink of Out calling emit, and waits for its end.
func runJob[Out any](ctx context.Context, id string, bids []nexmark.Bid, src []arkflow.SourceOption,
	mid func(*arkflow.Builder) *arkflow.Builder, emit func([]Out)) error {
	in := push.New(push.Config[nexmark.Bid]{})
	b := mid(arkflow.NewJob(id).Source("bids", in, src...))
	j, err := b.Sink("out", funcsink.Func[Out](func(_ context.Context, rows []Out) error {
		emit(rows)
		return nil
	})).Build()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	for i := 0; i < len(bids); i += BatchSize {
		if err := in.Push(ctx, bids[i:min(i+BatchSize, len(bids))]...); err != nil {
			in.Close()
			<-done
			return err
		}
	}
	in.Close()
	return <-done
}

// feed is the hand loops' producer: a goroutine sends the bids in batches
// of BatchSize over a bounded channel, as a service would hand them from
// the goroutine that receives them to the one that processes them.
func feed(bids []nexmark.Bid) <-chan []nexmark.Bid {
	ch := make(chan []nexmark.Bid, handChanDepth)
	go func() {
		for i := 0; i < len(bids); i += BatchSize {
			ch <- bids[i:min(i+BatchSize, len(bids))]
		}
		close(ch)
	}()
	return ch
}
