package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
	"github.com/arkflow-rs/arkflow-go/internal/suggest"
)

// Output is a validated Kafka output.
type Output struct {
	cfg      SinkConfig
	metaRows bool // the rows carry __meta_partition and __meta_offset
}

// NewOutput checks cfg for rows of schema (nil when unknown) and returns
// the output. It does no I/O. Errors name the config field at fault.
func NewOutput(cfg SinkConfig, schema *arrow.Schema) (*Output, error) {
	var f connectors.Fields
	f.Merge("", checkSink(&cfg))
	if schema != nil {
		if cfg.Key != "" {
			if i := schema.FieldIndices(string(cfg.Key)); len(i) == 0 {
				f.Add("key", "%s", suggest.UnknownColumn(string(cfg.Key), columnNames(schema)))
			} else if !keyType(schema.Field(i[0]).Type) {
				f.Add("key", "column %q has type %s; a key column must be string, binary or an integer", cfg.Key, schema.Field(i[0]).Type)
			}
		}
		if cfg.ValueField != "" {
			if i := schema.FieldIndices(cfg.ValueField); len(i) == 0 {
				f.Add("value_field", "%s", suggest.UnknownColumn(cfg.ValueField, columnNames(schema)))
			} else if t := schema.Field(i[0]).Type.ID(); t != arrow.STRING && t != arrow.BINARY {
				f.Add("value_field", "column %q has type %s; the value column must be string or binary", cfg.ValueField, schema.Field(i[0]).Type)
			}
		} else if err := rowjson.CheckSchema(connectors.StripMetaSchema(schema)); err != nil {
			f.Add("", "the rows cannot be written as JSON values: %v (or name a string or binary column in value_field)", err)
		}
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return &Output{cfg: cfg, metaRows: schema != nil && hasInputMeta(schema)}, nil
}

// hasInputMeta reports whether rows of the schema carry the Kafka
// metadata L3 derives offsets from.
func hasInputMeta(s *arrow.Schema) bool {
	return len(s.FieldIndices(connectors.MetaPartition)) == 1 && len(s.FieldIndices(connectors.MetaOffset)) == 1
}

func columnNames(s *arrow.Schema) []string {
	names := make([]string, 0, s.NumFields())
	for _, f := range s.Fields() {
		names = append(names, f.Name)
	}
	return names
}

func keyType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.BINARY, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

// Config returns the config with defaults applied.
func (o *Output) Config() SinkConfig { return o.cfg }

// NewSink returns the sink of one subtask. It does no I/O.
func (o *Output) NewSink(info connectors.TaskInfo) (connectors.Sink, error) {
	return o.newSink(info), nil
}

func (o *Output) newSink(info connectors.TaskInfo) *Sink {
	lg := info.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	// job, operator and subtask come with info.Logger.
	s := &Sink{cfg: &o.cfg, log: lg.With("connector", "kafka"), sentOffsets: map[tp]int64{}, metaRows: o.metaRows}
	if o.cfg.ExactlyOnce {
		s.txnID = strings.ReplaceAll(o.cfg.TransactionalID, SubtaskPlaceholder, strconv.Itoa(info.Subtask))
	}
	return s
}

// Sink writes rows to a topic. Without exactly_once (at-least-once), Write
// produces every row and returns once the broker acknowledged all of them
// (acks=all by default), so the rows' sources commit only delivered rows.
// With exactly_once (L2), Write is one transaction.
type Sink struct {
	cfg   *SinkConfig
	txnID string
	log   *slog.Logger

	producer   *kafka.Producer
	dispatched chan struct{} // closed when the producer's event loop ends
	connected  bool
	closed     bool
	fenced     error // sticky: a newer producer owns the transactional id
	inTxn      bool  // a transaction is open (a Write was interrupted)
	// txnMu serializes the transactional writes: the chain's and the
	// linger timer's commit of a coalesced transaction (pending).
	txnMu   sync.Mutex
	pending *coalesced
	topic   string

	buf []byte // the JSON of the last Write's rows (reused)

	// sentOffsets are, with offset_commit_group, the input offsets this
	// sink committed in its transactions, per partition (it never commits
	// below them).
	sentOffsets map[tp]int64
	// metaRows: the rows carry the input's Kafka metadata columns (known
	// from the schema, or seen in a write).
	metaRows bool
	// pairedSeen are the transactional sources the writes were paired
	// with (for the final commit at Close).
	pairedSeen []*Source
	// dropped counts the replayed rows Write dropped because the group
	// had committed them (see dropCommitted).
	dropped atomic.Int64
	// txnCommits and txnAborts count the transactions committed and
	// aborted (Metrics).
	txnCommits, txnAborts atomic.Int64
	// prevMarks are the input ends of the rows of the last committed
	// transaction, and prevLate is set when the last wait for their
	// acknowledgement ran out (see awaitPrevious).
	prevMarks map[tp]int64
	prevLate  bool

	// beforeCommit, when set (tests), runs inside every transaction after
	// its rows were produced and before the commit; an error fails the
	// attempt like an abortable error: the transaction is aborted and the
	// rows are written again in a new one.
	beforeCommit func(p *kafka.Producer, attempt int) error
}

// TransactionalID is the producer's transactional.id ("" without
// exactly_once).
func (s *Sink) TransactionalID() string { return s.txnID }

// Connect creates the producer; with exactly_once it calls
// InitTransactions (bounded by 60 s), which fences any older producer with
// the same transactional_id and aborts its open transaction.
func (s *Sink) Connect(ctx context.Context) error {
	if s.closed {
		return ErrClosed
	}
	if s.producer != nil {
		return errors.New("kafka: already connected")
	}
	s.topic = string(s.cfg.Topic)
	if g := s.cfg.OffsetCommitGroup; g != "" {
		s.notePaired(pairedSources(g)) // connected before the sinks
	}
	if err := s.open(ctx); err != nil {
		return err
	}
	s.connected = true
	return nil
}

// open creates the producer (and initialises its transactions).
func (s *Sink) open(ctx context.Context) error {
	conf := producerConfig(s.cfg, s.txnID)
	(*conf)["go.logs.channel.enable"] = true
	p, err := kafka.NewProducer(conf)
	if err != nil {
		return fmt.Errorf("kafka: a producer cannot be created: %w", err)
	}
	go drainLogs(p.Logs(), s.log, nil)
	done := make(chan struct{})
	go dispatch(p, s.log, done)
	if s.txnID != "" {
		ictx, cancel := context.WithTimeout(ctx, InitTransactionsTimeout)
		err := p.InitTransactions(ictx)
		cancel()
		if err != nil {
			p.Close()
			<-done
			return fmt.Errorf("kafka: init_transactions of transactional_id %q failed: %w", s.txnID, err)
		}
	}
	s.producer, s.dispatched = p, done
	return nil
}

// abort aborts the open transaction (bounded by TransactionTimeout).
func (s *Sink) abort() error {
	actx, cancel := context.WithTimeout(context.Background(), TransactionTimeout)
	defer cancel()
	err := s.producer.AbortTransaction(actx)
	if err == nil {
		s.inTxn = false
		s.txnAborts.Add(1)
	}
	return err
}

// discard closes the producer without flushing (after a fatal error).
func (s *Sink) discard() {
	if s.producer == nil {
		return
	}
	_ = s.producer.Purge(kafka.PurgeQueue | kafka.PurgeInFlight | kafka.PurgeNonBlocking)
	s.producer.Close()
	<-s.dispatched
	s.producer, s.dispatched, s.inTxn = nil, nil, false
}

// dispatch serves the producer's events until it closes: delivery reports
// go to their write, and errors librdkafka retries by itself are logged.
// A fatal error is not logged here: it surfaces through the next produce
// or commit, where the write either logs what it does about it (rebuild
// the producer) or returns it, and the job logs its failure; librdkafka's
// own FATAL log line reaches the logger too (drainLogs). Logging it here
// as well would say one event several times.
func dispatch(p *kafka.Producer, lg *slog.Logger, done chan struct{}) {
	defer close(done)
	for ev := range p.Events() {
		switch e := ev.(type) {
		case *kafka.Message:
			if w, ok := e.Opaque.(*writeState); ok {
				w.report(e.TopicPartition.Error)
			}
		case kafka.Error:
			if !e.IsFatal() {
				lg.Warn("kafka producer error (retrying)", "error", e)
			}
		}
	}
}

// writeState counts the delivery reports of one Write's records.
type writeState struct {
	remaining atomic.Int64
	mu        sync.Mutex
	err       error
	done      chan struct{}
	// then, when set, is called with the first error once every record
	// was reported (WriteAsync).
	then func(error)
}

func newWriteState(n int) *writeState {
	w := &writeState{done: make(chan struct{})}
	w.remaining.Store(int64(n))
	return w
}

func (w *writeState) report(err error) {
	if err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
	}
	w.settle(1)
}

