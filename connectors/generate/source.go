package generate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

func init() {
	connectors.RegisterInput(Type, func(bc connectors.BuildContext) (connectors.Input, error) {
		var cfg Config
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		return newInput(cfg, explicitZeros(bc.Config))
	})
}

// Input is a validated generate input.
type Input struct {
	cfg    Config
	gens   []*gen
	schema *arrow.Schema
}

// NewInput checks cfg, applies its defaults and returns the input. Errors
// name the config field at fault.
func NewInput(cfg Config) (*Input, error) { return newInput(cfg, nil) }

func newInput(cfg Config, zero map[string]bool) (*Input, error) {
	cfg.Fields = append([]Field(nil), cfg.Fields...)
	gens, err := check(&cfg, zero)
	if err != nil {
		return nil, err
	}
	fields := make([]arrow.Field, len(gens))
	for i, g := range gens {
		fields[i] = arrow.Field{Name: cfg.Fields[i].Name, Type: g.dt, Nullable: g.nullable}
	}
	return &Input{cfg: cfg, gens: gens, schema: connectors.WithMeta(arrow.NewSchema(fields, nil))}, nil
}

// Config returns the config with defaults applied.
func (in *Input) Config() Config { return in.cfg }

// Schema is the generated columns plus the __meta_* columns.
func (in *Input) Schema() *arrow.Schema { return in.schema }

// Partitions is the configured number of partitions.
func (in *Input) Partitions() int { return in.cfg.Partitions }

// NewSource returns the source of one subtask.
func (in *Input) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	par := max(info.Parallelism, 1)
	if info.Subtask < 0 || info.Subtask >= par {
		return nil, fmt.Errorf("generate: subtask %d out of range for parallelism %d", info.Subtask, par)
	}
	s := &Source{
		in:      in,
		info:    info,
		tracker: connectors.NewTracker(""),
		lim:     connectors.NewRateLimiter(in.cfg.RatePerSec),
	}
	s.batchSize = s.lim.BatchSize(in.cfg.BatchSize)
	for p := info.Subtask; p < in.cfg.Partitions; p += par {
		s.parts = append(s.parts, &partState{id: int32(p)})
		s.tracker.Start(int32(p), 0)
	}
	return s, nil
}

// Source generates one subtask's partitions. It implements
// connectors.Source, connectors.Positioner and connectors.ProgressReporter.
type Source struct {
	in      *Input
	info    connectors.TaskInfo
	parts   []*partState
	next    int // round-robin index into parts
	tracker *connectors.Tracker
	lim     *connectors.RateLimiter
	// batchSize is batch_size, or fewer rows when rate_per_sec allows
	// fewer within the limiter's linger.
	batchSize int

	connected bool
	srcOffs   []int32 // __meta_source offsets for a full batch
	srcData   []byte  // __meta_source bytes for a full batch
	pending   *connectors.Batch
	pendingN  int
	// read counts the rows of the subtask's partitions delivered so far,
	// from offset 0 (sought offsets included), for Progress.
	read atomic.Int64
}

type partState struct {
	id       int32
	offset   int64 // next row
	partCol  []int32
	finished bool
}

// Seek makes the partitions resume at the given offsets. It must be called
// before Connect. Positions of partitions this subtask does not read are
// ignored.
func (s *Source) Seek(positions []connectors.Position) error {
	if s.connected {
		return errors.New("generate: Seek after Connect")
	}
	for _, pos := range positions {
		if pos.Offset < 0 {
			return fmt.Errorf("generate: negative offset %d for partition %d", pos.Offset, pos.Partition)
		}
	}
	for _, pos := range positions {
		for _, ps := range s.parts {
			if ps.id == pos.Partition {
				ps.offset = pos.Offset
				s.tracker.Start(ps.id, pos.Offset)
			}
		}
	}
	return nil
}

// Positions returns the acknowledged frontier of every partition this
// subtask reads: the offset to resume from.
func (s *Source) Positions() []connectors.Position { return s.tracker.Positions() }

// Connect prepares the source; it does no I/O.
func (s *Source) Connect(ctx context.Context) error {
	if s.connected {
		return errors.New("generate: already connected")
	}
	s.connected = true
	var from int64
	for _, ps := range s.parts {
		from += ps.offset
	}
	s.read.Store(from)
	bs := s.batchSize
	id := s.info.OperatorID
	s.srcOffs = make([]int32, bs+1)
	s.srcData = make([]byte, 0, bs*len(id))
	for i := 0; i < bs; i++ {
		s.srcData = append(s.srcData, id...)
		s.srcOffs[i+1] = int32(len(s.srcData))
	}
	for _, ps := range s.parts {
		ps.partCol = make([]int32, bs)
		for i := range ps.partCol {
			ps.partCol[i] = ps.id
		}
	}
	return nil
}

