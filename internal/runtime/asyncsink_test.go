package runtime

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
)

// fakeAsync is an AsyncSink whose writes complete when the test says.
type fakeAsync struct {
	mu      sync.Mutex
	pending []func(error)
	started chan struct{}
}

func (f *fakeAsync) Connect(context.Context) error                  { return nil }
func (f *fakeAsync) Write(context.Context, arrow.RecordBatch) error { panic("Write on an AsyncSink") }
func (f *fakeAsync) Close(context.Context) error                    { return nil }
func (f *fakeAsync) WriteAsync(_ context.Context, _ arrow.RecordBatch, done func(error)) error {
	f.mu.Lock()
	f.pending = append(f.pending, done)
	f.mu.Unlock()
	f.started <- struct{}{}
	return nil
}

func (f *fakeAsync) complete(i int, err error) {
	f.mu.Lock()
	done := f.pending[i]
	f.mu.Unlock()
	done(err)
}

var _ connectors.AsyncSink = (*fakeAsync)(nil)

// An AsyncSink has up to maxAsyncWrites writes in flight; each write's
// rows are acknowledged when it completes, in any order; the chain's end
// (Close) waits for the writes in flight; a failed write fails the next
// batch and watermark and its rows' acknowledgement carries the error.
func TestSinkOpAsync(t *testing.T) {
	t.Parallel()
	f := &fakeAsync{started: make(chan struct{}, 16)}
	s := newSinkOp("out-0", f, &taskMetrics{})
	acked := make([]chan error, maxAsyncWrites+1)
	ctx := context.Background()
	for i := range acked {
		acked[i] = make(chan error, 1)
		ch := acked[i]
		b := ops.Batch{Rec: clicks([]string{"a"}, []int64{1}), Ack: ack.New(func(err error) { ch <- err })}
		if i < maxAsyncWrites {
			if err := s.Process(ctx, b, nil); err != nil {
				t.Fatal(err)
			}
			<-f.started
			continue
		}
		// The next write waits for a free slot.
		go func() { _ = s.Process(ctx, b, nil) }()
	}
	select {
	case <-f.started:
		t.Fatalf("%d writes in flight, the limit is %d", maxAsyncWrites+1, maxAsyncWrites)
	case <-time.After(50 * time.Millisecond):
	}
	// Out of order: the last in flight first.
	f.complete(maxAsyncWrites-1, nil)
	if err := <-acked[maxAsyncWrites-1]; err != nil {
		t.Fatalf("ack: %v", err)
	}
	<-f.started // the waiting write took the freed slot
	select {
	case err := <-acked[0]:
		t.Fatalf("write 0 acknowledged (%v) before it completed", err)
	default:
	}
	closed := make(chan error, 1)
	for i := 0; i < maxAsyncWrites-1; i++ {
		f.complete(i, nil)
		if err := <-acked[i]; err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a write in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	boom := errors.New("broker said no")
	f.complete(maxAsyncWrites, boom)
	if err := <-acked[maxAsyncWrites]; !errors.Is(err, boom) {
		t.Fatalf("the failed write's ack got %v", err)
	}
	if err := <-closed; !errors.Is(err, boom) {
		t.Fatalf("Close after a failed write: %v", err)
	}
	if err := s.Watermark(ctx, 0, nil); !errors.Is(err, boom) {
		t.Fatalf("Watermark after a failed write: %v", err)
	}
	next := make(chan error, 1)
	b := ops.Batch{Rec: clicks([]string{"a"}, []int64{1}), Ack: ack.New(func(err error) { next <- err })}
	if err := s.Process(ctx, b, nil); !errors.Is(err, boom) {
		t.Fatalf("Process after a failed write: %v", err)
	}
	if err := <-next; !errors.Is(err, boom) {
		t.Fatalf("a batch refused after a failed write was acknowledged with %v", err)
	}
}
