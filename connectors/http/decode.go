package httpconn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

// bodyDecoder turns request bodies into batches of the declared schema.
// It is not safe for concurrent use: the server keeps a pool of them.
type bodyDecoder struct {
	format string
	dec    *rowjson.Decoder // nil: format raw
	rb     *array.RecordBuilder
	fields []array.Builder
}

func newBodyDecoder(format string, schema *arrow.Schema) (*bodyDecoder, error) {
	d := &bodyDecoder{format: format, rb: array.NewRecordBuilder(memory.DefaultAllocator, schema)}
	d.fields = d.rb.Fields()
	if format != FormatRaw {
		dec, err := rowjson.NewDecoder(schema)
		if err != nil {
			d.rb.Release()
			return nil, err
		}
		d.dec = dec
	}
	return d, nil
}

// decode returns the rows of body as a batch (the caller releases it), or
// an error naming the element or line and the field; then nothing of the
// body is kept.
func (d *bodyDecoder) decode(body []byte) (arrow.RecordBatch, error) {
	var err error
	switch d.format {
	case FormatRaw:
		if body == nil {
			body = []byte{}
		}
		d.fields[0].(*array.BinaryBuilder).Append(body)
	case FormatNDJSON:
		err = d.lines(body)
	default:
		err = d.json(body)
	}
	rec := d.rb.NewRecordBatch() // also empties the builders after an error
	if err != nil {
		rec.Release()
		return nil, err
	}
	return rec, nil
}

// lines decodes one JSON object per line; blank lines are skipped.
func (d *bodyDecoder) lines(body []byte) error {
	for n := 1; len(body) > 0; n++ {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if rowjson.IsBlank(line) {
			continue
		}
		if err := d.dec.DecodeLine(line, d.fields); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return nil
}

// json decodes a body of one object, or an array of objects.
func (d *bodyDecoder) json(body []byte) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return errors.New("the body is empty: want a JSON object or an array of objects")
	}
	if trimmed[0] != '[' {
		return d.dec.DecodeLine(body, d.fields)
	}
	jd := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := jd.Token(); err != nil {
		return fmt.Errorf("the body is not a JSON array: %v", err)
	}
	for i := 0; jd.More(); i++ {
		var raw json.RawMessage
		if err := jd.Decode(&raw); err != nil {
			return fmt.Errorf("element %d: %v", i, err)
		}
		if err := d.dec.DecodeLine(raw, d.fields); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	if _, err := jd.Token(); err != nil {
		return fmt.Errorf("the array does not end: %v", err)
	}
	if _, err := jd.Token(); err != io.EOF {
		return errors.New("data after the array: want one JSON array")
	}
	return nil
}

func (d *bodyDecoder) release() { d.rb.Release() }