// settle marks n records as reported.
func (w *writeState) settle(n int64) {
	if n > 0 && w.remaining.Add(-n) == 0 {
		close(w.done)
		if w.then != nil {
			w.then(w.firstErr())
		}
	}
}

func (w *writeState) firstErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Write writes the rows: one record per row, keyed by the key column,
// valued by value_field or the row's JSON. At-least-once: it returns when
// every record was acknowledged by the broker, or with the first delivery
// error. Exactly-once: see writeTxn.
func (s *Sink) Write(ctx context.Context, rec arrow.RecordBatch) error {
	if s.txnID != "" {
		s.txnMu.Lock()
		defer s.txnMu.Unlock()
		if s.pending != nil { // a WriteAsync's transaction goes first
			s.commitPending(ctx)
		}
	}
	if err := s.usable(); err != nil {
		return err
	}
	if rec.NumRows() == 0 {
		return nil
	}
	b, err := s.prepare(rec)
	if err != nil || b == nil {
		return err
	}
	if s.txnID != "" {
		return s.writeTxn(ctx, b.values, b.keys, b.marks, 1)
	}
	n := len(b.values)
	w := newWriteState(n)
	if err := s.produce(ctx, b.values, b.keys, w); err != nil {
		return err
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		return fmt.Errorf("kafka: waiting for delivery of %d records to %q: %w", n, s.topic, ctx.Err())
	}
	if err := w.firstErr(); err != nil {
		return fmt.Errorf("kafka: delivering to topic %q: %w", s.topic, err)
	}
	return nil
}

