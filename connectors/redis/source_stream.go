package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// streamSource reads streams through a consumer group, one stream per
// partition (partition p of P is subtask p % P's).
//
// Offsets are entry IDs (parseID). A partition's position is its
// contiguous acknowledged frontier, and the source acknowledges (XACK) an
// entry only once the frontier passed it: the group's pending entries are
// always the entries at and after the frontier that were read.
//
// At Connect the source puts the group where the partition resumes: at
// the restored position after a Seek, else at the group's first pending
// entry (what a previous run read and did not acknowledge), else after
// its last delivered entry. It acknowledges the pending entries below
// that point (a restored checkpoint holds them) and sets the group's
// last-delivered ID just below it (XGROUP SETID), so that its reads
// (XREADGROUP >) deliver again, in order, exactly the entries from there.
type streamSource struct {
	in     *input
	info   connectors.TaskInfo
	log    *slog.Logger
	parts  []*streamPart
	byKey  map[string]*streamPart
	seeked map[int32]int64

	mu     sync.Mutex // guards client and closed against Close
	client goredis.UniversalClient
	closed bool

	// fetched carries what the reader goroutine read (fetchLoop) to Read;
	// stopFetch ends that goroutine, and fetchDone is closed when it ended.
	fetched   chan fetchResult
	stopFetch context.CancelFunc
	fetchDone chan struct{}

	// Read's goroutine only.
	connected bool
	failed    error
	ready     []streamBatch

	// The reader goroutine only (set before it starts).
	args []string // XREADGROUP's streams and ">"s
	rr   int      // the partition a cluster's blocking read waits on
}

// fetchResult is one read's entries, or the error that ended reading.
type fetchResult struct {
	streams []goredis.XStream
	err     error
}

// streamPart is one stream.
type streamPart struct {
	idx     int32
	key     string
	tracker *connectors.Tracker

	mu      sync.Mutex // guards unacked and toAck
	unacked []idSpan   // read batches not yet under the frontier, in order
	toAck   []string   // IDs under the frontier not yet acknowledged

	unackedN  atomic.Int64 // entries read and not yet acknowledged
	reclaimed atomic.Int64 // entries read again that the group had delivered before

	// Read's goroutine only.
	b       *rowBuilder
	next    int64 // the lowest offset not yet read
	redoEnd int64 // offsets below it were delivered by the group before Connect
	ids     []string
}

type idSpan struct {
	end int64
	ids []string
}

type streamBatch struct {
	rec        arrow.RecordBatch
	p          *streamPart
	first, end int64
	ids        []string
}

func newStreamSource(in *input, info connectors.TaskInfo, par int, lg *slog.Logger) *streamSource {
	s := &streamSource{in: in, info: info, log: lg, byKey: map[string]*streamPart{}, seeked: map[int32]int64{}}
	for i, key := range in.cfg.RedisType.Streams {
		if i%par != info.Subtask {
			continue
		}
		p := &streamPart{idx: int32(i), key: key, tracker: connectors.NewTracker(key)}
		s.parts = append(s.parts, p)
		s.byKey[key] = p
	}
	return s
}

// Seek makes the next Connect resume each partition at its position. A
// position names its stream: one that is not the partition's any more is
// an error (redis_type.streams changed order). Positions of partitions the
// config no longer has are ignored.
func (s *streamSource) Seek(positions []connectors.Position) error {
	if s.connected {
		return errors.New("redis: Seek after Connect")
	}
	streams := s.in.cfg.RedisType.Streams
	for _, p := range positions {
		if p.Partition < 0 || int(p.Partition) >= len(streams) {
			s.log.Warn("ignoring the position of a partition the input no longer has", "partition", p.Partition, "stream", p.Topic, "offset", p.Offset)
			continue
		}
		if want := streams[p.Partition]; p.Topic != "" && p.Topic != want {
			return fmt.Errorf("redis: the position of partition %d is for stream %q, but partition %d reads %q now: redis_type.streams must keep their order across restarts", p.Partition, p.Topic, p.Partition, want)
		}
		if p.Offset < 0 {
			return fmt.Errorf("redis: negative offset %d for partition %d", p.Offset, p.Partition)
		}
		s.seeked[p.Partition] = p.Offset
	}
	return nil
}

// Positions returns the frontier of every partition this subtask reads.
func (s *streamSource) Positions() []connectors.Position {
	var out []connectors.Position
	for _, p := range s.parts {
		out = append(out, p.tracker.Positions()...)
	}
	return out
}

