package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// listSource pops lists, one list per partition (partition p of P is
// subtask p % P's): at-least-once. Every element moves atomically from
// the head of its list to the tail of a processing list of its own
// (LMOVE/BLMOVE, KEY:processing:CONSUMER), and leaves that once it was
// acknowledged (LREM), in order: a crash leaves the elements read and not
// acknowledged in the processing list, and the next Connect reads them
// again first. Offsets number the elements a run read (from 0 at every
// Connect): a list has no positions to resume from, so the source is not
// a connectors.Positioner, and a restore of a checkpoint does not read
// the elements acknowledged after it again.
type listSource struct {
	in    *input
	info  connectors.TaskInfo
	log   *slog.Logger
	parts []*listPart

	mu     sync.Mutex // guards client and closed against Close
	client goredis.UniversalClient
	closed bool

	// Read's goroutine only.
	connected bool
	failed    error
	ready     []listBatch
	rr        int
}

type listPart struct {
	idx       int32
	key, proc string
	tracker   *connectors.Tracker
	mu        sync.Mutex // guards unacked and toRem
	unacked   []valSpan
	toRem     []string // acknowledged elements to remove from proc, in order
	b         *rowBuilder
	next      int64
	vals      []string
	redo      []string // proc's elements at Connect, read first
}

type valSpan struct {
	end  int64
	vals []string
}

type listBatch struct {
	rec        arrow.RecordBatch
	p          *listPart
	first, end int64
	vals       []string
}

func newListSource(in *input, info connectors.TaskInfo, par int, lg *slog.Logger) *listSource {
	s := &listSource{in: in, info: info, log: lg}
	for i, key := range in.cfg.RedisType.List {
		if i%par == info.Subtask {
			s.parts = append(s.parts, &listPart{idx: int32(i), key: key, proc: key + ":processing:" + in.cfg.RedisType.Consumer, tracker: connectors.NewTracker(key)})
		}
	}
	return s
}

// Connect connects and reads every partition's processing list: what a
// previous run popped and did not acknowledge, read again first.
func (s *listSource) Connect(ctx context.Context) error {
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
		redo, err := client.LRange(ctx, p.proc, 0, -1).Result()
		if err != nil {
			return fmt.Errorf("redis: reading processing list %q: %w", p.proc, err)
		}
		b, err := newRowBuilder(s.in)
		if err != nil {
			return err
		}
		p.b, p.redo = b, redo
		p.tracker.Start(p.idx, 0)
		s.log.Info("redis: source pops list", "list", p.key, "processing_list", p.proc, "partition", p.idx, "unacknowledged", len(redo))
	}
	return nil
}

// Read returns the elements popped, at most batch_size of one partition,
// waiting for the first until ctx is done.
func (s *listSource) Read(ctx context.Context) (connectors.Batch, error) {
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
		if err := ctx.Err(); err != nil {
			return connectors.Batch{}, err
		}
		if err := s.fetch(ctx); err != nil {
			if ctx.Err() != nil {
				return connectors.Batch{}, ctx.Err()
			}
			if !retryable(err) {
				return connectors.Batch{}, fmt.Errorf("redis: popping lists: %w", err)
			}
			s.log.Warn("popping lists failed (retrying)", "error", err)
			if err := sleepCtx(ctx, retryWait); err != nil {
				return connectors.Batch{}, err
			}
		}
	}
}

// fetch sends the removals due and pops up to batch_size elements of
// every partition without waiting (LLEN, then LMOVEs); when there were none,
// it waits block_ms for one partition's next element (in turn).
func (s *listSource) fetch(ctx context.Context) error {
	for _, p := range s.parts {
		if len(p.redo) > 0 {
			n := min(len(p.redo), s.in.cfg.BatchSize)
			s.addAll(p, p.redo[:n])
			p.redo = p.redo[n:]
			return nil
		}
	}
	pipe := s.client.Pipeline()
	s.queueRemovals(ctx, pipe)
	lens := make([]*goredis.IntCmd, len(s.parts))
	for i, p := range s.parts {
		lens[i] = pipe.LLen(ctx, p.key)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	pipe = s.client.Pipeline()
	cmds := make([][]*goredis.StringCmd, len(s.parts))
	for i, p := range s.parts {
		for j := 0; j < min(int(lens[i].Val()), s.in.cfg.BatchSize); j++ {
			cmds[i] = append(cmds[i], pipe.LMove(ctx, p.key, p.proc, "LEFT", "RIGHT"))
		}
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			return err
		}
	}
	got := false
	for i, p := range s.parts {
		var vals []string
		for _, c := range cmds[i] {
			if v, err := c.Result(); err == nil {
				vals = append(vals, v)
			}
		}
		if len(vals) > 0 {
			got = true
			s.addAll(p, vals)
		}
	}
	if got {
		return nil
	}
	s.rr = (s.rr + 1) % len(s.parts)
	p := s.parts[s.rr]
	v, err := s.client.BLMove(ctx, p.key, p.proc, "LEFT", "RIGHT", time.Duration(s.in.cfg.RedisType.BlockMS)*time.Millisecond).Result()
	if errors.Is(err, goredis.Nil) {
		return nil
	}
	if err != nil {
		return err
	}
	s.addAll(p, []string{v})
	return nil
}

// queueRemovals adds the removals of acknowledged elements to pipe. One
// lost leaves the element in the processing list, and a restart reads it
// again (at-least-once).
func (s *listSource) queueRemovals(ctx context.Context, pipe goredis.Pipeliner) {
	for _, p := range s.parts {
		p.mu.Lock()
		vals := p.toRem
		p.toRem = nil
		p.mu.Unlock()
		for _, v := range vals {
			pipe.LRem(ctx, p.proc, 1, v)
		}
	}
}

// addAll appends elements to their partition's rows and queues batches.
func (s *listSource) addAll(p *listPart, vals []string) {
	for _, v := range vals {
		if err := p.b.addString(v, s.info.OperatorID, p.idx, p.next, p.key, -1); err != nil {
			s.failed = decodeError(fmt.Sprintf("list %q element at offset %d (still in processing list %q)", p.key, p.next, p.proc), err)
			break
		}
		p.next++
		p.vals = append(p.vals, v)
		if p.b.Rows >= s.in.cfg.BatchSize {
			s.flush(p)
		}
	}
	s.flush(p)
}

func (s *listSource) flush(p *listPart) {
	first, end := p.b.First, p.b.End
	if rec := p.b.Take(); rec != nil {
		s.ready = append(s.ready, listBatch{rec: rec, p: p, first: first, end: end, vals: p.vals})
		p.vals = nil
	}
}

// ackFunc returns a batch's acknowledgement: when the partition's
// frontier moves, the elements below it are queued for removal from the
// processing list, which the next read sends.
func (s *listSource) ackFunc(b listBatch) func(error) {
	p := b.p
	done := p.tracker.Deliver(p.idx, b.first, b.end)
	p.mu.Lock()
	p.unacked = append(p.unacked, valSpan{end: b.end, vals: b.vals})
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
			p.toRem = append(p.toRem, p.unacked[i].vals...)
			i++
		}
		p.unacked = p.unacked[i:]
		p.mu.Unlock()
	}
}

// Close sends the removals due (ctx bounds that) and closes the
// connection. Safe without Connect and more than once.
func (s *listSource) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	client := s.client
	s.client = nil
	s.mu.Unlock()
	if client != nil {
		pipe := client.Pipeline()
		s.queueRemovals(ctx, pipe)
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

var _ connectors.Source = (*listSource)(nil)
