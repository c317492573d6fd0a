package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

func init() {
	connectors.RegisterInput(Type, func(bc connectors.BuildContext) (connectors.Input, error) {
		var cfg SourceConfig
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		in, err := newInput(cfg, explicitZero(bc.Config, "batch_size"))
		if in != nil && bc.Logger != nil {
			in.log = bc.Logger
		}
		return in, err
	})
	connectors.RegisterOutput(Type, func(bc connectors.BuildContext, schema *arrow.Schema) (connectors.Output, error) {
		var cfg SinkConfig
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		return NewOutput(cfg, schema)
	})
}

// Timing of the read loop.
const (
	// pollTimeout bounds one blocking Poll, and so how long a cancelled
	// Read takes to return.
	pollTimeout = 100 * time.Millisecond
	// maxLinger is how long a partition's buffered records wait for more
	// before they are returned as a batch while records keep arriving.
	maxLinger = 50 * time.Millisecond
	// commitInterval is the minimum time between two offset commits of a
	// subtask: acknowledgements arriving in between are folded into one.
	commitInterval = 100 * time.Millisecond
)

// metaFields are the metadata columns of every batch.
func metaFields() []arrow.Field {
	return []arrow.Field{
		{Name: connectors.MetaSource, Type: arrow.BinaryTypes.String},
		{Name: connectors.MetaPartition, Type: arrow.PrimitiveTypes.Int32},
		{Name: connectors.MetaOffset, Type: arrow.PrimitiveTypes.Int64},
		{Name: connectors.MetaTopic, Type: arrow.BinaryTypes.String},
		{Name: connectors.MetaKey, Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: connectors.MetaTimestamp, Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
	}
}

// Input is a validated Kafka input.
type Input struct {
	cfg      SourceConfig
	declared *arrow.Schema // value columns
	schema   *arrow.Schema // value columns + metadata

	// partitions caches the largest partition count of the topics (-1:
	// not looked up yet); see Partitions.
	partitions atomic.Int64
	partsOnce  sync.Once
	// log is the operator's logger (BuildContext.Logger; discarded for
	// an Input from NewInput): the partition lookup logs there.
	log *slog.Logger
}

// NewInput checks cfg, applies its defaults and returns the input. It does
// no I/O. Errors name the config field at fault.
func NewInput(cfg SourceConfig) (*Input, error) { return newInput(cfg, nil) }

func newInput(cfg SourceConfig, zero map[string]bool) (*Input, error) {
	if err := checkSource(&cfg, zero); err != nil {
		return nil, err
	}
	var declared *arrow.Schema
	if cfg.Format == FormatJSON {
		s, err := cfg.Schema.Arrow("schema")
		if err != nil {
			return nil, err
		}
		declared = s
	} else {
		declared = arrow.NewSchema([]arrow.Field{{Name: RawValueColumn, Type: arrow.BinaryTypes.Binary, Nullable: true}}, nil)
	}
	fields := append(append([]arrow.Field(nil), declared.Fields()...), metaFields()...)
	in := &Input{cfg: cfg, declared: declared, schema: arrow.NewSchema(fields, nil), log: slog.New(slog.DiscardHandler)}
	in.partitions.Store(-1)
	return in, nil
}

// Config returns the config with defaults applied.
func (in *Input) Config() SourceConfig { return in.cfg }

// Schema is the value columns (the declared schema, or the binary "value"
// column of format raw) followed by __meta_source, __meta_partition,
// __meta_offset, __meta_topic, __meta_key and __meta_timestamp.
func (in *Input) Schema() *arrow.Schema { return in.schema }

// Partitions is the largest partition count of the configured topics,
// from the brokers' metadata. Batches carry the Kafka partition number as
// their partition, so with several topics, partitions of the same number
// share one event-time partition.
//
// The count is looked up once, on the first call (the runtime asks only
// when it starts a job whose source uses event time), bounded by
// MetadataTimeout; a source that connects first fills it in. When the
// brokers cannot be reached it is 0, and watermarks then track partitions
// as they deliver rows.
func (in *Input) Partitions() int {
	in.partsOnce.Do(func() {
		if in.partitions.Load() >= 0 {
			return
		}
		conf := consumerConfig(&in.cfg)
		(*conf)["go.logs.channel.enable"] = true
		lg := in.log.With("connector", "kafka")
		c, err := kafka.NewConsumer(conf)
		if err != nil {
			lg.Warn("cannot look up the partitions of the input's topics", "topics", in.cfg.Topics, "error", err)
			return
		}
		go drainLogs(c.Logs(), lg, nil)
		defer c.Close()
		counts, err := partitionCounts(c, in.cfg.Topics, MetadataTimeout)
		if err != nil {
			lg.Warn("cannot look up the partitions of the input's topics", "topics", in.cfg.Topics, "error", err)
			return
		}
		in.notePartitions(counts)
	})
	return int(max(in.partitions.Load(), 0))
}

func (in *Input) notePartitions(counts map[string]int) {
	n := 0
	for _, c := range counts {
		n = max(n, c)
	}
	in.partitions.Store(int64(n))
}

// NewSource returns the source of one subtask. It does no I/O. With
// parallelism 1 the source subscribes to the topics with consumer_group
// (the group assigns the partitions, and rebalances move them); with more,
// subtask s is assigned partition p of every topic when p % P == s.
func (in *Input) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	return in.newSource(info)
}