// usable reports why the sink cannot write, or nil.
func (s *Sink) usable() error {
	switch {
	case s.closed:
		return ErrClosed
	case !s.connected:
		return errNotConnected
	case s.fenced != nil:
		return s.fenced
	}
	return nil
}

// admit starts WriteAsync: it returns why the sink cannot write, or the
// batch's records; none when there is nothing to write, done then called.
func (s *Sink) admit(rec arrow.RecordBatch, done func(error)) (*prepared, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if rec.NumRows() == 0 {
		done(nil)
		return nil, nil
	}
	b, err := s.prepare(rec)
	if err == nil && b == nil {
		done(nil)
	}
	return b, err
}

// prepared are a batch's records, and with offset_commit_group the input
// ends of its rows.
type prepared struct {
	values, keys [][]byte
	marks        map[tp]int64
}

// prepare makes rec's records; nil when nothing is left to write (every
// row replayed and already committed by the group).
func (s *Sink) prepare(rec arrow.RecordBatch) (*prepared, error) {
	var marks map[tp]int64
	if g := s.cfg.OffsetCommitGroup; g != "" && s.txnID != "" {
		srcs := pairedSources(g)
		if len(srcs) == 0 {
			return nil, s.unpaired()
		}
		kept, dropped, err := s.dropCommitted(rec, srcs)
		if err != nil {
			return nil, err
		}
		if dropped > 0 {
			s.dropped.Add(int64(dropped))
			s.log.Debug("dropped replayed rows the group already committed", "group", g, "rows", dropped)
			if kept == nil {
				return nil, nil
			}
			defer kept.Release()
			rec = kept
		}
		marks = batchMarks(rec, srcs)
		if !s.metaRows && hasInputMeta(rec.Schema()) {
			s.metaRows = true
		}
	}
	values, err := s.values(rec)
	if err != nil {
		return nil, err
	}
	keys, err := s.keys(rec)
	if err != nil {
		return nil, err
	}
	return &prepared{values: values, keys: keys, marks: marks}, nil
}

