package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// coreSource reads core NATS subjects: at-most-once. The server gives a
// message to the subscribers connected when it arrives and keeps nothing,
// so a message published while the source is not subscribed (stopped,
// restarting, reconnecting) is never read, and one the client dropped as
// a slow consumer neither (counted in nats_dropped_messages_total).
// Acknowledgements go nowhere: there is nobody to tell.
//
// Offsets number the messages a subtask read; they carry on from the
// restored position, or from the start time in nanoseconds when that is
// higher, so they keep growing across restarts, as the runtime's replay
// rules need (the push source does the same). The source is
// connectors.Unrewindable: behind a write-ahead log, rows it read are
// replayed from the log, not asked for again.
type coreSource struct {
	in   *input
	info connectors.TaskInfo
	log  *slog.Logger
	// subscribes: this subtask subscribes (all of them with a queue
	// group, else only subtask 0: others would read every message again).
	subscribes bool
	part       int32

	tracker *connectors.Tracker
	seek    int64 // the restored position; 0 without one

	mu     sync.Mutex // guards nc and sub against Metrics and Close
	nc     *natsgo.Conn
	sub    *natsgo.Subscription
	closed bool
	// dropped is the last count of messages the client dropped (Metrics).
	dropped atomic.Int64

	// Read's goroutine only.
	b         *rowBuilder
	next      int64 // offset of the next message
	connected bool
	failed    error
}

func newCoreSource(in *input, info connectors.TaskInfo, par int, lg *slog.Logger) *coreSource {
	s := &coreSource{in: in, info: info, log: lg, tracker: connectors.NewTracker("")}
	if in.cfg.Mode.QueueGroup != "" {
		s.subscribes, s.part = true, int32(info.Subtask)
	} else {
		s.subscribes = info.Subtask == 0
	}
	return s
}

// Unrewindable marks the source as one whose messages cannot be read
// again.
func (s *coreSource) Unrewindable() {}

// Seek makes the offsets of the next Connect go on from the position of
// this subtask's partition. It reads nothing again (core NATS keeps no
// messages).
func (s *coreSource) Seek(positions []connectors.Position) error {
	if s.connected {
		return errors.New("nats: Seek after Connect")
	}
	for _, p := range positions {
		if p.Partition == s.part {
			if p.Offset < 0 {
				return fmt.Errorf("nats: negative offset %d for partition %d", p.Offset, p.Partition)
			}
			s.seek = p.Offset
		}
	}
	return nil
}

// Positions returns the offset after the last acknowledged message, once
// connected (a subtask that does not subscribe has none).
func (s *coreSource) Positions() []connectors.Position { return s.tracker.Positions() }

// Connect connects and subscribes. ctx bounds only connecting.
func (s *coreSource) Connect(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if s.connected {
		return errors.New("nats: already connected")
	}
	s.connected = true
	if !s.subscribes {
		return nil
	}
	b, err := newRowBuilder(s.in)
	if err != nil {
		return err
	}
	s.b = b
	cfg := &s.in.cfg
	nc, err := dial(ctx, cfg.URL, cfg.Auth, cfg.TLS, connName(s.info.JobID, s.info.OperatorID, s.info.Subtask), s.log)
	if err != nil {
		return err
	}
	var sub *natsgo.Subscription
	if q := cfg.Mode.QueueGroup; q != "" {
		sub, err = nc.QueueSubscribeSync(cfg.Mode.Subject, q)
	} else {
		sub, err = nc.SubscribeSync(cfg.Mode.Subject)
	}
	if err == nil {
		// The subscription exists on the server once it answered a
		// round trip: messages published after Connect returns are read.
		err = nc.FlushTimeout(RequestTimeout)
	}
	if err != nil {
		nc.Close()
		return fmt.Errorf("nats: subscribing to %q: %w", cfg.Mode.Subject, err)
	}
	s.next = max(s.seek, time.Now().UnixNano())
	s.tracker.Start(s.part, s.next)
	s.mu.Lock()
	s.nc, s.sub = nc, sub
	s.mu.Unlock()
	s.log.Info("subscribed to core NATS subject (at-most-once)", "subject", cfg.Mode.Subject, "queue_group", cfg.Mode.QueueGroup)
	return nil
}

// Read returns the messages that arrived, at most batch_size, waiting for
// the first until ctx is done. A payload that does not decode fails the
// source with an error naming the subject, the message's offset and the
// field (after the batch of the messages before it).
func (s *coreSource) Read(ctx context.Context) (connectors.Batch, error) {
	if s.failed != nil {
		return connectors.Batch{}, s.failed
	}
	if !s.connected {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return connectors.Batch{}, ErrClosed
		}
		return connectors.Batch{}, errNotConnected
	}
	if !s.subscribes {
		<-ctx.Done() // nothing to read: another subtask subscribes
		return connectors.Batch{}, ctx.Err()
	}
	m, err := s.sub.NextMsgWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return connectors.Batch{}, ctx.Err()
		}
		s.failed = fmt.Errorf("nats: reading subject %q: %w", s.in.cfg.Mode.Subject, err)
		return connectors.Batch{}, s.failed
	}
	for {
		if err := s.b.add(m.Data, s.info.OperatorID, s.part, s.next, m.Subject, -1); err != nil {
			s.failed = decodeError(fmt.Sprintf("subject %q message at offset %d", m.Subject, s.next), err)
			if s.b.Rows == 0 {
				return connectors.Batch{}, s.failed
			}
			return s.batch(), nil // the next Read returns the error
		}
		s.next++
		if s.b.Rows >= s.in.cfg.BatchSize {
			break
		}
		if m, err = s.sub.NextMsg(0); err != nil {
			break // none waiting (ErrTimeout), or closed: the next Read says
		}
	}
	return s.batch(), nil
}

// batch takes the built rows as a batch and delivers their range to the
// tracker.
func (s *coreSource) batch() connectors.Batch {
	first, end := s.b.First, s.b.End
	rec := s.b.Take()
	return connectors.Batch{Record: rec, Partition: int(s.part), Ack: s.tracker.Deliver(s.part, first, end)}
}

// Close unsubscribes and closes the connection. Safe without Connect and
// more than once.
func (s *coreSource) Close(context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	nc, sub := s.nc, s.sub
	s.nc, s.sub = nil, nil
	s.mu.Unlock()
	var err error
	if sub != nil {
		if n, derr := sub.Dropped(); derr == nil {
			s.dropped.Store(int64(n))
		}
		err = sub.Unsubscribe()
	}
	if nc != nil {
		nc.Close()
	}
	if s.b != nil {
		s.b.Release()
	}
	s.connected = false
	if err != nil && !errors.Is(err, natsgo.ErrConnectionClosed) && !errors.Is(err, natsgo.ErrBadSubscription) {
		return fmt.Errorf("nats: unsubscribing: %w", err)
	}
	return nil
}

var (
	_ connectors.Source       = (*coreSource)(nil)
	_ connectors.Positioner   = (*coreSource)(nil)
	_ connectors.Unrewindable = (*coreSource)(nil)
)
