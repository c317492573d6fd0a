package walog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/metrics"
)

// SyncMode says when an append is made durable.
type SyncMode string

// Sync modes. See the package documentation for what each loses in a crash.
const (
	// SyncAlways fsyncs every entry before Append returns.
	SyncAlways SyncMode = "always"
	// SyncGroupCommit lets concurrent appenders share one fsync; Append
	// still returns only after its own entry is durable.
	SyncGroupCommit SyncMode = "group_commit"
	// SyncPeriodic returns at once and fsyncs every SyncInterval.
	SyncPeriodic SyncMode = "periodic"
	// SyncNone leaves flushing to the operating system (and Close).
	SyncNone SyncMode = "none"
)

// Defaults.
const (
	DefaultParkLease      = 60 * time.Second
	DefaultDrainTimeout   = 30 * time.Second
	DefaultSyncInterval   = 100 * time.Millisecond
	DefaultCursorInterval = 100 * time.Millisecond
	DefaultSegmentBytes   = 32 << 20
)

// ErrClosed is returned by operations on a closed log.
var ErrClosed = errors.New("wal: log is closed")

// ErrEmptyEntry is returned by Append for an empty payload. The log stores
// no empty entries, so that a record of length 0 (what a torn header of
// zeros reads as: its checksum, of nothing, is 0 too) is always damage.
var ErrEmptyEntry = errors.New("wal: empty entry: a payload must hold at least one byte")

// ErrClosedPending is the error a stream fails with when Close's drain
// window ran out while an acknowledgement was still waiting for an earlier
// one. The waiting entries are replayed after a restart.
var ErrClosedPending = errors.New("WAL closed while acknowledgement was pending")

// ErrParked matches every *ParkedError with errors.Is.
var ErrParked = errors.New("wal: acknowledgement parked")

// ParkedError is returned by Await when its lease ran out while an earlier
// sequence was still unacknowledged. It is retryable: nothing is
// recorded against the owner of the gap, so a retry succeeds as soon as the
// gap closes, and repeats the error for as long as it does not.
type ParkedError struct {
	// Seq is the lowest unacknowledged sequence: the gap.
	Seq uint64
	// Lease is how long the acknowledgement waited.
	Lease time.Duration
}

// Error names the sequence waited for and how long the acknowledgement
// waited.
func (e *ParkedError) Error() string {
	return fmt.Sprintf("WAL acknowledgement parked for >%s waiting for sequence %d; the gap owner appears stalled", formatLease(e.Lease), e.Seq)
}

// Temporary reports that the operation may be retried.
func (e *ParkedError) Temporary() bool { return true }

// Is makes errors.Is(err, ErrParked) true.
func (e *ParkedError) Is(target error) bool { return target == ErrParked }

