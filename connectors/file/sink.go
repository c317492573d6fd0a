package file

import (
	"bytes"
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
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("file %q: %w", s.path, err)
	}
	mu := lockFor(abs)
	mu.Lock()
	err = cutTornLine(f)
	mu.Unlock()
	if err != nil {
		f.Close()
		return fmt.Errorf("file %q: %w", s.path, err)
	}
	s.f, s.mu = f, mu
	return nil
}

// cutTornLine removes a last line without its newline: the rest of a write
// that a crash interrupted. Its rows were never acknowledged, so they are
// delivered again; keeping the fragment would glue it to the next line.
func cutTornLine(f *os.File) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	size := fi.Size()
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	// Scan back in blocks for the previous newline.
	buf := make([]byte, 64<<10)
	end := size
	for end > 0 {
		start := max(end-int64(len(buf)), 0)
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil {
			return err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return truncate(f, start+int64(i)+1)
		}
		end = start
	}
	return truncate(f, 0)
}

func truncate(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
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
