package funcsink_test

import (
	"context"
	"fmt"
	"log"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
)

// A RecordFunc receives the job's Arrow batches as they are, for
// columnar sinks (Parquet writers, Arrow Flight).
func ExampleRecordFunc() {
	type Reading struct {
		Sensor string
		Value  float64
	}
	in := push.New(push.Config[Reading]{})
	j, err := arkflow.NewJob("columnar").
		Source("in", in).
		Sink("out", funcsink.RecordFunc(func(_ context.Context, rec arrow.RecordBatch) error {
			fmt.Println(rec.NumRows(), "rows:", rec.Schema().Field(0).Name, rec.Schema().Field(1).Name)
			return nil
		})).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	if err := in.Push(context.Background(), Reading{"s1", 20.5}, Reading{"s2", 19}); err != nil {
		log.Fatal(err)
	}
	in.Close()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// 2 rows: Sensor Value
}

// A Func's nil return acknowledges the rows; an error fails the job,
// and the rows stay unacknowledged (a WAL or a replayable source gives them
// again after a restart).
func ExampleFunc() {
	type Payment struct {
		ID     int64
		Amount float64
	}
	in := push.New(push.Config[Payment]{})
	store := func(_ context.Context, rows []Payment) error {
		for _, p := range rows {
			if p.Amount < 0 {
				return fmt.Errorf("payment %d: negative amount", p.ID)
			}
			fmt.Println("stored", p.ID)
		}
		return nil
	}
	j, err := arkflow.NewJob("payments").Source("in", in).Sink("db", funcsink.Func[Payment](store)).Build()
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	ctx := context.Background()
	fmt.Println(in.PushWait(ctx, Payment{1, 9.5}))
	fmt.Println(in.PushWait(ctx, Payment{2, -1}) != nil)
	fmt.Println(<-done)
	// Output:
	// stored 1
	// <nil>
	// true
	// writing sink db-0: payment 2: negative amount
}
