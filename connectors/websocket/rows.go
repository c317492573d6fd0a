package websocket

import (
	"fmt"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/msgrows"
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
	return &input{cfg: cfg, declared: declared, schema: msgrows.Schema(declared, arrow.Field{Name: connectors.MetaTimestamp, Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}}), log: slog.New(slog.DiscardHandler)}, nil
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
type rowBuilder struct{ *msgrows.Builder }

func newRowBuilder(in *input) (*rowBuilder, error) {
	b, err := msgrows.New(in.schema, in.declared.NumFields(), in.cfg.Format == FormatJSON, 0)
	if err != nil {
		return nil, err
	}
	return &rowBuilder{b}, nil
}

// add appends one row: data decoded into the value columns, then the
// metadata. Data that does not decode appends nothing and returns the
// decoder's error, which names the field.
func (b *rowBuilder) add(data []byte, source string, off, atMS int64) error {
	if err := b.Add(data, source, 0, off); err != nil {
		return err
	}
	b.Extra(0).(*array.TimestampBuilder).Append(arrow.Timestamp(atMS))
	return nil
}

var _ connectors.Input = (*input)(nil)
