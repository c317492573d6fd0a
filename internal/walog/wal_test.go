package walog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// fakeClock is a Clock whose time moves only when the test advances it.
// After channels fire when an Advance reaches their deadline, and
// WaitTimers lets a test wait until code under test has started waiting.
type fakeClock struct {
	mu     sync.Mutex
	cond   *sync.Cond
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	c := &fakeClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	c.cond.Broadcast()
	return ch
}

// Advance moves time forward and fires every timer it reaches.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
		} else {
			t.ch <- c.now
		}
	}
	c.timers = kept
	c.cond.Broadcast()
}

// WaitTimers blocks until at least n timers are pending.
func (c *fakeClock) WaitTimers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		c.cond.Wait()
	}
}

// memStorage is a storage in memory that records what the log asks of it:
// how many syncs ran and which sequences each made durable. Its sync can be
// held at a gate so a test decides when it completes.
type memStorage struct {
	mu       sync.Mutex
	cond     *sync.Cond
	recs     []byte
	written  uint64 // highest sequence written
	durable  uint64 // highest sequence made durable by a sync
	syncs    int
	inSync   int
	gate     chan struct{} // if set, sync waits until it is closed
	delay    time.Duration // how long a sync takes
	writeErr error
	syncErr  error
	// syncFail, if set, is asked for the error of sync number n (from 1).
	syncFail func(n int) error
	writes   [][2]uint64 // first and last sequence of each write
	cursor   uint64
	meta     []byte
	closed   bool
	calls    []string
}

func newMemStorage() *memStorage {
	m := &memStorage{}
	m.cond = sync.NewCond(&m.mu)
	return m
}

func (m *memStorage) recover() (recovered, error) { return recovered{}, nil }
func (m *memStorage) describe() string            { return "mem" }

func (m *memStorage) write(recs []byte, first, last uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		panic("write after close")
	}
	if first != m.written+1 || last < first {
		panic(fmt.Sprintf("write of %d..%d after %d", first, last, m.written))
	}
	if m.writeErr != nil {
		return m.writeErr
	}
	m.recs = append(m.recs, recs...)
	m.written = last
	m.writes = append(m.writes, [2]uint64{first, last})
	m.cond.Broadcast()
	return nil
}

func (m *memStorage) sync() error {
	m.mu.Lock()
	if m.closed {
		panic("sync after close")
	}
	target := m.written
	m.syncs++
	n := m.syncs
	m.inSync++
	gate := m.gate
	m.cond.Broadcast()
	m.mu.Unlock()
	if gate != nil {
		<-gate
	}
	time.Sleep(m.delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inSync--
	m.calls = append(m.calls, "sync")
	if m.syncErr != nil {
		return m.syncErr
	}
	if m.syncFail != nil {
		if err := m.syncFail(n); err != nil {
			return err
		}
	}
	m.durable = max(m.durable, target)
	return nil
}

func (m *memStorage) replay(after uint64) (iterator, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seg, err := DecodeSegment("mem", append([]byte(nil), m.recs...), 1)
	if err != nil {
		return nil, err
	}
	var es []Entry
	for _, e := range seg.Entries {
		if e.Seq > after {
			es = append(es, e)
		}
	}
	return &sliceIter{es: es}, nil
}

func (m *memStorage) saveCursor(cursor uint64, meta []byte, _ uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cursor, m.meta = cursor, meta
	m.calls = append(m.calls, fmt.Sprintf("cursor %d", cursor))
	return nil
}

func (m *memStorage) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.calls = append(m.calls, "close")
	return nil
}

func (m *memStorage) waitInSync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for m.inSync == 0 {
		m.cond.Wait()
	}
}

func (m *memStorage) state() (syncs int, durable uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncs, m.durable
}

type sliceIter struct{ es []Entry }

func (it *sliceIter) next() (Entry, error) {
	if len(it.es) == 0 {
		return Entry{}, io.EOF
	}
	e := it.es[0]
	it.es = it.es[1:]
	return e, nil
}

func (it *sliceIter) close() error { return nil }

