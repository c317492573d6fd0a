package durable

import (
	"context"
	"testing"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

// controlFake is a fakeSource that also delivers watermark advances in
// band (as the test harness's inputs do): before the batch at index k of
// its spans it delivers advances[k], if any.
type controlFake struct {
	*fakeSource
	advances map[int]int64
	given    map[int]bool
}

func (c *controlFake) ReadControl(ctx context.Context) (connectors.Batch, *eventtime.Advance, error) {
	c.mu.Lock()
	k := c.next
	wm, ok := c.advances[k]
	if ok && !c.given[k] {
		c.given[k] = true
		c.mu.Unlock()
		return connectors.Batch{}, &eventtime.Advance{Partitions: []int{0}, Watermark: wm}, nil
	}
	c.mu.Unlock()
	b, err := c.Read(ctx)
	return b, nil, err
}

// A source's advances pass through its WAL in their place in the stream,
// and only its batches are appended; a wrapped source without advances is
// read through ReadControl as through Read.
func TestReadControlPassesAdvances(t *testing.T) {
	t.Parallel()
	spans := uniform(3, 2)
	inner := &controlFake{fakeSource: newFake(spans...), advances: map[int]int64{0: 10, 2: 30, 3: 40}, given: map[int]bool{}}
	s := openSource(t, &job.Durability{}, inner, t.TempDir())
	connect(t, s)
	// want lists what ReadControl returns, in order: a span's index, or
	// -wm for an advance to wm.
	want := []int64{-10, 0, 1, -30, 2, -40}
	var acks []func(error)
	for i, w := range want {
		b, adv, err := s.ReadControl(context.Background())
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		switch {
		case w < 0 && (adv == nil || adv.Watermark != -w || b.Record != nil):
			t.Fatalf("read %d: batch %v, advance %+v; want an advance to %d alone", i, b.Record != nil, adv, -w)
		case w >= 0 && adv != nil:
			t.Fatalf("read %d: advance %+v, want span %d", i, adv, w)
		case w >= 0:
			checkRows(t, b.Record, spans[w])
			acks = append(acks, b.Ack)
			if last := s.Log().Last(); last != uint64(w+1) {
				t.Fatalf("after span %d the WAL's last entry is %d, want %d (batches only)", w, last, w+1)
			}
		}
	}
	if _, _, err := s.ReadControl(context.Background()); err != connectors.ErrEndOfInput {
		t.Fatalf("after the last item: %v, want the end of input", err)
	}
	for _, a := range acks {
		a(nil)
	}
	closeAll(t, s, nil) // drains the native acknowledgements
	if got := ackStarts(inner.nativeAcks()); len(got) != len(spans) {
		t.Fatalf("native acknowledgements of the batches starting at %v, want all %d", got, len(spans))
	}

	plain := newFake(spans...)
	s = openSource(t, &job.Durability{}, plain, t.TempDir())
	connect(t, s)
	for i, sp := range spans {
		b, adv, err := s.ReadControl(context.Background())
		if err != nil || adv != nil {
			t.Fatalf("read %d of a source without advances: advance %+v, %v", i, adv, err)
		}
		checkRows(t, b.Record, sp)
		b.Ack(nil)
	}
	closeAll(t, s, nil)
}
