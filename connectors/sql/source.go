package sql

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Input is a validated sql input.
type Input struct {
	cfg        SourceConfig
	declared   *arrow.Schema
	schema     *arrow.Schema
	query      string   // with the database's parameters
	order      []string // the placeholder of each parameter
	track      int      // the tracking column's index in declared
	trackTime  bool     // the tracking column is a timestamp
	maxRetries int
}

// NewInput checks cfg, applies its defaults and returns the input. It
// does no I/O. Errors name the config field at fault.
func NewInput(cfg SourceConfig) (*Input, error) { return newInput(cfg, nil) }

func newInput(cfg SourceConfig, zero map[string]bool) (*Input, error) {
	declared, err := checkSource(&cfg, zero)
	if err != nil {
		return nil, err
	}
	text := cfg.SelectSQL
	if cfg.TableName != "" {
		var cols []string
		for _, f := range declared.Fields() {
			cols = append(cols, f.Name)
		}
		text = tableQuery(&cfg, cols)
	}
	q, order, err := bindQuery(text, cfg.Database.Type)
	if err != nil {
		return nil, connectors.FieldError("select_sql", "%v", err)
	}
	track := declared.FieldIndices(cfg.TrackingColumn)[0]
	n := DefaultMaxRetries
	if cfg.MaxRetries != nil {
		n = *cfg.MaxRetries
	}
	return &Input{
		cfg: cfg, declared: declared, schema: connectors.WithMeta(declared),
		query: q, order: order, track: track,
		trackTime:  declared.Field(track).Type.ID() == arrow.TIMESTAMP,
		maxRetries: n,
	}, nil
}

// Config returns the config with defaults applied.
func (in *Input) Config() SourceConfig { return in.cfg }

// Schema is the declared schema plus __meta_source, __meta_partition and
// __meta_offset (the row's tracking value).
func (in *Input) Schema() *arrow.Schema { return in.schema }

// Partitions is the configured number of partitions.
func (in *Input) Partitions() int { return in.cfg.Partitions }

// NewSource returns the source of one subtask: the partitions p with
// p % parallelism == subtask. It does no I/O. A subtask beyond the
// partitions reads nothing and never ends: run the source with at most
// partitions subtasks.
func (in *Input) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	par := max(info.Parallelism, 1)
	if info.Subtask < 0 || info.Subtask >= par {
		return nil, fmt.Errorf("sql: subtask %d out of range for parallelism %d", info.Subtask, par)
	}
	lg := info.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("connector", Type)
	s := &Source{
		in:      in,
		info:    info,
		r:       &retrier{db: in.cfg.Database, maxRetries: in.maxRetries, log: lg, what: "query", backoff: defaultBackoff},
		tracker: connectors.NewTracker(""),
		cursors: map[int32]*cursor{},
	}
	for p := info.Subtask; p < in.cfg.Partitions; p += par {
		s.assigned = append(s.assigned, int32(p))
		s.cursors[int32(p)] = &cursor{}
	}
	return s, nil
}

// Source polls the query for one subtask's partitions. It implements
// connectors.Source, connectors.Positioner and connectors.Metered.
type Source struct {
	in       *Input
	info     connectors.TaskInfo
	r        *retrier
	tracker  *connectors.Tracker
	assigned []int32
	cursors  map[int32]*cursor
	next     int // the partition the next round starts with

	mu        sync.Mutex // guards the state against a concurrent Close
	connected bool
	closed    bool
	// fields maps the query's result columns to the declared ones
	// (fields[i] is result column i's index in the declared schema).
	fields []int
}

// cursor is where reading a partition goes on: after the last tracking
// value read (an int64, or for a timestamp the exact time), or from the
// start.
type cursor struct {
	started  bool
	last     int64
	lastTime time.Time
	// known and value publish last (as the position's unit) for
	// Metrics.
	known atomic.Bool
	value atomic.Int64
}

// Seek makes each sought partition resume at its position: the rows
// whose tracking value is at least the offset (Unix microseconds for a
// timestamp). It must be called before Connect; positions of partitions
// this subtask does not read are ignored.
func (s *Source) Seek(positions []connectors.Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connected {
		return errors.New("sql: Seek after Connect")
	}
	for _, pos := range positions {
		c := s.cursors[pos.Partition]
		if c == nil {
			continue
		}
		if pos.Offset == math.MinInt64 {
			c.started = false
		} else {
			c.started, c.last = true, pos.Offset-1
			c.lastTime = time.UnixMicro(c.last).UTC()
			c.value.Store(c.last)
			c.known.Store(true)
		}
		s.tracker.Start(pos.Partition, pos.Offset)
	}
	return nil
}

// Positions returns the acknowledged frontier of every partition this
// subtask read or was sought in: the tracking value to resume from.
func (s *Source) Positions() []connectors.Position { return s.tracker.Positions() }

