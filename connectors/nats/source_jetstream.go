package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// jsSource reads a JetStream stream through durable pull consumers, one
// per partition this subtask owns (partition p of P is subtask p % P's).
//
// Offsets are stream sequences. A partition's position is its contiguous
// acknowledged frontier: the sequence after the last message of the
// longest prefix of delivered batches that were all acknowledged. The
// consumer acknowledges all-or-nothing (AckAll): when the frontier moves,
// the source acknowledges the message just below it, which acknowledges
// every earlier one, so the server's ack floor is the frontier, never
// past a row the job has not finished with.
//
// At Connect the source creates or updates each consumer with the
// connector's settings and resets it (the consumer reset API, nats-server
// 2.14 or later): to the restored position when there is one, else to its
// ack floor + 1. Either way the consumer delivers again, in order and at
// once, what a previous run read and did not acknowledge, instead of after
// its ack wait.
type jsSource struct {
	in   *input
	info connectors.TaskInfo
	log  *slog.Logger
	// parts are the partitions this subtask reads.
	parts    []*jsPart
	restored map[int32]int64

	msgs chan jsItem   // from the consumers' handlers to Read
	stop chan struct{} // closed by Close: handlers stop waiting on msgs
	// fatal is the first error a consumer reported that ends reading
	// (its consumer was deleted), set once (any goroutine), and fatalSet
	// is closed then.
	fatal     atomic.Pointer[error]
	fatalSet  chan struct{}
	fatalOnce sync.Once

	mu     sync.Mutex // guards nc and closed against Close
	nc     *natsgo.Conn
	closed bool

	// Read's goroutine only.
	connected bool
	failed    error
	ready     []jsBatch
}

// jsPart is one partition: a subject of the stream (or all of it) and
// its consumer.
type jsPart struct {
	idx      int32
	subject  string // the consumer's filter; "" for the whole stream
	consumer string
	topic    string // Position.Topic and the metrics' subject label
	tracker  *connectors.Tracker
	cc       jetstream.ConsumeContext

	mu      sync.Mutex // guards unacked
	unacked []jsSpan   // delivered batches not yet under the frontier, in order

	pending atomic.Int64 // NumPending of the last message read (-1: none yet)
	skipped atomic.Int64 // deliveries skipped as redeliveries

	// Read's goroutine only.
	b    *rowBuilder
	next uint64        // the lowest stream sequence not yet read
	last jetstream.Msg // the last message added to b
}

type jsSpan struct {
	end  int64
	last jetstream.Msg
}

type jsItem struct {
	p   *jsPart
	msg jetstream.Msg
}

type jsBatch struct {
	rec        arrow.RecordBatch
	p          *jsPart
	first, end int64
	last       jetstream.Msg
}

func newJSSource(in *input, info connectors.TaskInfo, par int, lg *slog.Logger) *jsSource {
	m := in.cfg.Mode
	s := &jsSource{in: in, info: info, log: lg, restored: map[int32]int64{}, stop: make(chan struct{}), fatalSet: make(chan struct{})}
	n := max(len(m.Subjects), 1)
	for i := 0; i < n; i++ {
		if i%par != info.Subtask {
			continue
		}
		p := &jsPart{idx: int32(i), consumer: m.ConsumerName, topic: m.Stream}
		if len(m.Subjects) > 0 {
			p.subject, p.topic = m.Subjects[i], m.Subjects[i]
			p.consumer = m.ConsumerName + "-" + strconv.Itoa(i)
		}
		p.tracker = connectors.NewTracker(p.topic)
		p.pending.Store(-1)
		s.parts = append(s.parts, p)
	}
	return s
}

// topicOf is what partition i's positions carry as their topic.
func (s *jsSource) topicOf(i int32) string {
	if m := s.in.cfg.Mode; len(m.Subjects) > 0 {
		return m.Subjects[i]
	}
	return s.in.cfg.Mode.Stream
}

