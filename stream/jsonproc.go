package stream

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/arrowjson"
)

// jsonProcessor is json_to_arrow (the JSON objects of value_field become
// the batch's columns) or arrow_to_json (each row as a JSON object is
// appended as __value__), with internal/arrowjson's conversions.
type jsonProcessor struct {
	label, typ string
	cfg        fieldsConfig
}

func newJSONProcessor(label, typ string, cfg fieldsConfig) processor {
	return &jsonProcessor{label: label, typ: typ, cfg: cfg}
}

func (p *jsonProcessor) name() string { return p.label }
func (p *jsonProcessor) close()       {}

func (p *jsonProcessor) process(ctx context.Context, rec arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	var out arrow.RecordBatch
	var err error
	if p.typ == "json_to_arrow" {
		out, err = arrowjson.Decode(rec, p.cfg.ValueField, p.cfg.FieldsToInclude)
	} else {
		out, err = arrowjson.AppendValue(rec, p.cfg.FieldsToInclude)
	}
	if err != nil {
		return nil, err
	}
	return []arrow.RecordBatch{out}, nil
}

// decodeJSON is the json codec of a buffer's join: the JSON objects of
// valueField become the table's columns.
func decodeJSON(rec arrow.RecordBatch, valueField string) (arrow.RecordBatch, error) {
	return arrowjson.Decode(rec, valueField, nil)
}
