package mqtt

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/msgrows"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

// MetaMark is the metadata column of a QoS 1 message's mark: its packet
// identifier and a hash of its topic and payload (null for QoS 0). The
// source recognises a redelivery of a message it took by it, also after a
// crash, from the write-ahead log's rows.
const MetaMark = "__meta_mark"

func init() {
	connectors.RegisterInput(Type, func(bc connectors.BuildContext) (connectors.Input, error) {
		var cfg SourceConfig
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		in, err := newInput(cfg, explicitZero(bc.Config, "batch_size", "port"))
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
		return newOutput(cfg, schema, explicitZero(bc.Config, "port"))
	})
}

// input is a validated MQTT input.
type input struct {
	cfg      SourceConfig
	declared *arrow.Schema // value columns
	schema   *arrow.Schema // value columns + metadata
	shared   bool          // the topics are shared subscriptions
	log      *slog.Logger
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
		if _, err := rowjson.NewDecoder(s); err != nil {
			return nil, connectors.FieldError("schema", "%v", err)
		}
		declared = s
	} else {
		declared = arrow.NewSchema([]arrow.Field{{Name: RawValueColumn, Type: arrow.BinaryTypes.Binary}}, nil)
	}
	return &input{
		cfg: cfg, declared: declared, schema: msgrows.Schema(declared,
			arrow.Field{Name: connectors.MetaTopic, Type: arrow.BinaryTypes.String},
			arrow.Field{Name: MetaMark, Type: arrow.BinaryTypes.Binary, Nullable: true}),
		shared: strings.HasPrefix(cfg.Topics[0], "$share/"),
		log:    slog.New(slog.DiscardHandler),
	}, nil
}

// Schema is the value columns (the declared schema, or the binary "value"
// column of format raw) followed by __meta_source, __meta_partition,
// __meta_offset, __meta_topic (the message's topic) and __meta_mark.
func (in *input) Schema() *arrow.Schema { return in.schema }

// Partitions is 1 (subtask 0 subscribes), or 0 with shared
// subscriptions: then every subtask subscribes and is a partition of its
// own, known only when the job runs.
func (in *input) Partitions() int {
	if in.shared {
		return 0
	}
	return 1
}

// NewSource returns the source of one subtask. It does no I/O.
func (in *input) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	par := max(info.Parallelism, 1)
	if info.Subtask < 0 || info.Subtask >= par {
		return nil, fmt.Errorf("mqtt: subtask %d out of range for parallelism %d", info.Subtask, par)
	}
	lg := info.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return newSource(in, info, lg.With("connector", "mqtt")), nil
}

// rowBuilder builds the batches of one partition, one message a row.
type rowBuilder struct {
	*msgrows.Builder
	mark [10]byte
}

func newRowBuilder(in *input) (*rowBuilder, error) {
	b, err := msgrows.New(in.schema, in.declared.NumFields(), in.cfg.Format == FormatJSON, min(in.cfg.BatchSize, 4096))
	if err != nil {
		return nil, err
	}
	return &rowBuilder{Builder: b}, nil
}

// add appends one message as a row: its payload decoded into the value
// columns, then the metadata (hasMark false: a null mark). A payload that
// does not decode appends nothing and returns the decoder's error (which
// names the field).
func (b *rowBuilder) add(data []byte, source string, part int32, off int64, topic string, m mark, hasMark bool) error {
	if err := b.Add(data, source, part, off); err != nil {
		return err
	}
	b.Extra(0).(*array.StringBuilder).Append(topic)
	mb := b.Extra(1).(*array.BinaryBuilder)
	if hasMark {
		mb.Append(m.encode(b.mark[:0]))
	} else {
		mb.AppendNull()
	}
	return nil
}

// mark identifies a QoS 1 delivery: the packet identifier the broker
// gave it and a hash of its topic and payload. A redelivery carries the
// same packet identifier and the same topic and payload.
type mark struct {
	pid  uint16
	hash uint64
}

func markOf(topic string, payload []byte, pid uint16) mark {
	h := fnv.New64a()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write(payload)
	return mark{pid: pid, hash: h.Sum64()}
}

// encode appends the mark's 10 bytes (big endian) to b.
func (m mark) encode(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, m.pid)
	return binary.BigEndian.AppendUint64(b, m.hash)
}

// decodeMark reads a mark that encode wrote.
func decodeMark(b []byte) (mark, bool) {
	if len(b) != 10 {
		return mark{}, false
	}
	return mark{pid: binary.BigEndian.Uint16(b), hash: binary.BigEndian.Uint64(b[2:])}, true
}

// decodeError is the error of a payload that did not decode, naming the
// message.
func decodeError(where string, err error) error {
	return fmt.Errorf("mqtt: %s: %w", where, err)
}

var _ connectors.Input = (*input)(nil)