func openMem(t *testing.T, opts Options) (*Log, *memStorage) {
	t.Helper()
	m := newMemStorage()
	l, err := open(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, m
}

// TestSyncAlways: one sync per entry, each before Append returns.
func TestSyncAlways(t *testing.T) {
	t.Parallel()
	l, m := openMem(t, Options{Sync: SyncAlways})
	ctx := context.Background()
	for i := 1; i <= 5; i++ {
		seq, err := l.Append(ctx, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		syncs, durable := m.state()
		if seq != uint64(i) || syncs != i || durable != seq {
			t.Fatalf("append %d: seq %d, %d syncs, durable through %d", i, seq, syncs, durable)
		}
	}
	// Concurrent appenders still get one sync each.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				seq, err := l.Append(ctx, []byte("y"))
				if err != nil {
					t.Error(err)
					return
				}
				if _, durable := m.state(); durable < seq {
					t.Errorf("Append returned %d, durable only through %d", seq, durable)
				}
			}
		})
	}
	wg.Wait()
	if syncs, _ := m.state(); syncs != 85 {
		t.Fatalf("%d syncs for 85 entries", syncs)
	}
}

// queued is the number of appenders waiting in the writer queue.
func (l *Log) queued() int {
	l.q.Lock()
	defer l.q.Unlock()
	return len(l.qReqs)
}

// waitQueued waits until n appenders wait in the writer queue.
func waitQueued(t *testing.T, l *Log, n int) {
	t.Helper()
	polltest.Eventually(t, fmt.Sprintf("%d appenders queued", n), func() bool { return l.queued() >= n },
		func() string { return fmt.Sprintf("%d queued", l.queued()) })
}

type appendResult struct {
	payload string
	seq     uint64
	durable uint64 // what the storage had made durable when Append returned
	err     error
}

// goAppend appends payload in a goroutine and sends the result.
func goAppend(l *Log, m *memStorage, payload string, results chan<- appendResult) {
	go func() {
		seq, err := l.Append(context.Background(), []byte(payload))
		_, durable := m.state()
		results <- appendResult{payload, seq, durable, err}
	}()
}

// TestGroupCommit: the writer queue. Appenders that arrive while a group is
// committed queue up; the next leader gives all of them their sequences in
// queue order, writes them with one write and syncs them with one sync,
// and each returns only once its own entry is durable.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	l, m := openMem(t, Options{Sync: SyncGroupCommit})
	m.gate = make(chan struct{})
	results := make(chan appendResult, 16)
	goAppend(l, m, "first", results)
	m.waitInSync() // the first group (one entry) is syncing, held at the gate
	for i := range 15 {
		goAppend(l, m, fmt.Sprintf("queued %d", i), results)
	}
	waitQueued(t, l, 15)
	if syncs, _ := m.state(); syncs != 1 || m.written != 1 {
		t.Fatalf("while the first group syncs: %d syncs, written through %d; the queued entries must wait", syncs, m.written)
	}
	close(m.gate)
	bySeq := map[uint64]string{}
	for range 16 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.durable < r.seq {
			t.Fatalf("Append returned %d while only %d was durable", r.seq, r.durable)
		}
		if r.payload == "first" && r.seq != 1 {
			t.Fatalf("the first appender got sequence %d", r.seq)
		}
		bySeq[r.seq] = r.payload
	}
	if len(bySeq) != 16 {
		t.Fatalf("sequences %v are not 16 distinct ones", bySeq)
	}
	// One write and one sync for the first entry, one of each shared by
	// the fifteen that queued while it ran.
	syncs, durable := m.state()
	if want := [][2]uint64{{1, 1}, {2, 16}}; syncs != 2 || durable != 16 || !slices.Equal(m.writes, want) {
		t.Fatalf("%d syncs, durable through %d, writes %v; want 2 syncs through 16, writes %v", syncs, durable, m.writes, want)
	}
	// Sequence order is file order: each sequence's record holds the
	// payload of the appender it was returned to.
	seg, err := DecodeSegment("mem", m.recs, 1)
	if err != nil || len(seg.Entries) != 16 {
		t.Fatalf("%d entries, %v", len(seg.Entries), err)
	}
	for _, e := range seg.Entries {
		if string(e.Payload) != bySeq[e.Seq] {
			t.Fatalf("record %d holds %q, but its sequence was returned to the appender of %q", e.Seq, e.Payload, bySeq[e.Seq])
		}
	}
	// The queue is empty and nobody leads: the next appender leads itself.
	if _, err := l.Append(context.Background(), []byte("alone")); err != nil || l.queued() != 0 {
		t.Fatalf("append after the groups: %v, %d queued", err, l.queued())
	}
	if n := len(m.writes); m.writes[n-1] != [2]uint64{17, 17} {
		t.Fatalf("last write %v, want 17..17", m.writes[n-1])
	}
}

