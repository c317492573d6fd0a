package stdout_test

import (
	"context"
	"log"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/connectors/stdout"
)

// Each row is written to standard output as one JSON line, without the
// __meta_* columns.
func ExampleConfig() {
	type reading struct {
		Sensor string  `arkflow:"sensor"`
		Value  float64 `arkflow:"value"`
	}
	in, err := arkflow.Encode([]reading{{"s1", 20.5}, {"s2", 19}})
	if err != nil {
		log.Fatal(err)
	}
	src, err := memory.NewSourceFrom([]arrow.RecordBatch{in})
	if err != nil {
		log.Fatal(err)
	}
	j, err := arkflow.NewJob("print").Source("in", src).Sink("out", stdout.Config{}).Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// {"sensor":"s1","value":20.5}
	// {"sensor":"s2","value":19}
}
