package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// source reads the messages of the subscribed topics. QoS 1 messages are
// acknowledged to the broker (PUBACK) only once they are safe: with a
// write-ahead log in front of the source (the runtime calls SetCovered),
// once the log holds them (Batch.Accepted); without one, once every sink
// acknowledged the rows derived from them (Batch.Ack). Whatever is not
// acknowledged, the broker delivers again after a reconnect with the same
// client ID and a persistent session (clean_session false), and the
// source recognises by their marks the redeliveries of messages it took
// (see marks), so that none is read twice.
//
// Offsets number the messages a subtask read; they carry on from the
// restored position, or from the start time in nanoseconds when that is
// higher, so they keep growing across restarts, as the runtime's replay
// rules need. The source is connectors.Unrewindable.
type source struct {
	in   *input
	info connectors.TaskInfo
	log  *slog.Logger
	ep   endpoint
	// subscribes: this subtask subscribes (all of them with shared
	// subscriptions, else only subtask 0: others would read every message
	// again).
	subscribes bool
	part       int32

	tracker *connectors.Tracker
	seek    int64 // the restored position; 0 without one

	msgs chan paho.Message
	done chan struct{} // closed by Close: the message handler stops waiting

	mu     sync.Mutex // guards client and closed against Close
	client paho.Client
	closed bool

	// walAhead: a write-ahead log is in front of the source (SetCovered),
	// so a message is safe, and acknowledged, once the log holds it.
	walAhead atomic.Bool
	marks    *marks

	connects    atomic.Int64
	redelivered atomic.Int64
	skipped     atomic.Int64

	// Read's goroutine only.
	b         *rowBuilder
	taken     []*delivery // the QoS 1 messages of the batch being built
	next      int64       // offset of the next message
	connected bool
	failed    error
}

func newSource(in *input, info connectors.TaskInfo, lg *slog.Logger) *source {
	cfg := &in.cfg
	s := &source{
		in: in, info: info, log: lg, tracker: connectors.NewTracker(""),
		ep: endpoint{
			host: cfg.Host, port: cfg.Port, clientID: subtaskClientID(cfg.ClientID, info.Subtask),
			username: cfg.Username, password: cfg.Password, cleanSession: *cfg.CleanSession,
			keepAlive: cfg.KeepAlive, tls: cfg.TLS,
		},
		msgs:  make(chan paho.Message, max(cfg.BatchSize, 256)),
		done:  make(chan struct{}),
		marks: newMarks(),
	}
	if in.shared {
		s.subscribes, s.part = true, int32(info.Subtask)
	} else {
		s.subscribes = info.Subtask == 0
	}
	return s
}

// Unrewindable marks the source as one whose messages cannot be read
// again.
func (s *source) Unrewindable() {}

// SetCovered is called by the write-ahead log in front of the source
// (connectors.CoverageAware): messages are then acknowledged to the broker
// once the log holds them.
func (s *source) SetCovered(func() []connectors.Position) { s.walAhead.Store(true) }

// Seek makes the offsets of the next Connect go on from the position of
// this subtask's partition. It reads nothing again.
func (s *source) Seek(positions []connectors.Position) error {
	if s.connected {
		return errors.New("mqtt: Seek after Connect")
	}
	for _, p := range positions {
		if p.Partition == s.part {
			if p.Offset < 0 {
				return fmt.Errorf("mqtt: negative offset %d for partition %d", p.Offset, p.Partition)
			}
			s.seek = p.Offset
		}
	}
	return nil
}

// Positions returns the offset after the last acknowledged message, once
// connected (a subtask that does not subscribe has none).
func (s *source) Positions() []connectors.Position { return s.tracker.Positions() }