func (in *Input) newSource(info connectors.TaskInfo) (*Source, error) {
	par := max(info.Parallelism, 1)
	if info.Subtask < 0 || info.Subtask >= par {
		return nil, fmt.Errorf("kafka: subtask %d out of range for parallelism %d", info.Subtask, par)
	}
	lg := info.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		in:         in,
		cfg:        &in.cfg,
		info:       info,
		par:        par,
		subscribe:  par == 1,
		log:        lg.With("connector", "kafka"), // job, operator and subtask come with info.Logger
		trackers:   map[string]*connectors.Tracker{},
		assigned:   map[tp]bool{},
		committed:  map[tp]int64{},
		restored:   map[tp]int64{},
		groupFloor: map[tp]int64{},
		revokedAt:  map[tp]int64{},
		bufs:       map[tp]*partBuf{},
		reading:    map[tp]bool{},
		kick:       make(chan struct{}, 1),
	}
	if s.subscribe {
		s.instanceID = groupInstanceID(&in.cfg, info)
	}
	for _, t := range in.cfg.Topics {
		s.trackers[t] = connectors.NewTracker(t)
	}
	return s, nil
}

// FirstRecordMessage is logged (at info level, with the attributes topic,
// partition and offset) when a source reads the first record of a
// partition after the partition was assigned to it: after a (re)start it
// tells when reading resumed, partition by partition.
const FirstRecordMessage = "kafka: first record read from partition"

// tp is a topic-partition.
type tp struct {
	topic string
	part  int32
}

// Source reads one subtask's share of the topics. It implements
// connectors.Source and connectors.Positioner.
//
// Positions are per topic-partition the contiguous acknowledged frontier:
// the offset after the last record of the longest prefix of
// delivered batches that were all acknowledged. Out-of-order
// acknowledgements wait for the gaps before them. The frontier is committed
// to the consumer group (CommitOffsets; auto commit is off) at most every
// 100 ms, when a partition is revoked, and at Close; with
// transactional_offsets it is not committed by the source at all, but by
// the paired output inside its transactions (txn.go).
type Source struct {
	in        *Input
	cfg       *SourceConfig
	info      connectors.TaskInfo
	par       int
	subscribe bool
	// instanceID is the group.instance.id of a subscribing source ("":
	// a dynamic member; see groupInstanceID).
	instanceID string
	log        *slog.Logger
	dec        *rowjson.Decoder

	consumer *kafka.Consumer

	mu        sync.Mutex // guards the fields below: acks and Positions come from other goroutines
	trackers  map[string]*connectors.Tracker
	assigned  map[tp]bool
	committed map[tp]int64 // offset last committed (or found committed) per assigned partition
	restored  map[tp]int64 // positions from Seek, applied when the partition is assigned
	closed    bool
	// revokedAt is, with transactional_offsets, the frontier of a
	// partition when a rebalance revoked it (nothing is committed then).
	revokedAt map[tp]int64
	// groupFloor is, with transactional_offsets, the offset the group had
	// committed for an assigned partition when it was assigned: the
	// paired output never commits below it.
	groupFloor map[tp]int64

	// gmMu guards the consumer against Close while the paired output asks
	// for its group metadata (transactional_offsets).
	gmMu     sync.Mutex
	gmClosed bool
	// covered, behind a WAL, returns the positions its cursor covers
	// (connectors.CoverageAware; guarded by mu).
	covered func() []connectors.Position

	commitMu   sync.Mutex // one commit at a time
	kick       chan struct{}
	stopCommit chan struct{}
	commitDone chan struct{}

	// metricsConsumer is the consumer once connected, until Close, for
	// Metrics (from other goroutines); metricsMu guards it, and Close
	// takes it before closing the consumer.
	metricsMu       sync.Mutex
	metricsConsumer *kafka.Consumer

	// fatal is set once the consumer raised a fatal error (see
	// closeConsumer); any goroutine.
	fatal atomic.Bool

	// Read's goroutine only (and the rebalance callback, which Poll runs
	// on it).
	connected   bool
	cooperative bool
	joined      bool // the group assigned partitions (or none) at least once
	bufs        map[tp]*partBuf
	reading     map[tp]bool // partitions read from since their assignment (FirstRecordMessage)
	buffered    int         // partitions with buffered rows
	oldest      time.Time   // when the oldest buffered row arrived
	ready       []pending
	failed      error // sticky: the source cannot go on
}

