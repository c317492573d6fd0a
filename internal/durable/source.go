package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/corruption"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Source wraps a connector's source with a WAL. Read appends each batch
// before returning it; acknowledgements go to the WAL first and
// reach the wrapped source's own acknowledgement (its native commit) only
// once the WAL cursor has passed them; Connect arranges for every
// entry after the cursor to be read again before new input.
//
// Its positions (connectors.Positioner) are those of the WAL cursor: for
// each partition, the offset after the last row of the entries the cursor
// covers. They are stored with the cursor, so a restart resumes the wrapped
// source after everything the WAL holds. A partition the cursor covers
// nothing of yet is at the first offset read from it (or, when nothing has
// been read from it, where the wrapped source starts it): a checkpoint
// records every partition the subtask reads, so that a restore never falls
// back to the wrapped source's configured start, which the native commits
// move past the checkpoint (for Kafka, the group's committed offset).
//
// A wrapped source that cannot read its input again
// (connectors.Unrewindable), in a job that takes checkpoints, has its
// entries held: the WAL keeps every entry until a completed checkpoint
// holds its rows (CheckpointCompleted moves the WAL's retention floor), and
// a restore replays the held entries the restored checkpoint does not hold
// instead of seeking the source back (see scanHeld).
type Source struct {
	inner connectors.Source
	name  string // the source operator ID, written into every payload
	task  string
	log   *walog.Log
	lg    *slog.Logger
	drain time.Duration

	restored []connectors.Position // from a checkpoint (Seek), or nil
	par      int                   // the source's parallelism

	// hold: the WAL keeps entries until a checkpoint holds them (the
	// wrapped source is connectors.Unrewindable and the job checkpoints).
	hold bool
	// metaHeld is what the cursor's meta said at open: the previous run
	// held its entries too (its deletions are then bounded by released).
	metaHeld bool
	// replayFrom is the first entry Read's replay reads (hold: it may be
	// at or below the cursor); 0 replays after the cursor. redoUpTo is
	// the cursor the held scan found: replayed entries up to it are redo.
	replayFrom, redoUpTo uint64
	warnedNoOffsets      bool

	replay    *walog.Replayer
	replaySet map[uint64]bool // entries Read must deliver again
	// replayOver is closed once Read has delivered every entry the WAL
	// replays (at Connect when there are none).
	replayOver     chan struct{}
	replayOverOnce sync.Once
	buf            []byte

	mu      sync.Mutex
	base    posMap  // positions as of the cursor folded so far
	queue   []posAt // positions of entries after that, in sequence order
	pending seqHeap // acknowledged entries whose native ack waits on the cursor
	natives map[uint64]func(error)
	closing bool
	kick    chan struct{}
	// redo are entries at or below the cursor that a restore replays
	// (hold only), in sequence order, and redoAcked those of them
	// acknowledged: the positions pass them in order, before any entry
	// of the queue (which all come after them).
	redo      []posAt
	redoAcked map[uint64]bool
	// held are the entries the WAL keeps for checkpoints (hold only): from
	// its floor on, in sequence order, with the positions of their rows.
	held []heldEntry
	// released merges the positions of the checkpoints that moved the
	// floor, in this run and (from the cursor's meta) earlier ones: every
	// row the WAL may have deleted lies before them.
	released posMap

	stopCommit context.CancelFunc
	committed  chan error

	replayed atomic.Int64
	parked   atomic.Int64

	keeper Keeper // the wrapped source, when it keeps something beside the WAL
}

type posKey struct {
	topic string
	part  int32
}

// posMap holds, per partition, the offset after the last row seen.
type posMap map[posKey]int64

type posAt struct {
	seq   uint64
	pos   posMap
	first posMap // per partition, the offset of the entry's first row
}

// heldEntry is an entry the WAL keeps until a checkpoint holds its rows.
type heldEntry struct {
	seq  uint64
	rows rowPositions
}

// Job is what Open needs to know about the job around the source.
type Job struct {
	// Checkpoints is set when the job takes checkpoints. The WAL of a
	// source that cannot read its input again (connectors.Unrewindable)
	// then keeps every entry until a completed checkpoint holds its rows
	// (CheckpointCompleted).
	Checkpoints bool
}

