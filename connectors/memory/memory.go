// Package memory provides in-process sources and sinks for tests and
// examples: a partitioned Source fed with Arrow batches (all at once, or
// appended while the job runs), and a Sink that captures what a job writes.
//
// A service that feeds a job from Go uses push.New instead: it
// blocks under backpressure, acknowledges durably, keeps nothing once
// processed, and its offsets carry across process restarts. A memory
// Source keeps every batch, and its offsets count the rows of a partition
// from 0 in every process, so a Source made again (in a new process) must
// be given the same rows in the same order to restore a job's positions:
// it is a replay of the input, as a Kafka topic would be. A restore to a
// position past the rows the Source holds when the job connects is
// refused while the Source is open (NewSource): the position was written
// for other rows, and seeking there would skip rows appended after the
// connect.
//
// Input type "memory", config:
//
//	{schema?: [{name, type, unit?, nullable?}], partitions?: N, rows?: [{...}, …], batch_size?: N}
//
// Declaratively, rows are JSON objects assigned to partition i mod N and cut
// into batches of batch_size (default 1024), like the file source. From Go,
// pass a *Source to the builder instead; its batches are used as they are.
// Output type "memory" captures into a *Sink bound by the builder, or into a
// private buffer for declarative specs. A spec without config (as ArkFlow v1
// writes it) is an empty, bounded source. ArkFlow's form, {messages: [a,
// b]}, gives one row a message in a string column "value" (ArkFlow's
// __value__ is binary), one row a batch.
package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

// RawValueColumn is the column of ArkFlow's form (SourceConfig.Messages).
const RawValueColumn = "value"

func init() {
	connectors.RegisterInput("memory", buildInput)
	connectors.RegisterOutput("memory", buildOutput)
}

// SourceConfig is the memory input's spec config.
type SourceConfig struct {
	Schema     connectors.Schema `json:"schema,omitempty"`
	Partitions int               `json:"partitions,omitempty"`
	Rows       []json.RawMessage `json:"rows,omitempty"`
	BatchSize  int               `json:"batch_size,omitempty"`
	// Messages is ArkFlow's form: each is a row whose string column
	// "value" holds it (schema and rows must be absent); batch_size then
	// defaults to 1, one row a batch as in ArkFlow.
	Messages []string `json:"messages,omitempty"`
}

// Source is an in-memory, partitioned input. Batches appended to a
// partition are delivered in order, with __meta_source, __meta_partition
// and __meta_offset (the row's index in its partition) added. The source is
// bounded once closed: readers end after the last batch. A Source may be
// read by several runs of a job (restarts) in one process; each run seeks
// to its positions, skipping the rows before them. While it is open, a
// restore to a position past the rows it holds is refused (the package
// doc says why). It is safe for concurrent use.
type Source struct {
	schema *arrow.Schema
	mu     sync.Mutex
	parts  [][]arrow.RecordBatch
	closed bool
	notify chan struct{}
}

// NewSource returns an open source with the given number of partitions for
// batches of schema. Append adds batches; Close ends the input.
func NewSource(schema *arrow.Schema, partitions int) *Source {
	if partitions < 1 {
		partitions = 1
	}
	return &Source{schema: schema, parts: make([][]arrow.RecordBatch, partitions), notify: make(chan struct{})}
}

// NewSourceFrom returns a closed source whose partition i holds parts[i].
// All batches must share one schema.
func NewSourceFrom(parts ...[]arrow.RecordBatch) (*Source, error) {
	var schema *arrow.Schema
	for _, p := range parts {
		for _, r := range p {
			if schema == nil {
				schema = r.Schema()
			} else if !schema.Equal(r.Schema()) {
				return nil, fmt.Errorf("memory: batches have different schemas: %s and %s", schema, r.Schema())
			}
		}
	}
	if schema == nil {
		return nil, fmt.Errorf("memory: NewSourceFrom needs at least one batch (use NewSource for an empty source)")
	}
	s := NewSource(schema, len(parts))
	for i, p := range parts {
		for _, r := range p {
			if err := s.Append(i, r); err != nil {
				return nil, err
			}
		}
	}
	s.Close()
	return s, nil
}

// InputType implements the builder's source component.
func (s *Source) InputType() string { return "memory" }

// MarshalJSON writes the source's spec config: its schema and partition
// count (the batches themselves stay in Go).
func (s *Source) MarshalJSON() ([]byte, error) {
	decl, err := connectors.FromArrow(s.schema)
	if err != nil {
		return nil, err
	}
	return json.Marshal(SourceConfig{Schema: decl, Partitions: len(s.parts)})
}

