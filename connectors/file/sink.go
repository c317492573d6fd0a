package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

// SubtaskPlaceholder in a sink path is replaced by the subtask index.
const SubtaskPlaceholder = "{subtask}"

// Output is a validated file output.
type Output struct {
	cfg SinkConfig
}

// NewOutput checks cfg for rows of schema (which may be nil when unknown)
// and returns the output. It does no I/O.
func NewOutput(cfg SinkConfig, schema *arrow.Schema) (*Output, error) {
	if err := checkSink(&cfg); err != nil {
		return nil, err
	}
	if schema != nil {
		s := schema
		if !cfg.KeepMeta {
			s = connectors.StripMetaSchema(schema)
		}
		if err := rowjson.CheckSchema(s); err != nil {
			return nil, fmt.Errorf("file output: %w", err)
		}
	}
	return &Output{cfg: cfg}, nil
}

// Config returns the config with defaults applied.
func (o *Output) Config() SinkConfig { return o.cfg }

// NewSink returns the sink of one subtask. It does no I/O.
func (o *Output) NewSink(info connectors.TaskInfo) (connectors.Sink, error) {
	return &Sink{
		path:     strings.ReplaceAll(o.cfg.Path, SubtaskPlaceholder, strconv.Itoa(info.Subtask)),
		keepMeta: o.cfg.KeepMeta,
		fsync:    o.cfg.Fsync == nil || *o.cfg.Fsync,
	}, nil
}

// pathLocks serializes appends to one file from the sinks of this process,
// keyed by absolute path.
var pathLocks sync.Map // string → *sync.Mutex

func lockFor(abs string) *sync.Mutex {
	m, _ := pathLocks.LoadOrStore(abs, new(sync.Mutex))
	return m.(*sync.Mutex)
}

// Sink appends JSON lines to a file.
type Sink struct {
	path     string
	keepMeta bool
	fsync    bool

	f   *os.File
	mu  *sync.Mutex
	buf []byte
}

// Path is the file the sink writes (the configured path with {subtask}
// replaced).
func (s *Sink) Path() string { return s.path }

// Connect creates the parent directories and opens the file for appending.
func (s *Sink) Connect(ctx context.Context) error {
	if s.f != nil {
		return errors.New("file: already connected")
	}
	abs, err := filepath.Abs(s.path)
	if err != nil {
		return fmt.Errorf("file %q: %w", s.path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return fmt.Errorf("file %q: %w", s.path, err)
	}
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("file %q: %w", s.path, err)
	}
	s.f, s.mu = f, lockFor(abs)
	return nil
}

// Write appends the rows with one write call and, unless fsync is off,
// syncs the file before returning.
func (s *Sink) Write(ctx context.Context, rec arrow.RecordBatch) error {
	if s.f == nil {
		return errors.New("file: Write before Connect")
	}
	if rec.NumRows() == 0 {
		return nil
	}
	if !s.keepMeta {
		rec = connectors.StripMeta(rec)
		defer rec.Release()
	}
	buf, err := rowjson.AppendRecord(s.buf[:0], rec)
	if err != nil {
		return fmt.Errorf("file %q: %w", s.path, err)
	}
	if cap(buf) <= 4<<20 {
		s.buf = buf // keep moderate buffers for reuse
	}
	s.mu.Lock()
	_, err = s.f.Write(buf)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("file %q: %w", s.path, err)
	}
	if s.fsync {
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("file %q: fsync: %w", s.path, err)
		}
	}
	return nil
}

// Close closes the file.
func (s *Sink) Close(ctx context.Context) error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("file %q: %w", s.path, err)
	}
	return nil
}

var (
	_ connectors.Output = (*Output)(nil)
	_ connectors.Sink   = (*Sink)(nil)
)
