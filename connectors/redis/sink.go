package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/expr"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
	"github.com/arkflow-rs/arkflow-go/internal/suggest"
)

// maxAttempts bounds the attempts of one write that fails on connection
// errors.
const maxAttempts = 10

// output is a validated Redis output.
type output struct {
	cfg SinkConfig
}

func newOutput(cfg SinkConfig, schema *arrow.Schema) (*output, error) {
	var f connectors.Fields
	f.Merge("", checkSink(&cfg))
	if schema != nil && f.Err() == nil {
		checkSinkSchema(&f, &cfg, schema)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return &output{cfg: cfg}, nil
}

// checkSinkSchema checks the columns and expressions the config names
// against the rows' schema.
func checkSinkSchema(f *connectors.Fields, cfg *SinkConfig, schema *arrow.Schema) {
	cols := make([]string, 0, schema.NumFields())
	for _, fd := range schema.Fields() {
		cols = append(cols, fd.Name)
	}
	if cfg.ValueField != "" {
		if i := schema.FieldIndices(cfg.ValueField); len(i) == 0 {
			f.Add("value_field", "%s", suggest.UnknownColumn(cfg.ValueField, cols))
		} else if t := schema.Field(i[0]).Type.ID(); t != arrow.STRING && t != arrow.BINARY {
			f.Add("value_field", "column %q has type %s; the value column must be string or binary", cfg.ValueField, schema.Field(i[0]).Type)
		}
	} else if err := rowjson.CheckSchema(connectors.StripMetaSchema(schema)); err != nil {
		f.Add("", "the rows cannot be written as JSON values: %v (or name a string or binary column in value_field)", err)
	}
	r := cfg.RedisType
	for key, e := range map[string]*Expr{"channel": r.Channel, "key": r.Key, "field": r.Field} {
		if e == nil || e.Expr == "" {
			continue
		}
		if _, err := compileExpr(e.Expr, schema); err != nil {
			f.Add("redis_type."+key+".expr", "%v", err)
		}
	}
}

// compileExpr compiles a per-row string expression.
func compileExpr(src string, schema *arrow.Schema) (*expr.Expr, error) {
	x, err := expr.Compile(src, schema)
	if err != nil {
		return nil, err
	}
	switch x.Type().ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64, arrow.TIMESTAMP:
		return x, nil
	}
	return nil, fmt.Errorf("%q has type %s; it must give a string, an integer or a timestamp", src, x.Type())
}

// NewSink returns the sink of one subtask. It does no I/O.
func (o *output) NewSink(info connectors.TaskInfo) (connectors.Sink, error) {
	lg := info.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &sink{cfg: &o.cfg, info: info, log: lg.With("connector", "redis")}, nil
}

// sink writes every row as one command (XADD, RPUSH, PUBLISH, HSET or
// SET), the rows of a write in one pipeline, and returns once Redis
// answered every command. A write that fails on a connection error is
// sent again whole (at-least-once: an XADD or RPUSH may then be there
// twice; HSET and SET write the same value again).
type sink struct {
	cfg  *SinkConfig
	info connectors.TaskInfo
	log  *slog.Logger

	client    goredis.UniversalClient
	connected bool
	closed    bool
	exprs     map[*Expr]*expr.Expr
	schema    *arrow.Schema
}

// Connect connects. ctx bounds only connecting.
func (s *sink) Connect(ctx context.Context) error {
	if s.closed {
		return ErrClosed
	}
	if s.connected {
		return errors.New("redis: already connected")
	}
	c, err := dial(ctx, s.cfg.Mode, s.cfg.TLS, connName(s.info.JobID, s.info.OperatorID, s.info.Subtask))
	if err != nil {
		return err
	}
	s.client, s.connected = c, true
	return nil
}