// Open opens the WAL of one source subtask and wraps the source with it.
// The caller closes the returned Source (which closes inner) and then,
// after the sinks, calls CloseWAL.
//
// ctx bounds only the opening (of the object-store backend, also by 30 s),
// not the WAL's lifetime: cancelled, Open opens nothing and returns ctx's
// error.
func Open(ctx context.Context, cfg *job.Durability, inner connectors.Source, dataDir string, info connectors.TaskInfo, task string, job Job) (*Source, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("opening the WAL of source %s: %w", task, err)
	}
	s := &Source{
		replayOver: make(chan struct{}),
		inner:      inner, name: info.OperatorID, task: task,
		lg:        info.Logger,
		base:      posMap{},
		natives:   map[uint64]func(error){},
		kick:      make(chan struct{}, 1),
		redoAcked: map[uint64]bool{},
		released:  posMap{},
	}
	if s.lg == nil {
		// info.Logger carries the job, operator and subtask keys; without
		// one the source logs nothing (never through slog.Default).
		s.lg = slog.New(slog.DiscardHandler)
	}
	if k, ok := inner.(Keeper); ok {
		if ObjectStore(cfg) {
			return nil, fmt.Errorf("opening the WAL of source %s: %w", task, errKeeperObjectStore)
		}
		s.keeper = k
	}
	if _, ok := inner.(connectors.Unrewindable); ok && job.Checkpoints {
		if _, ok := inner.(connectors.Positioner); !ok {
			return nil, fmt.Errorf("opening the WAL of source %s: its connector cannot read its input again (connectors.Unrewindable) but reports no positions (connectors.Positioner): "+
				"in a job with checkpoints the WAL keeps its entries until a checkpoint holds their rows, which it knows from their positions", task)
		}
		s.hold = true
	}
	opts := Options(cfg)
	opts.Logger = s.lg
	opts.CursorMeta = s.cursorMeta
	opts.Hold = s.hold
	var err error
	if ObjectStore(cfg) {
		s.log, err = openObjectStore(ctx, cfg, opts, info)
	} else {
		var dir string
		dir, err = Dir(cfg, dataDir, info.JobID, info.OperatorID, info.Subtask)
		if err == nil {
			s.log, err = walog.OpenDir(dir, walog.LocalOptions{Options: opts, SegmentBytes: cfg.SegmentBytes, Retain: cfg.Retain, NoRecycle: cfg.NoRecycle})
		}
	}
	if err == nil && s.keeper != nil {
		if err = s.openKeeper(cfg, dataDir, info); err != nil {
			s.log.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("opening the WAL of source %s: %w", task, err)
	}
	s.drain = opts.DrainTimeout
	if s.drain <= 0 {
		s.drain = walog.DefaultDrainTimeout
	}
	s.par = info.Parallelism
	if meta := s.log.CursorMeta(); len(meta) > 0 {
		m, err := decodeMeta(meta)
		ps, par := m.Positions, m.Parallelism
		if err != nil {
			s.log.Close()
			return nil, fmt.Errorf("opening the WAL of source %s: the positions stored with its cursor are unreadable: %w", task, err)
		}
		if par != 0 && par != info.Parallelism {
			s.log.Close()
			where := "its local logs could not be redistributed"
			if ObjectStore(cfg) {
				where = "the object_store backend cannot redistribute its logs to another parallelism (the local backend does)"
			}
			return nil, fmt.Errorf("opening the WAL of source %s: it was written by %d subtasks and this start runs %d: %s; "+
				"run the source at parallelism %d until its logs are drained, or remove them", task, par, info.Parallelism, where, par)
		}
		s.base = toMap(ps)
		s.metaHeld = m.Held
		s.released.merge(toMap(m.Released))
	}
	if c, ok := inner.(connectors.CoverageAware); ok {
		c.SetCovered(s.coveredPositions)
	}
	return s, nil
}

// Log returns the WAL.
func (s *Source) Log() *walog.Log { return s.log }

