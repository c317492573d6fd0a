package stream

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
)

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
	return nil, errors.New("not yet")
}

func decodeJSON(rec arrow.RecordBatch, valueField string) (arrow.RecordBatch, error) {
	return nil, errors.New("not yet")
}