// Seek makes the next Connect reset each partition's consumer to its
// position. A position names its partition by index and by subject (or
// stream): one whose subject is not the partition's any more is an error,
// since mode.subjects changed order. Positions of partitions the config
// no longer has are ignored. Must be called before Connect.
func (s *jsSource) Seek(positions []connectors.Position) error {
	if s.connected {
		return errors.New("nats: Seek after Connect")
	}
	n := int32(max(len(s.in.cfg.Mode.Subjects), 1))
	for _, p := range positions {
		if p.Partition < 0 || p.Partition >= n {
			s.log.Warn("ignoring the position of a partition the input no longer has", "partition", p.Partition, "subject", p.Topic, "offset", p.Offset)
			continue
		}
		if want := s.topicOf(p.Partition); p.Topic != "" && p.Topic != want {
			return fmt.Errorf("nats: the position of partition %d is for %q, but partition %d reads %q now: mode.subjects must keep their order across restarts", p.Partition, p.Topic, p.Partition, want)
		}
		if p.Offset < 0 {
			return fmt.Errorf("nats: negative offset %d for partition %d", p.Offset, p.Partition)
		}
		s.restored[p.Partition] = p.Offset
	}
	return nil
}

// Positions returns the frontier of every partition this subtask reads,
// once connected.
func (s *jsSource) Positions() []connectors.Position {
	var out []connectors.Position
	for _, p := range s.parts {
		out = append(out, p.tracker.Positions()...)
	}
	return out
}

// Connect connects, looks the stream up, and creates (or updates) and
// resets the consumer of every partition, then starts pulling. ctx bounds
// only connecting.
func (s *jsSource) Connect(ctx context.Context) error {
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
	if len(s.parts) == 0 {
		return nil // another subtask reads every partition
	}
	cfg := &s.in.cfg
	nc, err := dial(ctx, cfg.URL, cfg.Auth, cfg.TLS, connName(s.info.JobID, s.info.OperatorID, s.info.Subtask), s.log)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.nc = nc
	s.mu.Unlock()
	if err := s.start(ctx, nc); err != nil {
		s.stopConsumers(context.Background())
		return err
	}
	return nil
}

// start sets up every partition's consumer and starts consuming.
func (s *jsSource) start(ctx context.Context, nc *natsgo.Conn) error {
	m := s.in.cfg.Mode
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	stream, err := js.Stream(rctx, m.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("nats: stream %q does not exist (create it first: the source reads a stream, it does not define one): %w", m.Stream, err)
	}
	if err != nil {
		return fmt.Errorf("nats: looking up stream %q: %w (is JetStream enabled on the server?)", m.Stream, err)
	}
	info := stream.CachedInfo()
	if info.Config.Retention != jetstream.LimitsPolicy {
		s.log.Warn("the stream deletes acknowledged messages (retention "+info.Config.Retention.String()+"): a restore of a checkpoint cannot read again the messages acknowledged after it, and fails", "stream", m.Stream)
	}
	s.msgs = make(chan jsItem, 2*s.in.cfg.BatchSize)
	for _, p := range s.parts {
		if err := s.startPart(rctx, js, stream, info, p); err != nil {
			return err
		}
	}
	return nil
}