// Read returns the next batch, round-robin over the subtask's partitions,
// or connectors.ErrEndOfInput when every partition has delivered count
// rows (never, when count is 0).
func (s *Source) Read(ctx context.Context) (connectors.Batch, error) {
	if !s.connected {
		return connectors.Batch{}, errors.New("generate: Read before Connect")
	}
	if err := ctx.Err(); err != nil {
		return connectors.Batch{}, err
	}
	if s.pending == nil {
		ps, o0, n := s.pick()
		if ps == nil {
			return connectors.Batch{}, connectors.ErrEndOfInput
		}
		s.pending = &connectors.Batch{Record: s.batch(ps, o0, n), Partition: int(ps.id)}
		s.pendingN = n
	}
	if err := s.lim.Wait(ctx, s.pendingN); err != nil {
		return connectors.Batch{}, err // the batch stays next
	}
	b := *s.pending
	s.pending = nil
	s.read.Add(int64(s.pendingN))
	off := b.Record.Column(int(b.Record.NumCols()) - 1).(*array.Int64)
	b.Ack = s.tracker.Deliver(int32(b.Partition), off.Value(0), off.Value(off.Len()-1)+1)
	return b, nil
}

// pick chooses the partition of the next batch and its rows [o0, o0+n).
func (s *Source) pick() (*partState, int64, int) {
	count := s.in.cfg.Count
	bs := int64(s.batchSize)
	for range s.parts {
		ps := s.parts[s.next]
		s.next = (s.next + 1) % len(s.parts)
		if ps.finished {
			continue
		}
		o0 := ps.offset
		end := (o0/bs + 1) * bs // batches are aligned chunks of batchSize
		if end < o0 {           // overflow at the end of int64
			end = o0 + 1
		}
		if count > 0 && end > count {
			end = count
		}
		if end <= o0 {
			ps.finished = true
			continue
		}
		ps.offset = end
		if count > 0 && end >= count {
			ps.finished = true
		}
		return ps, o0, int(end - o0)
	}
	return nil, 0, 0
}

func (s *Source) batch(ps *partState, o0 int64, n int) arrow.RecordBatch {
	cfg := &s.in.cfg
	cols := make([]arrow.Array, 0, len(s.in.gens)+3)
	for _, g := range s.in.gens {
		cols = append(cols, g.column(cfg.Seed, ps.id, o0, n))
	}
	offs := make([]int64, n)
	for i := range offs {
		offs[i] = o0 + int64(i)
	}
	idLen := len(s.info.OperatorID)
	cols = append(cols,
		makeArray(arrow.BinaryTypes.String, n, []*memory.Buffer{nil,
			memory.NewBufferBytes(castBytes(s.srcOffs[:n+1])),
			memory.NewBufferBytes(s.srcData[:n*idLen])}, 0),
		makeArray(arrow.PrimitiveTypes.Int32, n, []*memory.Buffer{nil, memory.NewBufferBytes(castBytes(ps.partCol[:n]))}, 0),
		makeArray(arrow.PrimitiveTypes.Int64, n, []*memory.Buffer{nil, memory.NewBufferBytes(castBytes(offs))}, 0),
	)
	rec := array.NewRecordBatch(s.in.schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// Progress reports the rows delivered of the subtask's partitions, counted
// from offset 0, of count × those partitions (End 0 when count is 0:
// unbounded). It is safe to call while Read runs.
func (s *Source) Progress() connectors.Progress {
	p := connectors.Progress{Position: s.read.Load(), Unit: "rows"}
	if c := s.in.cfg.Count; c > 0 {
		p.End = c * int64(len(s.parts))
	}
	return p
}

// Close releases a batch that was generated but not delivered.
func (s *Source) Close(ctx context.Context) error {
	if s.pending != nil {
		s.pending.Record.Release()
		s.pending = nil
	}
	return nil
}

var (
	_ connectors.Input            = (*Input)(nil)
	_ connectors.Source           = (*Source)(nil)
	_ connectors.Positioner       = (*Source)(nil)
	_ connectors.ProgressReporter = (*Source)(nil)
)
