package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

func init() {
	connectors.RegisterInput(Type, func(bc connectors.BuildContext) (connectors.Input, error) {
		var cfg SourceConfig
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		return newInput(cfg, explicitZero(bc.Config, "partitions", "batch_size"))
	})
	connectors.RegisterOutput(Type, func(bc connectors.BuildContext, schema *arrow.Schema) (connectors.Output, error) {
		var cfg SinkConfig
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		return NewOutput(cfg, schema)
	})
}

// Input is a validated file input.
type Input struct {
	cfg      SourceConfig
	declared *arrow.Schema // the columns of a row
	schema   *arrow.Schema // declared plus the __meta_* columns

	// For the input_type form, declared and schema are read on first use.
	once      sync.Once
	schemaErr error
}

// NewInput checks cfg, applies its defaults and returns the input. It does
// no I/O. Errors name the config field at fault.
func NewInput(cfg SourceConfig) (*Input, error) { return newInput(cfg, nil) }

func newInput(cfg SourceConfig, zero map[string]bool) (*Input, error) {
	if err := checkSource(&cfg, zero); err != nil {
		return nil, err
	}
	if cfg.ArkFlow != nil {
		return &Input{cfg: cfg}, nil
	}
	declared, err := cfg.Schema.Arrow("schema")
	if err != nil {
		return nil, err
	}
	return &Input{cfg: cfg, declared: declared, schema: connectors.WithMeta(declared)}, nil
}

// Config returns the config with defaults applied.
func (in *Input) Config() SourceConfig { return in.cfg }

// Schema is the declared schema plus the __meta_* columns. In the
// input_type form the first call reads the file's columns (see the package
// documentation); when that fails, it is just the __meta_* columns and
// SchemaErr tells why.
func (in *Input) Schema() *arrow.Schema {
	in.load()
	return in.schema
}

// SchemaErr reads the file's columns in the input_type form, if not read
// yet, and returns the error of reading them: a field error naming
// input_type.path, for a missing, unreadable or corrupt file. It is nil
// for the path form, whose schema is declared.
func (in *Input) SchemaErr() error {
	in.load()
	return in.schemaErr
}

func (in *Input) load() {
	if in.cfg.ArkFlow == nil {
		return
	}
	in.once.Do(func() {
		it := in.cfg.ArkFlow
		declared, err := readSchema(it.Type, it.Path)
		if err != nil {
			var f connectors.Fields
			f.Add("input_type.path", "%v", err)
			in.schemaErr = f.Err()
			declared = arrow.NewSchema(nil, nil)
		}
		in.declared, in.schema = declared, connectors.WithMeta(declared)
	})
}

// Partitions is the configured number of partitions.
func (in *Input) Partitions() int { return in.cfg.Partitions }

// NewSource returns the source of one subtask. It does no I/O, except
// that in the input_type form it reads the file's columns if Schema has
// not, and returns SchemaErr.
func (in *Input) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	return in.newSource(info)
}

func (in *Input) newSource(info connectors.TaskInfo) (*Source, error) {
	if err := in.SchemaErr(); err != nil {
		return nil, err
	}
	par := max(info.Parallelism, 1)
	if info.Subtask < 0 || info.Subtask >= par {
		return nil, fmt.Errorf("file: subtask %d out of range for parallelism %d", info.Subtask, par)
	}
	n := in.cfg.Partitions
	s := &Source{
		in:      in,
		info:    info,
		parts:   make([]*partState, n),
		tracker: connectors.NewTracker(""),
		lim:     connectors.NewRateLimiter(in.cfg.RatePerSec),
	}
	s.batchSize = s.lim.BatchSize(in.cfg.BatchSize)
	for p := info.Subtask; p < n; p += par {
		s.parts[p] = &partState{id: int32(p)}
		s.assigned = append(s.assigned, p)
		s.tracker.Start(int32(p), 0)
	}
	return s, nil
}

