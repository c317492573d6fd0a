// Package msgrows builds the batches of sources that read one row per
// message (NATS, Redis, MQTT, WebSocket): the payload decoded as one JSON
// object into the declared columns (internal/rowjson's rules) or kept as
// bytes in a binary column, then __meta_source, __meta_partition and
// __meta_offset, then the connector's own metadata columns, which it
// appends itself (Extra) after each Add.
package msgrows

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

// Schema returns the batches' schema: the value columns, the three
// metadata columns every source has, then extra.
func Schema(values *arrow.Schema, extra ...arrow.Field) *arrow.Schema {
	fields := append([]arrow.Field(nil), values.Fields()...)
	fields = append(fields,
		arrow.Field{Name: connectors.MetaSource, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: connectors.MetaPartition, Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: connectors.MetaOffset, Type: arrow.PrimitiveTypes.Int64})
	return arrow.NewSchema(append(fields, extra...), nil)
}

// Builder builds the batches of one partition. Rows counts the rows added
// since the last Take; First and End are the offsets of the first and
// after the last of them.
type Builder struct {
	dec        *rowjson.Decoder // nil: raw
	rb         *array.RecordBuilder
	fields     []array.Builder
	n          int // value columns
	Rows       int
	First, End int64
}

// New returns a builder of batches of schema (Schema's), whose first
// values columns take the payload: decoded as JSON when json is set, else
// one binary column. reserve is the rows to make room for.
func New(schema *arrow.Schema, values int, json bool, reserve int) (*Builder, error) {
	b := &Builder{rb: array.NewRecordBuilder(memory.DefaultAllocator, schema), n: values}
	b.fields = b.rb.Fields()
	if json {
		dec, err := rowjson.NewDecoder(arrow.NewSchema(schema.Fields()[:values], nil))
		if err != nil {
			b.rb.Release()
			return nil, err
		}
		b.dec = dec
	}
	b.rb.Reserve(reserve)
	return b, nil
}

// JSON reports whether payloads are decoded as JSON.
func (b *Builder) JSON() bool { return b.dec != nil }

// Add appends a row: the payload into the value columns, then source,
// partition and offset. A payload that does not decode appends nothing
// and returns the decoder's error, which names the field. After a nil
// return the caller appends one value to every Extra column.
func (b *Builder) Add(data []byte, source string, part int32, off int64) error {
	if b.dec != nil {
		if err := b.dec.DecodeLine(data, b.fields); err != nil {
			return err
		}
	} else {
		if data == nil {
			data = []byte{} // an empty payload is an empty value, not a null one
		}
		b.fields[0].(*array.BinaryBuilder).Append(data)
	}
	b.fields[b.n].(*array.StringBuilder).Append(source)
	b.fields[b.n+1].(*array.Int32Builder).Append(part)
	b.fields[b.n+2].(*array.Int64Builder).Append(off)
	if b.Rows == 0 {
		b.First = off
	}
	b.End = off + 1
	b.Rows++
	return nil
}

// Extra returns the builder of the i-th column after the three metadata
// columns.
func (b *Builder) Extra(i int) array.Builder { return b.fields[b.n+3+i] }

// Take returns the rows added since the last Take as a batch (nil when
// there are none) and starts a new one.
func (b *Builder) Take() arrow.RecordBatch {
	if b.Rows == 0 {
		return nil
	}
	b.Rows = 0
	return b.rb.NewRecordBatch()
}

// Release frees the builder; it may be called more than once.
func (b *Builder) Release() {
	if b.rb != nil {
		b.rb.Release()
		b.rb = nil
	}
}
