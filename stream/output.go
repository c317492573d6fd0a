package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/stdout"
)

// valueOutputs are the outputs that write one column's bytes per row
// (a message, a line, a request) when given its key (value_field; the
// http output's body_field); a stream hands them __value__ when the
// config names none, as ArkFlow writes __value__ by default.
var valueOutputs = map[string]map[string]string{
	"kafka":  {"value_field": `"` + valueField + `"`},
	"mqtt":   {"value_field": `"` + valueField + `"`},
	"nats":   {"value_field": `"` + valueField + `"`},
	"redis":  {"value_field": `"` + valueField + `"`},
	"stdout": {"value_field": `"` + valueField + `"`},
	"http":   {"body_field": `"` + valueField + `"`, "format": `"per-row"`},
}

// valueKey is the key naming an output's value column.
func valueKey(typ string) string {
	if typ == "http" {
		return "body_field"
	}
	return "value_field"
}

// output is a stream's output or error_output. Its sinks are built and
// connected at the first write, one writing rows as the config says and,
// for valueOutputs, one writing __value__.
type output struct {
	c        *Component
	streamID string
	op       string
	lg       *slog.Logger
	stdout   io.Writer       // nil: os.Stdout
	cfg      json.RawMessage // the config, expr keys rewritten
	exprs    *outputExprs
	rows     connectors.Sink
	value    connectors.Sink
	byValue  bool // the config names no value_field: __value__ is used
}

func newOutput(c *Component, streamID, op string, lg *slog.Logger, w io.Writer) (*output, error) {
	o := &output{c: c, streamID: streamID, op: op, lg: lg, stdout: w, cfg: c.Config}
	if valueOutputs[c.Type] != nil {
		var keys map[string]json.RawMessage
		if json.Unmarshal(c.Config, &keys) == nil {
			_, named := keys[valueKey(c.Type)]
			o.byValue = !named
		}
		var err error
		if o.cfg, o.exprs, err = rewriteExprs(c.Config); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	return o, nil
}

// write writes rec with the sink its columns call for (after the json
// codec, when the output has it or writes __value__ and rec has none).
func (o *output) write(ctx context.Context, rec arrow.RecordBatch) error {
	// The json codec, or (for an output that writes __value__) rows
	// without a __value__, written as ArkFlow's arrow-json does.
	var fields []arrow.Field
	var cols []arrow.Array
	if o.exprs != nil {
		var err error
		if fields, cols, err = o.exprs.columns(ctx, rec); err != nil {
			return fmt.Errorf("%s: %w", o.op, err)
		}
		defer releaseArrays(cols)
	}
	if o.c.Codec != nil || (o.byValue && !rec.Schema().HasField(valueField)) {
		enc, err := encodeOutput(rec)
		if err != nil {
			return fmt.Errorf("%s: %w", o.op, err)
		}
		defer enc.Release()
		rec = enc
	}
	if cols != nil {
		rec.Retain()
		rec = withColumns(rec, fields, cols)
		defer rec.Release()
	}
	useValue := o.byValue && rec.Schema().HasField(valueField)
	sink := &o.rows
	if useValue {
		sink = &o.value
	}
	if *sink == nil {
		s, err := o.connect(ctx, useValue)
		if err != nil {
			return err
		}
		*sink = s
	}
	if err := (*sink).Write(ctx, rec); err != nil {
		return fmt.Errorf("%s: %w", o.op, err)
	}
	return nil
}

// connect builds and connects a sink, writing __value__ when byValue.
func (o *output) connect(ctx context.Context, byValue bool) (connectors.Sink, error) {
	f, ok := connectors.LookupOutput(o.c.Type)
	if !ok {
		return nil, fmt.Errorf("%s: output type %q is not registered", o.op, o.c.Type)
	}
	raw := o.cfg
	if byValue {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(raw, &keys); err != nil {
			return nil, fmt.Errorf("%s: %w", o.op, err)
		}
		for k, v := range valueOutputs[o.c.Type] {
			keys[k] = json.RawMessage(v)
		}
		raw, _ = json.Marshal(keys)
	}
	bc := connectors.BuildContext{JobID: o.streamID, OperatorID: o.op, Config: raw, Logger: o.lg}
	if o.c.Type == stdout.Type && o.stdout != nil {
		bc.Bound = stdout.Config{Writer: o.stdout}
	}
	out, err := f(bc, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.op, err)
	}
	s, err := out.NewSink(connectors.TaskInfo{JobID: o.streamID, OperatorID: o.op, Parallelism: 1, Logger: o.lg.With("operator", o.op)})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.op, err)
	}
	if err := s.Connect(ctx); err != nil {
		s.Close(ctx)
		return nil, fmt.Errorf("connecting %s: %w", o.op, err)
	}
	return s, nil
}

// close closes the sinks that were opened; nil does nothing.
func (o *output) close(ctx context.Context) error {
	if o == nil {
		return nil
	}
	o.exprs.close()
	var errs []error
	for _, s := range []connectors.Sink{o.rows, o.value} {
		if s != nil {
			if err := s.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("closing %s: %w", o.op, err))
			}
		}
	}
	return errors.Join(errs...)
}

func releaseArrays(cols []arrow.Array) {
	for _, c := range cols {
		c.Release()
	}
}