// Schema returns the schema of the appended batches (without metadata).
func (s *Source) Schema() *arrow.Schema { return s.schema }

// Append adds a batch to a partition. The source retains it.
func (s *Source) Append(partition int, rec arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memory: Append after Close")
	}
	if partition < 0 || partition >= len(s.parts) {
		return fmt.Errorf("memory: partition %d out of range [0, %d)", partition, len(s.parts))
	}
	if !s.schema.Equal(rec.Schema()) {
		return fmt.Errorf("memory: batch schema %s differs from the source's %s", rec.Schema(), s.schema)
	}
	rec.Retain()
	s.parts[partition] = append(s.parts[partition], rec)
	close(s.notify)
	s.notify = make(chan struct{})
	return nil
}

// Close ends the input: readers finish after the last batch.
func (s *Source) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.notify)
		s.notify = make(chan struct{})
	}
}

type input struct {
	src    *Source
	schema *arrow.Schema
}

func (in *input) Schema() *arrow.Schema { return in.schema }
func (in *input) Partitions() int       { return len(in.src.parts) }
func (in *input) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	r := &reader{src: in.src, schema: in.schema, op: info.OperatorID, tracker: connectors.NewTracker(""), seek: map[int32]int64{}}
	for p := range in.src.parts {
		if p%info.Parallelism == info.Subtask {
			r.parts = append(r.parts, p)
		}
	}
	r.next = make([]cursor, len(r.parts))
	return r, nil
}

func buildInput(bc connectors.BuildContext) (connectors.Input, error) {
	var cfg SourceConfig
	if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
		return nil, err
	}
	if src, ok := bc.Bound.(*Source); ok {
		return &input{src: src, schema: connectors.WithMeta(src.schema)}, nil
	}
	var f connectors.Fields
	if cfg.Messages != nil {
		arkflowMessages(&cfg, &f)
	}
	if cfg.Partitions < 0 {
		f.Add("partitions", "must be >= 1 (got %d)", cfg.Partitions)
	}
	if cfg.BatchSize < 0 {
		f.Add("batch_size", "must be >= 1 (got %d)", cfg.BatchSize)
	}
	parts := max(cfg.Partitions, 1)
	size := cfg.BatchSize
	if size == 0 {
		size = 1024
	}
	var schema *arrow.Schema
	if len(cfg.Schema) == 0 {
		if len(cfg.Rows) > 0 {
			f.Add("schema", "is required when rows are given")
		}
		schema = arrow.NewSchema(nil, nil)
	} else {
		s, err := cfg.Schema.Arrow("schema")
		f.Merge("", err)
		schema = s
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	src := NewSource(schema, parts)
	batches, err := decodeRows(schema, cfg.Rows, parts, size)
	if err != nil {
		return nil, err
	}
	for p, bs := range batches {
		for _, b := range bs {
			_ = src.Append(p, b)
			b.Release()
		}
	}
	src.Close()
	return &input{src: src, schema: connectors.WithMeta(schema)}, nil
}

type cursor struct {
	batch  int   // next batch index in the partition
	offset int64 // offset of that batch's first row
}

type reader struct {
	src     *Source
	schema  *arrow.Schema
	op      string
	parts   []int
	next    []cursor
	turn    int
	tracker *connectors.Tracker
	seek    map[int32]int64
}

func (r *reader) Connect(context.Context) error {
	r.src.mu.Lock()
	closed := r.src.closed
	for _, p := range r.parts {
		var held int64
		for _, b := range r.src.parts[p] {
			held += b.NumRows()
		}
		if off := r.seek[int32(p)]; !closed && off > held {
			r.src.mu.Unlock()
			return fmt.Errorf("memory source %s: restoring partition %d to offset %d, but this Source holds only %d rows of it: "+
				"the position was written for other rows (another process), and seeking there would skip rows appended from now on; "+
				"a memory Source's rows do not outlive its process: feed services through push.New, or start without restoring", r.op, p, off, held)
		}
	}
	r.src.mu.Unlock()
	for _, p := range r.parts {
		r.tracker.Start(int32(p), r.seek[int32(p)])
	}
	return nil
}

func (r *reader) Positions() []connectors.Position { return r.tracker.Positions() }