func formatLease(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// AbandonedError is returned by Await when an entry at or before the one
// waited for was abandoned: its delivery failed, so the cursor cannot pass
// it in this run. The entry is replayed after a restart.
type AbandonedError struct{ Seq uint64 }

// Error names the abandoned sequence.
func (e *AbandonedError) Error() string {
	return fmt.Sprintf("wal: sequence %d was abandoned (its delivery failed); it is replayed on restart", e.Seq)
}

// Clock is the time source for leases and drain windows.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure a Log. Zero values take the defaults.
type Options struct {
	// Sync is the sync mode (default group_commit).
	Sync SyncMode
	// SyncInterval is the periodic mode's fsync interval.
	SyncInterval time.Duration
	// CursorInterval is how often an advanced cursor is persisted. A
	// cursor persisted late only means more replay after a crash.
	CursorInterval time.Duration
	// ParkLease bounds how long Await waits for an earlier sequence.
	ParkLease time.Duration
	// DrainTimeout bounds how long Close waits for parked acknowledgements.
	DrainTimeout time.Duration
	// CursorMeta, if set, is called when the cursor is persisted; the bytes
	// it returns are stored with the cursor and returned by CursorMeta after
	// a restart. A source keeps its resume positions there, because the
	// entries they come from are deleted once the cursor passes them.
	CursorMeta func(cursor uint64) []byte
	// Hold keeps the entries the cursor has passed until the retention
	// floor (SetFloor) passes them too (default false: the cursor alone
	// decides, and a segment goes once the persisted cursor covers it).
	// A source whose input cannot be read again holds its entries until
	// a checkpoint of the state they went into is complete, so that a
	// restore of that checkpoint can replay them (ReplayFrom). The floor
	// is not persisted: a log opened with Hold starts it at its oldest
	// stored entry, and it only moves forward.
	Hold bool
	// Clock defaults to the system clock.
	Clock Clock
	// Logger receives the log's warnings (a failed periodic sync, a cut
	// torn tail); the durable source passes its subtask's logger. The
	// default, nil, discards them: the library never logs through
	// slog.Default.
	Logger *slog.Logger
}

func (o *Options) withDefaults() error {
	switch o.Sync {
	case "":
		o.Sync = SyncGroupCommit
	case SyncAlways, SyncGroupCommit, SyncPeriodic, SyncNone:
	default:
		return fmt.Errorf("wal: sync %q is not one of always, group_commit, periodic, none", o.Sync)
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.CursorInterval <= 0 {
		o.CursorInterval = DefaultCursorInterval
	}
	if o.ParkLease <= 0 {
		o.ParkLease = DefaultParkLease
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// storage is where a Log keeps its records and cursor: a local directory
// or an object store.
type storage interface {
	// recover loads what an earlier run left (repairing a torn tail).
	recover() (recovered, error)
	// write appends encoded records first..last. Calls are serialized and
	// in sequence order; write may run while sync does. recs is reused
	// once write returns: write must copy what it keeps.
	write(recs []byte, first, last uint64) error
	// sync makes every write that returned before the call durable. Calls
	// are serialized.
	sync() error
	// replay returns the stored entries with seq > after, in order
	// (after may be below the cursor: entries still stored are returned).
	replay(after uint64) (iterator, error)
	// saveCursor persists the cursor with its meta, then deletes segments
	// wholly at or below release, which is at most cursor (unless
	// retained). Calls are serialized.
	saveCursor(cursor uint64, meta []byte, release uint64) error
	// close releases the storage (and its lock). It does not sync.
	close() error
	// describe names the storage in errors ("/data/wal/x", "s3://b/p").
	describe() string
}

type recovered struct {
	cursor uint64
	meta   []byte
	// last is the highest sequence stored (0 if none).
	last uint64
	// oldest is the sequence of the oldest entry stored, or where the
	// next one goes when none is (0: after last and cursor).
	oldest uint64
}

type iterator interface {
	// next returns the next entry, or io.EOF.
	next() (Entry, error)
	close() error
}

// Log is a write-ahead log: entries are appended with increasing sequence
// numbers (from 1), acknowledged in any order, and the cursor (the highest
// contiguous acknowledged sequence) is what survives a restart. Every entry
// after the cursor is replayed.
//
// All methods are safe for concurrent use.
type Log struct {
	opts Options
	st   storage

	// appends: mu serializes writes and the sequences they take; closed
	// is set under it (and read without it by queued appenders)
	mu      sync.Mutex
	next    uint64
	written atomic.Uint64
	closed  atomic.Bool
	// a group's record parts or its buffer, and the header and checksum
	// of a record written outside group commit, reused (under mu)
	parts    [][]byte
	groupBuf []byte
	hdr      [headerSize]byte
	tail     [trailerSize]byte

	// the writer queue of group commit (see appendGroup)
	q        sync.Mutex
	qReqs    []*groupReq // waiting for the next group, in arrival order
	leading  bool        // a leader owns the group being committed
	spareReq []*groupReq // the previous group's slice, for reuse
	// gathering (see gather): the leader waits for expect appenders, the
	// number active during the last commit, for at most a quarter of its
	// duration, commitDur.
	expect    int
	commitDur time.Duration
	gathering int           // >0: the leader waits until this many queued
	gathered  chan struct{} // signalled when they have
	gatherT   *time.Timer   // the leader's

	// syncs
	gc      sync.Mutex
	gcCond  *sync.Cond
	syncing bool
	synced  uint64
	ioErr   error
	syncs   atomic.Uint64 // storage syncs run (for benchmarks)
	// syncTime is the latency of each storage sync (Stats).
	syncTime *metrics.Histogram
	// appended counts the entries appended (Stats).
	appended atomic.Uint64

	// acknowledgements
	ack       sync.Mutex
	cursor    uint64
	last      uint64 // highest sequence appended or recovered
	acked     map[uint64]struct{}
	abandoned map[uint64]struct{}
	advanced  chan struct{} // closed and replaced when the cursor moves or closing starts
	closing   bool
	drainEnd  time.Time
	waiters   int
	pending   int // waiters that failed with ErrClosedPending

	// cursor persistence
	persistMu sync.Mutex
	persisted uint64
	meta      []byte
	// floor is the retention floor of a log opened with Options.Hold:
	// entries from it on are kept even when the cursor has passed them.
	// savedFloor is the floor the last cursor save released to (under
	// persistMu).
	floor      atomic.Uint64
	savedFloor uint64
	// released is set (under persistMu) once Close has handed the storage
	// back: the directory may then belong to another opener.
	released atomic.Bool

	stop    chan struct{}
	flusher sync.WaitGroup
}

func open(st storage, opts Options) (*Log, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	rec, err := st.recover()
	if err != nil {
		st.close()
		return nil, err
	}
	last := max(rec.last, rec.cursor)
	l := &Log{
		opts:      opts,
		st:        st,
		next:      last + 1,
		cursor:    rec.cursor,
		last:      last,
		acked:     map[uint64]struct{}{},
		abandoned: map[uint64]struct{}{},
		advanced:  make(chan struct{}),
		persisted: rec.cursor,
		meta:      rec.meta,
		synced:    last,
		stop:      make(chan struct{}),
		syncTime:  metrics.NewDurationHistogram(metrics.LatencyBuckets),
	}
	l.written.Store(last)
	if opts.Hold {
		oldest := rec.oldest
		if oldest == 0 || oldest > last+1 {
			oldest = last + 1
		}
		l.floor.Store(oldest)
		l.savedFloor = oldest
	}
	l.gcCond = sync.NewCond(&l.gc)
	if opts.Sync == SyncGroupCommit {
		l.gathered = make(chan struct{}, 1)
		l.gatherT = time.NewTimer(time.Hour)
		l.gatherT.Stop()
	}
	l.flusher.Add(1)
	go l.flush()
	return l, nil
}

// Append writes one entry and returns its sequence number once it is as
// durable as the sync mode promises. An empty payload is refused
// (ErrEmptyEntry).
func (l *Log) Append(ctx context.Context, payload []byte) (uint64, error) {
	if len(payload) > MaxPayload {
		return 0, fmt.Errorf("wal: entry of %d bytes exceeds the limit of %d", len(payload), MaxPayload)
	}
	if len(payload) == 0 {
		return 0, ErrEmptyEntry
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if l.opts.Sync == SyncGroupCommit {
		seq, err := l.appendGroup(payload)
		if err == nil {
			l.appended.Add(1)
		}
		return seq, err
	}
	crc := crc32.ChecksumIEEE(payload)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return 0, ErrClosed
	}
	if err := l.failed(); err != nil {
		return 0, err
	}
	seq := l.next
	hdr, tail := l.hdr[:], l.tail[:]
	putSeq(hdr, seq)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(payload)))
	binary.BigEndian.PutUint32(tail, crc)
	var err error
	if pw, ok := l.st.(partsWriter); ok {
		// pwritev(2) of the three parts: no copy of the payload.
		l.parts = append(l.parts[:0], hdr, payload, tail)
		err = pw.writeParts(l.parts)
		clear(l.parts)
	} else {
		buf := getRecBuf(RecordSize(len(payload)))
		rec := append(append(append((*buf)[:0], hdr...), payload...), tail...)
		err = l.st.write(rec, seq, seq)
		putRecBuf(buf)
	}
	if err != nil {
		return 0, l.fail(err)
	}
	l.wrote(seq)
	if l.opts.Sync == SyncAlways {
		// One fsync per entry, before the next entry is written.
		if err := l.syncTo(seq); err != nil {
			return 0, err
		}
	}
	l.appended.Add(1)
	return seq, nil
}

// wrote publishes entries up to last as written. Callers hold l.mu.
func (l *Log) wrote(last uint64) {
	l.next = last + 1
	l.written.Store(last)
	l.ack.Lock()
	l.last = last
	l.ack.Unlock()
}

// groupReq is one Append waiting in the writer queue: its record in three
// parts, which the leader writes without copying the payload (the appender
// waits, so the payload stays valid until the write).
type groupReq struct {
	hdr     [headerSize]byte // seq (set by the leader) | len
	payload []byte
	tail    [trailerSize]byte // crc32 of payload
	seq     uint64            // set by the leader, with err
	err     error
	lead    bool          // set instead when the request is handed the leadership
	done    chan struct{} // one signal per use: done, or lead
}

// partsWriter is a storage that writes records from their parts (writev).
type partsWriter interface {
	writeParts(parts [][]byte) error
}

var groupReqs = sync.Pool{New: func() any { return &groupReq{done: make(chan struct{}, 1)} }}

// maxPooledBatch bounds the group buffers kept for reuse.
const maxPooledBatch = 8 << 20

// Gathering bounds: the leader stops waiting when no appender has queued
// for gatherIdle, and after at most a quarter of the last commit's
// duration, and maxGather.
const (
	gatherIdle = 50 * time.Microsecond
	maxGather  = time.Millisecond
)

// appendGroup is Append in group commit mode: a writer queue. The appender
// computes its record's header and checksum, queues it and waits. One appender at a
// time is the leader: it takes everything queued, gives the records their
// sequences in queue order, writes them with one storage write and makes
// them durable with one sync, then tells each member its sequence (or the
// error) and hands the leadership to the first appender that queued
// meanwhile, whose group is everything that queued by the time it starts.
func (l *Log) appendGroup(payload []byte) (uint64, error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	if err := l.failed(); err != nil {
		return 0, err
	}
	r := groupReqs.Get().(*groupReq)
	binary.BigEndian.PutUint32(r.hdr[8:], uint32(len(payload)))
	binary.BigEndian.PutUint32(r.tail[:], crc32.ChecksumIEEE(payload))
	r.payload = payload
	l.q.Lock()
	l.qReqs = append(l.qReqs, r)
	if l.gathering > 0 && len(l.qReqs) >= l.gathering {
		l.gathering = 0
		l.gathered <- struct{}{} // buffered, and sent once per gathering
	}
	lead := !l.leading
	l.leading = true
	l.q.Unlock()
	if !lead {
		<-r.done
		lead = r.lead
	}
	if lead {
		l.commitGroup(r)
	}
	seq, err := r.seq, r.err
	*r = groupReq{done: r.done}
	groupReqs.Put(r)
	return seq, err
}

// commitGroup is the leader's work; self is the leader's own request.
func (l *Log) commitGroup(self *groupReq) {
	l.q.Lock()
	if !l.closed.Load() {
		l.gather()
	}
	reqs := l.qReqs
	l.qReqs = l.spareReq[:0]
	l.spareReq = nil
	l.q.Unlock()

	start := time.Now()
	last, err := l.writeGroup(reqs)
	if err == nil {
		err = l.syncTo(last)
	}
	l.q.Lock()
	// The appenders active during this commit: they may all be back soon.
	l.expect = len(reqs) + len(l.qReqs)
	l.commitDur = time.Since(start)
	l.q.Unlock()
	for i, r := range reqs {
		if err != nil {
			r.seq, r.err = 0, err
		}
		reqs[i] = nil
		if r != self {
			r.done <- struct{}{} // r may be reused from here on
		}
	}

	l.q.Lock()
	l.spareReq = reqs[:0]
	if len(l.qReqs) > 0 {
		next := l.qReqs[0]
		next.lead = true
		next.done <- struct{}{}
	} else {
		l.leading = false
	}
	l.q.Unlock()
}

// gather waits, with l.q held, for the appenders of the last group to
// queue again before the leader takes the queue. Without it, a steady set
// of closed-loop appenders splits into two groups that take turns, each
// queueing while the other's commit runs: every sync then covers half of
// them. It waits only while fewer than expect have queued and others keep
// arriving (one at least every gatherIdle), and at most a quarter of the
// last commit's duration, so a leader whose peers have gone waits once
// and briefly.
func (l *Log) gather() {
	limit := min(l.commitDur/4, maxGather)
	if len(l.qReqs) >= l.expect || limit <= 0 {
		return
	}
	deadline := time.Now().Add(limit)
	for {
		n := len(l.qReqs)
		wait := min(gatherIdle, time.Until(deadline))
		if wait <= 0 {
			return
		}
		l.gathering = l.expect
		l.q.Unlock()
		l.gatherT.Reset(wait)
		select {
		case <-l.gathered:
		case <-l.gatherT.C:
		}
		l.gatherT.Stop()
		l.q.Lock()
		l.gathering = 0
		select {
		case <-l.gathered: // sent after the timer fired
		default:
		}
		if len(l.qReqs) >= l.expect || len(l.qReqs) == n {
			return
		}
	}
}

// writeGroup gives the group's records their sequences and writes them
// with one storage write; it returns the last sequence.
func (l *Log) writeGroup(reqs []*groupReq) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return 0, ErrClosed
	}
	if err := l.failed(); err != nil {
		return 0, err
	}
	first := l.next
	for i, r := range reqs {
		r.seq = first + uint64(i)
		putSeq(r.hdr[:], r.seq)
	}
	last := first + uint64(len(reqs)) - 1
	var err error
	if pw, ok := l.st.(partsWriter); ok {
		parts := l.parts[:0]
		for _, r := range reqs {
			parts = append(parts, r.hdr[:], r.payload, r.tail[:])
		}
		err = pw.writeParts(parts)
		clear(parts) // drop the references to the appenders' payloads
		l.parts = parts[:0]
	} else {
		buf := l.groupBuf[:0]
		for _, r := range reqs {
			buf = append(buf, r.hdr[:]...)
			buf = append(buf, r.payload...)
			buf = append(buf, r.tail[:]...)
		}
		err = l.st.write(buf, first, last)
		if cap(buf) <= maxPooledBatch {
			l.groupBuf = buf[:0]
		} else {
			l.groupBuf = nil
		}
	}
	if err != nil {
		return 0, l.fail(err)
	}
	l.wrote(last)
	return last, nil
}