// partBuf holds the rows of one partition read but not yet returned.
type partBuf struct {
	rb          *array.RecordBuilder
	first, last int64
	rows        int
}

type pending struct {
	rec        arrow.RecordBatch
	tp         tp
	first, end int64
}

// Seek makes the next Connect resume every partition it gets (assigned by
// the plan, or by the group) from the given position; partitions without a
// position keep the configured start: the group's committed offset, else
// the beginning of the partition (or its end with start_from_latest). A
// position outside the partition's range on the broker fails the source
// (its records were deleted, or the topic was recreated). Positions without
// a topic apply to the only configured topic. Must be called before
// Connect.
func (s *Source) Seek(positions []connectors.Position) error {
	if s.connected {
		return errors.New("kafka: Seek after Connect")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range positions {
		if p.Offset < 0 {
			return fmt.Errorf("kafka: negative offset %d for topic %q partition %d", p.Offset, p.Topic, p.Partition)
		}
		topic := p.Topic
		if topic == "" {
			if len(s.cfg.Topics) != 1 {
				return fmt.Errorf("kafka: a position without a topic (partition %d) is ambiguous with %d topics", p.Partition, len(s.cfg.Topics))
			}
			topic = s.cfg.Topics[0]
		}
		if _, ok := s.trackers[topic]; !ok {
			continue // not a topic of this input any more
		}
		s.restored[tp{topic, p.Partition}] = p.Offset
	}
	return nil
}

// Positions returns the contiguous acknowledged frontier of every
// partition this subtask currently reads, sorted by topic and partition.
func (s *Source) Positions() []connectors.Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []connectors.Position
	for _, t := range s.cfg.Topics {
		for _, p := range s.trackers[t].Positions() {
			if s.assigned[tp{t, p.Partition}] {
				out = append(out, p)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Connect creates the consumer, checks that the topics exist, and either
// subscribes (one subtask) or assigns this subtask's partitions at their
// resolved start offsets (several). ctx bounds only connecting.
func (s *Source) Connect(ctx context.Context) error {
	if s.connected {
		return errors.New("kafka: already connected")
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if s.in.cfg.Format == FormatJSON {
		dec, err := rowjson.NewDecoder(s.in.declared)
		if err != nil {
			return err
		}
		s.dec = dec
	}
	conf := consumerConfig(s.cfg)
	(*conf)["go.logs.channel.enable"] = true
	if s.subscribe && s.instanceID != "" {
		// Static membership (KIP-345): a restart within session.timeout.ms
		// takes the member's place, and its assignment, at once, instead
		// of waiting for the dead member's session to expire.
		(*conf)[groupInstanceIDKey] = s.instanceID
	}
	c, err := kafka.NewConsumer(conf)
	if err != nil {
		return fmt.Errorf("kafka: creating the consumer: %w", err)
	}
	go drainLogs(c.Logs(), s.log, s.noteLog)
	s.consumer = c
	s.cooperative = c.GetRebalanceProtocol() == "COOPERATIVE"
	fail := func(err error) error {
		s.closeConsumer(c) // may run the rebalance callback, which uses s.consumer
		s.consumer = nil
		return err
	}
	counts, err := partitionCounts(c, s.cfg.Topics, timeoutFor(ctx, MetadataTimeout))
	if err != nil {
		return fail(err)
	}
	s.in.notePartitions(counts)
	if s.subscribe {
		if s.instanceID != "" {
			s.log.Info("joining the consumer group as a static member", "group", s.cfg.ConsumerGroup, "group.instance.id", s.instanceID)
		} else {
			s.log.Info("joining the consumer group as a dynamic member (group.instance.id is empty)", "group", s.cfg.ConsumerGroup)
		}
		if err := c.SubscribeTopics(s.cfg.Topics, s.rebalance); err != nil {
			return fail(fmt.Errorf("kafka: subscribing to %v: %w", s.cfg.Topics, err))
		}
		// Wait for the group's first assignment, so that Positions cover
		// the assigned partitions from the start: a checkpoint cut right
		// after the start records them at their start offsets instead of
		// not at all (a restore would then fall back to the group's
		// committed offsets, which move on). Records polled meanwhile are
		// buffered for Read.
		wait := time.Now().Add(timeoutFor(ctx, JoinTimeout))
		for !s.joined && s.failed == nil && ctx.Err() == nil && time.Now().Before(wait) {
			s.poll(pollTimeout)
		}
		if s.failed != nil {
			return fail(s.failed)
		}
		if !s.joined {
			s.log.Warn("the consumer group assigned no partitions yet; reading starts when it does", "group", s.cfg.ConsumerGroup)
		}
	} else {
		var planned []kafka.TopicPartition
		for _, t := range s.cfg.Topics {
			for p := s.info.Subtask; p < counts[t]; p += s.par {
				planned = append(planned, kafka.TopicPartition{Topic: &t, Partition: int32(p)})
			}
		}
		if len(planned) > 0 {
			start, err := s.resolve(ctx, planned)
			if err != nil {
				return fail(err)
			}
			if err := c.Assign(start); err != nil {
				return fail(fmt.Errorf("kafka: assigning %s: %w", describe(start), err))
			}
			s.noteAssigned(start)
		}
	}
	s.connected = true
	s.metricsMu.Lock()
	s.metricsConsumer = s.consumer
	s.metricsMu.Unlock()
	s.stopCommit = make(chan struct{})
	s.commitDone = make(chan struct{})
	go s.committer()
	if s.cfg.TransactionalOffsets {
		registerPair(s)
	}
	return nil
}

// timeoutFor is d, or less when ctx ends sooner (at least 1 ms).
func timeoutFor(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if r := time.Until(dl); r < d {
			return max(r, time.Millisecond)
		}
	}
	return d
}

// resolve returns the explicit start offset of every partition: the
// restored position, else the group's committed offset, else the
// partition's beginning or end. Restored positions must lie within the
// partition's range on the broker.
func (s *Source) resolve(ctx context.Context, parts []kafka.TopicPartition) ([]kafka.TopicPartition, error) {
	timeout := int(timeoutFor(ctx, MetadataTimeout).Milliseconds())
	var committed []kafka.TopicPartition
	var err error
	if s.cfg.TransactionalOffsets {
		committed, err = s.committedNow(parts, timeoutFor(ctx, MetadataTimeout))
	} else {
		committed, err = s.consumer.Committed(cloneParts(parts), timeout)
	}
	if ke, ok := kafkaError(err); ok && ke.Code() == kafka.ErrGroupIDNotFound {
		committed, err = nil, nil // a group that never committed (some brokers say so)
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: reading the committed offsets of group %q: %w", s.cfg.ConsumerGroup, err)
	}
	cmt := map[tp]int64{}
	for _, p := range committed {
		if p.Error == nil && p.Offset >= 0 {
			cmt[tp{*p.Topic, p.Partition}] = int64(p.Offset)
		}
	}
	type wm struct {
		low, high int64
		err       error
	}
	wms := make([]wm, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo, hi, err := s.consumer.QueryWatermarkOffsets(*p.Topic, p.Partition, timeout)
			wms[i] = wm{lo, hi, err}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]kafka.TopicPartition, len(parts))
	for i, p := range parts {
		k := tp{*p.Topic, p.Partition}
		w := wms[i]
		if w.err != nil {
			return nil, fmt.Errorf("kafka: reading the offsets of topic %q partition %d: %w", k.topic, k.part, w.err)
		}
		var start int64
		if off, ok := s.revokedAt[k]; ok {
			// transactional_offsets: the frontier this source had when the
			// group took the partition away, unless the group's offset
			// moved past it meanwhile (another consumer's output
			// committed more) or the broker no longer has it.
			delete(s.revokedAt, k)
			if c, ok := cmt[k]; (!ok || off > c) && off >= w.low && off <= w.high {
				if _, restored := s.restored[k]; !restored {
					s.restored[k] = off
				}
			}
		}
		if off, ok := s.restored[k]; ok {
			if off < w.low || off > w.high {
				return nil, fmt.Errorf("kafka: checkpoint offset %d of topic %q partition %d is outside the broker's range %d..%d (deleted by retention, or the topic was recreated): refusing to skip or re-read records", off, k.topic, k.part, w.low, w.high)
			}
			start = off
			delete(s.restored, k) // a later re-assignment resumes from the group's commit
		} else if off, ok := cmt[k]; ok {
			switch {
			case off < w.low:
				s.log.Warn("the committed offset of a partition was deleted by retention; resuming at its first offset", "topic", k.topic, "partition", k.part, "committed", off, "first", w.low)
				start = w.low
			case off > w.high:
				return nil, fmt.Errorf("kafka: committed offset %d of group %q on topic %q partition %d is beyond the partition's end %d (was the topic recreated?)", off, s.cfg.ConsumerGroup, k.topic, k.part, w.high)
			default:
				start = off
			}
		} else if s.cfg.StartFromLatest {
			start = w.high
		} else {
			start = w.low
		}
		if c, ok := cmt[k]; ok && c == start {
			s.committed[k] = c
		} else {
			delete(s.committed, k)
		}
		if c, ok := cmt[k]; ok {
			s.groupFloor[k] = c
		} else {
			delete(s.groupFloor, k)
		}
		t := k.topic
		out[i] = kafka.TopicPartition{Topic: &t, Partition: k.part, Offset: kafka.Offset(start)}
	}
	return out, nil
}

// noteAssigned starts the frontiers of newly assigned partitions.
func (s *Source) noteAssigned(parts []kafka.TopicPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		k := tp{*p.Topic, p.Partition}
		s.trackers[k.topic].Start(k.part, int64(p.Offset))
		s.assigned[k] = true
		delete(s.reading, k)
	}
}

// rebalance is the subscription's rebalance callback; Poll runs it on
// Read's goroutine (or Close's). Assigned partitions start at explicit
// offsets (resolve); revoked partitions commit their frontier first and
// drop the rows read but not yet returned.
func (s *Source) rebalance(c *kafka.Consumer, ev kafka.Event) error {
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		s.joined = true
		if len(e.Partitions) == 0 {
			return nil
		}
		start, err := s.resolve(context.Background(), e.Partitions)
		if err != nil {
			s.failed = err
			return nil
		}
		if s.cooperative {
			err = c.IncrementalAssign(start)
		} else {
			err = c.Assign(start)
		}
		if err != nil {
			s.failed = fmt.Errorf("kafka: assigning %s: %w", describe(start), err)
			return nil
		}
		s.noteAssigned(start)
		s.log.Info("partitions assigned", "partitions", describe(start))
	case kafka.RevokedPartitions:
		lost := c.AssignmentLost()
		revoked := make([]tp, 0, len(e.Partitions))
		for _, p := range e.Partitions {
			revoked = append(revoked, tp{*p.Topic, p.Partition})
		}
		if !lost {
			if err := s.commit(revoked); err != nil {
				s.log.Warn("committing the offsets of revoked partitions", "error", err)
			}
		}
		if !lost && s.cfg.TransactionalOffsets {
			// Nothing was committed (the group lags the frontier by the
			// batch the output wrote last): should the group give a
			// partition back, it resumes at its frontier, not at the
			// group's older offset, so that rows already written are not
			// written again (see resolve).
			s.mu.Lock()
			for _, k := range revoked {
				if fr, ok := s.trackers[k.topic].Frontier(k.part); ok && s.assigned[k] {
					s.revokedAt[k] = fr
				}
			}
			s.mu.Unlock()
		}
		s.mu.Lock()
		if !s.closed { // at Close, Positions keep reporting the last frontiers
			for _, k := range revoked {
				delete(s.assigned, k)
				delete(s.committed, k)
			}
		}
		s.mu.Unlock()
		s.drop(revoked)
		var err error
		if s.cooperative {
			err = c.IncrementalUnassign(e.Partitions)
		} else {
			err = c.Unassign()
		}
		if err != nil {
			s.log.Warn("unassigning revoked partitions", "error", err)
		}
		s.log.Info("partitions revoked", "partitions", describe(e.Partitions), "lost", lost)
	}
	return nil
}

// drop forgets the rows of the given partitions that were read but not
// returned yet (they were never delivered, so nothing acknowledges them).
func (s *Source) drop(parts []tp) {
	gone := map[tp]bool{}
	for _, k := range parts {
		gone[k] = true
		if b := s.bufs[k]; b != nil {
			if b.rows > 0 {
				s.buffered--
			}
			b.rb.Release()
			delete(s.bufs, k)
		}
	}
	kept := s.ready[:0]
	for _, p := range s.ready {
		if gone[p.tp] {
			p.rec.Release()
			continue
		}
		kept = append(kept, p)
	}
	for i := len(kept); i < len(s.ready); i++ {
		s.ready[i] = pending{}
	}
	s.ready = kept
}

// Read returns the next batch: rows of one partition, in offset order, at
// most batch_size of them. It blocks until records arrive or ctx is done
// (returning ctx.Err() within about 100 ms).
func (s *Source) Read(ctx context.Context) (connectors.Batch, error) {
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
			p := s.ready[0]
			s.ready[0] = pending{}
			s.ready = s.ready[1:]
			return connectors.Batch{Record: p.rec, Partition: int(p.tp.part), Ack: s.ackFunc(p)}, nil
		}
		if s.failed != nil {
			return connectors.Batch{}, s.failed
		}
		if err := ctx.Err(); err != nil {
			return connectors.Batch{}, err
		}
		wait := pollTimeout
		if s.buffered > 0 {
			wait = 0
			if time.Since(s.oldest) >= maxLinger {
				s.flushAll()
				continue
			}
		}
		if !s.poll(wait) && s.buffered > 0 {
			s.flushAll()
		}
	}
}