func (s *jsSource) startPart(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, info *jetstream.StreamInfo, p *jsPart) error {
	m := s.in.cfg.Mode
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       p.consumer,
		Description:   fmt.Sprintf("arkflow %s/%s partition %d", s.info.JobID, s.info.OperatorID, p.idx),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       time.Duration(m.AckWaitMS) * time.Millisecond,
		MaxDeliver:    -1,
		MaxAckPending: m.MaxAckPending,
		FilterSubject: p.subject,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	})
	if err != nil {
		return fmt.Errorf("nats: creating or updating consumer %q of stream %q: %w (the source manages its consumer's settings; a consumer of that name created otherwise cannot take them: delete it, or choose another consumer_name)", p.consumer, m.Stream, err)
	}
	var res *jetstream.ConsumerResetResponse
	if off, ok := s.restored[p.idx]; ok {
		seq := uint64(max(off, 1))
		if first := info.State.FirstSeq; seq < first {
			if p.subject == "" {
				return fmt.Errorf("nats: stream %q: the restored position %d is gone: the stream starts at sequence %d now (its limits or retention deleted messages the job had not processed), and the source never skips messages on its own", m.Stream, seq, first)
			}
			s.log.Warn("messages below the stream's first sequence were deleted; those of this subject among them, if any, were never processed", "stream", m.Stream, "subject", p.subject, "restored", seq, "first", first)
		}
		res, err = js.ResetConsumerToSequence(ctx, m.Stream, p.consumer, seq)
	} else {
		res, err = js.ResetConsumer(ctx, m.Stream, p.consumer)
	}
	if err != nil {
		return fmt.Errorf("nats: resetting consumer %q of stream %q: %w (the source needs nats-server 2.14 or later, for the consumer reset API)", p.consumer, m.Stream, err)
	}
	b, err := newRowBuilder(s.in)
	if err != nil {
		return err
	}
	p.b = b
	p.next = res.ResetSeq
	p.tracker.Start(p.idx, int64(res.ResetSeq))
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		select {
		case s.msgs <- jsItem{p, msg}:
		case <-s.stop:
		}
	}, jetstream.PullMaxMessages(max(2*s.in.cfg.BatchSize, 100)), jetstream.ConsumeErrHandler(s.consumeError(p)))
	if err != nil {
		return fmt.Errorf("nats: consuming from consumer %q of stream %q: %w", p.consumer, m.Stream, err)
	}
	p.cc = cc
	s.log.Info("reading JetStream stream", "stream", m.Stream, "consumer", p.consumer, "subject", p.subject, "partition", p.idx, "from_sequence", res.ResetSeq)
	return nil
}

// consumeError handles what a consumer reports while consuming: a deleted
// consumer ends reading; the rest (missed heartbeats while the server is
// away, reconnects) is logged while the client recovers.
func (s *jsSource) consumeError(p *jsPart) jetstream.ConsumeErrHandlerFunc {
	return func(_ jetstream.ConsumeContext, err error) {
		if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
			e := fmt.Errorf("nats: consumer %q of stream %q: %w (was it deleted while the job ran?)", p.consumer, s.in.cfg.Mode.Stream, err)
			s.fatalOnce.Do(func() {
				s.fatal.Store(&e)
				close(s.fatalSet)
			})
			return
		}
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if !closed {
			s.log.Warn("JetStream consumer error (retrying)", "consumer", p.consumer, "error", err)
		}
	}
}

// Read returns the messages that arrived, at most batch_size of one
// partition, waiting for the first until ctx is done. Redeliveries of
// messages already read (their ack wait ran out while the job held them)
// are skipped. A payload that does not decode fails the source with an
// error naming the stream, subject, sequence and field (after the batch
// of the messages before it).
func (s *jsSource) Read(ctx context.Context) (connectors.Batch, error) {
	if !s.connected {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return connectors.Batch{}, ErrClosed
		}
		return connectors.Batch{}, errNotConnected
	}
	for {
		if len(s.ready) > 0 {
			b := s.ready[0]
			s.ready[0] = jsBatch{}
			s.ready = s.ready[1:]
			return connectors.Batch{Record: b.rec, Partition: int(b.p.idx), Ack: s.ackFunc(b)}, nil
		}
		if s.failed != nil {
			return connectors.Batch{}, s.failed
		}
		if e := s.fatal.Load(); e != nil {
			s.failed = *e
			continue
		}
		if len(s.parts) == 0 {
			<-ctx.Done()
			return connectors.Batch{}, ctx.Err()
		}
		select {
		case it := <-s.msgs:
			s.add(it)
		case <-ctx.Done():
			return connectors.Batch{}, ctx.Err()
		case <-s.fatalSet:
			continue
		}
		// Then what is there without waiting, up to a batch's worth.
	more:
		for n := 1; n < s.in.cfg.BatchSize && s.failed == nil; n++ {
			select {
			case it := <-s.msgs:
				s.add(it)
			default:
				break more
			}
		}
		for _, p := range s.parts {
			s.flush(p)
		}
	}
}