// Source reads one subtask's partitions of a file. It implements
// connectors.Source, connectors.Positioner and connectors.ProgressReporter.
type Source struct {
	in       *Input
	info     connectors.TaskInfo
	parts    []*partState // by partition; nil when not assigned
	assigned []int
	tracker  *connectors.Tracker
	lim      *connectors.RateLimiter
	// batchSize is batch_size, or fewer rows when rate_per_sec allows
	// fewer within the limiter's linger.
	batchSize int

	connected bool
	f         *os.File
	r         *bufio.Reader
	long      []byte // a line longer than the reader's buffer
	dec       *rowjson.Decoder
	line      int64 // index of the next physical line
	eof       bool
	err       error // sticky read error
	ready     []ready
	// consumed counts the bytes of the lines read so far; pos publishes
	// it once per batch, and size is the file's size (0: not a regular
	// file), for Progress.
	consumed  int64
	pos, size atomic.Int64

	// The input_type form reads the file with rows; row is the index of
	// the next row it returns.
	rows rowReader
	row  int64
}

type partState struct {
	id    int32
	skip  int64 // lines below this index are skipped (Seek)
	rows  int64 // rows of the partition seen so far, skipped ones included
	rb    *array.RecordBuilder
	first int64 // line index of the first buffered row
	last  int64 // line index of the last buffered row

	// The input_type form buffers pendN rows in pend, taken from a
	// batch of the file by the row indices in take.
	pend  []arrow.RecordBatch
	pendN int64
	take  []int64
}

type ready struct {
	rec         arrow.RecordBatch
	part        int32
	first, last int64
}

// Seek makes the source skip, per partition, the lines whose index is
// below the position's offset. It must be called before Connect. Positions
// of partitions this subtask does not read are ignored.
func (s *Source) Seek(positions []connectors.Position) error {
	if s.connected {
		return errors.New("file: Seek after Connect")
	}
	for _, pos := range positions {
		if pos.Offset < 0 {
			return fmt.Errorf("file: negative offset %d for partition %d", pos.Offset, pos.Partition)
		}
	}
	for _, pos := range positions {
		if pos.Partition < 0 || int(pos.Partition) >= len(s.parts) || s.parts[pos.Partition] == nil {
			continue
		}
		s.parts[pos.Partition].skip = pos.Offset
		s.tracker.Start(pos.Partition, pos.Offset)
	}
	return nil
}

// Positions returns the acknowledged frontier of every partition this
// subtask reads: the line index to resume from.
func (s *Source) Positions() []connectors.Position { return s.tracker.Positions() }

// Connect opens the file.
func (s *Source) Connect(ctx context.Context) error {
	if s.connected {
		return errors.New("file: already connected")
	}
	if s.in.cfg.ArkFlow != nil {
		return s.connectRows()
	}
	dec, err := rowjson.NewDecoder(s.in.declared)
	if err != nil {
		return err
	}
	f, err := os.Open(s.in.cfg.Path)
	if err != nil {
		return fmt.Errorf("file %q: %w", s.in.cfg.Path, err)
	}
	s.connected = true
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		s.size.Store(fi.Size())
	}
	s.f, s.dec = f, dec
	s.r = bufio.NewReaderSize(f, 256<<10)
	return nil
}

// Read returns the next batch, or connectors.ErrEndOfInput after the last.
func (s *Source) Read(ctx context.Context) (connectors.Batch, error) {
	if !s.connected {
		return connectors.Batch{}, errors.New("file: Read before Connect")
	}
	for len(s.ready) == 0 {
		if s.err != nil {
			return connectors.Batch{}, s.err
		}
		if s.eof || len(s.assigned) == 0 {
			return connectors.Batch{}, connectors.ErrEndOfInput
		}
		if err := ctx.Err(); err != nil {
			return connectors.Batch{}, err
		}
		fill := s.fill
		if s.in.cfg.ArkFlow != nil {
			fill = s.fillRows
		}
		if err := fill(ctx); err != nil {
			s.err = err
		}
	}
	b := s.ready[0]
	if err := s.lim.Wait(ctx, int(b.rec.NumRows())); err != nil {
		return connectors.Batch{}, err // the batch stays first in line
	}
	s.ready[0] = ready{}
	s.ready = s.ready[1:]
	return connectors.Batch{
		Record:    b.rec,
		Partition: int(b.part),
		Ack:       s.tracker.Deliver(b.part, b.first, b.last+1),
	}, nil
}

