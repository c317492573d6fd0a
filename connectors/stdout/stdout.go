// Package stdout provides the "stdout" output: every row is written to
// standard output as a JSON line (see internal/rowjson for the formats).
//
//	{"keep_meta": false}
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

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

// Type is the output type name.
const Type = "stdout"

// Config is the config of the "stdout" output.
type Config struct {
	// KeepMeta writes the __meta_* columns too.
	KeepMeta bool `json:"keep_meta,omitempty"`
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
	if schema != nil {
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
	return &Sink{w: o.cfg.Writer, keepMeta: o.cfg.KeepMeta}, nil
}

// NewSinkTo returns a sink writing JSON lines to w (os.Stdout when nil).
func NewSinkTo(w io.Writer, keepMeta bool) *Sink { return &Sink{w: w, keepMeta: keepMeta} }

// Sink writes rows as JSON lines.
type Sink struct {
	w        io.Writer // nil: os.Stdout, looked up at each write
	keepMeta bool
	buf      []byte
}

// Connect does nothing: standard output is always open.
func (s *Sink) Connect(ctx context.Context) error { return nil }

// Write writes the rows with one write call.
func (s *Sink) Write(ctx context.Context, rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	if !s.keepMeta {
		rec = connectors.StripMeta(rec)
		defer rec.Release()
	}
	buf, err := rowjson.AppendRecord(s.buf[:0], rec)
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

// Close does nothing; standard output stays open.
func (s *Sink) Close(ctx context.Context) error { return nil }

var (
	_ connectors.Output = (*Output)(nil)
	_ connectors.Sink   = (*Sink)(nil)
)