// Connect connects and puts every partition's group where the partition
// resumes (see streamSource). ctx bounds only connecting.
func (s *streamSource) Connect(ctx context.Context) error {
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
	if len(s.parts) == 0 {
		return nil
	}
	client, err := dial(ctx, s.in.cfg.Mode, s.in.cfg.TLS, connName(s.info.JobID, s.info.OperatorID, s.info.Subtask))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.client = client
	s.mu.Unlock()
	for _, p := range s.parts {
		if err := s.startPart(ctx, client, p); err != nil {
			return err
		}
		s.args = append(s.args, p.key)
	}
	for range s.parts {
		s.args = append(s.args, ">")
	}
	fctx, cancel := context.WithCancel(context.Background())
	s.fetched, s.stopFetch, s.fetchDone = make(chan fetchResult, 1), cancel, make(chan struct{})
	go s.fetchLoop(fctx)
	return nil
}

// fetchLoop reads ahead of Read, one read in flight while Read turns the
// last one into rows, until ctx ends or reading fails for good. A
// connection error is logged and the read tried again.
func (s *streamSource) fetchLoop(ctx context.Context) {
	defer close(s.fetchDone)
	for ctx.Err() == nil {
		streams, err := s.fetch(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil && retryable(err) {
			s.log.Warn("reading streams failed (retrying)", "error", err)
			_ = sleepCtx(ctx, retryWait)
			continue
		}
		if err != nil {
			err = fmt.Errorf("redis: reading streams %v (group %q): %w", s.args[:len(s.parts)], s.in.cfg.RedisType.Group, err)
		} else if len(streams) == 0 {
			continue
		}
		select {
		case s.fetched <- fetchResult{streams, err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// startPart creates the partition's group if needed and moves it to
// where the partition resumes.
func (s *streamSource) startPart(ctx context.Context, c goredis.UniversalClient, p *streamPart) error {
	rt := s.in.cfg.RedisType
	err := c.XGroupCreateMkStream(ctx, p.key, rt.Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("redis: creating consumer group %q of stream %q: %w", rt.Group, p.key, err)
	}
	delivered, err := lastDelivered(ctx, c, p.key, rt.Group)
	if err != nil {
		return err
	}
	start, restored := s.seeked[p.idx]
	if !restored {
		start = delivered + 1
		pend, err := c.XPending(ctx, p.key, rt.Group).Result()
		if err != nil {
			return fmt.Errorf("redis: reading the pending entries of group %q of stream %q: %w", rt.Group, p.key, err)
		}
		if pend.Count > 0 {
			if start, err = parseID(pend.Lower); err != nil {
				return fmt.Errorf("redis: stream %q: %w", p.key, err)
			}
		}
	}
	if restored {
		s.warnDeleted(ctx, c, p, start)
	}
	if err := ackBelow(ctx, c, p.key, rt.Group, start); err != nil {
		return err
	}
	if err := c.XGroupSetID(ctx, p.key, rt.Group, idBefore(start)).Err(); err != nil {
		return fmt.Errorf("redis: moving group %q of stream %q to %s: %w", rt.Group, p.key, formatID(start), err)
	}
	b, err := newRowBuilder(s.in)
	if err != nil {
		return err
	}
	p.b, p.next, p.redoEnd = b, start, delivered+1
	p.tracker.Start(p.idx, start)
	s.log.Info("redis: source reads stream", "stream", p.key, "group", rt.Group, "partition", p.idx, "position", start, "from_id", formatID(start), "restored", restored)
	return nil
}

// warnDeleted logs a warning when entries at or after a restored
// position were deleted (trimmed, or XDEL): the restore cannot read them
// again, and the rows they held are in neither the state nor the input.
func (s *streamSource) warnDeleted(ctx context.Context, c goredis.UniversalClient, p *streamPart, start int64) {
	info, err := c.XInfoStream(ctx, p.key).Result()
	if err != nil {
		return
	}
	if del, err := parseID(info.MaxDeletedEntryID); err == nil && del >= start {
		s.log.Warn("entries at or after the restored position were deleted from the stream (XTRIM, MAXLEN or XDEL): the restore cannot read them again",
			"stream", p.key, "position", formatID(start), "max_deleted_entry_id", info.MaxDeletedEntryID)
	}
}

// lastDelivered returns the offset of the group's last-delivered ID.
func lastDelivered(ctx context.Context, c goredis.UniversalClient, key, group string) (int64, error) {
	groups, err := c.XInfoGroups(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("redis: reading the groups of stream %q: %w", key, err)
	}
	for _, g := range groups {
		if g.Name == group {
			off, err := parseID(g.LastDeliveredID)
			if err != nil {
				return 0, fmt.Errorf("redis: stream %q group %q: %w", key, group, err)
			}
			return off, nil
		}
	}
	return 0, fmt.Errorf("redis: stream %q has no group %q (deleted while connecting?)", key, group)
}

// ackBelow acknowledges the group's pending entries below offset start.
func ackBelow(ctx context.Context, c goredis.UniversalClient, key, group string, start int64) error {
	if start <= 0 {
		return nil
	}
	end := idBefore(start)
	for {
		pend, err := c.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: key, Group: group, Start: "-", End: end, Count: 1000}).Result()
		if err != nil {
			return fmt.Errorf("redis: reading the pending entries of group %q of stream %q: %w", group, key, err)
		}
		if len(pend) == 0 {
			return nil
		}
		ids := make([]string, len(pend))
		for i, e := range pend {
			ids[i] = e.ID
		}
		n, err := c.XAck(ctx, key, group, ids...).Result()
		if err != nil {
			return fmt.Errorf("redis: acknowledging entries of stream %q below the restored position: %w", key, err)
		}
		if n == 0 {
			return fmt.Errorf("redis: stream %q group %q: the pending entries below the restored position stay pending after XACK", key, group)
		}
	}
}

// Read returns the entries that arrived, at most batch_size of one
// partition, waiting for the first until ctx is done. An entry whose
// payload does not decode fails the source with an error naming the
// stream, entry ID and field, after the batch of the entries before it.
func (s *streamSource) Read(ctx context.Context) (connectors.Batch, error) {
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
			s.ready[0] = streamBatch{}
			s.ready = s.ready[1:]
			return connectors.Batch{Record: b.rec, Partition: int(b.p.idx), Ack: s.ackFunc(b)}, nil
		}
		if s.failed != nil {
			return connectors.Batch{}, s.failed
		}
		if len(s.parts) == 0 {
			<-ctx.Done()
			return connectors.Batch{}, ctx.Err()
		}
		var r fetchResult
		select {
		case r = <-s.fetched:
		case <-ctx.Done():
			return connectors.Batch{}, ctx.Err()
		}
		if r.err != nil {
			s.failed = r.err
			continue
		}
		for _, st := range r.streams {
			if p := s.byKey[st.Stream]; p != nil && s.failed == nil {
				s.addAll(p, st.Messages)
			}
		}
	}
}

// fetch sends the acknowledgements due and reads what arrived, in one
// round trip; it waits up to block_ms on the server for the first entry.
// A cluster reads the streams in a pipeline without waiting, and when
// none had anything, waits on one of them (in turn).
func (s *streamSource) fetch(ctx context.Context) ([]goredis.XStream, error) {
	rt := s.in.cfg.RedisType
	block := time.Duration(rt.BlockMS) * time.Millisecond
	pipe := s.client.Pipeline()
	undo := s.queueAcks(ctx, pipe)
	n := len(s.parts)
	var reads []*goredis.XStreamSliceCmd
	if s.in.cfg.Mode.Type == ModeCluster && n > 1 {
		for _, p := range s.parts {
			reads = append(reads, pipe.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: rt.Group, Consumer: rt.Consumer, Streams: []string{p.key, ">"}, Count: int64(s.in.cfg.BatchSize), Block: -1}))
		}
	} else {
		reads = append(reads, pipe.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: rt.Group, Consumer: rt.Consumer, Streams: s.args, Count: int64(s.in.cfg.BatchSize), Block: block}))
	}
	_, err := pipe.Exec(ctx)
	if err != nil && !errors.Is(err, goredis.Nil) {
		if retryable(err) || ctx.Err() != nil {
			// XACK again with the next read, or at Close when Close
			// stopped this one: XACK is idempotent.
			undo()
		}
		return nil, err
	}
	var out []goredis.XStream
	for _, r := range reads {
		v, err := r.Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return nil, err
		}
		out = append(out, v...)
	}
	if len(out) > 0 || len(reads) == 1 {
		return out, nil
	}
	s.rr = (s.rr + 1) % n
	out, err = s.client.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: rt.Group, Consumer: rt.Consumer, Streams: []string{s.parts[s.rr].key, ">"}, Count: int64(s.in.cfg.BatchSize), Block: block}).Result()
	if errors.Is(err, goredis.Nil) {
		err = nil
	}
	return out, err
}