// poll polls the consumer once (running the rebalance callback when the
// group rebalances) and buffers the record it returns; errors that stop
// the source go to s.failed. It reports whether an event arrived.
func (s *Source) poll(wait time.Duration) bool {
	switch e := s.consumer.Poll(int(wait.Milliseconds())).(type) {
	case nil:
		return false
	case *kafka.Message:
		if e.TopicPartition.Error != nil {
			s.failed = s.messageError(e)
		} else if err := s.add(e); err != nil {
			s.failed = err
		}
	case kafka.Error:
		if err := s.consumerError(e); err != nil {
			s.failed = err
		}
	}
	return true
}

// messageError is the error of a message that carries one (a
// partition-level consumer error).
func (s *Source) messageError(m *kafka.Message) error {
	tpn := m.TopicPartition
	topic := ""
	if tpn.Topic != nil {
		topic = *tpn.Topic
	}
	err := tpn.Error
	if ke, ok := kafkaError(err); ok && ke.Code() == kafka.ErrAutoOffsetReset {
		return fmt.Errorf("kafka: topic %q partition %d: the offset to read is no longer (or not yet) on the broker, and the source never resets offsets on its own: %w", topic, tpn.Partition, err)
	}
	if ke, ok := kafkaError(err); ok && ke.Code() == kafka.ErrUnknownTopicOrPart {
		return fmt.Errorf("kafka: topic %q does not exist (any more): %w", topic, err)
	}
	return fmt.Errorf("kafka: reading topic %q partition %d: %w", topic, tpn.Partition, err)
}