// Seek records checkpoint positions to reconcile with the WAL on Connect.
func (s *Source) Seek(ps []connectors.Position) error {
	if _, ok := s.inner.(connectors.Positioner); !ok {
		return fmt.Errorf("source %s cannot resume from positions (its connector does not implement connectors.Positioner)", s.task)
	}
	// Non-nil even when empty: a checkpoint without positions for this
	// task was taken before it consumed anything, and that is a position.
	s.restored = append([]connectors.Position{}, ps...)
	return nil
}

// Positions returns where a restart resumes every partition: the
// positions the WAL cursor covers, and, for a partition it covers nothing
// of yet, the offset of the first row read from it after the cursor (an
// entry read but not acknowledged, or one the WAL replays), else the
// wrapped source's own position (its start, as nothing of it is
// acknowledged). Leaving such a partition out would make a restore of a
// checkpoint taken now resume it at the wrapped source's configured start,
// which the native commits move on once the cursor passes its rows: the
// rows in between would be skipped.
func (s *Source) Positions() []connectors.Position {
	cursor := s.log.Cursor()
	var inner []connectors.Position
	if p, ok := s.inner.(connectors.Positioner); ok {
		inner = p.Positions()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fold(cursor)
	out := posMap{}
	out.merge(s.base)
	starts := posMap{}
	for _, q := range s.redo {
		for k, off := range q.first {
			if cur, ok := starts[k]; !ok || off < cur {
				starts[k] = off
			}
		}
	}
	for _, q := range s.queue {
		for k, off := range q.first {
			if cur, ok := starts[k]; !ok || off < cur {
				starts[k] = off
			}
		}
	}
	for k, off := range starts {
		if _, ok := out[k]; !ok {
			out[k] = off
		}
	}
	for _, p := range inner {
		k := posKey{p.Topic, p.Partition}
		if _, ok := out[k]; !ok {
			out[k] = p.Offset
		}
	}
	return out.list()
}

// coveredPositions returns the positions the WAL cursor covers only: a
// partition it covers nothing of has none (connectors.CoverageAware).
func (s *Source) coveredPositions() []connectors.Position {
	return s.positionsAt(s.log.Cursor())
}

func (s *Source) positionsAt(cursor uint64) []connectors.Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fold(cursor)
	return s.base.list()
}

// fold merges the positions of the entries the cursor has passed into
// base: first those of replayed entries at or below the cursor, as they
// are acknowledged in order (hold only), then the queue's. s.mu must be
// held.
func (s *Source) fold(cursor uint64) {
	for len(s.redo) > 0 && s.redoAcked[s.redo[0].seq] {
		delete(s.redoAcked, s.redo[0].seq)
		s.base.merge(s.redo[0].pos)
		s.redo = s.redo[1:]
	}
	if len(s.redo) > 0 {
		return
	}
	for len(s.queue) > 0 && s.queue[0].seq <= cursor {
		s.base.merge(s.queue[0].pos)
		s.queue = s.queue[1:]
	}
}

// cursorMeta is the WAL's CursorMeta hook: the positions as of the cursor,
// stored with it, and the parallelism of the source; a held log adds the
// positions it released entries up to.
func (s *Source) cursorMeta(cursor uint64) []byte {
	if s.keeper != nil {
		// The save that follows may delete the entries behind the
		// cursor: what the keeper keeps of them goes to disk first.
		s.keeper.SaveKept()
	}
	m := walMeta{Parallelism: s.par, Positions: s.positionsAt(cursor), Held: s.hold}
	if s.hold {
		s.mu.Lock()
		m.Released = s.released.list()
		s.mu.Unlock()
	}
	return encodeMeta(m)
}

// walMeta is what a source stores with its WAL cursor. Logs written before
// it recorded the parallelism hold the bare list of positions.
type walMeta struct {
	Parallelism int                   `json:"parallelism"`
	Positions   []connectors.Position `json:"positions"`
	// Held says the log kept its entries for checkpoints (Options.Hold);
	// Released are then the positions before which it may have deleted
	// rows. A log that did not hold may have deleted every row before
	// Positions.
	Held     bool                  `json:"held,omitempty"`
	Released []connectors.Position `json:"released,omitempty"`
}

func encodeMeta(m walMeta) []byte {
	b, _ := json.Marshal(m)
	return b
}