// Write writes the rows (see sink).
func (s *sink) Write(ctx context.Context, rec arrow.RecordBatch) error {
	if s.closed {
		return ErrClosed
	}
	if !s.connected {
		return errNotConnected
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	values, err := s.payloads(rec)
	if err != nil {
		return err
	}
	r := s.cfg.RedisType
	target := r.Key
	if r.Type == TypePublish {
		target = r.Channel
	}
	keys, err := s.strings(rec, target)
	if err != nil {
		return fmt.Errorf("redis: redis_type.%s: %w", map[bool]string{true: "channel", false: "key"}[r.Type == TypePublish], err)
	}
	var fields []string
	if r.Type == TypeHashes || r.Type == TypeStream {
		if fields, err = s.strings(rec, r.Field); err != nil {
			return fmt.Errorf("redis: redis_type.field: %w", err)
		}
	}
	for attempt := 1; ; attempt++ {
		err := s.send(ctx, keys, fields, values)
		if err == nil {
			return nil
		}
		if !retryable(err) || attempt == maxAttempts || ctx.Err() != nil {
			return fmt.Errorf("redis: writing %d rows (redis_type %s): %w", n, r.Type, err)
		}
		s.log.Warn("writing failed on a connection error (retrying)", "attempt", attempt, "error", err)
		if err := sleepCtx(ctx, retryWait); err != nil {
			return err
		}
	}
}

// send writes every row in one pipeline and checks every answer.
func (s *sink) send(ctx context.Context, keys, fields []string, values [][]byte) error {
	pipe := s.client.Pipeline()
	at := func(xs []string, i int) string {
		if len(xs) == 1 {
			return xs[0]
		}
		return xs[i]
	}
	for i, v := range values {
		k := at(keys, i)
		switch s.cfg.RedisType.Type {
		case TypePublish:
			pipe.Publish(ctx, k, v)
		case TypeList:
			pipe.RPush(ctx, k, v)
		case TypeHashes:
			pipe.HSet(ctx, k, at(fields, i), v)
		case TypeStrings:
			pipe.Set(ctx, k, v, 0)
		case TypeStream:
			pipe.XAdd(ctx, &goredis.XAddArgs{Stream: k, Values: []any{at(fields, i), v}})
		}
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		return err
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}

// strings returns e's value for every row; a constant gives one value.
func (s *sink) strings(rec arrow.RecordBatch, e *Expr) ([]string, error) {
	if e.Expr == "" {
		return []string{e.Value}, nil
	}
	if s.exprs == nil || !s.schema.Equal(rec.Schema()) {
		s.exprs, s.schema = map[*Expr]*expr.Expr{}, rec.Schema()
	}
	x := s.exprs[e]
	if x == nil {
		var err error
		if x, err = compileExpr(e.Expr, rec.Schema()); err != nil {
			return nil, err
		}
		s.exprs[e] = x
	}
	col, err := x.Eval(rec)
	if err != nil {
		return nil, err
	}
	defer col.Release()
	out := make([]string, col.Len())
	for i := range out {
		if col.IsNull(i) {
			return nil, fmt.Errorf("%q is null in row %d", e.Expr, i)
		}
		out[i] = stringAt(col, i)
	}
	return out, nil
}

func stringAt(col arrow.Array, i int) string {
	switch a := col.(type) {
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return string(a.Value(i))
	case *array.Uint64:
		return strconv.FormatUint(a.Value(i), 10)
	case *array.Timestamp:
		toTime, _ := a.DataType().(*arrow.TimestampType).GetToTimeFunc()
		return strconv.FormatInt(toTime(a.Value(i)).UnixMilli(), 10)
	}
	return col.ValueStr(i)
}

// payloads returns every row's value: value_field's bytes, or the row as
// a JSON object without its __meta_* columns.
func (s *sink) payloads(rec arrow.RecordBatch) ([][]byte, error) {
	n := int(rec.NumRows())
	out := make([][]byte, n)
	if s.cfg.ValueField != "" {
		idx := rec.Schema().FieldIndices(s.cfg.ValueField)
		if len(idx) == 0 {
			return nil, fmt.Errorf("redis: value_field column %q is not in the rows", s.cfg.ValueField)
		}
		col := rec.Column(idx[0])
		for i := 0; i < n; i++ {
			switch a := col.(type) {
			case *array.Binary:
				out[i] = append([]byte{}, a.Value(i)...)
			case *array.String:
				out[i] = []byte(a.Value(i))
			default:
				return nil, fmt.Errorf("redis: value_field column %q has type %s, not string or binary", s.cfg.ValueField, col.DataType())
			}
		}
		return out, nil
	}
	stripped := connectors.StripMeta(rec)
	defer stripped.Release()
	buf, err := rowjson.AppendRecord(nil, stripped)
	if err != nil {
		return nil, fmt.Errorf("redis: encoding rows: %w", err)
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
		return nil, fmt.Errorf("redis: encoded %d rows, want %d", row, n)
	}
	return out, nil
}

// Close closes the connection. Safe without Connect and more than once.
func (s *sink) Close(context.Context) error {
	if s.closed {
		return nil
	}
	s.closed, s.connected = true, false
	if s.client != nil {
		_ = s.client.Close()
		s.client = nil
	}
	return nil
}

var (
	_ connectors.Output = (*output)(nil)
	_ connectors.Sink   = (*sink)(nil)
)