// Record buffers are reused: write copies them (into the page cache, or
// into an object-store buffer) and keeps no reference.
var recBufs sync.Pool

// maxPooledRec bounds the buffers kept for reuse, so that one huge entry
// does not pin its buffer.
const maxPooledRec = 1 << 20

func getRecBuf(n int) *[]byte {
	if b, ok := recBufs.Get().(*[]byte); ok && cap(*b) >= n {
		return b
	}
	b := make([]byte, 0, max(n, 4<<10))
	return &b
}

func putRecBuf(b *[]byte) {
	if cap(*b) <= maxPooledRec {
		recBufs.Put(b)
	}
}

func putSeq(rec []byte, seq uint64) {
	for i := 7; i >= 0; i-- {
		rec[i] = byte(seq)
		seq >>= 8
	}
}

// syncTo returns once seq is durable. One caller at a time runs the fsync
// for everything written so far; the others wait for it and return if it
// covered them (group commit).
func (l *Log) syncTo(seq uint64) error {
	l.gc.Lock()
	defer l.gc.Unlock()
	for l.synced < seq && l.ioErr == nil {
		if l.syncing {
			l.gcCond.Wait()
			continue
		}
		l.syncing = true
		target := l.written.Load()
		l.gc.Unlock()
		start := time.Now()
		err := l.st.sync()
		l.syncTime.ObserveDuration(time.Since(start))
		l.syncs.Add(1)
		l.gc.Lock()
		l.syncing = false
		if err != nil {
			// After a failed fsync the kernel may have dropped the dirty
			// pages: nothing written since the last good sync can be
			// trusted, so the log stops accepting work.
			l.ioErr = fmt.Errorf("wal: sync %s: %w", l.st.describe(), err)
		} else if target > l.synced {
			l.synced = target
		}
		l.gcCond.Broadcast()
	}
	return l.ioErr
}

