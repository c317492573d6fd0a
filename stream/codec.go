package stream

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/arrowjson"
)

// decodeInput decodes the __value__ payloads of an input's batch with its
// codec (json or debezium_json) into the batch's columns, keeping the
// input's __meta_* columns after them. It takes over rec.
func decodeInput(codec string, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	defer rec.Release()
	var dec arrow.RecordBatch
	var err error
	if codec == "debezium_json" {
		dec, err = arrowjson.DecodeDebezium(payloads(rec))
	} else {
		dec, err = arrowjson.Decode(rec, valueField, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("codec %s: %w", codec, err)
	}
	schema := rec.Schema()
	fields := append([]arrow.Field(nil), dec.Schema().Fields()...)
	cols := append([]arrow.Array(nil), dec.Columns()...)
	for i, f := range schema.Fields() {
		if connectors.IsMeta(f.Name) && !dec.Schema().HasField(f.Name) && dec.NumRows() == rec.NumRows() {
			fields = append(fields, f)
			cols = append(cols, rec.Column(i))
		}
	}
	defer dec.Release()
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, dec.NumRows()), nil
}

// payloads are the __value__ bytes of rec's rows (nil for a null).
func payloads(rec arrow.RecordBatch) [][]byte {
	i := rec.Schema().FieldIndices(valueField)
	if len(i) == 0 {
		return nil
	}
	out := make([][]byte, rec.NumRows())
	switch c := rec.Column(i[0]).(type) {
	case *array.Binary:
		for r := range out {
			if c.IsValid(r) {
				out[r] = c.Value(r)
			}
		}
	case *array.String:
		for r := range out {
			if c.IsValid(r) {
				out[r] = []byte(c.Value(r))
			}
		}
	}
	return out
}

// encodeOutput is an output's json codec: each row, without the
// __meta_* columns, as a JSON object in __value__ (replacing one the
// rows have). rec stays the caller's.
func encodeOutput(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	stripped := connectors.StripMeta(rec)
	defer stripped.Release()
	if stripped.Schema().HasField(valueField) {
		idx := stripped.Schema().FieldIndices(valueField)[0]
		keep := make([]int, 0, stripped.NumCols()-1)
		for i := range int(stripped.NumCols()) {
			if i != idx {
				keep = append(keep, i)
			}
		}
		p := connectors.Project(stripped, keep)
		defer p.Release()
		stripped = p
	}
	vals, err := arrowjson.Encode(stripped, nil)
	if err != nil {
		return nil, fmt.Errorf("codec json: %w", err)
	}
	b := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	defer b.Release()
	b.AppendValues(vals, nil)
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: valueField, Type: arrow.BinaryTypes.Binary}}, nil), []arrow.Array{col}, int64(len(vals))), nil
}