// decodeMeta reads a cursor's meta; parallelism 0 means not recorded.
// Meta that does not decode is corruption (it passed the cursor's CRC, so
// the bytes are what was written, but not by this code): its error
// matches walog.ErrCorrupt.
func decodeMeta(b []byte) (walMeta, error) {
	if len(b) > 0 && b[0] == '[' {
		var ps []connectors.Position
		err := json.Unmarshal(b, &ps)
		return walMeta{Positions: ps}, corruption.Mark(err)
	}
	var m walMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return walMeta{}, corruption.Mark(err)
	}
	return m, nil
}

// CursorPositions decodes the meta a source stores with its WAL cursor
// (walog.Inspection.Meta): the positions its cursor covers, the offset
// after the last row of the entries at or below it, per partition. Empty
// meta (a log whose cursor was never saved by a source) has none. Meta
// that does not decode is an error matching walog.ErrCorrupt.
func CursorPositions(meta []byte) ([]connectors.Position, error) {
	if len(meta) == 0 {
		return nil, nil
	}
	m, err := decodeMeta(meta)
	if err != nil {
		return nil, fmt.Errorf("wal: the positions stored with the cursor do not decode: %w", err)
	}
	return m.Positions, nil
}

// Connect reconciles the WAL with restored checkpoint positions, seeks the
// wrapped source past what the WAL holds, connects it, and starts the
// committer.
func (s *Source) Connect(ctx context.Context) error {
	scan := s.scan
	if s.hold {
		scan = s.scanHeld
	}
	plan, err := scan()
	if err != nil {
		return err
	}
	if p, ok := s.inner.(connectors.Positioner); ok && len(plan.seek) > 0 {
		if err := p.Seek(plan.seek.list()); err != nil {
			return fmt.Errorf("source %s: seeking past the WAL: %w", s.task, err)
		}
	}
	if err := s.inner.Connect(ctx); err != nil {
		return err
	}
	if len(s.replaySet) == 0 {
		s.endReplay()
	} else {
		var r *walog.Replayer
		var err error
		if s.replayFrom > 0 {
			r, err = s.log.ReplayFrom(s.replayFrom)
		} else {
			r, err = s.log.Replay()
		}
		if err != nil {
			return fmt.Errorf("source %s: replaying the WAL: %w", s.task, err)
		}
		s.replay = r
		if s.replayFrom == 0 || s.replayFrom > s.log.Cursor() {
			s.lg.Info("replaying the WAL's entries that were not acknowledged before reading new input", "entries", len(s.replaySet), "cursor", s.log.Cursor())
		}
	}
	cctx, cancel := context.WithCancel(context.Background())
	s.stopCommit = cancel
	s.committed = make(chan error, 1)
	go func() { s.committed <- s.commit(cctx) }()
	return nil
}

type scanPlan struct {
	seek posMap
}

