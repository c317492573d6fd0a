package drop_test

import (
	"context"
	"fmt"
	"log"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/drop"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
)

// The drop output acknowledges every row without writing it: a sink for
// benchmarks and for jobs whose work is their state.
func ExampleConfig() {
	src := generate.Config{Count: 1000, Fields: []generate.Field{{Name: "n", Type: "int64"}}}
	j, err := arkflow.NewJob("discard").Source("in", src).Sink("out", drop.Config{}).Build()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(j.Run(context.Background()))
	// Output: <nil>
}
