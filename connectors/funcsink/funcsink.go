// Package funcsink delivers a job's output to a Go function: Func[T]
// decodes each batch into structs of type T (as arkflow.Decode does),
// RecordFunc passes the Arrow batch as it is. A nil return acknowledges
// the rows; an error fails the job with them unacknowledged. Nothing is
// retained after the call.
//
//	j, err := arkflow.NewJob("totals").
//		...
//		Sink("db", funcsink.Func[Total](func(ctx context.Context, rows []Total) error {
//			return store.Upsert(ctx, rows)
//		})).
//		Build()
//
// Func[T] matches T's fields to the sink's input columns by name and
// ignores the columns T has no field for, so a window's results decode
// into
//
//	type Result struct {
//		User   string
//		Start  time.Time `arkflow:"window_start"`
//		End    time.Time `arkflow:"window_end"`
//		Clicks int64
//	}
package funcsink

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/typed"
)

// Func is a sink that calls a Go function with the rows of every batch a
// job writes, decoded into []T. T's fields are matched to the sink's input
// columns by name, as arkflow.DecodeInto matches them; a field the input
// has no column for, or cannot be stored in, is reported when the job is
// built, and columns T has no field for are ignored (the package doc shows
// a window's results).
//
// A nil return acknowledges the rows: the sources advance past them (and,
// with durability, the WAL). An error fails the job; the rows stay
// unacknowledged, so a restart reads them again. Several sink subtasks
// (arkflow.WithParallelism) may call the function at once, each with rows
// in the order it received them. The rows slice is the function's to keep.
type Func[T any] func(ctx context.Context, rows []T) error

// OutputType implements arkflow.SinkComponent.
func (f Func[T]) OutputType() string { return funcOutputType }

// MarshalJSON writes the sink's spec config, which is empty: the function
// exists only in the program that defines it.
func (f Func[T]) MarshalJSON() ([]byte, error) { return []byte("{}"), nil }

func (f Func[T]) output(schema *arrow.Schema) (connectors.Output, error) {
	if f == nil {
		return nil, fmt.Errorf("the funcsink.Func is nil")
	}
	codec, err := typed.For[T]()
	if err != nil {
		return nil, err
	}
	if schema != nil {
		if err := checkDecode(codec, schema); err != nil {
			return nil, err
		}
	}
	return funcOutput(func(connectors.TaskInfo) connectors.Sink {
		return &funcSink{write: func(ctx context.Context, rec arrow.RecordBatch) error {
			rows, ok := codec.Own(rec) // a typed batch no one else holds
			if !ok {
				var err error
				if rows, err = codec.Decode(rec, nil); err != nil {
					return err
				}
			}
			return f(ctx, rows)
		}}
	}), nil
}

// checkDecode reports whether batches of schema decode into T, by decoding
// an empty one.
func checkDecode[T any](codec *typed.Codec[T], schema *arrow.Schema) error {
	rec := emptyRecord(schema)
	defer rec.Release()
	_, err := codec.Decode(rec, nil)
	return err
}

// RecordFunc is the untyped form of Func: it is called with every
// batch a job writes, without the __meta_* columns. The batch is valid
// only during the call (Retain it to keep it). A nil return acknowledges
// the rows; an error fails the job, as for Func.
type RecordFunc func(ctx context.Context, rec arrow.RecordBatch) error

// OutputType implements arkflow.SinkComponent.
func (f RecordFunc) OutputType() string { return funcOutputType }

// MarshalJSON writes the sink's spec config, which is empty.
func (f RecordFunc) MarshalJSON() ([]byte, error) { return []byte("{}"), nil }

func (f RecordFunc) output(*arrow.Schema) (connectors.Output, error) {
	if f == nil {
		return nil, fmt.Errorf("the funcsink.RecordFunc is nil")
	}
	return funcOutput(func(connectors.TaskInfo) connectors.Sink {
		return &funcSink{write: func(ctx context.Context, rec arrow.RecordBatch) error {
			out := connectors.StripMeta(rec)
			defer out.Release()
			return f(ctx, out)
		}}
	}), nil
}

// funcOutputType is the output type of Func and RecordFunc.
const funcOutputType = "func"

type funcBinding interface {
	output(schema *arrow.Schema) (connectors.Output, error)
}

type funcOutput func(connectors.TaskInfo) connectors.Sink

func (o funcOutput) NewSink(info connectors.TaskInfo) (connectors.Sink, error) { return o(info), nil }

type funcSink struct {
	write func(ctx context.Context, rec arrow.RecordBatch) error
}

func (s *funcSink) Connect(context.Context) error { return nil }
func (s *funcSink) Write(ctx context.Context, rec arrow.RecordBatch) error {
	return s.write(ctx, rec)
}
func (s *funcSink) Close(context.Context) error { return nil }

func init() {
	connectors.RegisterOutput(funcOutputType, func(bc connectors.BuildContext, schema *arrow.Schema) (connectors.Output, error) {
		if err := connectors.DecodeConfig(bc.Config, &struct{}{}); err != nil {
			return nil, err
		}
		f, ok := bc.Bound.(funcBinding)
		if !ok {
			return nil, fmt.Errorf("output type %q is a Go function: give a funcsink.Func or funcsink.RecordFunc to the Builder's Sink; a spec alone cannot run it", funcOutputType)
		}
		return f.output(schema)
	})
}

// emptyRecord returns a batch of schema without rows.
func emptyRecord(schema *arrow.Schema) arrow.RecordBatch {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		b := array.NewBuilder(memory.DefaultAllocator, f.Type)
		cols[i] = b.NewArray()
		b.Release()
	}
	rec := array.NewRecordBatch(schema, cols, 0)
	for _, c := range cols {
		c.Release()
	}
	return rec
}