func (r *reader) Seek(ps []connectors.Position) error {
	for _, p := range ps {
		r.seek[p.Partition] = p.Offset
	}
	return nil
}

func (r *reader) Read(ctx context.Context) (connectors.Batch, error) {
	for {
		r.src.mu.Lock()
		closed, notify := r.src.closed, r.src.notify
		for i := 0; i < len(r.parts); i++ {
			k := (r.turn + i) % len(r.parts)
			p := r.parts[k]
			c := &r.next[k]
			// Skip whole batches before the seek position (all of them: a
			// `continue` here would move on to the next partition and, when
			// that is the last one, end or wait with this one unread).
			for c.batch < len(r.src.parts[p]) && r.seek[int32(p)]-c.offset >= r.src.parts[p][c.batch].NumRows() {
				c.offset += r.src.parts[p][c.batch].NumRows()
				c.batch++
			}
			if c.batch >= len(r.src.parts[p]) {
				continue
			}
			rec := r.src.parts[p][c.batch]
			start := c.offset
			c.batch++
			c.offset += rec.NumRows()
			// Skip rows before the seek position.
			skip := r.seek[int32(p)] - start
			rec.Retain()
			r.src.mu.Unlock()
			r.turn = k + 1
			if skip > 0 {
				sl := rec.NewSlice(skip, rec.NumRows())
				rec.Release()
				rec = sl
				start += skip
			}
			out := connectors.AddMeta(r.schema, rec, r.op, int32(p), start)
			rec.Release()
			return connectors.Batch{Record: out, Partition: p, Ack: r.tracker.Deliver(int32(p), start, start+out.NumRows())}, nil
		}
		r.src.mu.Unlock()
		if closed {
			return connectors.Batch{}, connectors.ErrEndOfInput
		}
		select {
		case <-ctx.Done():
			return connectors.Batch{}, ctx.Err()
		case <-notify:
		}
	}
}

func (r *reader) Close(context.Context) error { return nil }

// arkflowMessages turns ArkFlow's messages into rows of one string
// column "value", one a batch unless batch_size says otherwise.
func arkflowMessages(cfg *SourceConfig, f *connectors.Fields) {
	if len(cfg.Schema) > 0 || len(cfg.Rows) > 0 {
		f.Add("messages", "is ArkFlow's form and excludes schema and rows: each message is a row of one string column %q", RawValueColumn)
		return
	}
	cfg.Schema = connectors.Schema{{Name: RawValueColumn, Type: "string"}}
	for _, m := range cfg.Messages {
		row, _ := json.Marshal(map[string]string{RawValueColumn: m})
		cfg.Rows = append(cfg.Rows, row)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 1
	}
}

// decodeRows decodes declarative rows: row i goes to partition i mod parts;
// each partition is cut into batches of size rows.
func decodeRows(schema *arrow.Schema, rows []json.RawMessage, parts, size int) ([][]arrow.RecordBatch, error) {
	out := make([][]arrow.RecordBatch, parts)
	if len(rows) == 0 {
		return out, nil
	}
	dec, err := rowjson.NewDecoder(schema)
	if err != nil {
		return nil, connectors.FieldError("schema", "%v", err)
	}
	mem := memory.DefaultAllocator
	type pending struct {
		bs []array.Builder
		n  int
	}
	cur := make([]pending, parts)
	newBuilders := func() []array.Builder {
		bs := make([]array.Builder, schema.NumFields())
		for i, f := range schema.Fields() {
			bs[i] = array.NewBuilder(mem, f.Type)
		}
		return bs
	}
	flush := func(p int) {
		if cur[p].n == 0 {
			return
		}
		cols := make([]arrow.Array, len(cur[p].bs))
		for i, b := range cur[p].bs {
			cols[i] = b.NewArray()
			b.Release()
		}
		out[p] = append(out[p], array.NewRecordBatch(schema, cols, int64(cur[p].n)))
		for _, c := range cols {
			c.Release()
		}
		cur[p] = pending{}
	}
	var f connectors.Fields
	for i, row := range rows {
		p := i % parts
		if cur[p].bs == nil {
			cur[p].bs = newBuilders()
		}
		if err := dec.DecodeLine(row, cur[p].bs); err != nil {
			f.Add(fmt.Sprintf("rows[%d]", i), "%v", err)
			continue
		}
		cur[p].n++
		if cur[p].n == size {
			flush(p)
		}
	}
	for p := range cur {
		flush(p)
	}
	return out, f.Err()
}
