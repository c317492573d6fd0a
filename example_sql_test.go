//go:build cgo

package arkflow_test

import (
	"context"
	"fmt"
	"log"

	"github.com/arkflow-rs/arkflow-go"
	_ "github.com/arkflow-rs/arkflow-go/connectors/duckdb" // the SQL engine (cgo)
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
)

// A map runs SQL over each batch, read as the table flow; its output
// columns are the query's, which later operators and the sink read.
func ExampleBuilder_SQL() {
	type Order struct {
		User   string
		Amount float64
	}
	type Big struct {
		User string
		Net  float64
	}
	in := push.New(push.Config[Order]{})
	j, err := arkflow.NewJob("big-orders").
		Source("orders", in).
		SQL("big", `SELECT upper("User") AS "User", round("Amount" / 1.2, 2) AS "Net" FROM flow WHERE "Amount" > 100`).
		Sink("out", funcsink.Func[Big](func(_ context.Context, rows []Big) error {
			for _, r := range rows {
				fmt.Println(r.User, r.Net)
			}
			return nil
		})).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	if err := in.Push(context.Background(), Order{"ann", 120}, Order{"bob", 30}, Order{"cy", 240}); err != nil {
		log.Fatal(err)
	}
	in.Close()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// ANN 100
	// CY 200
}
