// Package drop provides the "drop" output, which discards every row (and
// acknowledges it at once). Its config is empty: {}.
package drop

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Type is the output type name.
const Type = "drop"

// Config is the (empty) config of the "drop" output.
type Config struct{}

// OutputType returns "drop".
func (Config) OutputType() string { return Type }

func init() {
	connectors.RegisterOutput(Type, func(bc connectors.BuildContext, schema *arrow.Schema) (connectors.Output, error) {
		var m map[string]json.RawMessage
		if err := connectors.DecodeConfig(bc.Config, &m); err != nil {
			return nil, err
		}
		var errs connectors.Fields
		for _, k := range slices.Sorted(maps.Keys(m)) {
			errs.Add(k, "unknown field (the drop output takes no config)")
		}
		if err := errs.Err(); err != nil {
			return nil, err
		}
		return Output{}, nil
	})
}

// Output is the drop output.
type Output struct{}

// NewSink returns a sink that discards rows.
func (Output) NewSink(info connectors.TaskInfo) (connectors.Sink, error) { return Sink{}, nil }

// Sink discards rows.
type Sink struct{}

// Connect does nothing.
func (Sink) Connect(ctx context.Context) error { return nil }

// Write discards rec.
func (Sink) Write(ctx context.Context, rec arrow.RecordBatch) error { return nil }

// Close does nothing.
func (Sink) Close(ctx context.Context) error { return nil }

var (
	_ connectors.Output = Output{}
	_ connectors.Sink   = Sink{}
)
