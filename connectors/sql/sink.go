package sql

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

func init() {
	connectors.RegisterInput(Type, func(bc connectors.BuildContext) (connectors.Input, error) {
		var cfg SourceConfig
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		return newInput(cfg, explicitZero(bc.Config, "partitions", "batch_size", "poll_interval_ms"))
	})
	connectors.RegisterOutput(Type, func(bc connectors.BuildContext, schema *arrow.Schema) (connectors.Output, error) {
		var cfg SinkConfig
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		return NewOutput(cfg, schema)
	})
}

// Output is a validated sql output.
type Output struct {
	cfg        SinkConfig
	schema     *arrow.Schema
	maxRetries int
}

// NewOutput checks cfg against the rows' schema (nil when not known: then
// the columns are checked at the first write), applies its defaults and
// returns the output. It does no I/O. Errors name the config field at
// fault.
func NewOutput(cfg SinkConfig, schema *arrow.Schema) (*Output, error) {
	if _, err := checkSink(&cfg, schema); err != nil {
		return nil, err
	}
	n := DefaultMaxRetries
	if cfg.MaxRetries != nil {
		n = *cfg.MaxRetries
	}
	return &Output{cfg: cfg, schema: schema, maxRetries: n}, nil
}

// Config returns the config with defaults applied.
func (o *Output) Config() SinkConfig { return o.cfg }

// NewSink returns the sink of one subtask. It does no I/O.
func (o *Output) NewSink(info connectors.TaskInfo) (connectors.Sink, error) {
	lg := info.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("connector", Type)
	return &Sink{
		out: o,
		r:   &retrier{db: o.cfg.Database, maxRetries: o.maxRetries, log: lg, what: "write", backoff: defaultBackoff},
	}, nil
}

// Sink writes batches to a table, one transaction per batch. It
// implements connectors.Sink and connectors.Metered.
type Sink struct {
	out *Output
	r   *retrier

	mu        sync.Mutex // guards closed against a concurrent Close
	connected bool
	closed    bool

	// bound is what the statement was made for; nil until the first
	// schema is known.
	bound *binding
}

// binding is the statement for rows of one schema.
type binding struct {
	schema *arrow.Schema
	cols   []int  // the rows' columns written, in statement order
	kinds  []kind // the table column's kind of each
	stmt   string
	names  []string
}

// Connect opens the database and, when the rows' schema is known, checks
// the table against it: every column written exists with a type that
// takes it, and the upsert keys are the table's primary key or a unique
// index. ctx bounds only connecting.
func (s *Sink) Connect(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	err := s.r.do(ctx, func(c conn) error {
		if s.out.schema == nil {
			return nil
		}
		b, err := s.bind(ctx, c, s.out.schema)
		s.bound = b
		return err
	})
	if err != nil {
		return err
	}
	s.connected = true
	return nil
}

// bind checks the table against rows of schema and prepares the
// statement.
func (s *Sink) bind(ctx context.Context, c conn, schema *arrow.Schema) (*binding, error) {
	cfg := s.out.cfg
	cols, err := checkSink(&cfg, schema)
	if err != nil {
		return nil, fmt.Errorf("sql: the rows do not fit the output's config: %w", err)
	}
	table := quoteTable(cfg.TableName)
	tcols, err := c.columns(ctx, table)
	if err != nil {
		return nil, fmt.Errorf("sql: reading the columns of table %s: %w", table, err)
	}
	if len(tcols) == 0 {
		return nil, fmt.Errorf("sql: table %s does not exist (table_name is case-sensitive; the output creates no table)", table)
	}
	byName := map[string]column{}
	var all []string
	for _, tc := range tcols {
		byName[tc.name] = tc
		all = append(all, tc.name)
	}
	b := &binding{schema: schema, cols: cols}
	var problems []error
	for _, i := range cols {
		f := schema.Field(i)
		tc, ok := byName[f.Name]
		switch {
		case !ok:
			problems = append(problems, fmt.Errorf("column %q of the rows does not exist in table %s (its columns: %s): add it to the table, or list the columns to write in columns",
				f.Name, table, strings.Join(all, ", ")))
		case !accepts(cfg.Database.Type, tc.kind, f.Type):
			problems = append(problems, fmt.Errorf("column %q of table %s is %s (%s), which does not take the rows' %s values",
				f.Name, table, tc.typ, kindNames[tc.kind], f.Type))
		}
		b.kinds = append(b.kinds, tc.kind)
		b.names = append(b.names, f.Name)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("sql: the rows do not fit table %s: %w", table, errors.Join(problems...))
	}
	b.stmt = insertSQL(cfg.Database.Type, cfg.TableName, b.names, cfg.Keys)
	if err := c.prepare(ctx, b.stmt, len(b.names)); err != nil {
		if isNoConflictTarget(err) {
			return nil, fmt.Errorf("sql: keys (%s) are not the primary key or a unique index of table %s: an upsert needs one (e.g. CREATE UNIQUE INDEX ON %s (%s)): %w",
				strings.Join(cfg.Keys, ", "), table, table, strings.Join(quoted(cfg.Keys), ", "), err)
		}
		return nil, fmt.Errorf("sql: preparing %s: %w", b.stmt, err)
	}
	return b, nil
}