// TestGroupCommitFailure: a failed write or sync fails every member of its
// group, and the log then refuses the groups queued behind it without
// writing them (after a failed fsync nothing unsynced can be trusted).
func TestGroupCommitFailure(t *testing.T) {
	t.Parallel()
	for _, what := range []string{"write", "sync", "first sync"} {
		t.Run(what, func(t *testing.T) {
			l, m := openMem(t, Options{Sync: SyncGroupCommit})
			eio := errors.New("EIO")
			m.gate = make(chan struct{})
			switch what {
			case "write":
				m.syncFail = func(n int) error {
					if n == 1 {
						m.writeErr = eio // m.mu is held
					}
					return nil
				}
			case "sync":
				m.syncFail = func(n int) error {
					if n == 2 {
						return eio
					}
					return nil
				}
			case "first sync":
				m.syncFail = func(int) error { return eio }
			}
			results := make(chan appendResult, 8)
			goAppend(l, m, "first", results)
			m.waitInSync()
			for i := range 7 {
				goAppend(l, m, fmt.Sprintf("queued %d", i), results)
			}
			waitQueued(t, l, 7)
			close(m.gate)
			failed := 0
			for range 8 {
				r := <-results
				switch {
				case r.payload == "first" && what != "first sync":
					if r.err != nil || r.seq != 1 {
						t.Fatalf("first append: %d, %v", r.seq, r.err)
					}
				case r.err == nil || !strings.Contains(r.err.Error(), "EIO") || r.seq != 0:
					t.Fatalf("append of %q: %d, %v; want the EIO", r.payload, r.seq, r.err)
				default:
					failed++
				}
			}
			wantWrites := map[string][][2]uint64{
				"write":      {{1, 1}},
				"sync":       {{1, 1}, {2, 8}},
				"first sync": {{1, 1}},
			}[what]
			if !slices.Equal(m.writes, wantWrites) {
				t.Fatalf("writes %v, want %v", m.writes, wantWrites)
			}
			m.writeErr, m.syncFail = nil, nil
			if _, err := l.Append(context.Background(), []byte("after")); err == nil || !strings.Contains(err.Error(), "EIO") {
				t.Fatalf("append after the failure: %v", err)
			}
			if !slices.Equal(m.writes, wantWrites) {
				t.Fatalf("an append after the failure was written: %v", m.writes)
			}
			if l.queued() != 0 {
				t.Fatalf("%d appenders left in the queue", l.queued())
			}
		})
	}
}