// add appends one delivered message to its partition's rows, skipping
// redeliveries.
func (s *jsSource) add(it jsItem) {
	p := it.p
	meta, ok := parseAckReply(it.msg.Reply())
	if !ok {
		s.failed = fmt.Errorf("nats: a message of consumer %q without JetStream metadata (reply subject %q)", p.consumer, it.msg.Reply())
		return
	}
	seq := meta.streamSeq
	if seq < p.next {
		p.skipped.Add(1) // in flight since its first delivery
		return
	}
	p.pending.Store(int64(meta.pending))
	if err := p.b.add(it.msg.Data(), s.info.OperatorID, p.idx, int64(seq), it.msg.Subject(), int64(meta.tsNanos/1e6)); err != nil {
		s.failed = decodeError(fmt.Sprintf("stream %q subject %q sequence %d", s.in.cfg.Mode.Stream, it.msg.Subject(), seq), err)
		s.flush(p)
		return
	}
	p.next = seq + 1
	p.last = it.msg
	if p.b.Rows >= s.in.cfg.BatchSize {
		s.flush(p)
	}
}

// flush queues a partition's rows as a batch.
func (s *jsSource) flush(p *jsPart) {
	first, end := p.b.First, p.b.End
	if rec := p.b.Take(); rec != nil {
		s.ready = append(s.ready, jsBatch{rec: rec, p: p, first: first, end: end, last: p.last})
		p.last = nil
	}
}

// ackFunc delivers a batch's range to its partition's frontier and
// returns its acknowledgement: when the frontier moved, the message just
// below it is acknowledged to the server, and with it every earlier one.
func (s *jsSource) ackFunc(b jsBatch) func(error) {
	p := b.p
	done := p.tracker.Deliver(p.idx, b.first, b.end)
	p.mu.Lock()
	p.unacked = append(p.unacked, jsSpan{end: b.end, last: b.last})
	p.mu.Unlock()
	return func(err error) {
		done(err)
		if err != nil {
			return
		}
		fr, _ := p.tracker.Frontier(p.idx)
		p.mu.Lock()
		var ack jetstream.Msg
		i := 0
		for i < len(p.unacked) && p.unacked[i].end <= fr {
			ack = p.unacked[i].last
			p.unacked[i] = jsSpan{}
			i++
		}
		p.unacked = p.unacked[i:]
		p.mu.Unlock()
		if ack != nil {
			// Fire and forget: a lost acknowledgement makes the server
			// deliver again, and a restart resets to the ack floor.
			_ = ack.Ack()
		}
	}
}

// stopConsumers stops pulling and closes the connection, after sending
// the acknowledgements made so far (a flush ctx and RequestTimeout bound).
func (s *jsSource) stopConsumers(ctx context.Context) {
	s.mu.Lock()
	nc := s.nc
	s.nc = nil
	s.mu.Unlock()
	for _, p := range s.parts {
		if p.cc != nil {
			p.cc.Stop()
			p.cc = nil
		}
	}
	if nc != nil {
		fctx, cancel := context.WithTimeout(ctx, RequestTimeout)
		_ = nc.FlushWithContext(fctx)
		cancel()
		nc.Close()
	}
}

// Close stops the consumers (which stay on the server, with their ack
// floors) and closes the connection; ctx bounds sending the last
// acknowledgements. Safe without Connect and more than once.
func (s *jsSource) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.stopConsumers(ctx)
	for _, b := range s.ready {
		b.rec.Release()
	}
	s.ready = nil
	for _, p := range s.parts {
		if p.b != nil {
			p.b.Release()
		}
	}
	s.connected = false
	return nil
}

var (
	_ connectors.Source     = (*jsSource)(nil)
	_ connectors.Positioner = (*jsSource)(nil)
)
