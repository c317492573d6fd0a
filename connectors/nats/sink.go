package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
	"github.com/arkflow-rs/arkflow-go/internal/suggest"
)

// output is a validated NATS output.
type output struct {
	cfg SinkConfig
}

func newOutput(cfg SinkConfig, schema *arrow.Schema) (*output, error) {
	var f connectors.Fields
	f.Merge("", checkSink(&cfg))
	if schema != nil {
		checkSinkSchema(&f, &cfg, schema)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return &output{cfg: cfg}, nil
}

// checkSinkSchema checks the columns the config names against the rows'
// schema.
func checkSinkSchema(f *connectors.Fields, cfg *SinkConfig, schema *arrow.Schema) {
	cols := make([]string, 0, schema.NumFields())
	for _, fd := range schema.Fields() {
		cols = append(cols, fd.Name)
	}
	if cfg.ValueField != "" {
		if i := schema.FieldIndices(cfg.ValueField); len(i) == 0 {
			f.Add("value_field", "%s", suggest.UnknownColumn(cfg.ValueField, cols))
		} else if t := schema.Field(i[0]).Type.ID(); t != arrow.STRING && t != arrow.BINARY {
			f.Add("value_field", "column %q has type %s; the payload column must be string or binary", cfg.ValueField, schema.Field(i[0]).Type)
		}
	} else if err := rowjson.CheckSchema(connectors.StripMetaSchema(schema)); err != nil {
		f.Add("", "the rows cannot be written as JSON payloads: %v (or name a string or binary column in value_field)", err)
	}
	for i, col := range cfg.MsgIDFields {
		at := fmt.Sprintf("msg_id_fields[%d]", i)
		if idx := schema.FieldIndices(col); len(idx) == 0 {
			f.Add(at, "%s", suggest.UnknownColumn(col, cols))
		} else if !idType(schema.Field(idx[0]).Type) {
			f.Add(at, "column %q has type %s; a message ID column must be a string, binary, integer, bool or timestamp", col, schema.Field(idx[0]).Type)
		}
	}
	if cfg.Mode.Type == ModeJetStream && len(cfg.MsgIDFields) == 0 && !hasPosition(schema) {
		f.Add("msg_id_fields", "is required: the rows carry no source position (%s, %s, %s) to derive the Nats-Msg-Id from, as rows out of a window or an aggregate do not; name the columns that identify a row (its key and window start)",
			connectors.MetaSource, connectors.MetaPartition, connectors.MetaOffset)
	}
}

// hasPosition reports whether rows of the schema carry their source
// position.
func hasPosition(s *arrow.Schema) bool {
	is := func(name string, t arrow.Type) bool {
		i := s.FieldIndices(name)
		return len(i) == 1 && s.Field(i[0]).Type.ID() == t
	}
	return is(connectors.MetaSource, arrow.STRING) && is(connectors.MetaPartition, arrow.INT32) && is(connectors.MetaOffset, arrow.INT64)
}

func idType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.BINARY, arrow.BOOL, arrow.TIMESTAMP,
		arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

// NewSink returns the sink of one subtask. It does no I/O.
func (o *output) NewSink(info connectors.TaskInfo) (connectors.Sink, error) {
	lg := info.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &sink{cfg: &o.cfg, info: info, log: lg.With("connector", "nats")}, nil
}

// sink publishes rows, one message a row.
//
// Core NATS (regular): Write publishes and then flushes, a round trip to
// the server, so it returns once the server has every message; the
// server passes them to the subscribers connected then and keeps nothing
// (at-most-once for them).
//
// JetStream: every message carries a Nats-Msg-Id (see msgIDs), and Write
// returns once the stream acknowledged every one. A message the stream
// saw within its duplicate window is acknowledged as a duplicate and not
// stored again: rows a restart writes again are stored once, if the
// restart comes within the window (effectively-once).
type sink struct {
	cfg  *SinkConfig
	info connectors.TaskInfo
	log  *slog.Logger

	nc        *natsgo.Conn
	js        jetstream.JetStream
	connected bool
	closed    bool

	// dups counts the messages the stream acknowledged as duplicates
	// (Metrics; any goroutine).
	dups atomic.Int64
}

// Connect connects; for JetStream it also checks that a stream captures
// the subject, and logs its duplicate window. ctx bounds only connecting.
func (s *sink) Connect(ctx context.Context) error {
	if s.closed {
		return ErrClosed
	}
	if s.connected {
		return errors.New("nats: already connected")
	}
	nc, err := dial(ctx, s.cfg.URL, s.cfg.Auth, s.cfg.TLS, connName(s.info.JobID, s.info.OperatorID, s.info.Subtask), s.log)
	if err != nil {
		return err
	}
	if s.cfg.Mode.Type == ModeJetStream {
		if err := s.connectJS(ctx, nc); err != nil {
			nc.Close()
			return err
		}
	}
	s.nc = nc
	s.connected = true
	return nil
}

func (s *sink) connectJS(ctx context.Context, nc *natsgo.Conn) error {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(RequestTimeout), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	subject := string(s.cfg.Mode.Subject)
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	name, err := js.StreamNameBySubject(rctx, subject)
	if err != nil {
		return fmt.Errorf("nats: no JetStream stream captures subject %q: %w (create a stream whose subjects include it, or use mode type regular)", subject, err)
	}
	st, err := js.Stream(rctx, name)
	if err != nil {
		return fmt.Errorf("nats: looking up stream %q: %w", name, err)
	}
	s.log.Info("publishing to JetStream stream", "subject", subject, "stream", name, "duplicate_window", st.CachedInfo().Config.Duplicates)
	s.js = js
	return nil
}

// Write publishes the rows and returns once they are delivered as far as
// the mode promises (see sink).
func (s *sink) Write(ctx context.Context, rec arrow.RecordBatch) error {
	if err := s.usable(); err != nil {
		return err
	}
	if rec.NumRows() == 0 {
		return nil
	}
	if s.js == nil {
		return s.writeCore(ctx, rec)
	}
	futs, err := s.publishJS(ctx, rec)
	if err != nil {
		return err
	}
	return s.await(ctx, futs)
}

// WriteAsync publishes the rows and calls done once every one is
// delivered as Write promises, or with the first error. Core NATS writes
// are synchronous: done is called before WriteAsync returns. Implements
// connectors.AsyncSink.
func (s *sink) WriteAsync(ctx context.Context, rec arrow.RecordBatch, done func(error)) error {
	if err := s.usable(); err != nil {
		return err
	}
	if s.js == nil || rec.NumRows() == 0 {
		done(s.Write(ctx, rec))
		return nil
	}
	futs, err := s.publishJS(ctx, rec)
	if err != nil {
		return err
	}
	go func() { done(s.await(ctx, futs)) }()
	return nil
}

func (s *sink) usable() error {
	if s.closed {
		return ErrClosed
	}
	if !s.connected {
		return errNotConnected
	}
	return nil
}

// writeCore publishes every row and flushes.
func (s *sink) writeCore(ctx context.Context, rec arrow.RecordBatch) error {
	payloads, err := s.payloads(rec)
	if err != nil {
		return err
	}
	subject := string(s.cfg.Mode.Subject)
	for _, p := range payloads {
		if err := s.nc.Publish(subject, p); err != nil {
			return fmt.Errorf("nats: publishing to %q: %w", subject, err)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	if err := s.nc.FlushWithContext(fctx); err != nil {
		return fmt.Errorf("nats: flushing %d messages to %q: %w", len(payloads), subject, err)
	}
	return nil
}

// publishJS publishes every row with its message ID, without waiting for
// the acknowledgements.
func (s *sink) publishJS(ctx context.Context, rec arrow.RecordBatch) ([]jetstream.PubAckFuture, error) {
	payloads, err := s.payloads(rec)
	if err != nil {
		return nil, err
	}
	ids, err := msgIDs(s.info.JobID, s.cfg.MsgIDFields, rec)
	if err != nil {
		return nil, err
	}
	subject := string(s.cfg.Mode.Subject)
	futs := make([]jetstream.PubAckFuture, 0, len(payloads))
	for i, p := range payloads {
		m := &natsgo.Msg{Subject: subject, Data: p, Header: natsgo.Header{jetstream.MsgIDHeader: []string{ids[i]}}}
		for {
			f, err := s.js.PublishMsgAsync(m)
			if err == nil {
				futs = append(futs, f)
				break
			}
			if errors.Is(err, jetstream.ErrTooManyStalledMsgs) && ctx.Err() == nil {
				select {
				case <-s.js.PublishAsyncComplete():
				case <-time.After(10 * time.Millisecond):
				case <-ctx.Done():
				}
				continue
			}
			return nil, fmt.Errorf("nats: publishing to %q: %w", subject, err)
		}
	}
	return futs, nil
}

// await waits for the stream's acknowledgement of every message.
func (s *sink) await(ctx context.Context, futs []jetstream.PubAckFuture) error {
	subject := string(s.cfg.Mode.Subject)
	for _, f := range futs {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				s.dups.Add(1)
			}
		case err := <-f.Err():
			return fmt.Errorf("nats: publishing to %q: the stream did not acknowledge message %s: %w", subject, f.Msg().Header.Get(jetstream.MsgIDHeader), err)
		case <-ctx.Done():
			return fmt.Errorf("nats: waiting for the stream's acknowledgements of %d messages to %q: %w", len(futs), subject, ctx.Err())
		}
	}
	return nil
}

// payloads returns every row's payload: value_field's bytes, or the row
// as a JSON object without its __meta_* columns. They are copies, which
// stay valid after rec is released (an asynchronous publish may send
// them again).
func (s *sink) payloads(rec arrow.RecordBatch) ([][]byte, error) {
	n := int(rec.NumRows())
	out := make([][]byte, n)
	if s.cfg.ValueField != "" {
		idx := rec.Schema().FieldIndices(s.cfg.ValueField)
		if len(idx) == 0 {
			return nil, fmt.Errorf("nats: value_field column %q is not in the rows", s.cfg.ValueField)
		}
		var buf []byte
		ends := make([]int, n)
		col := rec.Column(idx[0])
		for i := 0; i < n; i++ {
			if !col.IsNull(i) {
				buf = append(buf, bytesAt(col, i)...)
			}
			ends[i] = len(buf)
		}
		start := 0
		for i, end := range ends {
			out[i] = buf[start:end:end]
			start = end
		}
		return out, nil
	}
	stripped := connectors.StripMeta(rec)
	defer stripped.Release()
	buf, err := rowjson.AppendRecord(nil, stripped)
	if err != nil {
		return nil, fmt.Errorf("nats: encoding rows for %q: %w", s.cfg.Mode.Subject, err)
	}
	row, start := 0, 0
	for i, c := range buf {
		if c == '\n' {
			out[row] = buf[start:i:i]
			row++
			start = i + 1
		}
	}
	if row != n {
		return nil, fmt.Errorf("nats: encoded %d rows, want %d", row, n)
	}
	return out, nil
}

func bytesAt(col arrow.Array, i int) []byte {
	switch a := col.(type) {
	case *array.Binary:
		return a.Value(i)
	case *array.String:
		return []byte(a.Value(i))
	}
	return nil
}

// Close flushes and closes the connection; ctx (and RequestTimeout)
// bound the flush. Safe without Connect and more than once.
func (s *sink) Close(ctx context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.connected = false
	if s.nc == nil {
		return nil
	}
	fctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	err := s.nc.FlushWithContext(fctx)
	cancel()
	s.nc.Close()
	s.nc = nil
	if err != nil && !errors.Is(err, natsgo.ErrConnectionClosed) {
		return fmt.Errorf("nats: flushing at close: %w", err)
	}
	return nil
}

// msgIDs returns every row's Nats-Msg-Id: the job's ID, then the values
// of the fields, or without fields the row's source position, each after
// a ':' (escaped by idPart). Two rows of one batch with the same ID are an
// error: the stream would keep only the first.
func msgIDs(job string, fields []string, rec arrow.RecordBatch) ([]string, error) {
	names := fields
	if len(names) == 0 {
		names = []string{connectors.MetaSource, connectors.MetaPartition, connectors.MetaOffset}
	}
	cols := make([]arrow.Array, len(names))
	for i, name := range names {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) == 0 {
			if len(fields) == 0 {
				return nil, fmt.Errorf("nats: the rows carry no source position (%s) to derive message IDs from: set msg_id_fields", name)
			}
			return nil, fmt.Errorf("nats: msg_id_fields column %q is not in the rows", name)
		}
		cols[i] = rec.Column(idx[0])
	}
	n := int(rec.NumRows())
	out := make([]string, n)
	seen := make(map[string]int, n)
	var b []byte
	for r := 0; r < n; r++ {
		b = append(b[:0], job...)
		for _, c := range cols {
			b = append(b, ':')
			b = appendIDPart(b, c, r)
		}
		id := string(b)
		if prev, dup := seen[id]; dup {
			return nil, fmt.Errorf("nats: rows %d and %d of one write have the same message ID %q, and the stream would keep only one: name columns that tell them apart in msg_id_fields", prev, r, id)
		}
		seen[id] = r
		out[r] = id
	}
	return out, nil
}

