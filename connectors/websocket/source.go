package websocket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	ws "github.com/coder/websocket"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// ErrClosed is returned by Connect and Read after Close.
var ErrClosed = errors.New("websocket: closed")

var errNotConnected = errors.New("websocket: not connected (Connect first)")

// frameQueue is how many frames the connection's reader holds ahead of
// Read: beyond them it stops reading, and TCP slows the server.
const frameQueue = 256

// frame is one message read, or the error that ended reading.
type frame struct {
	data []byte
	at   int64 // arrival, Unix milliseconds
	err  error
}

// source reads one WebSocket connection (subtask 0 only: every subtask
// would read every frame again). A goroutine reads frames into a bounded
// queue and connects again, with backoff, when the connection is lost;
// Read decodes them. Offsets number the rows read; they go on from the
// restored position, or from the start time in nanoseconds when that is
// higher, so they grow across restarts (connectors.Unrewindable).
type source struct {
	in    *input
	info  connectors.TaskInfo
	log   *slog.Logger
	reads bool

	tracker *connectors.Tracker
	seek    int64

	reconnects atomic.Int64
	up         atomic.Bool

	mu     sync.Mutex
	closed bool
	cancel context.CancelFunc
	done   chan struct{}
	frames chan frame

	// Read's goroutine only.
	b         *rowBuilder
	pend      []byte // lines of a frame not yet decoded (format json)
	pendAt    int64
	next      int64
	connected bool
	failed    error
}

// Unrewindable marks the source as one whose frames cannot be read again.
func (s *source) Unrewindable() {}

// Seek makes the offsets of the next Connect go on from the position of
// partition 0. It reads nothing again.
func (s *source) Seek(positions []connectors.Position) error {
	if s.connected {
		return errors.New("websocket: Seek after Connect")
	}
	for _, p := range positions {
		if p.Partition == 0 {
			if p.Offset < 0 {
				return fmt.Errorf("websocket: negative offset %d", p.Offset)
			}
			s.seek = p.Offset
		}
	}
	return nil
}

// Positions returns the offset after the last acknowledged row.
func (s *source) Positions() []connectors.Position { return s.tracker.Positions() }

// Connect opens the connection (subtask 0), bounded by ctx and timeout.
// A server that cannot be reached fails Connect; a connection lost later
// is opened again, with backoff.
func (s *source) Connect(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case s.connected:
		return errors.New("websocket: already connected")
	}
	s.connected = true
	if !s.reads {
		return nil
	}
	b, err := newRowBuilder(s.in)
	if err != nil {
		return err
	}
	s.b = b
	client, err := s.in.cfg.httpClient()
	if err != nil {
		return err
	}
	c, err := s.dial(ctx, client)
	if err != nil {
		return err
	}
	s.next = max(s.seek, time.Now().UnixNano())
	s.tracker.Start(0, s.next)
	run, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.cancel, s.done, s.frames = cancel, make(chan struct{}), make(chan frame, frameQueue)
	s.mu.Unlock()
	go s.run(run, client, c)
	s.log.Info("connected to the WebSocket server (at-most-once)", "url", s.in.cfg.URL)
	return nil
}

// dial opens one connection, its handshake bounded by timeout.
func (s *source) dial(ctx context.Context, client *http.Client) (*ws.Conn, error) {
	cfg := &s.in.cfg
	ctx, cancel := context.WithTimeout(ctx, time.Duration(cfg.Timeout)*time.Second)
	defer cancel()
	h := http.Header{}
	for k, v := range cfg.Headers {
		h.Set(k, v)
	}
	c, resp, err := ws.Dial(ctx, cfg.URL, &ws.DialOptions{HTTPClient: client, HTTPHeader: h})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("websocket: connecting to %s: the server answered %s: %w", cfg.URL, resp.Status, err)
		}
		return nil, fmt.Errorf("websocket: connecting to %s: %w", cfg.URL, err)
	}
	// The frame size is checked while reading (readFrame), to fail with
	// the limit's name rather than the library's close.
	c.SetReadLimit(-1)
	s.up.Store(true)
	return c, nil
}

// run reads frames until ctx ends or a frame is too large, connecting
// again whenever the connection is lost.
func (s *source) run(ctx context.Context, client *http.Client, c *ws.Conn) {
	defer close(s.done)
	for {
		err := s.readAll(ctx, c)
		c.CloseNow()
		s.up.Store(false)
		if ctx.Err() != nil {
			return
		}
		var tooBig *tooLarge
		if errors.As(err, &tooBig) {
			select {
			case s.frames <- frame{err: err}:
			case <-ctx.Done():
			}
			return
		}
		s.log.Warn("lost the WebSocket connection; connecting again", "url", s.in.cfg.URL, "error", err)
		if c = s.redial(ctx, client); c == nil {
			return
		}
		s.reconnects.Add(1)
		s.log.Info("connected to the WebSocket server again; frames it sent meanwhile are lost", "url", s.in.cfg.URL)
	}
}

