package arkflow_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/window"
)

// A service pushes events from its handlers into a keyed event-time
// window, and gets the window results back as Go structs.
func ExampleNewPush() {
	type Click struct {
		User   string
		Amount int64
		TS     time.Time
	}
	type PerUser struct {
		User   string
		Start  time.Time `arkflow:"window_start"`
		Clicks int64
		Total  int64
	}
	clicks := arkflow.NewPush(arkflow.PushConfig[Click]{})
	j, err := arkflow.NewJob("per-user").
		Source("clicks", clicks, arkflow.EventTime("TS")).
		KeyBy("User").
		Window("w", window.Tumbling(time.Minute).Count("Clicks").Sum("Amount", "Total")).
		Sink("out", arkflow.SinkFunc[PerUser](func(_ context.Context, rows []PerUser) error {
			for _, r := range rows {
				fmt.Println(r.Start.Format("15:04"), r.User, r.Clicks, r.Total)
			}
			return nil
		})).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()

	// In a service, each HTTP handler calls Push with its request's rows.
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ctx := context.Background()
	if err := clicks.Push(ctx, Click{"ann", 5, t0}, Click{"ann", 7, t0.Add(20 * time.Second)}); err != nil {
		log.Fatal(err)
	}
	if err := clicks.Push(ctx, Click{"bob", 1, t0.Add(30 * time.Second)}); err != nil {
		log.Fatal(err)
	}
	// Close ends the input: the open windows fire and the job ends.
	clicks.Close()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Unordered output:
	// 09:00 ann 2 12
	// 09:00 bob 1 1
}

// PushWait returns once the rows were processed: here, once the sink
// returned nil for them.
func ExamplePush_PushWait() {
	type Order struct {
		ID    int64
		Total float64
	}
	orders := arkflow.NewPush(arkflow.PushConfig[Order]{})
	j, err := arkflow.NewJob("orders").
		Source("orders", orders).
		Filter("big", arkflow.Where("Total > 100")).
		Sink("out", arkflow.SinkFunc[Order](func(_ context.Context, rows []Order) error {
			fmt.Println("stored", rows)
			return nil
		})).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	go j.Run(context.Background())
	defer j.Stop(context.Background())

	ctx := context.Background()
	if err := orders.PushWait(ctx, Order{1, 250}, Order{2, 20}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("processed, pending:", orders.Pending())
	// Output:
	// stored [{1 250}]
	// processed, pending: 0
}

// A RecordSinkFunc receives the job's Arrow batches as they are, for
// columnar sinks (Parquet writers, Arrow Flight).
func ExampleRecordSinkFunc() {
	type Reading struct {
		Sensor string
		Value  float64
	}
	in := arkflow.NewPush(arkflow.PushConfig[Reading]{})
	j, err := arkflow.NewJob("columnar").
		Source("in", in).
		Sink("out", arkflow.RecordSinkFunc(func(_ context.Context, rec arrow.RecordBatch) error {
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

// A SinkFunc's nil return acknowledges the rows; an error fails the job,
// and the rows stay unacknowledged (a WAL or a replayable source gives them
// again after a restart).
func ExampleSinkFunc() {
	type Payment struct {
		ID     int64
		Amount float64
	}
	in := arkflow.NewPush(arkflow.PushConfig[Payment]{})
	store := func(_ context.Context, rows []Payment) error {
		for _, p := range rows {
			if p.Amount < 0 {
				return fmt.Errorf("payment %d: negative amount", p.ID)
			}
			fmt.Println("stored", p.ID)
		}
		return nil
	}
	j, err := arkflow.NewJob("payments").Source("in", in).Sink("db", arkflow.SinkFunc[Payment](store)).Build()
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
