// Package stdout provides the "stdout" output: every row is written to
// standard output as a JSON line (see internal/rowjson for the formats),
// or, with value_field, as the bytes of that column (ArkFlow's form).
//
//	{"keep_meta": false}
//	{"value_field": "__value__", "append_newline": true}
//
// __meta_* columns are dropped unless keep_meta is true. Each Write writes
// its batch with one write call under a process-wide lock, so the lines of
// concurrent subtasks never interleave.
package stdout

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

// Type is the output type name.
const Type = "stdout"

// Config is the config of the "stdout" output.
type Config struct {
	// KeepMeta writes the __meta_* columns too.
	KeepMeta bool `json:"keep_meta,omitempty"`
	// ValueField names a string or binary column: each row's value of it
	// is written as it is instead of the row as JSON (a null writes an
	// empty line).
	ValueField string `json:"value_field,omitempty"`
	// AppendNewline ends each value_field value with a newline (default
	// true, ArkFlow's). JSON lines always end in one.
	AppendNewline *bool `json:"append_newline,omitempty"`
	// Writer replaces os.Stdout for Go users (and tests). It is not part of
	// the spec: the factory uses it when the builder binds this Config (or
	// a *Config) to the operator.
	Writer io.Writer `json:"-"`
}

// OutputType returns "stdout".
func (Config) OutputType() string { return Type }

func init() {
	connectors.RegisterOutput(Type, func(bc connectors.BuildContext, schema *arrow.Schema) (connectors.Output, error) {
		var cfg Config
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		switch b := bc.Bound.(type) {
		case Config:
			cfg.Writer = b.Writer
		case *Config:
			if b != nil {
				cfg.Writer = b.Writer
			}
		}
		return NewOutput(cfg, schema)
	})
}

// mu serializes writes of all stdout sinks in the process.
var mu sync.Mutex

// Output is a validated stdout output.
type Output struct{ cfg Config }

// NewOutput checks that rows of schema (nil when unknown) can be written
// and returns the output.
func NewOutput(cfg Config, schema *arrow.Schema) (*Output, error) {
	if schema != nil && cfg.ValueField != "" {
		if err := valueColumn(schema, cfg.ValueField); err != nil {
			return nil, connectors.FieldError("value_field", "%v", err)
		}
	} else if schema != nil {
		s := schema
		if !cfg.KeepMeta {
			s = connectors.StripMetaSchema(schema)
		}
		if err := rowjson.CheckSchema(s); err != nil {
			return nil, fmt.Errorf("stdout output: %w", err)
		}
	}
	return &Output{cfg: cfg}, nil
}

// NewSink returns the sink of one subtask.
func (o *Output) NewSink(info connectors.TaskInfo) (connectors.Sink, error) {
	return &Sink{w: o.cfg.Writer, keepMeta: o.cfg.KeepMeta, value: o.cfg.ValueField, newline: o.cfg.AppendNewline == nil || *o.cfg.AppendNewline}, nil
}

// NewSinkTo returns a sink writing JSON lines to w (os.Stdout when nil).
func NewSinkTo(w io.Writer, keepMeta bool) *Sink { return &Sink{w: w, keepMeta: keepMeta} }

// Sink writes rows as JSON lines.
type Sink struct {
	w        io.Writer // nil: os.Stdout, looked up at each write
	keepMeta bool
	value    string // value_field, "" for JSON lines
	newline  bool
	buf      []byte
}

// Connect does nothing: standard output is always open.
func (s *Sink) Connect(ctx context.Context) error { return nil }

// Write writes the rows with one write call.
func (s *Sink) Write(ctx context.Context, rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	var buf []byte
	var err error
	if s.value != "" {
		buf, err = s.appendValues(s.buf[:0], rec)
	} else {
		if !s.keepMeta {
			rec = connectors.StripMeta(rec)
			defer rec.Release()
		}
		buf, err = rowjson.AppendRecord(s.buf[:0], rec)
	}
	if err != nil {
		return fmt.Errorf("stdout: %w", err)
	}
	if cap(buf) <= 4<<20 {
		s.buf = buf
	}
	w := s.w
	if w == nil {
		w = os.Stdout
	}
	mu.Lock()
	_, err = w.Write(buf)
	mu.Unlock()
	if err != nil {
		return fmt.Errorf("stdout: %w", err)
	}
	return nil
}

// valueColumn checks that schema has a string or binary column name.
func valueColumn(schema *arrow.Schema, name string) error {
	i := schema.FieldIndices(name)
	if len(i) == 0 {
		return fmt.Errorf("no column %q in the rows", name)
	}
	switch t := schema.Field(i[0]).Type; t.ID() {
	case arrow.STRING, arrow.BINARY:
		return nil
	default:
		return fmt.Errorf("column %q has type %s; it must be string or binary", name, t)
	}
}

// appendValues appends every row's value_field bytes.
func (s *Sink) appendValues(buf []byte, rec arrow.RecordBatch) ([]byte, error) {
	if err := valueColumn(rec.Schema(), s.value); err != nil {
		return nil, err
	}
	col := rec.Column(rec.Schema().FieldIndices(s.value)[0])
	for i := range col.Len() {
		if col.IsValid(i) {
			switch c := col.(type) {
			case *array.String:
				buf = append(buf, c.Value(i)...)
			case *array.Binary:
				buf = append(buf, c.Value(i)...)
			}
		}
		if s.newline {
			buf = append(buf, '\n')
		}
	}
	return buf, nil
}

// Close does nothing; standard output stays open.
func (s *Sink) Close(ctx context.Context) error { return nil }

var (
	_ connectors.Output = (*Output)(nil)
	_ connectors.Sink   = (*Sink)(nil)
)
