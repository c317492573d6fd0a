package push_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// A service pushes events from its handlers into a keyed event-time
// window, and gets the window results back as Go structs.
func ExampleNew() {
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
	clicks := push.New(push.Config[Click]{})
	j, err := arkflow.NewJob("per-user").
		Source("clicks", clicks, arkflow.EventTime{Field: "TS"}).
		KeyBy("User").
		Window("w", window.Tumbling(time.Minute, job.Count("Clicks"), job.Sum("Amount", "Total"))).
		Sink("out", funcsink.Func[PerUser](func(_ context.Context, rows []PerUser) error {
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
func ExampleSource_PushWait() {
	type Order struct {
		ID    int64
		Total float64
	}
	orders := push.New(push.Config[Order]{})
	j, err := arkflow.NewJob("orders").
		Source("orders", orders).
		Where("big", "Total > 100").
		Sink("out", funcsink.Func[Order](func(_ context.Context, rows []Order) error {
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

// With an IdempotencyKey, a client that sends a request again (it lost
// the answer) is counted once: the rows it sent before are acknowledged
// as duplicates, and only the new one goes in.
func ExampleSource_PushDedup() {
	type Click struct {
		ID     string // chosen by the client, the same in every retry
		User   string
		Amount int64
	}
	dir, err := os.MkdirTemp("", "push-dedup")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	clicks := push.New(push.Config[Click]{IdempotencyKey: func(c Click) string { return c.ID }})
	totals := map[string]int64{}
	j, err := arkflow.NewJob("dedup").
		// The keys seen live beside the write-ahead log, and survive a crash.
		Source("clicks", clicks, arkflow.Durable(job.Durability{})).
		Sink("out", funcsink.Func[Click](func(_ context.Context, rows []Click) error {
			for _, c := range rows {
				totals[c.User] += c.Amount
			}
			return nil
		})).
		Build(arkflow.WithDataDir(dir))
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()

	ctx := context.Background()
	dups, err := clicks.PushDedup(ctx, Click{"c1", "ann", 5}, Click{"c2", "bob", 3})
	fmt.Println("first request:", dups, "duplicates,", err)
	dups, err = clicks.PushDedup(ctx, Click{"c1", "ann", 5}, Click{"c2", "bob", 3}, Click{"c3", "ann", 1})
	fmt.Println("sent again, one click more:", dups, "duplicates,", err)

	clicks.Close()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println("ann", totals["ann"], "bob", totals["bob"])
	// Output:
	// first request: 0 duplicates, <nil>
	// sent again, one click more: 2 duplicates, <nil>
	// ann 6 bob 3
}
