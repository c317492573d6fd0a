package nats

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
		in, err := newInput(cfg, explicitZero(bc.Config, "batch_size", "mode.ack_wait_ms", "mode.max_ack_pending"))
		if in != nil && bc.Logger != nil {
			in.log = bc.Logger
		}
		return in, err
	})
	connectors.RegisterOutput(Type, func(bc connectors.BuildContext, schema *arrow.Schema) (connectors.Output, error) {
		var cfg SinkConfig
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		return newOutput(cfg, schema)
	})
}

// input is a validated NATS input.
type input struct {
	cfg      SourceConfig
	declared *arrow.Schema // value columns
	schema   *arrow.Schema // value columns + metadata
	// log is the operator's logger (BuildContext.Logger).
	log *slog.Logger
}

func newInput(cfg SourceConfig, zero map[string]bool) (*input, error) {
	if err := checkSource(&cfg, zero); err != nil {
		return nil, err
	}
	var declared *arrow.Schema
	if cfg.Format == FormatJSON {
		s, err := cfg.Schema.Arrow("schema")
		if err != nil {
			return nil, err
		}
		declared = s
	} else {
		declared = arrow.NewSchema([]arrow.Field{{Name: RawValueColumn, Type: arrow.BinaryTypes.Binary}}, nil)
	}
	return &input{cfg: cfg, declared: declared, schema: msgrows.Schema(declared,
		arrow.Field{Name: connectors.MetaTopic, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: connectors.MetaTimestamp, Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true}), log: slog.New(slog.DiscardHandler)}, nil
}

// Schema is the value columns (the declared schema, or the binary "value"
// column of format raw) followed by __meta_source, __meta_partition,
// __meta_offset, __meta_topic (the message's subject) and
// __meta_timestamp (JetStream's timestamp of the message; null in core
// mode, whose messages have none).
func (in *input) Schema() *arrow.Schema { return in.schema }

// Partitions is, for JetStream, the number of subjects (1 without them);
// for core NATS 1, or 0 with a queue group: then every subtask subscribes
// and is a partition of its own, known only when the job runs.
func (in *input) Partitions() int {
	m := in.cfg.Mode
	switch {
	case m.Type == ModeJetStream:
		return max(len(m.Subjects), 1)
	case m.QueueGroup != "":
		return 0
	}
	return 1
}

// NewSource returns the source of one subtask. It does no I/O.
func (in *input) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	par := max(info.Parallelism, 1)
	if info.Subtask < 0 || info.Subtask >= par {
		return nil, fmt.Errorf("nats: subtask %d out of range for parallelism %d", info.Subtask, par)
	}
	lg := info.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("connector", "nats") // job, operator and subtask come with info.Logger
	if in.cfg.Mode.Type == ModeJetStream {
		return newJSSource(in, info, par, lg), nil
	}
	return newCoreSource(in, info, par, lg), nil
}

// rowBuilder builds the batches of one partition, one message a row.
type rowBuilder struct{ *msgrows.Builder }

func newRowBuilder(in *input) (*rowBuilder, error) {
	b, err := msgrows.New(in.schema, in.declared.NumFields(), in.cfg.Format == FormatJSON, min(in.cfg.BatchSize, 4096))
	if err != nil {
		return nil, err
	}
	return &rowBuilder{b}, nil
}

// add appends one message as a row: its payload decoded into the value
// columns, then the metadata. tsMS < 0 is a null timestamp. A payload
// that does not decode appends nothing and returns the decoder's error
// (which names the field).
func (b *rowBuilder) add(data []byte, source string, part int32, off int64, subject string, tsMS int64) error {
	if err := b.Add(data, source, part, off); err != nil {
		return err
	}
	b.Extra(0).(*array.StringBuilder).Append(subject)
	tb := b.Extra(1).(*array.TimestampBuilder)
	if tsMS < 0 {
		tb.AppendNull()
	} else {
		tb.Append(arrow.Timestamp(tsMS))
	}
	return nil
}

// decodeError is the error of a payload that did not decode, naming the
// message.
func decodeError(where string, err error) error {
	return fmt.Errorf("nats: %s: %w", where, err)
}

var _ connectors.Input = (*input)(nil)