// accepts reports whether a table column of kind k takes an Arrow type:
// PostgreSQL's numbers take numbers only (SQLite stores booleans and
// timestamps as integers).
func accepts(dbType string, k kind, dt arrow.DataType) bool {
	if dbType == Postgres && k == kindNumber && (dt.ID() == arrow.BOOL || dt.ID() == arrow.TIMESTAMP) {
		return false
	}
	if dbType == Postgres && k == kindBinary && dt.ID() != arrow.BINARY && dt.ID() != arrow.LARGE_BINARY {
		return false
	}
	return k.accepts(dt)
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = quoteIdent(n)
	}
	return out
}

// Write writes the rows in one transaction: all of them or, on an error,
// none. Errors that may pass are retried (max_retries); an error of a row
// names the row and, where the database tells, the column.
func (s *Sink) Write(ctx context.Context, rec arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case !s.connected:
		return errNotConnected
	case rec.NumRows() == 0:
		return nil
	}
	return s.r.do(ctx, func(c conn) error {
		if s.bound == nil || !s.bound.schema.Equal(rec.Schema()) {
			b, err := s.bind(ctx, c, rec.Schema())
			if err != nil {
				return err
			}
			s.bound = b
		}
		rows := s.bound.rows(rec, s.out.cfg.Database.Type)
		i, err := c.execBatch(ctx, s.bound.stmt, rows)
		if err != nil {
			return s.bound.explain(s.out.cfg.TableName, rec, i, err)
		}
		return nil
	})
}

// rows returns the statement's parameters of every row of rec.
func (b *binding) rows(rec arrow.RecordBatch, dbType string) [][]any {
	n, w := int(rec.NumRows()), len(b.cols)
	encs := make([]encoder, w)
	for j, c := range b.cols {
		encs[j] = newEncoder(rec.Column(c), b.kinds[j], dbType)
	}
	flat := make([]any, n*w)
	rows := make([][]any, n)
	for i := range rows {
		r := flat[i*w : (i+1)*w : (i+1)*w]
		for j, enc := range encs {
			r[j] = enc(i)
		}
		rows[i] = r
	}
	return rows
}

var encodeArg = regexp.MustCompile(`args\[(\d+)\]`)

// explain adds to a write's error the row it is about (row ≥ 0) and the
// column, when the error names a parameter.
func (b *binding) explain(table string, rec arrow.RecordBatch, row int, err error) error {
	where := "sql: writing to " + quoteTable(table)
	if row >= 0 {
		where += fmt.Sprintf(": row %d of the batch's %d", row, rec.NumRows())
	}
	if m := encodeArg.FindStringSubmatch(err.Error()); m != nil {
		if j, _ := strconv.Atoi(m[1]); j < len(b.names) {
			where += fmt.Sprintf(": column %q (%s)", b.names[j], rec.Schema().Field(b.cols[j]).Type)
		}
	}
	return fmt.Errorf("%s: %w", where, err)
}

// Close closes the connection. It is safe to call more than once.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.r.close()
}