// Connect opens the database and runs the query once without rows, to
// check it and that it returns exactly the declared columns. ctx bounds
// only connecting.
func (s *Source) Connect(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.connected:
		return errors.New("sql: already connected")
	}
	err := s.r.do(ctx, func(c conn) error {
		args := s.args(&cursor{}, 0, 0)
		return c.query(ctx, s.in.query, args, s.checkColumns, func([]any) error { return nil })
	})
	if err != nil {
		return s.queryError(err)
	}
	s.connected = true
	for _, p := range s.assigned {
		if c := s.cursors[p]; c.started {
			s.r.log.Info(ResumeMessage, "partition", p, "position", c.last+1)
		} else {
			s.r.log.Info(ResumeMessage, "partition", p, "position", "start")
		}
	}
	return nil
}

// ResumeMessage is the message of the line a source logs at Connect for
// each of its partitions, with partition and position: the tracking value
// it reads from (rows at or after it), or "start".
const ResumeMessage = "sql: source reads partition"

func (s *Source) queryError(err error) error {
	if s.in.cfg.TableName != "" {
		return fmt.Errorf("sql: querying table %s (%s): %w", quoteTable(s.in.cfg.TableName), s.in.query, err)
	}
	return fmt.Errorf("sql: running select_sql (%s): %w", s.in.query, err)
}

// checkColumns maps the query's result columns to the declared ones.
func (s *Source) checkColumns(names []string) error {
	s.fields = make([]int, len(names))
	seen := map[string]bool{}
	var problems []string
	for i, n := range names {
		idx := s.in.declared.FieldIndices(n)
		if len(idx) != 1 {
			problems = append(problems, fmt.Sprintf("it returns column %q, which schema does not declare", n))
			continue
		}
		if seen[n] {
			problems = append(problems, fmt.Sprintf("it returns column %q twice", n))
		}
		seen[n] = true
		s.fields[i] = idx[0]
	}
	for _, f := range s.in.declared.Fields() {
		if !seen[f.Name] {
			problems = append(problems, fmt.Sprintf("schema declares column %q, which it does not return", f.Name))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the query's columns do not match schema: %s", strings.Join(problems, "; "))
	}
	return nil
}

// args returns the query's parameters for a partition's cursor.
func (s *Source) args(c *cursor, part int32, limit int) []any {
	out := make([]any, len(s.in.order))
	for i, name := range s.in.order {
		switch name {
		case phLast:
			out[i] = s.lastArg(c)
		case phLimit:
			out[i] = int64(limit)
		case phPartition:
			out[i] = int64(part)
		}
	}
	return out
}

// beforeAll is the :last of a timestamp column before any row: earlier
// than any PostgreSQL can store but -infinity.
var beforeAll = time.Date(-4000, 1, 1, 0, 0, 0, 0, time.UTC)

func (s *Source) lastArg(c *cursor) any {
	switch {
	case s.in.trackTime && !c.started:
		return beforeAll
	case s.in.trackTime:
		return c.lastTime
	case !c.started:
		return int64(math.MinInt64)
	}
	return c.last
}

// Read returns the next rows of one of the subtask's partitions, taking
// them in turn; when a round of queries finds none it waits
// poll_interval_ms and asks again, until ctx ends.
func (s *Source) Read(ctx context.Context) (connectors.Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return connectors.Batch{}, ErrClosed
	case !s.connected:
		return connectors.Batch{}, errNotConnected
	}
	wait := time.Duration(s.in.cfg.PollIntervalMS) * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return connectors.Batch{}, err
		}
		for range s.assigned {
			part := s.assigned[s.next]
			s.next = (s.next + 1) % len(s.assigned)
			b, ok, err := s.poll(ctx, part)
			if err != nil || ok {
				return b, err
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return connectors.Batch{}, ctx.Err()
		case <-t.C:
		}
	}
}

// page is the rows one query returned, before they become a batch.
type page struct {
	vals  [][]any     // by row, in declared order
	offs  []int64     // each row's tracking value (its __meta_offset)
	times []time.Time // a timestamp tracking column's exact values
}

// poll runs the query for one partition and returns its rows as a batch
// (ok false when there were none).
func (s *Source) poll(ctx context.Context, part int32) (connectors.Batch, bool, error) {
	c := s.cursors[part]
	var pg *page
	var rowErr error // a row's problem, which names the row itself
	err := s.r.do(ctx, func(cn conn) error {
		pg = &page{}
		return cn.query(ctx, s.in.query, s.args(c, part, s.in.cfg.BatchSize+1), s.checkColumns, func(vals []any) error {
			rowErr = s.collect(pg, c, part, vals)
			return rowErr
		})
	})
	switch {
	case rowErr != nil:
		return connectors.Batch{}, false, rowErr
	case err != nil && ctx.Err() != nil:
		return connectors.Batch{}, false, ctx.Err()
	case err != nil:
		return connectors.Batch{}, false, s.queryError(err)
	}
	n, err := s.complete(pg, part)
	if err != nil || n == 0 {
		return connectors.Batch{}, false, err
	}
	rec, err := s.record(pg, part, n)
	if err != nil {
		return connectors.Batch{}, false, err
	}
	first, last := pg.offs[0], pg.offs[n-1]
	c.started, c.last = true, last
	if s.in.trackTime {
		c.lastTime = pg.times[n-1]
	}
	c.value.Store(last)
	c.known.Store(true)
	return connectors.Batch{Record: rec, Partition: int(part), Ack: s.tracker.Deliver(part, first, last+1)}, true, nil
}