// WriteAsync is Write without waiting for the delivery reports, for
// at-least-once: done gets the first delivery error (or nil) once every
// record was reported, on the producer's event goroutine. Exactly-once
// without offset_commit_group (L2): see writeCoalesced; with it (L3) each
// write stays one synchronous transaction, done called before WriteAsync
// returns. Implements connectors.AsyncSink.
func (s *Sink) WriteAsync(ctx context.Context, rec arrow.RecordBatch, done func(error)) error {
	if s.txnID != "" {
		if s.cfg.OffsetCommitGroup == "" {
			return s.writeCoalesced(ctx, rec, done)
		}
		done(s.Write(ctx, rec))
		return nil
	}
	b, err := s.admit(rec, done)
	if err != nil || b == nil {
		return err
	}
	w := newWriteState(len(b.values))
	topic := s.topic
	w.then = func(err error) {
		if err != nil {
			err = fmt.Errorf("kafka: delivering to topic %q: %w", topic, err)
		}
		done(err)
	}
	// A failed produce recorded its error in w: what was enqueued still
	// reports, and done gets the error when it has.
	_ = s.produce(ctx, b.values, b.keys, w)
	return nil
}

// produce enqueues one record per value. On a full queue it waits for
// deliveries and retries. Records not enqueued are settled in w.
func (s *Sink) produce(ctx context.Context, values, keys [][]byte, w *writeState) error {
	topic := s.topic
	msg := kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny}, Opaque: w}
	for i, v := range values {
		msg.Value = v
		msg.Key = nil
		if keys != nil {
			msg.Key = keys[i]
		}
		for {
			err := s.producer.Produce(&msg, nil)
			if err == nil {
				break
			}
			if ke, ok := kafkaError(err); ok && ke.Code() == kafka.ErrQueueFull {
				select {
				case <-time.After(5 * time.Millisecond):
					continue
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
			err = fmt.Errorf("kafka: producing to topic %q: %w", topic, err)
			w.mu.Lock()
			if w.err == nil {
				w.err = err // before settling: WriteAsync's done reads it
			}
			w.mu.Unlock()
			w.settle(int64(len(values) - i))
			return err
		}
	}
	return nil
}

// writeTxn writes the rows as one transaction (L2): begin, produce every
// row, commit (which flushes). The rows are acknowledged, and so the
// sources and WAL commit, only after the commit returned.
//
//   - An abortable error (TxnRequiresAbort, a failed delivery, a failed
//     commit) aborts the transaction and writes the same rows again in a
//     new one; read_committed consumers never see the aborted records.
//   - A retriable commit error retries the commit.
//   - A fatal producer error other than fencing rebuilds the producer
//     (InitTransactions aborts whatever the old one left open) and writes
//     the rows again.
//   - Fencing (a newer producer with the same transactional_id) fails the
//     write, and every later one, with ErrFenced: the other producer owns
//     the id, and rebuilding would take it back from it.
//
// After MaxTransactionAttempts attempts the last error is returned.
func (s *Sink) writeTxn(ctx context.Context, values, keys [][]byte, marks map[tp]int64, first int) error {
	var last error
	for attempt := first; attempt <= MaxTransactionAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.producer == nil {
			if err := s.open(ctx); err != nil {
				last = err
				if isFenced(err) {
					s.fenced = fmt.Errorf("%w (transactional_id %q): %v", ErrFenced, s.txnID, err)
					return s.fenced
				}
				continue
			}
		}
		err := s.txnAttempt(ctx, values, keys, marks, attempt)
		if err == nil {
			s.committed()
			return nil
		}
		last = err
		if stop := s.failedAttempt(err, attempt); stop != nil {
			return stop
		}
	}
	return fmt.Errorf("kafka: writing %d records to topic %q in a transaction failed %d times: %w", len(values), s.topic, MaxTransactionAttempts, last)
}

// committed follows a committed transaction: a producer that failed
// fatally after the commit is replaced for the next write.
func (s *Sink) committed() {
	if ferr := s.producer.GetFatalError(); ferr != nil {
		s.log.Warn("kafka producer failed fatally after a commit; rebuilding it for the next write", "transactional_id", s.txnID, "error", ferr)
		s.discard()
	}
}