// Connect connects and subscribes. ctx bounds only connecting.
func (s *source) Connect(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if s.connected {
		return errors.New("mqtt: already connected")
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
	o, err := s.ep.options()
	if err != nil {
		return err
	}
	handler := func(_ paho.Client, m paho.Message) {
		select {
		case s.msgs <- m:
		case <-s.done:
		}
	}
	o.SetAutoAckDisabled(true)
	o.SetDefaultPublishHandler(handler)
	o.SetOnConnectHandler(s.onConnect)
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		s.log.Warn("lost the connection to the MQTT broker; reconnecting", "broker", s.ep.address(), "error", err)
	})
	c := paho.NewClient(o)
	present, err := connect(ctx, c, s.ep)
	if err != nil {
		return err
	}
	if err := s.subscribe(ctx, c); err != nil {
		c.Disconnect(0)
		return err
	}
	s.next = max(s.seek, time.Now().UnixNano())
	s.tracker.Start(s.part, s.next)
	s.mu.Lock()
	s.client = c
	s.mu.Unlock()
	if !present && !s.ep.cleanSession && s.seek > 0 {
		s.log.Warn("the MQTT broker had no session for the client ID of a restarted source: the messages published while the job was stopped are lost "+
			"(a broker without persistence restarted, a session expired, or client_id changed)", "client_id", s.ep.clientID)
	}
	s.log.Info("subscribed to MQTT topics", "broker", s.ep.address(), "client_id", s.ep.clientID, "topics", s.in.cfg.Topics,
		"qos", *s.in.cfg.QoS, "session_present", present, "write_ahead_log", s.walAhead.Load())
	return nil
}

// subscribe subscribes to every topic filter; a filter the broker
// refuses is an error naming it.
func (s *source) subscribe(ctx context.Context, c paho.Client) error {
	filters := make(map[string]byte, len(s.in.cfg.Topics))
	for _, t := range s.in.cfg.Topics {
		filters[t] = byte(*s.in.cfg.QoS)
	}
	tok := c.SubscribeMultiple(filters, nil)
	if err := wait(ctx, tok, RequestTimeout); err != nil {
		return fmt.Errorf("mqtt: subscribing to %v: %w", s.in.cfg.Topics, err)
	}
	for _, t := range s.in.cfg.Topics {
		if q, ok := tok.(*paho.SubscribeToken).Result()[t]; ok && q == 0x80 {
			return fmt.Errorf("mqtt: the broker refused the subscription to %q (not authorised, or not a valid filter for it)", t)
		}
	}
	return nil
}

// onConnect runs at every connect; after a reconnect with a clean session
// the subscriptions are made again (a persistent session keeps them).
func (s *source) onConnect(c paho.Client) {
	if s.connects.Add(1) == 1 {
		return
	}
	s.log.Info("reconnected to the MQTT broker", "broker", s.ep.address())
	if s.ep.cleanSession {
		go func() {
			if err := s.subscribe(context.Background(), c); err != nil {
				s.log.Error("subscribing again after a reconnect", "error", err)
			}
		}()
	}
}

// Read returns the messages that arrived, at most batch_size, waiting for
// the first until ctx is done. A redelivery of a message the source took
// is skipped (see marks). A payload that does not decode fails the source
// with an error naming the topic, the message's offset and packet
// identifier, and the field (after the batch of the messages before it).
func (s *source) Read(ctx context.Context) (connectors.Batch, error) {
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
	for {
		m, err := s.next1(ctx)
		if err != nil {
			return connectors.Batch{}, err
		}
		for {
			if err := s.add(m); err != nil {
				s.failed = err
				if s.b.Rows == 0 {
					return connectors.Batch{}, s.failed
				}
				return s.batch(), nil // the next Read returns the error
			}
			if s.b.Rows >= s.in.cfg.BatchSize {
				return s.batch(), nil
			}
			select {
			case m = <-s.msgs:
				continue
			default:
			}
			break
		}
		if s.b.Rows > 0 {
			return s.batch(), nil
		}
		// Every message was a redelivery skipped: wait for more.
	}
}

// stallWarning is how long Read waits for a message, while messages it
// read are not yet acknowledged (no write-ahead log), before it warns.
var stallWarning = 10 * time.Second