// TestGroupCommitClose: appenders queued when Close starts fail with
// ErrClosed and write nothing; what a group wrote before is synced by Close.
func TestGroupCommitClose(t *testing.T) {
	t.Parallel()
	m := newMemStorage()
	l, err := open(m, Options{Sync: SyncGroupCommit})
	if err != nil {
		t.Fatal(err)
	}
	m.gate = make(chan struct{})
	results := make(chan appendResult, 5)
	goAppend(l, m, "first", results)
	m.waitInSync()
	for i := range 4 {
		goAppend(l, m, fmt.Sprintf("queued %d", i), results)
	}
	waitQueued(t, l, 4)
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	for !l.closed.Load() {
		time.Sleep(time.Millisecond)
	}
	close(m.gate)
	for range 5 {
		r := <-results
		if r.payload == "first" {
			if r.err != nil || r.seq != 1 {
				t.Fatalf("first append: %d, %v", r.seq, r.err)
			}
		} else if !errors.Is(r.err, ErrClosed) {
			t.Fatalf("append queued at Close: %d, %v", r.seq, r.err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.writes, [][2]uint64{{1, 1}}) || m.durable != 1 {
		t.Fatalf("writes %v, durable through %d", m.writes, m.durable)
	}
}

// TestGroupCommitConcurrent: many appenders, each entry returned once,
// sequences dense, every record where its sequence says, and fewer writes
// and syncs than entries.
func TestGroupCommitConcurrent(t *testing.T) {
	t.Parallel()
	l, m := openMem(t, Options{Sync: SyncGroupCommit})
	m.delay = 100 * time.Microsecond // a sync takes long enough for a queue to form
	const appenders, each = 16, 200
	var wg sync.WaitGroup
	got := make([][]uint64, appenders)
	for g := range appenders {
		wg.Go(func() {
			for i := range each {
				seq, err := l.Append(context.Background(), fmt.Appendf(nil, "g%d-%d-%s", g, i, strings.Repeat("x", (g*i)%97)))
				if err != nil {
					t.Error(err)
					return
				}
				if _, durable := m.state(); durable < seq {
					t.Errorf("Append returned %d, durable only through %d", seq, durable)
				}
				got[g] = append(got[g], seq)
			}
		})
	}
	wg.Wait()
	seg, err := DecodeSegment("mem", m.recs, 1)
	if err != nil || len(seg.Entries) != appenders*each {
		t.Fatalf("%d entries, %v", len(seg.Entries), err)
	}
	for g, seqs := range got {
		for i, seq := range seqs {
			want := fmt.Sprintf("g%d-%d-%s", g, i, strings.Repeat("x", (g*i)%97))
			if p := string(seg.Entries[seq-1].Payload); p != want {
				t.Fatalf("entry %d holds %.20q, want %.20q", seq, p, want)
			}
			if i > 0 && seq <= seqs[i-1] {
				t.Fatalf("appender %d got %d after %d", g, seq, seqs[i-1])
			}
		}
	}
	syncs, _ := m.state()
	t.Logf("%d entries: %d writes, %d syncs", appenders*each, len(m.writes), syncs)
	if len(m.writes) != syncs || syncs >= appenders*each {
		t.Fatalf("%d writes and %d syncs for %d entries", len(m.writes), syncs, appenders*each)
	}
}

// TestEmptyEntryRefused: the log stores no empty entries, in any mode, so
// that a record of length 0 is always damage (a torn header of zeros).
func TestEmptyEntryRefused(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncAlways, SyncGroupCommit, SyncPeriodic, SyncNone} {
		t.Run(string(mode), func(t *testing.T) {
			l, m := openMem(t, Options{Sync: mode})
			for _, p := range [][]byte{nil, {}} {
				_, err := l.Append(context.Background(), p)
				if !errors.Is(err, ErrEmptyEntry) || !strings.Contains(err.Error(), "empty entry") {
					t.Fatalf("Append(%#v) = %v, want ErrEmptyEntry", p, err)
				}
			}
			if seq, err := l.Append(context.Background(), []byte{0}); err != nil || seq != 1 {
				t.Fatalf("one-byte entry: %d, %v", seq, err)
			}
			if len(m.writes) != 1 {
				t.Fatalf("writes %v", m.writes)
			}
		})
	}
}

// TestSyncPeriodicAndNone: these modes return before any sync; Flush (and
// Close) make everything durable.
func TestSyncPeriodicAndNone(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncPeriodic, SyncNone} {
		t.Run(string(mode), func(t *testing.T) {
			l, m := openMem(t, Options{Sync: mode, SyncInterval: time.Hour})
			for range 10 {
				if _, err := l.Append(context.Background(), []byte("z")); err != nil {
					t.Fatal(err)
				}
			}
			if syncs, _ := m.state(); syncs != 0 {
				t.Fatalf("%d syncs before Flush", syncs)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if syncs, durable := m.state(); syncs != 1 || durable != 10 {
				t.Fatalf("after Flush: %d syncs, durable through %d", syncs, durable)
			}
		})
	}
	// With a short interval the flusher syncs by itself.
	l, m := openMem(t, Options{Sync: SyncPeriodic, SyncInterval: time.Millisecond})
	seq, err := l.Append(context.Background(), []byte("p"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, durable := m.state(); durable >= seq {
			break
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSyncFailureStopsTheLog: after a failed sync nothing written since the
// last good one can be trusted, so the log refuses further appends.
func TestSyncFailureStopsTheLog(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncAlways, SyncGroupCommit} {
		t.Run(string(mode), func(t *testing.T) {
			l, m := openMem(t, Options{Sync: mode})
			ctx := context.Background()
			if _, err := l.Append(ctx, []byte("ok")); err != nil {
				t.Fatal(err)
			}
			m.syncErr = errors.New("EIO")
			if _, err := l.Append(ctx, []byte("lost")); err == nil || !strings.Contains(err.Error(), "EIO") {
				t.Fatalf("append with a failing sync: %v", err)
			}
			m.syncErr = nil
			if _, err := l.Append(ctx, []byte("after")); err == nil || !strings.Contains(err.Error(), "EIO") {
				t.Fatalf("append after a failed sync: %v", err)
			}
			if m.written != 2 {
				t.Fatalf("%d entries written; the one after the failure must not be", m.written)
			}
		})
	}
	l, m := openMem(t, Options{})
	m.writeErr = errors.New("ENOSPC")
	if _, err := l.Append(context.Background(), []byte("x")); err == nil || !strings.Contains(err.Error(), "ENOSPC") {
		t.Fatalf("append with a failing write: %v", err)
	}
	m.writeErr = nil
	if _, err := l.Append(context.Background(), []byte("x")); err == nil {
		t.Fatal("append after a failed write succeeded")
	}
}

// TestCursorContiguous: the cursor is the highest contiguous acknowledged
// sequence; an ack ahead of a gap waits for it.
func TestCursorContiguous(t *testing.T) {
	t.Parallel()
	l, _ := openMem(t, Options{})
	for range 6 {
		if _, err := l.Append(context.Background(), []byte("e")); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		ack    uint64
		cursor uint64
	}{{3, 0}, {2, 0}, {5, 0}, {1, 3}, {1, 3}, {3, 3}, {4, 5}, {6, 6}}
	for _, s := range steps {
		if err := l.Ack(s.ack); err != nil {
			t.Fatal(err)
		}
		if c := l.Cursor(); c != s.cursor {
			t.Fatalf("after ack %d: cursor %d, want %d", s.ack, c, s.cursor)
		}
	}
	for _, bad := range []uint64{0, 7} {
		if err := l.Ack(bad); err == nil || !strings.Contains(err.Error(), "never appended") {
			t.Fatalf("Ack(%d) = %v", bad, err)
		}
	}
	if err := l.Await(context.Background(), 7); err == nil || !strings.Contains(err.Error(), "never appended") {
		t.Fatalf("Await(7) = %v", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	t.Parallel()
	if _, err := open(newMemStorage(), Options{Sync: "fsync"}); err == nil || !strings.Contains(err.Error(), `"fsync"`) {
		t.Fatalf("bad sync mode: %v", err)
	}
	if _, err := OpenDir(t.TempDir(), LocalOptions{Options: Options{Sync: "per_entry"}}); err == nil {
		t.Fatal("OpenDir accepted sync per_entry")
	}
}

// TestCloseOrder: Close syncs, persists the cursor, then releases the
// storage; afterwards appends fail with ErrClosed.
func TestCloseOrder(t *testing.T) {
	t.Parallel()
	m := newMemStorage()
	l, err := open(m, Options{Sync: SyncNone, CursorInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Append(context.Background(), []byte("c")); err != nil {
			t.Fatal(err)
		}
	}
	l.Ack(1)
	l.Ack(2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.calls, ", "); got != "sync, cursor 2, close" {
		t.Fatalf("Close did %s", got)
	}
	if _, err := l.Append(context.Background(), []byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestFlushAfterClose: a closed log no longer owns its directory (another
// process may have opened it), so Flush and Sync refuse instead of
// writing a cursor there.
func TestFlushAfterClose(t *testing.T) {
	t.Parallel()
	m := newMemStorage()
	l, err := open(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Append(context.Background(), []byte("a"))
	l.Append(context.Background(), []byte("b"))
	l.Ack(1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Ack(2)
	if err := l.Flush(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close: %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	if m.cursor != 1 {
		t.Fatalf("cursor %d written after Close", m.cursor)
	}
}

func appendN(t *testing.T, l *Log, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for i := range n {
		seq, err := l.Append(context.Background(), fmt.Appendf(nil, "entry %d", i))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

func goAwait(l *Log, ctx context.Context, seq uint64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- l.Await(ctx, seq) }()
	return ch
}

func openClocked(t *testing.T, opts Options) (*Log, *fakeClock, string) {
	t.Helper()
	clock := newFakeClock()
	opts.Clock = clock
	dir := t.TempDir()
	l, err := OpenDir(dir, LocalOptions{Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, clock, dir
}

// TestParkedAck: an acknowledgement waiting for an earlier one returns an
// explicit, retryable error when its lease runs out; the lease fences
// nothing, so a retry after the gap closes succeeds at once, and the error
// repeats for as long as it does not.
func TestParkedAck(t *testing.T) {
	t.Parallel()
	l, clock, _ := openClocked(t, Options{})
	ctx := context.Background()
	appendN(t, l, 3)
	l.Ack(2)
	done := goAwait(l, ctx, 2)
	clock.WaitTimers(1)
	clock.Advance(59 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("Await returned %v before its lease ran out", err)
	default:
	}
	clock.Advance(time.Second)
	err := <-done
	const want = "WAL acknowledgement parked for >60s waiting for sequence 1; the gap owner appears stalled"
	if err == nil || err.Error() != want {
		t.Fatalf("Await = %v, want %q", err, want)
	}
	var pe *ParkedError
	if !errors.Is(err, ErrParked) || !errors.As(err, &pe) || pe.Seq != 1 || pe.Lease != DefaultParkLease {
		t.Fatalf("error %#v is not the ParkedError for sequence 1", err)
	}
	if tmp, ok := err.(interface{ Temporary() bool }); !ok || !tmp.Temporary() {
		t.Fatal("a parked acknowledgement is not marked temporary")
	}

	// The gap owner is still stalled: every retry parks and fails again.
	for range 3 {
		done = goAwait(l, ctx, 2)
		clock.WaitTimers(1)
		clock.Advance(DefaultParkLease)
		if err := <-done; err == nil || err.Error() != want {
			t.Fatalf("retry: %v", err)
		}
	}

	// The owner settles: the retry proceeds at once, no lease involved.
	l.Ack(1)
	if err := l.Await(ctx, 2); err != nil {
		t.Fatalf("retry after the gap closed: %v", err)
	}

	// A parked wait ends the moment the gap closes, without the clock.
	appendN(t, l, 2) // 4, 5
	l.Ack(5)
	done = goAwait(l, ctx, 5)
	clock.WaitTimers(1)
	l.Ack(3)
	l.Ack(4)
	if err := <-done; err != nil {
		t.Fatalf("parked wait after the gap closed: %v", err)
	}

	// A wait is cancelled by its context.
	appendN(t, l, 2) // 6, 7
	l.Ack(7)
	cctx, cancel := context.WithCancel(ctx)
	done = goAwait(l, cctx, 7)
	clock.WaitTimers(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

// TestParkedLeaseFormatting: the lease in the message follows the option.
func TestParkedLeaseFormatting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lease time.Duration
		text  string
	}{
		{1500 * time.Millisecond, ">1.5s"},
		{90 * time.Second, ">90s"},
		{250 * time.Millisecond, ">250ms"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			l, clock, _ := openClocked(t, Options{ParkLease: tc.lease})
			appendN(t, l, 4)
			l.Ack(1)
			l.Ack(4)
			done := goAwait(l, context.Background(), 4)
			clock.WaitTimers(1)
			clock.Advance(tc.lease)
			want := "WAL acknowledgement parked for " + tc.text + " waiting for sequence 2; the gap owner appears stalled"
			if err := <-done; err == nil || err.Error() != want {
				t.Fatalf("Await = %v, want %q", err, want)
			}
		})
	}
}

// TestAwaitAbandoned: waiting behind an abandoned entry fails at once with
// an *AbandonedError naming it; acknowledging it later clears the gap.
func TestAwaitAbandoned(t *testing.T) {
	t.Parallel()
	l, clock, _ := openClocked(t, Options{})
	ctx := context.Background()
	appendN(t, l, 5)
	l.Ack(3)
	l.Abandon(2)
	err := l.Await(ctx, 3)
	var ae *AbandonedError
	if !errors.As(err, &ae) || ae.Seq != 2 {
		t.Fatalf("Await behind an abandoned entry: %v", err)
	}
	if errors.Is(err, ErrParked) {
		t.Fatal("an abandoned entry reported as parked")
	}
	// Abandoned while the wait is parked behind 4.
	l.Ack(1)
	l.Ack(2)
	l.Ack(5)
	done := goAwait(l, ctx, 5)
	clock.WaitTimers(1)
	l.Abandon(4)
	if err := <-done; !errors.As(err, &ae) || ae.Seq != 4 {
		t.Fatalf("Await when the gap was abandoned: %v", err)
	}
	// Abandoning something acknowledged or covered does nothing.
	l.Abandon(1)
	l.Abandon(5)
	l.Ack(4)
	if err := l.Await(ctx, 5); err != nil || l.Cursor() != 5 {
		t.Fatalf("after acknowledging the abandoned entry: %v, cursor %d", err, l.Cursor())
	}
}

// TestDrainAcked: Close gives a parked acknowledgement the drain window; if
// the gap closes within it, the wait and Close both succeed.
func TestDrainAcked(t *testing.T) {
	t.Parallel()
	l, clock, dir := openClocked(t, Options{})
	ctx := context.Background()
	appendN(t, l, 2)
	l.Ack(2)
	done := goAwait(l, ctx, 2)
	clock.WaitTimers(1)
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	clock.WaitTimers(2) // the wait now also watches the drain window
	if _, err := l.Append(ctx, []byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append while closing: %v", err)
	}
	clock.Advance(29 * time.Second)
	l.Ack(1)
	if err := <-done; err != nil {
		t.Fatalf("drained wait: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := l.Append(ctx, []byte("later")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	l2, err := OpenDir(dir, LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if c := l2.Cursor(); c != 2 {
		t.Fatalf("cursor after reopen %d, want 2", c)
	}
}

// TestDrainTimeout: if the drain window runs out, the wait fails with
// ErrClosedPending, Close reports it with the exact text, and the entries
// are replayed after a restart.
func TestDrainTimeout(t *testing.T) {
	t.Parallel()
	for _, drain := range []time.Duration{0, 5 * time.Second} {
		t.Run(fmt.Sprint(drain), func(t *testing.T) {
			l, clock, dir := openClocked(t, Options{DrainTimeout: drain})
			if drain == 0 {
				drain = DefaultDrainTimeout
			}
			ctx := context.Background()
			appendN(t, l, 2)
			l.Ack(2)
			done := goAwait(l, ctx, 2)
			clock.WaitTimers(1)
			closed := make(chan error, 1)
			go func() { closed <- l.Close() }()
			clock.WaitTimers(2)
			clock.Advance(drain - time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("wait ended before the drain window: %v", err)
			default:
			}
			clock.Advance(time.Millisecond)
			if err := <-done; err != ErrClosedPending {
				t.Fatalf("wait: %v, want ErrClosedPending", err)
			}
			err := <-closed
			if !errors.Is(err, ErrClosedPending) || err.Error() != "WAL closed while acknowledgement was pending" {
				t.Fatalf("Close = %v", err)
			}
			if _, err := l.Append(ctx, []byte("late")); !errors.Is(err, ErrClosed) {
				t.Fatalf("Append after Close: %v", err)
			}
			l2, err := OpenDir(dir, LocalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			if got := replayAll(t, l2); len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 {
				t.Fatalf("replayed %v, want 1 and 2", got)
			}
		})
	}
}

// TestCloseWithoutWaiters returns at once, whatever the drain window.
func TestCloseWithoutWaiters(t *testing.T) {
	t.Parallel()
	l, _, _ := openClocked(t, Options{})
	appendN(t, l, 3)
	l.Ack(2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func replayAll(t *testing.T, l *Log) []Entry {
	t.Helper()
	r, err := l.Replay()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var es []Entry
	for {
		e, err := r.Next()
		if err == io.EOF {
			return es
		}
		if err != nil {
			t.Fatal(err)
		}
		e.Payload = append([]byte(nil), e.Payload...)
		es = append(es, e)
	}
}

// TestAppendCancelled: an Append whose context is already done writes
// nothing.
func TestAppendCancelled(t *testing.T) {
	t.Parallel()
	l, m := openMem(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a cancelled context: %v", err)
	}
	if m.written != 0 || l.Last() != 0 {
		t.Fatal("a cancelled Append wrote an entry")
	}
	if err := l.Await(ctx, 0); err != nil {
		t.Fatalf("Await(0): %v", err)
	}
}

// TestRecordBuffersNotShared: Append reuses its encoding buffers (and the
// writer queue its group buffers), so what concurrent appenders wrote must
// still decode to their own payloads.
func TestRecordBuffersNotShared(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncNone, SyncGroupCommit} {
		t.Run(string(mode), func(t *testing.T) {
			l, m := openMem(t, Options{Sync: mode})
			var wg sync.WaitGroup
			seqs := make([][]uint64, 8)
			for g := range 8 {
				wg.Go(func() {
					for i := range 200 {
						seq, err := l.Append(context.Background(), fmt.Appendf(nil, "g%d-%d-%s", g, i, strings.Repeat("x", i*37)))
						if err != nil {
							t.Error(err)
							return
						}
						seqs[g] = append(seqs[g], seq)
					}
				})
			}
			wg.Wait()
			seg, err := DecodeSegment("mem", m.recs, 1)
			if err != nil || len(seg.Entries) != 1600 {
				t.Fatalf("%d entries, %v", len(seg.Entries), err)
			}
			for g, ss := range seqs {
				for i, seq := range ss {
					want := fmt.Sprintf("g%d-%d-%s", g, i, strings.Repeat("x", i*37))
					if got := string(seg.Entries[seq-1].Payload); got != want {
						t.Fatalf("entry %d holds %.20q, want %.20q", seq, got, want)
					}
				}
			}
		})
	}
}

// TestAppendAllocations: Append allocates nothing in the steady state, in
// group commit (pooled requests and group buffers) as in the other modes.
// Not parallel: testing.AllocsPerRun counts the whole process's
// allocations (and sets GOMAXPROCS to 1 while it runs).
func TestAppendAllocations(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts need a full, race-free run")
	}
	for _, mode := range []SyncMode{SyncAlways, SyncGroupCommit, SyncNone} {
		t.Run(string(mode), func(t *testing.T) {
			l, _ := openMem(t, Options{Sync: mode})
			payload := bytes.Repeat([]byte("p"), 1000)
			ctx := context.Background()
			for range 100 { // warm the pools and let the storage grow
				l.Append(ctx, payload)
			}
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := l.Append(ctx, payload); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > 0.1 {
				t.Fatalf("%.2f allocations per Append", allocs)
			}
		})
	}
}

// TestStats checks the counters the job's Prometheus collector reads:
// appends, one sync latency per storage sync, and acknowledgements parked
// ahead of a gap until it closes.
func TestStats(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncAlways, SyncGroupCommit} {
		t.Run(string(mode), func(t *testing.T) {
			l, m := openMem(t, Options{Sync: mode})
			ctx := context.Background()
			for range 4 {
				if _, err := l.Append(ctx, []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Ack(2); err != nil {
				t.Fatal(err)
			}
			if err := l.Ack(4); err != nil {
				t.Fatal(err)
			}
			s := l.Stats()
			syncs, _ := m.state()
			if s.Appends != 4 || s.ParkedAcks != 2 || s.Syncs.Count != uint64(syncs) || syncs == 0 {
				t.Fatalf("stats %+v after 4 appends, acks of 2 and 4 and %d syncs", s, syncs)
			}
			if err := l.Ack(1); err != nil {
				t.Fatal(err)
			}
			if s := l.Stats(); s.ParkedAcks != 1 {
				t.Fatalf("ack 1 moved the cursor to 2: parked %d, want 1 (4)", s.ParkedAcks)
			}
		})
	}
}