// fail poisons the log after a failed write and returns the error it
// then fails with.
func (l *Log) fail(err error) error {
	l.gc.Lock()
	defer l.gc.Unlock()
	if l.ioErr == nil {
		l.ioErr = fmt.Errorf("wal: write %s: %w", l.st.describe(), err)
	}
	return l.ioErr
}

func (l *Log) failed() error {
	l.gc.Lock()
	defer l.gc.Unlock()
	return l.ioErr
}

// Sync makes every entry appended so far durable, whatever the sync mode.
func (l *Log) Sync() error {
	if l.released.Load() {
		return ErrClosed
	}
	return l.syncTo(l.written.Load())
}

// Ack records that an entry was handled. It never blocks. The cursor moves
// to the highest contiguous acknowledged sequence: an ack ahead of
// a gap is kept until the gap closes. Acknowledging a sequence twice, or one
// at or below the cursor, does nothing.
func (l *Log) Ack(seq uint64) error {
	l.ack.Lock()
	defer l.ack.Unlock()
	if seq == 0 || seq > l.last {
		return fmt.Errorf("wal: acknowledgement of sequence %d, which was never appended (last is %d)", seq, l.last)
	}
	if seq <= l.cursor {
		return nil
	}
	delete(l.abandoned, seq)
	l.acked[seq] = struct{}{}
	moved := false
	for {
		if _, ok := l.acked[l.cursor+1]; !ok {
			break
		}
		delete(l.acked, l.cursor+1)
		l.cursor++
		moved = true
	}
	if moved && l.waiters > 0 {
		// Only Await calls watch the channel (Close waits for them to
		// leave); not replacing it otherwise saves an allocation per ack.
		l.wake()
	}
	return nil
}

