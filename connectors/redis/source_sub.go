package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// subSource reads pub/sub channels or patterns: at-most-once. Redis gives
// a message to the subscribers connected when it is published and keeps
// nothing, so a message published while the source is not subscribed
// (stopped, restarting, reconnecting) is never read. Only subtask 0
// subscribes (others would read every message again).
//
// Offsets number the messages read; they carry on from the restored
// position, or from the start time in nanoseconds when that is higher, so
// they keep growing across restarts. The source is
// connectors.Unrewindable: behind a write-ahead log, rows it read are
// replayed from the log.
type subSource struct {
	in      *input
	info    connectors.TaskInfo
	log     *slog.Logger
	tracker *connectors.Tracker
	seek    int64

	mu     sync.Mutex // guards client, ps and closed against Close
	client goredis.UniversalClient
	ps     *goredis.PubSub
	closed bool

	// Read's goroutine only.
	ch        <-chan *goredis.Message
	b         *rowBuilder
	next      int64
	connected bool
	failed    error
}

func newSubSource(in *input, info connectors.TaskInfo, lg *slog.Logger) *subSource {
	return &subSource{in: in, info: info, log: lg, tracker: connectors.NewTracker("")}
}

// Unrewindable marks the source as one whose messages cannot be read
// again.
func (s *subSource) Unrewindable() {}

// Seek makes the offsets of the next Connect go on from partition 0's
// position. It reads nothing again.
func (s *subSource) Seek(positions []connectors.Position) error {
	if s.connected {
		return errors.New("redis: Seek after Connect")
	}
	for _, p := range positions {
		if p.Partition == 0 {
			if p.Offset < 0 {
				return fmt.Errorf("redis: negative offset %d for partition 0", p.Offset)
			}
			s.seek = p.Offset
		}
	}
	return nil
}

// Positions returns the offset after the last acknowledged message.
func (s *subSource) Positions() []connectors.Position { return s.tracker.Positions() }

// Connect connects and subscribes (subtask 0). ctx bounds only connecting.
func (s *subSource) Connect(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if s.connected {
		return errors.New("redis: already connected")
	}
	s.connected = true
	if s.info.Subtask != 0 {
		return nil
	}
	b, err := newRowBuilder(s.in)
	if err != nil {
		return err
	}
	s.b = b
	client, err := dial(ctx, s.in.cfg.Mode, s.in.cfg.TLS, connName(s.info.JobID, s.info.OperatorID, s.info.Subtask))
	if err != nil {
		return err
	}
	sub := s.in.cfg.RedisType.Subscribe
	var ps *goredis.PubSub
	if sub.Type == "patterns" {
		ps = client.PSubscribe(ctx, sub.Patterns...)
	} else {
		ps = client.Subscribe(ctx, sub.Channels...)
	}
	// The subscription exists once the server confirmed it: messages
	// published after Connect returns are read.
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		_ = client.Close()
		return fmt.Errorf("redis: subscribing to %v: %w", append(sub.Channels, sub.Patterns...), err)
	}
	s.ch = ps.Channel(goredis.WithChannelSize(max(2*s.in.cfg.BatchSize, 100)))
	s.next = max(s.seek, time.Now().UnixNano())
	s.tracker.Start(0, s.next)
	s.mu.Lock()
	s.client, s.ps = client, ps
	s.mu.Unlock()
	s.log.Info("subscribed to Redis pub/sub (at-most-once)", "channels", sub.Channels, "patterns", sub.Patterns)
	return nil
}

// Read returns the messages that arrived, at most batch_size, waiting for
// the first until ctx is done. A payload that does not decode fails the
// source with an error naming the channel, the message's offset and the
// field (after the batch of the messages before it).
func (s *subSource) Read(ctx context.Context) (connectors.Batch, error) {
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
	if s.ch == nil {
		<-ctx.Done()
		return connectors.Batch{}, ctx.Err()
	}
	var m *goredis.Message
	select {
	case m = <-s.ch:
	case <-ctx.Done():
		return connectors.Batch{}, ctx.Err()
	}
	for m != nil {
		if err := s.b.addString(m.Payload, s.info.OperatorID, 0, s.next, m.Channel, -1); err != nil {
			s.failed = decodeError(fmt.Sprintf("channel %q message at offset %d", m.Channel, s.next), err)
			if s.b.Rows == 0 {
				return connectors.Batch{}, s.failed
			}
			return s.batch(), nil
		}
		s.next++
		if s.b.Rows >= s.in.cfg.BatchSize {
			break
		}
		select {
		case m = <-s.ch:
		default:
			m = nil
		}
	}
	return s.batch(), nil
}

func (s *subSource) batch() connectors.Batch {
	first, end := s.b.First, s.b.End
	rec := s.b.Take()
	return connectors.Batch{Record: rec, Partition: 0, Ack: s.tracker.Deliver(0, first, end)}
}

// Close unsubscribes and closes the connection. Safe without Connect and
// more than once.
func (s *subSource) Close(context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	client, ps := s.client, s.ps
	s.client, s.ps = nil, nil
	s.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
	if client != nil {
		_ = client.Close()
	}
	if s.b != nil {
		s.b.Release()
	}
	s.connected = false
	return nil
}

var (
	_ connectors.Source       = (*subSource)(nil)
	_ connectors.Positioner   = (*subSource)(nil)
	_ connectors.Unrewindable = (*subSource)(nil)
)
