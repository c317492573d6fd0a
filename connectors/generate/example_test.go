package generate_test

import (
	"context"
	"fmt"
	"log"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
)

// A bounded generator: 3 partitions of 4 rows each, the same rows on every
// run (the seed decides them).
func ExampleConfig() {
	type row struct {
		ID    int64
		Price float64
	}
	src := generate.Config{Count: 4, Partitions: 3, Seed: 7, Fields: []generate.Field{
		{Name: "ID", Type: "int64", Sequence: true},
		{Name: "Price", Type: "float64", Min: generate.Ptr(1.0), Max: generate.Ptr(2.0)},
	}}
	var n int
	j, err := arkflow.NewJob("gen").Source("in", src).
		Sink("out", funcsink.Func[row](func(_ context.Context, rows []row) error {
			for _, r := range rows {
				if r.Price < 1 || r.Price > 2 {
					return fmt.Errorf("price %v out of range", r.Price)
				}
			}
			n += len(rows)
			return nil
		}), arkflow.WithParallelism(1)).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "rows")
	// Output: 12 rows
}