// scan reads the entries after the cursor once: their positions, whether
// a restored checkpoint covers them (then they are acknowledged instead of
// replayed, so the cursor moves past the covered prefix), and where
// the wrapped source must resume.
func (s *Source) scan() (scanPlan, error) {
	r, err := s.log.Replay()
	if err != nil {
		return scanPlan{}, fmt.Errorf("source %s: reading the WAL: %w", s.task, err)
	}
	defer r.Close()
	restored := toMap(s.restored)
	// A checkpoint older than the cursor: the rows between its positions
	// and the cursor's are gone from the WAL, so the wrapped source must
	// read them again, and the WAL's tail would only duplicate them.
	// A partition the WAL's positions hold but the checkpoint does not was
	// read only after the checkpoint: its configured start is older too.
	older := false
	if restored != nil {
		for k, b := range s.base {
			if off, ok := restored[k]; !ok || off < b {
				older = true
			}
		}
	}
	if older {
		// Positions restart from the checkpoint, and the entries the scan
		// skips must not move them (the flusher may persist them at once).
		s.mu.Lock()
		s.base = posMap{}
		s.base.merge(restored)
		s.mu.Unlock()
	}
	seek := posMap{}
	seek.merge(s.base)
	s.replaySet = map[uint64]bool{}
	var covered []uint64
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return scanPlan{}, fmt.Errorf("source %s: reading the WAL: %w", s.task, err)
		}
		_, rec, err := walog.DecodeBatch(e.Payload, nil)
		if err != nil {
			return scanPlan{}, fmt.Errorf("source %s: WAL entry %d: %w", s.task, e.Seq, err)
		}
		if s.keeper != nil {
			s.keeper.Logged(rec)
		}
		pos, rows := positionsOf(rec)
		if restored != nil && (older || rows.coveredBy(restored)) {
			covered = append(covered, e.Seq)
		} else {
			s.replaySet[e.Seq] = true
		}
		rec.Release()
		if !older {
			s.mu.Lock()
			s.queue = append(s.queue, posAt{seq: e.Seq, pos: pos, first: rows.first()})
			s.mu.Unlock()
			seek.merge(pos)
		}
	}
	for _, seq := range covered {
		if err := s.log.Ack(seq); err != nil {
			return scanPlan{}, err
		}
	}
	if restored != nil {
		if older {
			s.lg.Info("the restored checkpoint is older than what the WAL acknowledged: the source reads its input again from the checkpoint's positions, "+
				"so the WAL's copies of those rows are not replayed (nothing is lost; output written after the checkpoint may be written again)",
				"resume_at", describePositions(restored.list()), "wal_cursor", s.log.Cursor())
			seek = posMap{}
			s.replaySet = map[uint64]bool{}
		}
		seek.merge(restored)
	}
	return scanPlan{seek: seek}, nil
}

// Read returns the next replayed entry while there are any, then reads the
// wrapped source and appends each batch to the WAL before returning it.
func (s *Source) Read(ctx context.Context) (connectors.Batch, error) {
	if b, ok, err := s.replayNext(); ok || err != nil {
		return b, err
	}
	b, err := s.inner.Read(ctx)
	return s.admit(ctx, b, err)
}

// controlReader is a source that delivers watermark advances in band with
// its batches (the runtime's ControlReader; the test harness's inputs).
type controlReader interface {
	ReadControl(ctx context.Context) (connectors.Batch, *eventtime.Advance, error)
}

// ReadControl is Read for a wrapped source that delivers watermark
// advances in band (the runtime calls it instead of Read): its batches go
// through the WAL as Read's do, and its advances pass through in their
// place in the stream. An advance carries no rows, so the WAL has nothing
// to keep of it; a restart replays the WAL's entries without the advances
// between them, which the wrapped source delivers again only if it reads
// them again. A wrapped source without advances is read with Read.
func (s *Source) ReadControl(ctx context.Context) (connectors.Batch, *eventtime.Advance, error) {
	if b, ok, err := s.replayNext(); ok || err != nil {
		return b, nil, err
	}
	cr, ok := s.inner.(controlReader)
	if !ok {
		b, err := s.inner.Read(ctx)
		b, err = s.admit(ctx, b, err)
		return b, nil, err
	}
	b, adv, err := cr.ReadControl(ctx)
	if adv != nil && err == nil {
		return connectors.Batch{}, adv, nil
	}
	b, err = s.admit(ctx, b, err)
	return b, nil, err
}

// ReplayOver is closed once Read has delivered every entry the WAL
// replays after a restart, before any new input.
func (s *Source) ReplayOver() <-chan struct{} { return s.replayOver }

func (s *Source) endReplay() { s.replayOverOnce.Do(func() { close(s.replayOver) }) }

// replayNext returns the next entry the WAL replays after a restart (ok),
// or nothing once the replay is over.
func (s *Source) replayNext() (b connectors.Batch, ok bool, err error) {
	for s.replay != nil {
		e, err := s.replay.Next()
		if err == io.EOF {
			s.replay.Close()
			s.replay = nil
			s.endReplay()
			break
		}
		if err != nil {
			return connectors.Batch{}, false, fmt.Errorf("replaying the WAL: %w", err)
		}
		if !s.replaySet[e.Seq] {
			continue
		}
		delete(s.replaySet, e.Seq)
		_, rec, err := walog.DecodeBatch(e.Payload, nil)
		if err != nil {
			return connectors.Batch{}, false, fmt.Errorf("replaying WAL entry %d: %w", e.Seq, err)
		}
		s.replayed.Add(1)
		ack := s.ackFunc(e.Seq, nil)
		if s.isRedo(e.Seq) {
			ack = s.redoAck(e.Seq)
		}
		return connectors.Batch{Record: rec, Partition: int(partitionOf(rec)), Ack: ack}, true, nil
	}
	return connectors.Batch{}, false, nil
}