// consumerError handles an error event: fatal ones and missing topics stop
// the source; others (brokers down, timeouts) are logged while librdkafka
// reconnects, resuming from the partitions' explicit positions.
func (s *Source) consumerError(e kafka.Error) error {
	switch {
	case e.Code() == kafka.ErrFencedInstanceID:
		s.fatal.Store(true)
		// librdkafka raises it as a fatal error: this consumer cannot
		// rejoin; the source fails instead of reading nothing on.
		return fmt.Errorf("%w (consumer group %q, group.instance.id %q): is the job running in another process too, or does another source set the same group.instance.id in its properties? (%v)",
			ErrInstanceFenced, s.cfg.ConsumerGroup, s.instanceID, e)
	case e.IsFatal():
		s.fatal.Store(true)
		return fmt.Errorf("kafka: consumer failed: %w", e)
	case e.Code() == kafka.ErrUnknownTopicOrPart || e.Code() == kafka.ErrUnknownTopic:
		return fmt.Errorf("kafka: %w (topics %v)", e, s.cfg.Topics)
	}
	s.log.Warn("kafka consumer error (retrying)", "error", e)
	return nil
}

// add appends one record to its partition's buffer.
func (s *Source) add(m *kafka.Message) error {
	k := tp{*m.TopicPartition.Topic, m.TopicPartition.Partition}
	b := s.bufs[k]
	if b == nil {
		if !s.isAssigned(k) {
			return nil // left over from a revoked assignment
		}
		b = &partBuf{rb: array.NewRecordBuilder(memory.DefaultAllocator, s.in.schema)}
		b.rb.Reserve(min(s.cfg.BatchSize, 4096))
		s.bufs[k] = b
	}
	off := int64(m.TopicPartition.Offset)
	if !s.reading[k] {
		s.reading[k] = true
		s.log.Info(FirstRecordMessage, "topic", k.topic, "partition", k.part, "offset", off)
	}
	fields := b.rb.Fields()
	n := s.in.declared.NumFields()
	if s.dec != nil {
		v := m.Value
		if len(v) == 0 {
			v = emptyObject // a tombstone: every column null
		}
		if err := s.dec.DecodeLine(v, fields); err != nil {
			return fmt.Errorf("kafka: topic %q partition %d offset %d: %w", k.topic, k.part, off, err)
		}
	} else {
		vb := fields[0].(*array.BinaryBuilder)
		if m.Value == nil {
			vb.AppendNull()
		} else {
			vb.Append(m.Value)
		}
	}
	fields[n].(*array.StringBuilder).Append(s.info.OperatorID)
	fields[n+1].(*array.Int32Builder).Append(k.part)
	fields[n+2].(*array.Int64Builder).Append(off)
	fields[n+3].(*array.StringBuilder).Append(k.topic)
	kb := fields[n+4].(*array.BinaryBuilder)
	if m.Key == nil {
		kb.AppendNull()
	} else {
		kb.Append(m.Key)
	}
	tb := fields[n+5].(*array.TimestampBuilder)
	if m.TimestampType == kafka.TimestampNotAvailable || m.Timestamp.IsZero() {
		tb.AppendNull()
	} else {
		tb.Append(arrow.Timestamp(m.Timestamp.UnixMilli()))
	}
	if b.rows == 0 {
		b.first = off
		if s.buffered == 0 {
			s.oldest = time.Now()
		}
		s.buffered++
	}
	b.last = off
	b.rows++
	if b.rows >= s.cfg.BatchSize {
		s.flush(k, b)
	}
	return nil
}

