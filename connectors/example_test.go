package connectors_test

import (
	"context"
	"fmt"
	"log"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/stdout"
)

// LinesConfig is the config of the "example-lines" input: its JSON
// encoding is the spec's sources[].config, and InputType names the
// connector, so a LinesConfig can be given to Builder.Source directly.
type LinesConfig struct {
	Lines []string `json:"lines"`
}

// InputType implements arkflow.SourceComponent.
func (LinesConfig) InputType() string { return "example-lines" }

// linesSchema is the schema of the rows, without the __meta_* columns.
var linesSchema = arrow.NewSchema([]arrow.Field{{Name: "line", Type: arrow.BinaryTypes.String}}, nil)

// linesInput is a checked config: it builds sources but does no I/O.
type linesInput struct{ lines []string }

func (linesInput) Schema() *arrow.Schema { return connectors.WithMeta(linesSchema) }
func (linesInput) Partitions() int       { return 1 }
func (in linesInput) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	return &linesSource{lines: in.lines, name: info.OperatorID}, nil
}

// linesSource delivers its lines as one batch, then the end of its input.
type linesSource struct {
	lines []string
	name  string
	done  bool
}

func (s *linesSource) Connect(context.Context) error { return nil }
func (s *linesSource) Close(context.Context) error   { return nil }

func (s *linesSource) Read(ctx context.Context) (connectors.Batch, error) {
	if s.done {
		return connectors.Batch{}, connectors.ErrEndOfInput
	}
	s.done = true
	b := array.NewRecordBuilder(memory.DefaultAllocator, linesSchema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(s.lines, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	// Every row gets __meta_source, __meta_partition and __meta_offset.
	return connectors.Batch{Record: connectors.AddMeta(connectors.WithMeta(linesSchema), rec, s.name, 0, 0)}, nil
}

// A connector registers a factory under its type name. The factory checks
// the config and returns an Input; Build and Validate call it too, so it
// must not touch the outside world. Registration is global: do it once,
// usually in the connector package's init.
func ExampleRegisterInput() {
	connectors.RegisterInput("example-lines", func(bc connectors.BuildContext) (connectors.Input, error) {
		var cfg LinesConfig
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		if len(cfg.Lines) == 0 {
			return nil, connectors.FieldError("lines", "needs at least one line")
		}
		return linesInput{lines: cfg.Lines}, nil
	})

	// A bad config is reported by Build and Validate, with its path.
	_, err := arkflow.NewJob("empty").Source("in", LinesConfig{}).Sink("out", stdout.Config{}).Build()
	fmt.Println(err)

	j, err := arkflow.NewJob("lines").
		Source("in", LinesConfig{Lines: []string{"hello", "world"}}).
		Sink("out", stdout.Config{}). // prints each row as JSON, without __meta_*
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// job "empty": operator "in": .Source("in", ...): lines: needs at least one line
	// {"line":"hello"}
	// {"line":"world"}
}
