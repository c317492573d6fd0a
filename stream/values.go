package stream

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// renameRaw returns rec with its raw payload column "value" named
// __value__ and typed binary, as ArkFlow's inputs deliver payloads. It
// takes over rec.
func renameRaw(rec arrow.RecordBatch) arrow.RecordBatch {
	defer rec.Release()
	schema := rec.Schema()
	idx := schema.FieldIndices("value")[0]
	fields := append([]arrow.Field(nil), schema.Fields()...)
	cols := append([]arrow.Array(nil), rec.Columns()...)
	f := fields[idx]
	f.Name = valueField
	switch col := cols[idx].(type) {
	case *array.String:
		data := array.NewData(arrow.BinaryTypes.Binary, col.Len(), col.Data().Buffers(), nil, col.NullN(), col.Data().Offset())
		cols[idx] = array.NewBinaryData(data)
		data.Release()
		defer cols[idx].Release()
		f.Type = arrow.BinaryTypes.Binary
	case *array.LargeString:
		data := array.NewData(arrow.BinaryTypes.LargeBinary, col.Len(), col.Data().Buffers(), nil, col.NullN(), col.Data().Offset())
		cols[idx] = array.NewLargeBinaryData(data)
		data.Release()
		defer cols[idx].Release()
		f.Type = arrow.BinaryTypes.LargeBinary
	}
	fields[idx] = f
	md := schema.Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows())
}

// streamSchema is the schema a stream sees of an input's rows: with the
// raw payload column renamed, when rawValue says so.
func streamSchema(c *Component, schema *arrow.Schema) *arrow.Schema {
	if !rawValue(c, schema) {
		return schema
	}
	fields := append([]arrow.Field(nil), schema.Fields()...)
	i := schema.FieldIndices("value")[0]
	fields[i].Name = valueField
	switch fields[i].Type.ID() {
	case arrow.STRING:
		fields[i].Type = arrow.BinaryTypes.Binary
	case arrow.LARGE_STRING:
		fields[i].Type = arrow.BinaryTypes.LargeBinary
	}
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md)
}