// next1 waits for the next message until ctx is done. Without a
// write-ahead log it warns when none comes while messages read wait for
// their acknowledgement: the broker sends only so many without a PUBACK,
// and a job that holds rows (open windows) waits for more rows forever.
func (s *source) next1(ctx context.Context) (paho.Message, error) {
	select {
	case m := <-s.msgs:
		return m, nil
	default:
	}
	t := time.NewTimer(stallWarning)
	defer t.Stop()
	for {
		select {
		case m := <-s.msgs:
			return m, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			if n := s.marks.pending(); n > 0 && !s.walAhead.Load() {
				s.log.Warn("no MQTT message came while messages read wait for their acknowledgement: the broker sends at most its "+
					"max_inflight_messages (Mosquitto: 20) without a PUBACK, which the source sends once the sinks have the rows; "+
					"a job that holds rows (open windows) needs a durability block on the source, or a higher broker limit",
					"unacknowledged", n, "waited", stallWarning)
			}
		}
	}
}

// add appends message m as a row, unless it is a redelivery of a message
// the source took.
func (s *source) add(m paho.Message) error {
	var d *delivery
	var mk mark
	qos1 := m.Qos() > 0
	if qos1 {
		mk = markOf(m.Topic(), m.Payload(), m.MessageID())
		if m.Duplicate() {
			s.redelivered.Add(1)
			if s.marks.redelivery(mk, m) {
				s.skipped.Add(1)
				s.log.Info("skipped the redelivery of a message taken before", "topic", m.Topic(), "packet_id", m.MessageID())
				return nil
			}
		}
		d = &delivery{mark: mk, msg: m}
	}
	if err := s.b.add(m.Payload(), s.info.OperatorID, s.part, s.next, m.Topic(), mk, qos1); err != nil {
		return decodeError(fmt.Sprintf("topic %q message at offset %d (packet id %d)", m.Topic(), s.next, m.MessageID()), err)
	}
	if d != nil {
		s.marks.take(d)
		s.taken = append(s.taken, d)
	}
	s.next++
	return nil
}

// batch takes the built rows as a batch, delivers their range to the
// tracker, and arranges for the acknowledgement of their QoS 1 messages to
// the broker.
func (s *source) batch() connectors.Batch {
	first, end := s.b.First, s.b.End
	rec := s.b.Take()
	ack := s.tracker.Deliver(s.part, first, end)
	taken := s.taken
	s.taken = nil
	b := connectors.Batch{Record: rec, Partition: int(s.part), Ack: ack}
	if len(taken) == 0 {
		return b
	}
	if s.walAhead.Load() {
		b.Accepted = func(err error) {
			if err == nil {
				s.marks.accept(taken)
			}
		}
		return b
	}
	b.Ack = func(err error) {
		ack(err)
		if err == nil {
			s.marks.accept(taken)
		}
	}
	return b
}

// Close disconnects (the broker keeps a persistent session, and the
// messages not acknowledged in it). Safe without Connect and more than
// once.
func (s *source) Close(context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.client
	s.client = nil
	close(s.done)
	s.mu.Unlock()
	if c != nil {
		flushAcks(c)
		c.Disconnect(250)
	}
	if s.b != nil {
		s.b.Release()
	}
	s.connected = false
	return nil
}

// flushAcks waits, for at most a second, until the broker has the PUBACKs
// sent so far: it answers an UNSUBSCRIBE sent after them only once it
// processed them (a broker handles a client's packets in order). A
// DISCONNECT right after them may otherwise close the connection before
// the broker read them, and it would deliver those messages again.
func flushAcks(c paho.Client) {
	tok := c.Unsubscribe("$arkflow/flush")
	tok.WaitTimeout(time.Second)
}

var (
	_ connectors.Source         = (*source)(nil)
	_ connectors.Positioner     = (*source)(nil)
	_ connectors.Unrewindable   = (*source)(nil)
	_ connectors.CoverageAware  = (*source)(nil)
	_ connectors.MetricFamilies = (*input)(nil)
)
