package redis

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unsafe"

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
		in, err := newInput(cfg, explicitZero(bc.Config, "batch_size", "redis_type.block_ms"))
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

// input is a validated Redis input.
type input struct {
	cfg      SourceConfig
	declared *arrow.Schema // value columns
	schema   *arrow.Schema // value columns + metadata
	log      *slog.Logger
}

func newInput(cfg SourceConfig, zero map[string]bool) (*input, error) {
	if err := checkSource(&cfg, zero); err != nil {
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
	return &input{cfg: cfg, declared: declared, schema: msgrows.Schema(declared,
		arrow.Field{Name: connectors.MetaTopic, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: connectors.MetaTimestamp, Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true}), log: slog.New(slog.DiscardHandler)}, nil
}

// Schema is the value columns (the declared schema, or the binary "value"
// column of format raw) followed by __meta_source, __meta_partition,
// __meta_offset, __meta_topic (the stream, list or channel) and
// __meta_timestamp (a stream entry's time, from its ID; null otherwise).
func (in *input) Schema() *arrow.Schema { return in.schema }

// Partitions is the number of streams or lists; 1 for pub/sub (read by
// subtask 0).
func (in *input) Partitions() int {
	switch in.cfg.RedisType.Type {
	case TypeStream:
		return len(in.cfg.RedisType.Streams)
	case TypeList:
		return len(in.cfg.RedisType.List)
	}
	return 1
}

// NewSource returns the source of one subtask. It does no I/O.
func (in *input) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	par := max(info.Parallelism, 1)
	if info.Subtask < 0 || info.Subtask >= par {
		return nil, fmt.Errorf("redis: subtask %d out of range for parallelism %d", info.Subtask, par)
	}
	lg := info.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("connector", "redis")
	switch in.cfg.RedisType.Type {
	case TypeStream:
		return newStreamSource(in, info, par, lg), nil
	case TypeList:
		return newListSource(in, info, par, lg), nil
	}
	return newSubSource(in, info, lg), nil
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
func (b *rowBuilder) add(data []byte, source string, part int32, off int64, topic string, tsMS int64) error {
	if err := b.Add(data, source, part, off); err != nil {
		return err
	}
	b.Extra(0).(*array.StringBuilder).Append(topic)
	tb := b.Extra(1).(*array.TimestampBuilder)
	if tsMS < 0 {
		tb.AppendNull()
	} else {
		tb.Append(arrow.Timestamp(tsMS))
	}
	return nil
}

// addString is add with the payload as a string, without copying it:
// the decoder and the builders only read the bytes, and copy what they
// keep.
func (b *rowBuilder) addString(data string, source string, part int32, off int64, topic string, tsMS int64) error {
	return b.add(unsafe.Slice(unsafe.StringData(data), len(data)), source, part, off, topic, tsMS)
}

// Stream entry IDs as offsets. An ID is MS-SEQ (milliseconds, a sequence
// within them); its offset is MS·2^20 + SEQ, which keeps the IDs' order.
// It fits an int64 for SEQ < 2^20 and MS < 2^43 (until the year 2248);
// other IDs are refused.
const (
	seqBits = 20
	maxSeq  = 1<<seqBits - 1
	maxMS   = 1<<43 - 1
)

// parseID returns the offset of a stream entry ID.
func parseID(id string) (int64, error) {
	msPart, seqPart, ok := strings.Cut(id, "-")
	if !ok {
		return 0, fmt.Errorf("stream entry ID %q is not MS-SEQ", id)
	}
	ms, err1 := strconv.ParseUint(msPart, 10, 64)
	seq, err2 := strconv.ParseUint(seqPart, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stream entry ID %q is not MS-SEQ", id)
	}
	if ms > maxMS || seq > maxSeq {
		return 0, fmt.Errorf("stream entry ID %q does not fit the source's offsets (milliseconds below 2^43 and a sequence below 2^20 within one millisecond): the source cannot track it", id)
	}
	return int64(ms<<seqBits | seq), nil
}

// formatID returns the stream entry ID of an offset.
func formatID(off int64) string {
	return strconv.FormatInt(off>>seqBits, 10) + "-" + strconv.FormatInt(off&maxSeq, 10)
}

// idBefore returns the greatest possible entry ID below offset off's ID:
// what a group's last-delivered ID must be for its next read to start at
// off. Offset 0 gives "0-0" (read everything).
func idBefore(off int64) string {
	if off <= 0 {
		return "0-0"
	}
	ms, seq := off>>seqBits, off&maxSeq
	if seq > 0 {
		return strconv.FormatInt(ms, 10) + "-" + strconv.FormatInt(seq-1, 10)
	}
	return strconv.FormatInt(ms-1, 10) + "-18446744073709551615"
}

// decodeError is the error of a payload that did not decode, naming the
// message.
func decodeError(where string, err error) error {
	return fmt.Errorf("redis: %s: %w", where, err)
}

var _ connectors.Input = (*input)(nil)