var emptyObject = []byte("{}")

func (s *Source) isAssigned(k tp) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.assigned[k]
}

// flush queues a partition's buffered rows as one batch.
func (s *Source) flush(k tp, b *partBuf) {
	if b.rows == 0 {
		return
	}
	s.ready = append(s.ready, pending{rec: b.rb.NewRecordBatch(), tp: k, first: b.first, end: b.last + 1})
	b.rows = 0
	s.buffered--
	if s.buffered > 0 {
		s.oldest = time.Now()
	}
}

// flushAll queues every partition's buffered rows, in topic-partition order.
func (s *Source) flushAll() {
	keys := make([]tp, 0, len(s.bufs))
	for k, b := range s.bufs {
		if b.rows > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].part < keys[j].part
	})
	for _, k := range keys {
		s.flush(k, s.bufs[k])
	}
}

// ackFunc delivers a batch's range to its partition's frontier and returns
// the acknowledgement: on success the frontier moves over the contiguous
// acknowledged prefix and a commit is scheduled.
func (s *Source) ackFunc(p pending) func(error) {
	s.mu.Lock()
	tr := s.trackers[p.tp.topic]
	s.mu.Unlock()
	done := tr.Deliver(p.tp.part, p.first, p.end)
	return func(err error) {
		done(err)
		if err == nil && !s.cfg.TransactionalOffsets {
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
	}
}

// committer commits the frontiers after acknowledgements, at most every
// commitInterval.
func (s *Source) committer() {
	defer close(s.commitDone)
	for {
		select {
		case <-s.stopCommit:
			return
		case <-s.kick:
		}
		if err := s.commit(nil); err != nil {
			s.log.Warn("committing offsets (retried with the next acknowledgement)", "group", s.cfg.ConsumerGroup, "error", err)
		}
		select {
		case <-s.stopCommit:
			return
		case <-time.After(commitInterval):
		}
	}
}

// commit commits the frontier of the given partitions (nil: every
// assigned one) where it moved since the last commit.
//
// With transactional_offsets it commits nothing: the paired output commits
// the offsets inside its transactions.
func (s *Source) commit(only []tp) error {
	if s.cfg.TransactionalOffsets {
		return nil
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	var offs []kafka.TopicPartition
	consider := only
	if consider == nil {
		for k := range s.assigned {
			consider = append(consider, k)
		}
	}
	for _, k := range consider {
		if !s.assigned[k] {
			continue
		}
		fr, ok := s.trackers[k.topic].Frontier(k.part)
		if !ok {
			continue
		}
		if c, ok := s.committed[k]; ok && c >= fr {
			continue
		}
		t := k.topic
		offs = append(offs, kafka.TopicPartition{Topic: &t, Partition: k.part, Offset: kafka.Offset(fr)})
	}
	s.mu.Unlock()
	if len(offs) == 0 {
		return nil
	}
	res, err := s.consumer.CommitOffsets(offs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, p := range res {
		if p.Error != nil {
			errs = append(errs, fmt.Errorf("topic %q partition %d: %w", *p.Topic, p.Partition, p.Error))
			continue
		}
		k := tp{*p.Topic, p.Partition}
		if s.assigned[k] {
			s.committed[k] = int64(p.Offset)
		}
	}
	return errors.Join(errs...)
}

// Close commits the acknowledged frontiers, leaves the group (revoking the
// assignment) and closes the consumer. It is safe to call without Connect
// and more than once.
func (s *Source) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.metricsMu.Lock()
	s.metricsConsumer = nil
	s.metricsMu.Unlock()
	if s.cfg.TransactionalOffsets {
		unregisterPair(s)
		s.gmMu.Lock()
		s.gmClosed = true
		s.gmMu.Unlock()
	}
	var errs []error
	if s.stopCommit != nil {
		close(s.stopCommit)
		<-s.commitDone
	}
	if s.consumer != nil {
		if err := s.commit(nil); err != nil {
			errs = append(errs, fmt.Errorf("kafka: committing offsets at close: %w", err))
		}
		if err := s.closeConsumer(s.consumer); err != nil {
			errs = append(errs, fmt.Errorf("kafka: closing the consumer: %w", err))
		}
	}
	for _, p := range s.ready {
		p.rec.Release()
	}
	s.ready = nil
	for k, b := range s.bufs {
		b.rb.Release()
		delete(s.bufs, k)
	}
	s.connected = false
	return errors.Join(errs...)
}

func cloneParts(ps []kafka.TopicPartition) []kafka.TopicPartition {
	out := make([]kafka.TopicPartition, len(ps))
	for i, p := range ps {
		t := *p.Topic
		out[i] = kafka.TopicPartition{Topic: &t, Partition: p.Partition}
	}
	return out
}

// describe prints topic-partitions with their offsets: "t[0]@5 t[1]@0".
func describe(ps []kafka.TopicPartition) string {
	out := make([]byte, 0, 16*len(ps))
	for i, p := range ps {
		if i > 0 {
			out = append(out, ' ')
		}
		t := ""
		if p.Topic != nil {
			t = *p.Topic
		}
		out = fmt.Appendf(out, "%s[%d]", t, p.Partition)
		if p.Offset >= 0 {
			out = fmt.Appendf(out, "@%d", int64(p.Offset))
		}
	}
	return string(out)
}

// closeConsumer closes c, unless it raised a fatal error: then
// confluent-kafka-go's Close would never return (librdkafka refuses to
// close a consumer in that state, and v2.11.1's Close waits for the close
// to finish: confluent-kafka-go pull request 1588), so c is left to the
// end of the process, and Close of the source still returns.
func (s *Source) closeConsumer(c *kafka.Consumer) error {
	if s.fatal.Load() {
		s.log.Warn("not closing the consumer: it raised a fatal error, and closing it would block forever; its connections end with the process")
		return nil
	}
	return c.Close()
}

// noteLog watches the consumer's log lines for librdkafka's fatal errors
// (tag FATAL): a fatal error reaches Poll as an event only when Read polls,
// the log line comes at once, so Close knows not to close the consumer
// (closeConsumer) even when the fatal error came after the last Read.
func (s *Source) noteLog(ev kafka.LogEvent) {
	if ev.Tag == "FATAL" {
		s.fatal.Store(true)
	}
}

// drainLogs forwards librdkafka's log lines to lg until the client closes,
// and hands each to note (when not nil).
func drainLogs(ch chan kafka.LogEvent, lg *slog.Logger, note func(kafka.LogEvent)) {
	for ev := range ch {
		if note != nil {
			note(ev)
		}
		lg.Log(context.Background(), logLevel(ev.Level), "librdkafka: "+ev.Message, "client", ev.Name, "tag", ev.Tag)
	}
}

var (
	_ connectors.Input      = (*Input)(nil)
	_ connectors.Source     = (*Source)(nil)
	_ connectors.Positioner = (*Source)(nil)
)