// queueAcks adds the acknowledgements due to pipe, and returns the
// function that queues them again (when the pipeline failed on a
// connection error). One lost leaves the entry pending, and a restart
// reads it again (at-least-once) or acknowledges it (a restored
// checkpoint holds it).
func (s *streamSource) queueAcks(ctx context.Context, pipe goredis.Pipeliner) (undo func()) {
	taken := make([][]string, len(s.parts))
	for i, p := range s.parts {
		p.mu.Lock()
		ids := p.toAck
		p.toAck = nil
		p.mu.Unlock()
		if len(ids) > 0 {
			pipe.XAck(ctx, p.key, s.in.cfg.RedisType.Group, ids...)
			p.unackedN.Add(-int64(len(ids)))
			taken[i] = ids
		}
	}
	return func() {
		for i, p := range s.parts {
			if ids := taken[i]; len(ids) > 0 {
				p.mu.Lock()
				p.toAck = append(ids, p.toAck...)
				p.mu.Unlock()
				p.unackedN.Add(int64(len(ids)))
			}
		}
	}
}

// addAll appends entries to their partition's rows, and queues batches.
func (s *streamSource) addAll(p *streamPart, msgs []goredis.XMessage) {
	field := s.in.cfg.RedisType.Field
	for _, m := range msgs {
		off, err := parseID(m.ID)
		if err != nil {
			s.failed = fmt.Errorf("redis: stream %q: %w", p.key, err)
			break
		}
		if off < p.next {
			continue // cannot happen with XREADGROUP >, which delivers in ID order
		}
		v, ok := m.Values[field]
		str, isStr := v.(string)
		if !ok || !isStr {
			s.failed = fmt.Errorf("redis: stream %q entry %s: has no field %q (redis_type.field) holding the payload", p.key, m.ID, field)
			break
		}
		if err := p.b.addString(str, s.info.OperatorID, p.idx, off, p.key, off>>seqBits); err != nil {
			s.failed = decodeError(fmt.Sprintf("stream %q entry %s field %q", p.key, m.ID, field), err)
			break
		}
		if off < p.redoEnd {
			p.reclaimed.Add(1)
		}
		p.next = off + 1
		p.ids = append(p.ids, m.ID)
		if p.b.Rows >= s.in.cfg.BatchSize {
			s.flush(p)
		}
	}
	s.flush(p)
}

