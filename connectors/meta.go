package connectors

import (
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Metadata columns sources add to their rows. Sinks drop every
// column that starts with MetaPrefix unless configured to keep them.
const (
	MetaPrefix    = "__meta_"
	MetaSource    = "__meta_source"    // string: the source operator ID
	MetaTopic     = "__meta_topic"     // string: Kafka topic
	MetaPartition = "__meta_partition" // int32: source partition
	MetaOffset    = "__meta_offset"    // int64: offset in the partition
	MetaKey       = "__meta_key"       // binary: record key
	MetaTimestamp = "__meta_timestamp" // timestamp(ms): record timestamp
)

// IsMeta reports whether a column name is a metadata column.
func IsMeta(name string) bool { return strings.HasPrefix(name, MetaPrefix) }

// MetaFields are the metadata columns of sources that have partitions and
// offsets (file, generate, memory).
func MetaFields() []arrow.Field {
	return []arrow.Field{
		{Name: MetaSource, Type: arrow.BinaryTypes.String},
		{Name: MetaPartition, Type: arrow.PrimitiveTypes.Int32},
		{Name: MetaOffset, Type: arrow.PrimitiveTypes.Int64},
	}
}

// WithMeta returns s with the standard metadata columns appended.
func WithMeta(s *arrow.Schema) *arrow.Schema {
	fields := append(append([]arrow.Field(nil), s.Fields()...), MetaFields()...)
	return arrow.NewSchema(fields, nil)
}

// StripMeta returns rec without its metadata columns. When there are none it
// returns rec itself, retained; the caller releases the result either way.
func StripMeta(rec arrow.RecordBatch) arrow.RecordBatch {
	keep := make([]int, 0, rec.NumCols())
	for i, f := range rec.Schema().Fields() {
		if !IsMeta(f.Name) {
			keep = append(keep, i)
		}
	}
	if len(keep) == int(rec.NumCols()) {
		rec.Retain()
		return rec
	}
	return Project(rec, keep)
}

// Project returns a record with the given columns of rec, in that order.
func Project(rec arrow.RecordBatch, cols []int) arrow.RecordBatch {
	if p, ok := rec.(interface {
		Project([]int) (arrow.RecordBatch, bool)
	}); ok {
		if out, ok := p.Project(cols); ok {
			return out
		}
	}
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		fields[i] = rec.Schema().Field(c)
		arrs[i] = rec.Column(c)
	}
	md := rec.Schema().Metadata()
	return newRecord(arrow.NewSchema(fields, &md), arrs, rec.NumRows())
}

// StripMetaSchema returns s without metadata columns.
func StripMetaSchema(s *arrow.Schema) *arrow.Schema {
	var fields []arrow.Field
	for _, f := range s.Fields() {
		if !IsMeta(f.Name) {
			fields = append(fields, f)
		}
	}
	return arrow.NewSchema(fields, nil)
}

// MetaArrays builds the standard metadata columns for n rows of one
// partition whose first row has offset start: __meta_source (source, on
// every row), __meta_partition and __meta_offset (start, start+1, …). It
// fills the buffers directly, without per-row builder calls. The caller
// releases the arrays.
func MetaArrays(source string, partition int32, start int64, n int) []arrow.Array {
	offs := make([]int32, n+1)
	data := make([]byte, 0, n*len(source))
	for i := 0; i < n; i++ {
		data = append(data, source...)
		offs[i+1] = int32(len(data))
	}
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = partition
	}
	offsets := make([]int64, n)
	for i := range offsets {
		offsets[i] = start + int64(i)
	}
	src := array.NewStringData(array.NewData(arrow.BinaryTypes.String, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs)), memory.NewBufferBytes(data)}, nil, 0, 0))
	part := array.NewInt32Data(array.NewData(arrow.PrimitiveTypes.Int32, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(parts))}, nil, 0, 0))
	off := array.NewInt64Data(array.NewData(arrow.PrimitiveTypes.Int64, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(offsets))}, nil, 0, 0))
	return []arrow.Array{src, part, off}
}

// AddMeta returns rec with the standard metadata columns of MetaArrays
// appended, as a batch of schema (rec's schema plus MetaFields, as
// WithMeta makes it). rec stays the caller's; the result shares its
// columns.
func AddMeta(schema *arrow.Schema, rec arrow.RecordBatch, source string, partition int32, start int64) arrow.RecordBatch {
	if w, ok := rec.(interface {
		WithMeta(*arrow.Schema, string, int32, int64, func() []arrow.Array) (arrow.RecordBatch, bool)
	}); ok {
		// A typed batch makes its metadata columns when one is read.
		n := int(rec.NumRows())
		if out, ok := w.WithMeta(schema, source, partition, start, func() []arrow.Array { return MetaArrays(source, partition, start, n) }); ok {
			return out
		}
	}
	meta := MetaArrays(source, partition, start, int(rec.NumRows()))
	cols := append(append(make([]arrow.Array, 0, len(rec.Columns())+len(meta)), rec.Columns()...), meta...)
	out := array.NewRecordBatch(schema, cols, rec.NumRows())
	for _, c := range meta {
		c.Release()
	}
	return out
}
