package websocket

import (
	"fmt"
	"log/slog"

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
		in, err := newInput(cfg, explicitZero(bc.Config))
		if in != nil && bc.Logger != nil {
			in.log = bc.Logger
		}
		return in, err
	})
}

// input is a validated WebSocket input.
type input struct {
	cfg      SourceConfig
	declared *arrow.Schema // value columns
	schema   *arrow.Schema // value columns + metadata
	log      *slog.Logger
}

func newInput(cfg SourceConfig, zero map[string]bool) (*input, error) {
	if err := cfg.check(zero); err != nil {
		return nil, err
	}
	declared := arrow.NewSchema([]arrow.Field{{Name: RawValueColumn, Type: arrow.BinaryTypes.Binary}}, nil)
	if cfg.Format == FormatJSON {
		s, err := cfg.Schema.Arrow("schema")
		if err != nil {
			return nil, err
		}
		declared = s
	}
	fields := append(append([]arrow.Field(nil), declared.Fields()...),
		arrow.Field{Name: connectors.MetaSource, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: connectors.MetaPartition, Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: connectors.MetaOffset, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: connectors.MetaTimestamp, Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}})
	return &input{cfg: cfg, declared: declared, schema: arrow.NewSchema(fields, nil), log: slog.New(slog.DiscardHandler)}, nil
}

// Schema is the value columns (the declared schema, or the binary "value"
// column of format raw) followed by __meta_source, __meta_partition,
// __meta_offset and __meta_timestamp (when the frame arrived).
func (in *input) Schema() *arrow.Schema { return in.schema }

// Partitions is 1: one connection, read by subtask 0.
func (in *input) Partitions() int { return 1 }

// NewSource returns the source of one subtask. It does no I/O.
func (in *input) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	par := max(info.Parallelism, 1)
	if info.Subtask < 0 || info.Subtask >= par {
		return nil, fmt.Errorf("websocket: subtask %d out of range for parallelism %d", info.Subtask, par)
	}
	lg := info.Logger
	if lg == nil {
		lg = in.log
	}
	return &source{in: in, info: info, log: lg.With("connector", Type), reads: info.Subtask == 0, tracker: connectors.NewTracker("")}, nil
}

// rowBuilder builds the batches, one row per frame (raw) or JSON line.
type rowBuilder struct {
	dec    *rowjson.Decoder // nil: format raw
	rb     *array.RecordBuilder
	fields []array.Builder
	n      int // value columns
	rows   int
	// first and end are the offsets of the first row and after the last.
	first, end int64
}

func newRowBuilder(in *input) (*rowBuilder, error) {
	b := &rowBuilder{rb: array.NewRecordBuilder(memory.DefaultAllocator, in.schema), n: in.declared.NumFields()}
	b.fields = b.rb.Fields()
	if in.cfg.Format == FormatJSON {
		dec, err := rowjson.NewDecoder(in.declared)
		if err != nil {
			b.rb.Release()
			return nil, err
		}
		b.dec = dec
	}
	return b, nil
}

// add appends one row: data decoded into the value columns, then the
// metadata. Data that does not decode appends nothing and returns the
// decoder's error, which names the field.
func (b *rowBuilder) add(data []byte, source string, off, atMS int64) error {
	if b.dec != nil {
		if err := b.dec.DecodeLine(data, b.fields); err != nil {
			return err
		}
	} else {
		if data == nil {
			data = []byte{} // an empty frame is an empty value, not a null one
		}
		b.fields[0].(*array.BinaryBuilder).Append(data)
	}
	n := b.n
	b.fields[n].(*array.StringBuilder).Append(source)
	b.fields[n+1].(*array.Int32Builder).Append(0)
	b.fields[n+2].(*array.Int64Builder).Append(off)
	b.fields[n+3].(*array.TimestampBuilder).Append(arrow.Timestamp(atMS))
	if b.rows == 0 {
		b.first = off
	}
	b.end = off + 1
	b.rows++
	return nil
}

// take returns the rows added since the last take as a batch and starts a
// new one.
func (b *rowBuilder) take() arrow.RecordBatch {
	b.rows = 0
	return b.rb.NewRecordBatch()
}

func (b *rowBuilder) release() {
	if b.rb != nil {
		b.rb.Release()
		b.rb = nil
	}
}

var _ connectors.Input = (*input)(nil)