// failedAttempt ends a failed transaction attempt: it aborts the
// transaction, or rebuilds the producer, so that the rows can be written
// again in a new one, and returns nil; or it returns the error that ends
// the write (an unpaired group; fencing, sticky).
func (s *Sink) failedAttempt(err error, attempt int) error {
	switch {
	case errors.Is(err, ErrUnpairedGroup):
		// No retry: the paired input is gone (a configuration or
		// shutdown problem, not a transaction failure).
		if aerr := s.abort(); aerr != nil {
			s.discard()
		}
		return err
	case isFenced(err) || isFenced(s.producer.GetFatalError()):
		// Never rebuild: InitTransactions would fence the producer
		// that took over, and a zombie would take the id back.
		s.discard()
		s.fenced = fmt.Errorf("%w (transactional_id %q): %v", ErrFenced, s.txnID, err)
		return s.fenced
	case s.producer.GetFatalError() != nil:
		s.log.Warn("kafka producer failed fatally; rebuilding it and writing the batch again in a new transaction", "transactional_id", s.txnID, "attempt", attempt, "error", err)
		s.discard()
	default:
		s.log.Warn("kafka transaction failed; aborting it and writing the batch again in a new transaction", "transactional_id", s.txnID, "attempt", attempt, "error", err)
		if aerr := s.abort(); aerr != nil {
			s.log.Warn("aborting the kafka transaction failed; rebuilding the producer", "transactional_id", s.txnID, "error", aerr)
			s.discard()
		}
	}
	return nil
}

// txnAttempt runs one transaction over the rows.
func (s *Sink) txnAttempt(ctx context.Context, values, keys [][]byte, marks map[tp]int64, attempt int) error {
	if err := s.producer.BeginTransaction(); err != nil {
		return fmt.Errorf("kafka: begin_transaction failed: %w", err)
	}
	s.inTxn = true
	w := newWriteState(len(values))
	if err := s.produce(ctx, values, keys, w); err != nil {
		return fmt.Errorf("kafka: writing to the transaction failed: %w", err)
	}
	return s.finishTxn(ctx, marks, []*writeState{w}, attempt)
}

// finishTxn commits the open transaction, whose records report to ws:
// with offset_commit_group it first sends the input's offsets (marks) to
// it, and after the commit it waits for the records' delivery reports.
func (s *Sink) finishTxn(ctx context.Context, marks map[tp]int64, ws []*writeState, attempt int) error {
	p := s.producer
	var sent map[tp]int64
	if s.cfg.OffsetCommitGroup != "" {
		// L3: the input's offsets commit with the rows, or not at all.
		var err error
		if sent, err = s.sendOffsets(ctx, p, marks); err != nil {
			return err
		}
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(p, attempt); err != nil {
			return err
		}
	}
	for {
		cctx, cancel := context.WithTimeout(ctx, TransactionTimeout)
		err := p.CommitTransaction(cctx)
		cancel()
		if err == nil {
			s.inTxn = false
			s.txnCommits.Add(1)
			break
		}
		if ke, ok := kafkaError(err); ok && ke.IsRetriable() && !ke.TxnRequiresAbort() && !ke.IsFatal() && ctx.Err() == nil {
			continue
		}
		return fmt.Errorf("kafka: commit_transaction failed: %w", err)
	}
	for k, off := range sent {
		s.sentOffsets[k] = off // committed with the transaction
	}
	if s.cfg.OffsetCommitGroup != "" {
		s.prevMarks = marks // the next transaction waits for their acknowledgement
	}
	// The commit flushed every record; their reports are on their way.
	deadline := time.After(TransactionTimeout)
	for _, w := range ws {
		select {
		case <-w.done:
		case <-deadline:
			return errors.New("kafka: delivery reports of a committed transaction did not arrive")
		}
		if err := w.firstErr(); err != nil {
			// Unreachable in practice: a failed delivery fails the commit.
			return fmt.Errorf("kafka: delivering to topic %q: %w", s.topic, err)
		}
	}
	return nil
}

// values returns the record values of rec's rows.
func (s *Sink) values(rec arrow.RecordBatch) ([][]byte, error) {
	n := int(rec.NumRows())
	out := make([][]byte, n)
	if s.cfg.ValueField != "" {
		idx := rec.Schema().FieldIndices(s.cfg.ValueField)
		if len(idx) == 0 {
			return nil, fmt.Errorf("kafka: value_field column %q is not in the rows", s.cfg.ValueField)
		}
		col := rec.Column(idx[0])
		for i := 0; i < n; i++ {
			if !col.IsNull(i) {
				out[i] = bytesAt(col, i)
			}
		}
		return out, nil
	}
	stripped := connectors.StripMeta(rec)
	defer stripped.Release()
	buf, err := rowjson.AppendRecord(s.buf[:0], stripped)
	if err != nil {
		return nil, fmt.Errorf("kafka: encoding rows for topic %q: %w", s.topic, err)
	}
	if cap(buf) <= 4<<20 {
		s.buf = buf
	}
	start := 0
	row := 0
	for i, c := range buf {
		if c == '\n' {
			out[row] = buf[start:i:i]
			row++
			start = i + 1
		}
	}
	if row != n {
		return nil, fmt.Errorf("kafka: encoded %d rows, want %d", row, n)
	}
	return out, nil
}