// admit appends a batch the wrapped source read (b, err: its Read's
// result) to the WAL and returns it with its acknowledgement routed
// through the WAL, or fails it when the append fails.
func (s *Source) admit(ctx context.Context, b connectors.Batch, err error) (connectors.Batch, error) {
	if err != nil || b.Record == nil || b.Record.NumRows() == 0 {
		return b, err
	}
	s.buf, err = walog.EncodeBatch(s.buf[:0], s.name, b.Record)
	if err == nil {
		var seq uint64
		seq, err = s.log.Append(ctx, s.buf)
		if err == nil {
			pos, rows := positionsOf(b.Record)
			s.mu.Lock()
			s.queue = append(s.queue, posAt{seq: seq, pos: pos, first: rows.first()})
			if s.hold {
				s.held = append(s.held, heldEntry{seq: seq, rows: rows})
			}
			s.mu.Unlock()
			if s.hold && len(rows) == 0 {
				s.warnNoOffsets(seq)
			}
			b.Ack = s.ackFunc(seq, b.Ack)
			if b.Accepted != nil {
				b.Accepted(nil)
				b.Accepted = nil
			}
			return b, nil
		}
	}
	// Not durable, so not delivered: the wrapped source keeps the rows
	// unacknowledged and the job fails.
	b.Record.Release()
	err = fmt.Errorf("appending to the WAL: %w", err)
	if b.Accepted != nil {
		b.Accepted(err)
	}
	if b.Ack != nil {
		b.Ack(err)
	}
	return connectors.Batch{}, err
}

