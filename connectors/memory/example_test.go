package memory_test

import (
	"context"
	"fmt"
	"log"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/memory"
)

// Batches held in memory in, batches collected in memory out: the way to
// run a job over data a test or a program already has.
func ExampleNewSourceFrom() {
	type order struct {
		ID     int64
		Amount float64
	}
	in, err := arkflow.Encode([]order{{1, 9.5}, {2, 120}, {3, 30}})
	if err != nil {
		log.Fatal(err)
	}
	src, err := memory.NewSourceFrom([]arrow.RecordBatch{in})
	if err != nil {
		log.Fatal(err)
	}
	out := memory.NewSink()
	j, err := arkflow.NewJob("orders").Source("in", src).Where("big", "Amount > 20").Sink("out", out).Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	for _, rec := range out.Records() {
		rows, err := arkflow.Decode[order](rec)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(rows)
	}
	// Output: [{2 120} {3 30}]
}