// fill reads lines until at least one batch is ready, the file ends, or
// ctx is done.
func (s *Source) fill(ctx context.Context) error {
	defer func() { s.pos.Store(s.consumed) }()
	n := int64(len(s.parts))
	bs := int64(s.batchSize)
	for i := 0; len(s.ready) == 0; i++ {
		if i%1024 == 1023 && ctx.Err() != nil {
			return nil // Read reports ctx.Err()
		}
		line, err := s.readLine()
		if err == io.EOF {
			s.eof = true
			for _, p := range s.assigned {
				s.flush(s.parts[p])
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("file %q: %w", s.in.cfg.Path, err)
		}
		idx := s.line
		s.line++
		ps := s.parts[idx%n]
		if ps == nil || rowjson.IsBlank(line) {
			continue
		}
		ps.rows++
		if idx < ps.skip {
			continue
		}
		if ps.rb == nil {
			ps.rb = array.NewRecordBuilder(memory.DefaultAllocator, s.in.schema)
			ps.rb.Reserve(s.batchSize)
		}
		fields := ps.rb.Fields()
		if err := s.dec.DecodeLine(line, fields); err != nil {
			return fmt.Errorf("file %q line %d: %w", s.in.cfg.Path, idx+1, err)
		}
		m := s.dec.NumFields()
		fields[m].(*array.StringBuilder).Append(s.info.OperatorID)
		fields[m+1].(*array.Int32Builder).Append(ps.id)
		fields[m+2].(*array.Int64Builder).Append(idx)
		if fields[0].Len() == 1 {
			ps.first = idx
		}
		ps.last = idx
		if ps.rows%bs == 0 {
			s.flush(ps)
		}
	}
	return nil
}

// flush queues the buffered rows of a partition as a batch.
func (s *Source) flush(ps *partState) {
	if ps.rb == nil || ps.rb.Field(0).Len() == 0 {
		return
	}
	s.ready = append(s.ready, ready{rec: ps.rb.NewRecordBatch(), part: ps.id, first: ps.first, last: ps.last})
}

// readLine returns the next physical line without its "\n" or "\r\n", or
// io.EOF. The slice is valid until the next call.
func (s *Source) readLine() ([]byte, error) {
	s.long = s.long[:0]
	for {
		b, err := s.r.ReadSlice('\n')
		s.consumed += int64(len(b))
		switch err {
		case nil:
			if len(s.long) > 0 {
				s.long = append(s.long, b...)
				b = s.long
			}
			return trimEOL(b), nil
		case bufio.ErrBufferFull:
			s.long = append(s.long, b...)
		case io.EOF:
			if len(s.long) > 0 || len(b) > 0 {
				s.long = append(s.long, b...)
				return trimEOL(s.long), nil
			}
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

func trimEOL(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	if len(b) > 0 && b[len(b)-1] == '\r' {
		b = b[:len(b)-1]
	}
	return b
}

// Progress reports the bytes of the file read so far (every subtask reads
// the whole file, skipping the lines of partitions it does not read) of
// the file's size (End 0 when it is not a regular file, such as a pipe).
// In the input_type form it reports rows: those read of the file's rows
// (End 0 when not known before the end: all formats but parquet). It is
// safe to call while Read runs.
func (s *Source) Progress() connectors.Progress {
	if s.in.cfg.ArkFlow != nil {
		return connectors.Progress{Position: s.pos.Load(), End: s.size.Load(), Unit: "rows"}
	}
	return connectors.Progress{Position: s.pos.Load(), End: s.size.Load(), Unit: "bytes"}
}

// Close closes the file and releases buffered rows.
func (s *Source) Close(ctx context.Context) error {
	for i := range s.ready {
		s.ready[i].rec.Release()
	}
	s.ready = nil
	for _, ps := range s.parts {
		if ps != nil && ps.rb != nil {
			ps.rb.Release()
			ps.rb = nil
		}
		if ps != nil {
			for _, r := range ps.pend {
				r.Release()
			}
			ps.pend, ps.pendN = nil, 0
		}
	}
	if s.rows != nil {
		err := s.rows.close()
		s.rows = nil
		return err
	}
	if s.f != nil {
		err := s.f.Close()
		s.f = nil
		return err
	}
	return nil
}

var (
	_ connectors.Input            = (*Input)(nil)
	_ connectors.Source           = (*Source)(nil)
	_ connectors.Positioner       = (*Source)(nil)
	_ connectors.ProgressReporter = (*Source)(nil)
)
