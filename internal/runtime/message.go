package runtime

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
)

// kind says what a message carries. Control messages travel in the same
// channels as data, so they stay in order with it: a watermark never
// overtakes the rows it follows, and later a checkpoint barrier will not
// either.
type kind uint8

const (
	// msgData carries rows.
	msgData kind = iota
	// msgWatermark says no row with an event time below wm will follow on
	// this channel.
	msgWatermark
	// msgEnd says the sender will send nothing more. A bounded input's end
	// is preceded by a watermark of +∞; a graceful stop's end is not, so
	// that windows keep their contents for the next run.
	msgEnd
	// msgBarrier marks a checkpoint's cut: everything before it on this
	// channel was sent before the cut.
	msgBarrier
)

type message struct {
	kind kind
	rec  arrow.RecordBatch
	ack  *ack.Node
	wm   int64
	id   uint64 // barrier id
}

// inbox is the input side of a chain instance: one channel per upstream
// sender (slot), so that per-sender order holds and, later, barrier
// alignment can hold back one sender while reading the others. With several
// slots, one forwarding goroutine per slot merges them; holding a slot back
// means its forwarder stops forwarding, so its sender feels backpressure.
type inbox struct {
	slots  []chan message
	merged chan slotMessage
	// from is the upstream operator of each slot.
	from []string
}

type slotMessage struct {
	slot int
	msg  message
}

func newInbox(slots int, capacity int) *inbox {
	ib := &inbox{slots: make([]chan message, slots)}
	for i := range ib.slots {
		ib.slots[i] = make(chan message, capacity)
	}
	return ib
}

// start launches the forwarders of a multi-slot inbox. They exit after
// forwarding their slot's end, or when ctx is done.
func (ib *inbox) start(ctx context.Context) {
	if len(ib.slots) <= 1 {
		return
	}
	ib.merged = make(chan slotMessage, len(ib.slots))
	for i, ch := range ib.slots {
		go func(slot int, ch chan message) {
			for {
				select {
				case <-ctx.Done():
					return
				case m := <-ch:
					select {
					case ib.merged <- slotMessage{slot, m}:
					case <-ctx.Done():
						return
					}
					if m.kind == msgEnd {
						return
					}
				}
			}
		}(i, ch)
	}
}

// next returns the next message and its slot.
func (ib *inbox) next(ctx context.Context) (message, int, error) {
	if len(ib.slots) == 1 {
		select {
		case m := <-ib.slots[0]:
			return m, 0, nil
		case <-ctx.Done():
			return message{}, 0, ctx.Err()
		}
	}
	select {
	case sm := <-ib.merged:
		return sm.msg, sm.slot, nil
	case <-ctx.Done():
		return message{}, 0, ctx.Err()
	}
}