// appendIDPart appends the value of row r of col: integers, timestamps
// and bools as decimal text (true 1, false 0), strings and binary with
// every byte outside '!'..'~' and every '%' and ':' as %XX, a null as %N
// (never the result of an escape), so that distinct values give distinct
// IDs.
func appendIDPart(b []byte, col arrow.Array, r int) []byte {
	if col.IsNull(r) {
		return append(b, "%N"...)
	}
	switch a := col.(type) {
	case *array.String:
		return escapeID(b, a.Value(r))
	case *array.Binary:
		return escapeID(b, string(a.Value(r)))
	case *array.Boolean:
		if a.Value(r) {
			return append(b, '1')
		}
		return append(b, '0')
	case *array.Int8:
		return strconv.AppendInt(b, int64(a.Value(r)), 10)
	case *array.Int16:
		return strconv.AppendInt(b, int64(a.Value(r)), 10)
	case *array.Int32:
		return strconv.AppendInt(b, int64(a.Value(r)), 10)
	case *array.Int64:
		return strconv.AppendInt(b, a.Value(r), 10)
	case *array.Uint8:
		return strconv.AppendUint(b, uint64(a.Value(r)), 10)
	case *array.Uint16:
		return strconv.AppendUint(b, uint64(a.Value(r)), 10)
	case *array.Uint32:
		return strconv.AppendUint(b, uint64(a.Value(r)), 10)
	case *array.Uint64:
		return strconv.AppendUint(b, a.Value(r), 10)
	case *array.Timestamp:
		return strconv.AppendInt(b, int64(a.Value(r)), 10)
	}
	return append(b, "%?"...)
}

func escapeID(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '!' || c > '~' || c == '%' || c == ':' {
			b = append(b, '%', hex[c>>4], hex[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
}

var (
	_ connectors.Output    = (*output)(nil)
	_ connectors.AsyncSink = (*sink)(nil)
)