// collect keeps one result row, checking its tracking value: present and
// after the cursor and the row before.
func (s *Source) collect(pg *page, c *cursor, part int32, vals []any) error {
	row := make([]any, len(vals))
	for i, v := range vals {
		row[s.fields[i]] = v
	}
	name := s.in.cfg.TrackingColumn
	v := row[s.in.track]
	var off int64
	if s.in.trackTime {
		t, err := toTime(v, arrow.Microsecond)
		if v == nil || err != nil {
			return s.rowError(part, len(pg.vals), name, "", fmt.Errorf("tracking column %s", valueProblem(v, err)))
		}
		off = t.UnixMicro()
		if (c.started && !t.After(c.lastTime)) || (len(pg.times) > 0 && t.Before(pg.times[len(pg.times)-1])) {
			return s.orderError(part, t.Format(time.RFC3339Nano))
		}
		pg.times = append(pg.times, t)
	} else {
		n, err := toInt64(v)
		if v == nil || err != nil {
			return s.rowError(part, len(pg.vals), name, "", fmt.Errorf("tracking column %s", valueProblem(v, err)))
		}
		off = n
		if (c.started && n <= c.last) || (len(pg.offs) > 0 && n < pg.offs[len(pg.offs)-1]) {
			return s.orderError(part, fmt.Sprint(n))
		}
	}
	pg.vals = append(pg.vals, row)
	pg.offs = append(pg.offs, off)
	return nil
}

func valueProblem(v any, err error) string {
	if v == nil {
		return "is NULL"
	}
	return err.Error()
}

func (s *Source) orderError(part int32, v string) error {
	return fmt.Errorf("sql: partition %d: the query returned %s = %s out of order: it must return only rows after :last, in tracking order (ORDER BY %s)",
		part, s.in.cfg.TrackingColumn, v, quoteIdent(s.in.cfg.TrackingColumn))
}

// rowError names the row (by its tracking value when known, else its
// place in the query's result) and the column of a value that cannot be
// read.
func (s *Source) rowError(part int32, i int, col, trackValue string, err error) error {
	row := fmt.Sprintf("row %d of the query's result", i)
	if trackValue != "" {
		row = fmt.Sprintf("the row with %s = %s", s.in.cfg.TrackingColumn, trackValue)
	}
	return fmt.Errorf("sql: partition %d: %s: column %q: %w (nothing of the batch was delivered)", part, row, col, err)
}

// complete returns how many of the page's rows make the batch. The query
// asks for one row more than a batch (:limit is batch_size + 1), to see
// whether the run of rows sharing the last tracking value of a full batch
// goes on after it: then the batch ends before that run, which the next
// query reads whole (it asks for rows after the batch's last value, and
// would skip the run's rest). A batch_size run that goes on could never
// move on, and is an error.
func (s *Source) complete(pg *page, part int32) (int, error) {
	n, size := len(pg.offs), s.in.cfg.BatchSize
	if n <= size {
		return n, nil
	}
	last := pg.offs[size-1]
	if pg.offs[size] != last {
		return size, nil
	}
	k := size
	for k > 0 && pg.offs[k-1] == last {
		k--
	}
	if k == 0 {
		return 0, fmt.Errorf("sql: partition %d: more than batch_size (%d) rows share %s = %d: raise batch_size above the number of rows that share a tracking value",
			part, size, s.in.cfg.TrackingColumn, last)
	}
	return k, nil
}

// record builds the batch of the page's first n rows.
func (s *Source) record(pg *page, part int32, n int) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s.in.schema)
	defer b.Release()
	fields := s.in.declared.Fields()
	for j, f := range fields {
		app := newAppender(f)
		fb := b.Field(j)
		fb.Reserve(n)
		for i := 0; i < n; i++ {
			if err := app(fb, pg.vals[i][j]); err != nil {
				return nil, s.rowError(part, i, f.Name, s.trackText(pg, i), err)
			}
		}
	}
	m := len(fields)
	src := b.Field(m).(*array.StringBuilder)
	parts := b.Field(m + 1).(*array.Int32Builder)
	offs := b.Field(m + 2).(*array.Int64Builder)
	for i := 0; i < n; i++ {
		src.Append(s.info.OperatorID)
		parts.Append(part)
	}
	offs.AppendValues(pg.offs[:n], nil)
	return b.NewRecordBatch(), nil
}

func (s *Source) trackText(pg *page, i int) string {
	if s.in.trackTime {
		return pg.times[i].Format(time.RFC3339Nano)
	}
	return fmt.Sprint(pg.offs[i])
}

// Close closes the connection. It is safe to call more than once, and
// before Connect.
func (s *Source) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.r.close()
}