// keys returns the record keys of rec's rows, or nil without a key column.
func (s *Sink) keys(rec arrow.RecordBatch) ([][]byte, error) {
	if s.cfg.Key == "" {
		return nil, nil
	}
	idx := rec.Schema().FieldIndices(string(s.cfg.Key))
	if len(idx) == 0 {
		return nil, fmt.Errorf("kafka: key column %q is not in the rows", s.cfg.Key)
	}
	col := rec.Column(idx[0])
	n := int(rec.NumRows())
	out := make([][]byte, n)
	for i := 0; i < n; i++ {
		if col.IsNull(i) {
			continue
		}
		switch a := col.(type) {
		case *array.String, *array.Binary:
			out[i] = bytesAt(a, i)
		case *array.Int8:
			out[i] = strconv.AppendInt(nil, int64(a.Value(i)), 10)
		case *array.Int16:
			out[i] = strconv.AppendInt(nil, int64(a.Value(i)), 10)
		case *array.Int32:
			out[i] = strconv.AppendInt(nil, int64(a.Value(i)), 10)
		case *array.Int64:
			out[i] = strconv.AppendInt(nil, a.Value(i), 10)
		case *array.Uint8:
			out[i] = strconv.AppendUint(nil, uint64(a.Value(i)), 10)
		case *array.Uint16:
			out[i] = strconv.AppendUint(nil, uint64(a.Value(i)), 10)
		case *array.Uint32:
			out[i] = strconv.AppendUint(nil, uint64(a.Value(i)), 10)
		case *array.Uint64:
			out[i] = strconv.AppendUint(nil, a.Value(i), 10)
		default:
			return nil, fmt.Errorf("kafka: key column %q has type %s; a key column must be string, binary or an integer", s.cfg.Key, col.DataType())
		}
	}
	return out, nil
}

// bytesAt returns the bytes of a string or binary value without copying
// (Produce copies them).
func bytesAt(col arrow.Array, i int) []byte {
	switch a := col.(type) {
	case *array.Binary:
		if v := a.Value(i); v != nil {
			return v
		}
		return []byte{}
	case *array.String:
		b := a.Data().Buffers()[2]
		if b == nil || a.ValueLen(i) == 0 {
			return []byte{}
		}
		off := a.ValueOffset(i)
		return b.Bytes()[off : off+a.ValueLen(i)]
	}
	return nil
}

// Close flushes the producer (at-least-once, bounded by 30 s; nothing is
// pending after a successful Write) and closes it. It is safe to call
// without Connect and more than once.
func (s *Sink) Close(ctx context.Context) error {
	s.txnMu.Lock() // the linger timer's commit may be running
	defer s.txnMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.dropPending()
	if s.producer == nil {
		return nil
	}
	if s.cfg.OffsetCommitGroup != "" {
		s.commitFinalOffsets(ctx)
	}
	var err error
	if s.inTxn {
		// An interrupted Write: its rows were never acknowledged, so they
		// are written again after a restart; do not leave them pending.
		if aerr := s.abort(); aerr != nil {
			err = fmt.Errorf("kafka: aborting the open transaction at close: %w", aerr)
		}
	}
	if left := s.producer.Flush(int(timeoutFor(ctx, CloseFlushTimeout).Milliseconds())); left > 0 {
		err = errors.Join(err, fmt.Errorf("kafka: %d records to topic %q were not delivered before close", left, s.topic))
	}
	s.producer.Close()
	<-s.dispatched
	s.producer, s.dispatched = nil, nil
	return err
}

var (
	_ connectors.Output    = (*Output)(nil)
	_ connectors.Sink      = (*Sink)(nil)
	_ connectors.AsyncSink = (*Sink)(nil)
)