// Abandon records that an entry's delivery failed: it stays unacknowledged
// until a restart replays it, and Await calls waiting behind it return an
// *AbandonedError instead of waiting out their lease.
func (l *Log) Abandon(seq uint64) {
	l.ack.Lock()
	defer l.ack.Unlock()
	if seq <= l.cursor || seq > l.last {
		return
	}
	if _, ok := l.acked[seq]; ok {
		return
	}
	l.abandoned[seq] = struct{}{}
	l.wake()
}

func (l *Log) wake() {
	close(l.advanced)
	l.advanced = make(chan struct{})
}

// Await returns once the cursor has reached seq, so that whatever follows
// the WAL in the ack chain (the native source commit) may proceed for it.
//
// While an earlier sequence is unacknowledged the call is parked. After the
// lease (Options.ParkLease) it returns a *ParkedError naming the gap; the
// caller retries. During Close it waits at most until the drain window ends,
// then returns ErrClosedPending.
func (l *Log) Await(ctx context.Context, seq uint64) error {
	l.ack.Lock()
	if seq > l.last {
		l.ack.Unlock()
		return fmt.Errorf("wal: await of sequence %d, which was never appended (last is %d)", seq, l.last)
	}
	l.waiters++
	defer func() {
		l.waiters--
		l.wake()
		l.ack.Unlock()
	}()
	leaseEnd := l.opts.Clock.Now().Add(l.opts.ParkLease)
	var timer <-chan time.Time
	var timerEnd time.Time
	for {
		if l.cursor >= seq {
			return nil
		}
		for s := l.cursor + 1; s <= seq && len(l.abandoned) > 0; s++ {
			if _, ok := l.abandoned[s]; ok {
				return &AbandonedError{Seq: s}
			}
		}
		now := l.opts.Clock.Now()
		end := leaseEnd
		if l.closing && l.drainEnd.Before(end) {
			end = l.drainEnd
		}
		if !now.Before(end) {
			if l.closing && !l.drainEnd.After(now) {
				l.pending++
				return ErrClosedPending
			}
			return &ParkedError{Seq: l.cursor + 1, Lease: l.opts.ParkLease}
		}
		if timer == nil || !timerEnd.Equal(end) {
			timer, timerEnd = l.opts.Clock.After(end.Sub(now)), end
		}
		ch := l.advanced
		l.ack.Unlock()
		select {
		case <-ch:
		case <-timer:
		case <-ctx.Done():
			l.ack.Lock()
			return ctx.Err()
		}
		l.ack.Lock()
	}
}