// flush queues a partition's rows as a batch.
func (s *streamSource) flush(p *streamPart) {
	first, end := p.b.First, p.b.End
	if rec := p.b.Take(); rec != nil {
		s.ready = append(s.ready, streamBatch{rec: rec, p: p, first: first, end: end, ids: p.ids})
		p.unackedN.Add(int64(len(p.ids)))
		p.ids = nil
	}
}

// ackFunc delivers a batch's range to its partition's frontier and
// returns its acknowledgement: when the frontier moves, the IDs below it
// are queued for XACK, which the next read sends.
func (s *streamSource) ackFunc(b streamBatch) func(error) {
	p := b.p
	done := p.tracker.Deliver(p.idx, b.first, b.end)
	p.mu.Lock()
	p.unacked = append(p.unacked, idSpan{end: b.end, ids: b.ids})
	p.mu.Unlock()
	return func(err error) {
		done(err)
		if err != nil {
			return
		}
		fr, _ := p.tracker.Frontier(p.idx)
		p.mu.Lock()
		i := 0
		for i < len(p.unacked) && p.unacked[i].end <= fr {
			p.toAck = append(p.toAck, p.unacked[i].ids...)
			p.unacked[i] = idSpan{}
			i++
		}
		p.unacked = p.unacked[i:]
		p.mu.Unlock()
	}
}

// Close sends the acknowledgements due (ctx bounds that) and closes the
// connection; the group keeps its pending entries. Safe without Connect
// and more than once.
func (s *streamSource) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.stopFetch != nil {
		s.stopFetch()
		<-s.fetchDone
	}
	s.mu.Lock()
	client := s.client
	s.client = nil
	s.mu.Unlock()
	if client != nil {
		pipe := client.Pipeline()
		s.queueAcks(ctx, pipe)
		if pipe.Len() > 0 {
			_, _ = pipe.Exec(ctx)
		}
		_ = client.Close()
	}
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
	_ connectors.Source     = (*streamSource)(nil)
	_ connectors.Positioner = (*streamSource)(nil)
)