// ackFunc returns the acknowledgement of WAL entry seq: the WAL first, then,
// once the cursor has passed seq, native (the wrapped source's own).
func (s *Source) ackFunc(seq uint64, native func(error)) func(error) {
	return func(err error) {
		if err != nil {
			s.log.Abandon(seq)
			if native != nil {
				native(err)
			}
			return
		}
		// Register the native ack before the WAL ack can move the
		// cursor: otherwise the committer could see a later entry covered
		// and run its native ack before this one is queued.
		if native != nil {
			s.mu.Lock()
			s.natives[seq] = native
			s.pending.push(seq)
			s.mu.Unlock()
		}
		if e := s.log.Ack(seq); e != nil {
			s.lg.Error("WAL acknowledgement", "error", e)
		}
		if native == nil {
			return
		}
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// commit runs native acknowledgements in sequence order once the cursor
// covers them. A parked wait that outlives its lease is logged and retried:
// the error repeats while the gap stays open and stops the moment
// it closes.
func (s *Source) commit(ctx context.Context) error {
	for {
		s.mu.Lock()
		if len(s.pending) == 0 {
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			select {
			case <-s.kick:
				continue
			case <-ctx.Done():
				return nil
			}
		}
		seq := s.pending[0]
		s.mu.Unlock()
		err := s.log.Await(ctx, seq)
		var parked *walog.ParkedError
		var abandoned *walog.AbandonedError
		switch {
		case err == nil:
			s.settle(s.log.Cursor(), nil)
		case errors.As(err, &parked):
			s.parked.Add(1)
			s.lg.Warn(err.Error(), "waiting", seq)
		case errors.As(err, &abandoned):
			// Never committed in this run; replayed after a restart.
			s.settle(seq, err)
		case ctx.Err() != nil:
			return walog.ErrClosedPending
		default:
			return err
		}
	}
}

// settle runs the native acknowledgements of pending entries up to seq.
func (s *Source) settle(upTo uint64, err error) {
	var run []func(error)
	s.mu.Lock()
	for len(s.pending) > 0 && s.pending[0] <= upTo {
		seq := s.pending.pop()
		run = append(run, s.natives[seq])
		delete(s.natives, seq)
	}
	s.mu.Unlock()
	for _, f := range run {
		f(err)
	}
}

// Close lets pending native acknowledgements drain (bounded by the drain
// window), then closes the wrapped source. The WAL stays open
// until CloseWAL.
func (s *Source) Close(ctx context.Context) error {
	var drainErr error
	if s.stopCommit != nil {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		select {
		case s.kick <- struct{}{}:
		default:
		}
		t := time.NewTimer(s.drain)
		select {
		case drainErr = <-s.committed:
		case <-t.C:
			s.stopCommit()
			drainErr = <-s.committed
		case <-ctx.Done():
			s.stopCommit()
			drainErr = <-s.committed
		}
		t.Stop()
		s.stopCommit()
		s.stopCommit = nil
	}
	if s.replay != nil {
		s.replay.Close()
		s.replay = nil
	}
	return errors.Join(drainErr, s.inner.Close(ctx))
}

// CloseWAL closes the WAL: the last step of a stop, after the sinks.
func (s *Source) CloseWAL() error { return s.log.Close() }

// Gauges are the WAL's positions now, reported with the source task's
// metrics: wal_cursor (the last entry acknowledged through) and wal_last
// (the last entry appended).
func (s *Source) Gauges() map[string]int64 {
	return map[string]int64{
		"wal_cursor": int64(s.log.Cursor()),
		"wal_last":   int64(s.log.Last()),
	}
}

// WALStats returns the write-ahead log's appends, sync latencies and
// parked acknowledgements (for the Prometheus families).
func (s *Source) WALStats() walog.Stats { return s.log.Stats() }

// Counters are the WAL's totals since the source opened: wal_replayed
// (entries replayed after a restart) and wal_parked_timeouts (parked
// acknowledgements that outlived their lease).
func (s *Source) Counters() map[string]int64 {
	return map[string]int64{
		"wal_replayed":        s.replayed.Load(),
		"wal_parked_timeouts": s.parked.Load(),
	}
}

// rowPositions are the per-partition offset ranges of a batch's rows.
type rowPositions map[posKey][2]int64 // [min, max]

// first returns the offset of the first row of every partition.
func (r rowPositions) first() posMap {
	if len(r) == 0 {
		return nil
	}
	m := make(posMap, len(r))
	for k, mm := range r {
		m[k] = mm[0]
	}
	return m
}

// coveredBy reports whether every row lies before the restored position of
// its partition. Rows without offsets are never covered.
func (r rowPositions) coveredBy(restored posMap) bool {
	if len(r) == 0 {
		return false
	}
	for k, mm := range r {
		off, ok := restored[k]
		if !ok || mm[1] >= off {
			return false
		}
	}
	return true
}

// positionsOf reads a batch's __meta_topic, __meta_partition and
// __meta_offset columns.
func positionsOf(rec arrow.RecordBatch) (posMap, rowPositions) {
	pos, rows := posMap{}, rowPositions{}
	offs := column[*array.Int64](rec, connectors.MetaOffset)
	if offs == nil {
		return pos, rows
	}
	parts := column[*array.Int32](rec, connectors.MetaPartition)
	topics := column[*array.String](rec, connectors.MetaTopic)
	// Rows come in runs of one partition (usually the whole batch): fold
	// a run locally and touch the maps once per run.
	var cur posKey
	var lo, hi int64
	inRun := false
	flush := func() {
		if !inRun {
			return
		}
		if p, ok := pos[cur]; !ok || hi+1 > p {
			pos[cur] = hi + 1
		}
		mm, ok := rows[cur]
		if !ok {
			mm = [2]int64{lo, hi}
		}
		mm[0], mm[1] = min(mm[0], lo), max(mm[1], hi)
		rows[cur] = mm
		inRun = false
	}
	for i := 0; i < offs.Len(); i++ {
		if offs.IsNull(i) {
			continue
		}
		k := posKey{}
		if parts != nil && parts.IsValid(i) {
			k.part = parts.Value(i)
		}
		if topics != nil && topics.IsValid(i) {
			k.topic = topics.Value(i)
		}
		o := offs.Value(i)
		if inRun && k == cur {
			lo, hi = min(lo, o), max(hi, o)
			continue
		}
		flush()
		cur, lo, hi, inRun = k, o, o, true
	}
	flush()
	return pos, rows
}

func partitionOf(rec arrow.RecordBatch) int32 {
	if parts := column[*array.Int32](rec, connectors.MetaPartition); parts != nil && parts.Len() > 0 && parts.IsValid(0) {
		return parts.Value(0)
	}
	return 0
}

func column[T arrow.Array](rec arrow.RecordBatch, name string) T {
	var zero T
	idx := rec.Schema().FieldIndices(name)
	if len(idx) == 0 {
		return zero
	}
	c, ok := rec.Column(idx[0]).(T)
	if !ok {
		return zero
	}
	return c
}

func (m posMap) merge(o posMap) {
	for k, v := range o {
		if cur, ok := m[k]; !ok || v > cur {
			m[k] = v
		}
	}
}

func (m posMap) list() []connectors.Position {
	out := make([]connectors.Position, 0, len(m))
	for k, v := range m {
		out = append(out, connectors.Position{Topic: k.topic, Partition: k.part, Offset: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func toMap(ps []connectors.Position) posMap {
	if ps == nil {
		return nil
	}
	m := posMap{}
	for _, p := range ps {
		m[posKey{p.Topic, p.Partition}] = p.Offset
	}
	return m
}

// seqHeap is a min-heap of sequence numbers.
type seqHeap []uint64

func (h *seqHeap) push(x uint64) {
	*h = append(*h, x)
	i := len(*h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if (*h)[p] <= (*h)[i] {
			break
		}
		(*h)[p], (*h)[i] = (*h)[i], (*h)[p]
		i = p
	}
}

func (h *seqHeap) pop() uint64 {
	old := *h
	x := old[0]
	n := len(old) - 1
	old[0] = old[n]
	*h = old[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && (*h)[l] < (*h)[m] {
			m = l
		}
		if r < n && (*h)[r] < (*h)[m] {
			m = r
		}
		if m == i {
			break
		}
		(*h)[m], (*h)[i] = (*h)[i], (*h)[m]
		i = m
	}
	return x
}

// DryRun opens the WALs of a source's subtasks and closes them again:
// it checks that they are reachable, not held by another process and
// readable (no corruption), and leaves them free for the real start to
// open at once. info names the source and its parallelism
// (Subtask is ignored). Local logs written at another parallelism are
// checked as they are: the start redistributes them first (Reshard).
func DryRun(ctx context.Context, cfg *job.Durability, dataDir string, info connectors.TaskInfo) error {
	opts := Options(cfg)
	opts.Logger = info.Logger
	n := info.Parallelism
	if !ObjectStore(cfg) {
		d0, err := Dir(cfg, dataDir, info.JobID, info.OperatorID, 0)
		if err != nil {
			return err
		}
		if old, _, err := logParallelism(filepath.Dir(d0)); err != nil {
			return fmt.Errorf("source %s: %w", info.OperatorID, err)
		} else if old != 0 && old != n {
			n = old
		}
	}
	var errs []error
	for sub := range n {
		info := info
		info.Subtask = sub
		var log *walog.Log
		var err error
		if ObjectStore(cfg) {
			log, err = openObjectStore(ctx, cfg, opts, info)
		} else {
			var dir string
			if dir, err = Dir(cfg, dataDir, info.JobID, info.OperatorID, info.Subtask); err == nil {
				log, err = walog.OpenDir(dir, walog.LocalOptions{Options: opts, SegmentBytes: cfg.SegmentBytes, Retain: cfg.Retain, NoRecycle: cfg.NoRecycle})
			}
		}
		if err == nil {
			err = log.Close()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("opening the WAL of source %s[%d]: %w", info.OperatorID, info.Subtask, err))
		}
	}
	return errors.Join(errs...)
}

// describePositions renders positions for a log line: "partition 0 at
// offset 10, ..." (with the topic when there is one).
func describePositions(ps []connectors.Position) string {
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		d := fmt.Sprintf("partition %d at offset %d", p.Partition, p.Offset)
		if p.Topic != "" {
			d = p.Topic + " " + d
		}
		parts = append(parts, d)
	}
	return strings.Join(parts, ", ")
}