// Stats are a log's counters since it opened (the job's Prometheus
// collector reads them at scrape time).
type Stats struct {
	// Appends counts the entries appended.
	Appends uint64
	// Syncs is the latency of every storage sync (an fsync for a local
	// log, an upload for one in object storage).
	Syncs metrics.Snapshot
	// ParkedAcks are the acknowledgements received ahead of a gap: kept
	// until every sequence before them is acknowledged and the cursor
	// can move past them.
	ParkedAcks int
}

// Stats returns the log's counters now.
func (l *Log) Stats() Stats {
	s := Stats{Appends: l.appended.Load(), Syncs: l.syncTime.Snapshot()}
	l.ack.Lock()
	s.ParkedAcks = len(l.acked)
	l.ack.Unlock()
	return s
}

// Cursor returns the highest contiguous acknowledged sequence.
func (l *Log) Cursor() uint64 {
	l.ack.Lock()
	defer l.ack.Unlock()
	return l.cursor
}

// Last returns the highest sequence appended or recovered.
func (l *Log) Last() uint64 {
	l.ack.Lock()
	defer l.ack.Unlock()
	return l.last
}

// CursorMeta returns the meta stored with the last persisted cursor (from
// this run or, after a restart, from the previous one).
func (l *Log) CursorMeta() []byte {
	l.persistMu.Lock()
	defer l.persistMu.Unlock()
	return l.meta
}