// readAll queues the frames of one connection until it fails.
func (s *source) readAll(ctx context.Context, c *ws.Conn) error {
	for {
		data, err := s.readFrame(ctx, c)
		if err != nil {
			return err
		}
		select {
		case s.frames <- frame{data: data, at: time.Now().UnixMilli()}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tooLarge is a frame over max_message_bytes.
type tooLarge struct{ limit int64 }

func (e *tooLarge) Error() string {
	return fmt.Sprintf("a frame over max_message_bytes (%d bytes): raise max_message_bytes; frames are never cut or skipped", e.limit)
}

func (s *source) readFrame(ctx context.Context, c *ws.Conn) ([]byte, error) {
	_, r, err := c.Reader(ctx)
	if err != nil {
		return nil, err
	}
	limit := s.in.cfg.MaxMessageBytes
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &tooLarge{limit: limit}
	}
	return data, nil
}

// redial connects again, waiting between attempts (exponential backoff
// with full jitter), until it succeeds or ctx ends (nil).
func (s *source) redial(ctx context.Context, client *http.Client) *ws.Conn {
	rc := s.in.cfg.Reconnect
	wait := time.Duration(rc.InitialMS) * time.Millisecond
	for {
		d := wait/2 + rand.N(wait/2+1)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil
		}
		c, err := s.dial(ctx, client)
		if err == nil {
			return c
		}
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("connecting to the WebSocket server again failed", "url", s.in.cfg.URL, "error", err, "retry_in", wait)
		wait = min(2*wait, time.Duration(rc.MaxMS)*time.Millisecond)
	}
}

// Read returns the rows of the frames that arrived, at most batch_size,
// waiting for the first until ctx is done. A frame that does not decode
// fails the source with an error naming its offset and the field (after
// the batch of the rows before it).
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
	if !s.reads {
		<-ctx.Done() // nothing to read: subtask 0 reads
		return connectors.Batch{}, ctx.Err()
	}
	if s.pend == nil {
		select {
		case f := <-s.frames:
			if !s.take(f) {
				return s.batch()
			}
		case <-ctx.Done():
			return connectors.Batch{}, ctx.Err()
		}
	}
	for s.decodePending() && s.b.Rows < s.in.cfg.BatchSize {
		select {
		case f := <-s.frames:
			if !s.take(f) {
				return s.batch()
			}
		default:
			return s.batch()
		}
	}
	return s.batch()
}

// take makes a frame the pending one; false for the reader's error
// (s.failed).
func (s *source) take(f frame) bool {
	if f.err != nil {
		s.failed = fmt.Errorf("websocket: reading %s at offset %d: %w", s.in.cfg.URL, s.next, f.err)
		return false
	}
	s.pend, s.pendAt = f.data, f.at
	return true
}

// decodePending adds the pending frame's rows while the batch has room;
// true once the frame is done, false when the batch is full or a row did
// not decode (s.failed).
func (s *source) decodePending() bool {
	for s.pend != nil {
		if s.b.Rows >= s.in.cfg.BatchSize {
			return false
		}
		var line []byte
		if !s.b.JSON() {
			line, s.pend = s.pend, nil
		} else {
			line, s.pend = cutLine(s.pend)
			if len(bytes.TrimSpace(line)) == 0 {
				continue // blank lines between objects
			}
		}
		if err := s.b.add(line, s.info.OperatorID, s.next, s.pendAt); err != nil {
			s.failed = fmt.Errorf("websocket: %s: frame received at %s, row at offset %d: %w",
				s.in.cfg.URL, time.UnixMilli(s.pendAt).UTC().Format(time.RFC3339Nano), s.next, err)
			s.pend = nil
			return false
		}
		s.next++
	}
	return true
}

// cutLine returns the first line of b and the rest (nil when none).
func cutLine(b []byte) (line, rest []byte) {
	line, rest, found := bytes.Cut(b, []byte{'\n'})
	if !found || len(rest) == 0 {
		return line, nil
	}
	return line, rest
}

// batch returns the built rows (after them, s.failed if set).
func (s *source) batch() (connectors.Batch, error) {
	if s.b.Rows == 0 {
		if s.failed != nil {
			return connectors.Batch{}, s.failed
		}
		return connectors.Batch{}, nil
	}
	first, end := s.b.First, s.b.End
	rec := s.b.Take()
	return connectors.Batch{Record: rec, Partition: 0, Ack: s.tracker.Deliver(0, first, end)}, nil
}

// Close closes the connection and stops reconnecting. Safe without
// Connect and more than once.
func (s *source) Close(context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	if s.b != nil {
		s.b.Release()
	}
	s.connected = false
	return nil
}

var (
	_ connectors.Source       = (*source)(nil)
	_ connectors.Positioner   = (*source)(nil)
	_ connectors.Unrewindable = (*source)(nil)
)
