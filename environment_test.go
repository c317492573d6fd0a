package arkflow_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
)

// countOutput is a connector whose sinks count the rows they are given.
type countOutput struct{ rows *atomic.Int64 }

func (o countOutput) NewSink(connectors.TaskInfo) (connectors.Sink, error) { return countSink(o), nil }

type countSink countOutput

func (countSink) Connect(context.Context) error { return nil }
func (s countSink) Write(_ context.Context, rec arrow.RecordBatch) error {
	s.rows.Add(rec.NumRows())
	return nil
}
func (countSink) Close(context.Context) error { return nil }

// countType is a sink component naming the "count" output type.
type countType struct{}

func (countType) OutputType() string { return "count" }

// A job built WithEnvironment finds the connector types registered there;
// one built without it does not, and the global registry is unchanged.
func TestWithEnvironment(t *testing.T) {
	t.Parallel()
	var rows atomic.Int64
	env := connectors.NewEnvironment()
	if err := env.RegisterOutput("count", func(connectors.BuildContext, *arrow.Schema) (connectors.Output, error) {
		return countOutput{&rows}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.RegisterOutput("count", nil); err == nil {
		t.Fatal("a second registration of one name in an environment is not refused")
	}
	b := func() *arkflow.Builder {
		return arkflow.NewJob("env").Source("in", generate.Config{Count: 100, Fields: []generate.Field{{Name: "v", Type: "int64"}}}).Sink("out", countType{})
	}
	if _, err := b().Build(); err == nil || !strings.Contains(err.Error(), `unknown output type "count"`) {
		t.Fatalf("without the environment: %v, want the type unknown", err)
	}
	if _, ok := connectors.LookupOutput("count"); ok {
		t.Fatal("registering into an environment changed the global registry")
	}
	j, err := b().Build(arkflow.WithEnvironment(env))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rows.Load() != 100 {
		t.Fatalf("the environment's sink got %d rows, want 100", rows.Load())
	}
}

// A service that runs jobs for others gives them an environment with its
// own connectors, leaving the global registry as it is.
func ExampleWithEnvironment() {
	var rows atomic.Int64
	env := connectors.NewEnvironment() // the built-in types, and the imported ones
	if err := env.RegisterOutput("count", func(connectors.BuildContext, *arrow.Schema) (connectors.Output, error) {
		return countOutput{&rows}, nil
	}); err != nil {
		log.Fatal(err)
	}
	j, err := arkflow.NewJob("counted").
		Source("in", generate.Config{Count: 42, Fields: []generate.Field{{Name: "v", Type: "int64"}}}).
		Sink("out", countType{}).
		Build(arkflow.WithEnvironment(env))
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(rows.Load(), "rows counted")
	// Output: 42 rows counted
}