// SaveCursorMeta persists the cursor with meta now, even if the cursor has
// not moved since it was last persisted (a new log's cursor 0, say). The
// CursorMeta option, when set, gives the meta of later persists.
func (l *Log) SaveCursorMeta(meta []byte) error {
	l.persistMu.Lock()
	defer l.persistMu.Unlock()
	if l.released.Load() {
		return ErrClosed
	}
	floor := l.floor.Load()
	c := l.Cursor()
	if err := l.st.saveCursor(c, meta, l.release(c, floor)); err != nil {
		return fmt.Errorf("wal: saving cursor %d in %s: %w", c, l.st.describe(), err)
	}
	l.persisted, l.meta, l.savedFloor = c, append([]byte(nil), meta...), floor
	return nil
}

// release is the highest sequence a cursor save may delete: the cursor,
// and with Hold the entry before the floor when that is lower.
func (l *Log) release(cursor, floor uint64) uint64 {
	if l.opts.Hold && floor-1 < cursor {
		return floor - 1
	}
	return cursor
}

// SetFloor moves the retention floor of a log opened with Options.Hold to
// seq: the entries before seq may then be deleted once the cursor has
// passed them too, and entries from seq on are kept. The floor only moves
// forward (a lower seq does nothing). The segments it releases are
// deleted at the next cursor save (every Options.CursorInterval, Flush or
// Close). Without Hold, SetFloor does nothing: the cursor alone decides.
func (l *Log) SetFloor(seq uint64) {
	if !l.opts.Hold {
		return
	}
	for {
		cur := l.floor.Load()
		if seq <= cur || l.floor.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// Floor returns the lowest sequence the log keeps for ReplayFrom: with
// Options.Hold, the retention floor (after a restart, the oldest entry
// stored); without it, the cursor's successor, as entries at or below the
// cursor are deleted once it is persisted.
func (l *Log) Floor() uint64 {
	if l.opts.Hold {
		return l.floor.Load()
	}
	return l.Cursor() + 1
}

// Replay returns the entries after the persisted cursor, in order: the ones
// a restart must deliver again. Call it before appending.
func (l *Log) Replay() (*Replayer, error) {
	it, err := l.st.replay(l.Cursor())
	if err != nil {
		return nil, err
	}
	return &Replayer{it: it}, nil
}

// ReplayFrom returns the stored entries from sequence seq on, in order,
// including those at or below the cursor that the log still holds: with
// Options.Hold, every entry from Floor on is stored. Entries below seq, or
// already deleted, are not returned; the first entry returned may so come
// after seq. Call it before appending.
func (l *Log) ReplayFrom(seq uint64) (*Replayer, error) {
	if seq == 0 {
		seq = 1
	}
	it, err := l.st.replay(seq - 1)
	if err != nil {
		return nil, err
	}
	return &Replayer{it: it}, nil
}

// Replayer iterates over replayed entries.
type Replayer struct{ it iterator }

// Next returns the next entry, or io.EOF after the last. The payload is
// valid until the next call.
func (r *Replayer) Next() (Entry, error) { return r.it.next() }

// Close releases the replayer.
func (r *Replayer) Close() error { return r.it.close() }

// Flush makes every appended entry durable and persists the cursor now.
// After Close it returns ErrClosed.
func (l *Log) Flush() error {
	if err := l.Sync(); err != nil {
		return err
	}
	return l.persistCursor()
}

func (l *Log) persistCursor() error {
	l.persistMu.Lock()
	defer l.persistMu.Unlock()
	if l.released.Load() {
		return ErrClosed
	}
	// The floor is read before the meta: a source that records what it
	// released in the meta moves the floor only after it has recorded it.
	floor := l.floor.Load()
	c := l.Cursor()
	if c <= l.persisted && floor == l.savedFloor {
		return nil
	}
	var meta []byte
	if l.opts.CursorMeta != nil {
		meta = l.opts.CursorMeta(c)
	}
	if err := l.st.saveCursor(c, meta, l.release(c, floor)); err != nil {
		return fmt.Errorf("wal: saving cursor %d in %s: %w", c, l.st.describe(), err)
	}
	l.persisted, l.meta, l.savedFloor = c, meta, floor
	return nil
}

// flush persists the cursor (and, in periodic mode, syncs) in the
// background.
func (l *Log) flush() {
	defer l.flusher.Done()
	// Two tickers: folding the sync into the cursor's tick (syncing on the
	// ticks at least SyncInterval after the last sync) stretched the
	// periodic mode's loss window to up to twice SyncInterval.
	cursorTick := time.NewTicker(l.opts.CursorInterval)
	defer cursorTick.Stop()
	var syncTick <-chan time.Time
	if l.opts.Sync == SyncPeriodic {
		t := time.NewTicker(l.opts.SyncInterval)
		defer t.Stop()
		syncTick = t.C
	}
	for {
		select {
		case <-l.stop:
			return
		case <-syncTick:
			if err := l.Sync(); err != nil {
				l.opts.Logger.Error("wal: periodic sync failed", "wal", l.st.describe(), "error", err)
			}
		case <-cursorTick.C:
			if err := l.persistCursor(); err != nil {
				l.opts.Logger.Warn("wal: persisting the cursor failed; retrying", "error", err)
			}
		}
	}
}

// Close stops appends, gives parked acknowledgements the drain window,
// syncs, persists the cursor and releases the storage. It returns
// ErrClosedPending if an acknowledgement was still waiting when the window
// ran out.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return nil
	}
	l.closed.Store(true)
	l.mu.Unlock()

	l.ack.Lock()
	l.closing = true
	l.drainEnd = l.opts.Clock.Now().Add(l.opts.DrainTimeout)
	l.wake()
	for l.waiters > 0 {
		ch := l.advanced
		l.ack.Unlock()
		<-ch
		l.ack.Lock()
	}
	pending := l.pending
	l.ack.Unlock()

	close(l.stop)
	l.flusher.Wait()
	var errs []error
	if pending > 0 {
		errs = append(errs, ErrClosedPending)
	}
	errs = append(errs, l.Flush())
	l.persistMu.Lock()
	l.released.Store(true)
	l.persistMu.Unlock()
	errs = append(errs, l.st.close())
	return errors.Join(errs...)
}
