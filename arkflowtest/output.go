package arkflowtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/typed"
)

// Output is a sink that captures the rows a job writes as values of type
// T: give it to Builder.Sink (or Builder.LateSink, for the rows a window's
// route policy sends aside), and read Rows once a harness call has
// returned. Columns are matched to T's fields by name; columns T has no
// field for (the window update marker, metadata columns) are ignored; a
// field with no column, or of a type the column cannot be stored in, is
// reported when the job is built.
//
// An Output is safe for concurrent use; all subtasks of its sink write
// into it, each batch whole.
type Output[T any] struct {
	codec *typed.Codec[T]
	err   error

	mu    sync.Mutex
	rows  []T
	taken int
	h     *Harness // the harness it belongs to last, nil before New
}

// NewOutput returns an empty output of rows of type T, a struct (see
// NewInput).
func NewOutput[T any]() *Output[T] {
	c, err := typed.For[T]()
	if err != nil {
		var zero T
		err = fmt.Errorf("arkflowtest: %T cannot be a row: %w", zero, err)
	}
	return &Output[T]{codec: c, err: err}
}

// OutputType implements arkflow.SinkComponent.
func (o *Output[T]) OutputType() string { return outputType }

// Rows returns every row written so far, in the order the sink's subtasks
// wrote them: since New started the run (an Output an earlier harness
// wrote to starts empty again), through the Restores that resumed it.
func (o *Output[T]) Rows() []T {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]T(nil), o.rows...)
}

// Take returns the rows written since the last Take (all of them at the
// first), to check a job's output step by step.
func (o *Output[T]) Take() []T {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := append([]T(nil), o.rows[o.taken:]...)
	o.taken = len(o.rows)
	return out
}

// check reports whether rows of schema can be decoded into T.
func (o *Output[T]) check(schema *arrow.Schema) error {
	if o.err != nil {
		return o.err
	}
	if schema == nil {
		return nil
	}
	cols := emptyColumns(schema)
	empty := array.NewRecordBatch(schema, cols, 0)
	for _, c := range cols {
		c.Release()
	}
	defer empty.Release()
	_, err := o.codec.Decode(empty, nil)
	return err
}

// write decodes a batch and appends its rows.
func (o *Output[T]) write(rec arrow.RecordBatch) error {
	if o.err != nil {
		return o.err
	}
	rows, err := o.codec.Decode(rec, nil)
	if err != nil {
		return fmt.Errorf("arkflowtest: decoding rows: %w", err)
	}
	o.mu.Lock()
	o.rows = append(o.rows, rows...)
	o.mu.Unlock()
	return nil
}

// begin makes the output h's. fresh (New) empties it of the rows the job
// of an earlier harness wrote, unless that job still runs.
func (o *Output[T]) begin(h *Harness, fresh bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if fresh && o.h != nil && o.h != h && o.h.done() {
		o.rows, o.taken = nil, 0
	}
	o.h = h
}

// harnessOutput is what the build finds bound to a sink.
type harnessOutput interface {
	check(schema *arrow.Schema) error
	write(rec arrow.RecordBatch) error
	begin(h *Harness, fresh bool)
}

func emptyColumns(schema *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		b := array.NewBuilder(memory.DefaultAllocator, f.Type)
		cols[i] = b.NewArray()
		b.Release()
	}
	return cols
}

type outputConn struct{ o harnessOutput }

func buildOutput(bc connectors.BuildContext, schema *arrow.Schema) (connectors.Output, error) {
	o, ok := bc.Bound.(harnessOutput)
	if !ok {
		return nil, fmt.Errorf("output type %q writes to Go: pass an arkflowtest.Output to Builder.Sink", outputType)
	}
	if err := o.check(schema); err != nil {
		return nil, err
	}
	return &outputConn{o}, nil
}

func (c *outputConn) NewSink(connectors.TaskInfo) (connectors.Sink, error) {
	return &sinkTask{c.o}, nil
}

type sinkTask struct{ o harnessOutput }

func (s *sinkTask) Connect(context.Context) error { return nil }
func (s *sinkTask) Write(_ context.Context, rec arrow.RecordBatch) error {
	return s.o.write(rec)
}
func (s *sinkTask) Close(context.Context) error { return nil }
