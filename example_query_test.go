package arkflow_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/drop"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
)

// Sale is a row a shop's service pushes.
type Sale struct {
	Shop   string
	Amount int64
}

// ShopTotal is the row the "totals" aggregate keeps per shop.
type ShopTotal struct {
	Shop  string
	Sales int64
	Total int64
}

// A service asks a running job for the current total of one shop.
func ExampleQueryRows() {
	ctx := context.Background()
	sales := push.New(push.Config[Sale]{})
	j, err := arkflow.NewJob("shops").
		Source("sales", sales).
		KeyBy("Shop").
		Aggregate("totals", job.Running(job.Count("Sales"), job.Sum("Amount", "Total"))).
		Sink("out", drop.Config{}).
		Parallelism(3).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	go j.Run(ctx)
	defer j.Stop(ctx)
	// PushWait returns once the rows were processed and their state committed.
	if err := sales.PushWait(ctx, Sale{"north", 5}, Sale{"south", 3}, Sale{"north", 7}); err != nil {
		log.Fatal(err)
	}
	north, err := arkflow.QueryRows[ShopTotal](ctx, j, "totals", "north")
	if err != nil {
		log.Fatal(err)
	}
	east, _ := arkflow.QueryRows[ShopTotal](ctx, j, "totals", "east")
	fmt.Println(north, len(east))
	// Output: [{north 2 12}] 0
}

// shopSeen is the state the "seen" Process operator keeps per shop.
var shopSeen = state.NewValue[int64]("seen")

// ShopSeen is what the "seen" operator emits.
type ShopSeen struct {
	Shop string
	Seen int64
}

// A service reads a Process operator's state with the state.Value its
// function declared.
func ExampleJob_QueryState() {
	ctx := context.Background()
	sales := push.New(push.Config[Sale]{})
	b := arkflow.NewJob("seen").Source("sales", sales).KeyBy("Shop")
	j, err := arkflow.ProcessRows(b, "seen", func(ctx context.Context, st *state.Keyed, s Sale) ([]ShopSeen, error) {
		n, _, err := shopSeen.Get(st)
		if err != nil {
			return nil, err
		}
		n++
		return []ShopSeen{{s.Shop, n}}, shopSeen.Set(st, n)
	}).Sink("out", drop.Config{}).Build()
	if err != nil {
		log.Fatal(err)
	}
	go j.Run(ctx)
	defer j.Stop(ctx)
	if err := sales.PushWait(ctx, Sale{"north", 5}, Sale{"north", 7}); err != nil {
		log.Fatal(err)
	}
	k, err := j.QueryState(ctx, "seen", "north")
	if err != nil {
		log.Fatal(err)
	}
	n, ok, err := shopSeen.Get(k)
	fmt.Println(n, ok, err)
	fmt.Println(shopSeen.Set(k, 0) != nil) // read only
	// Output:
	// 2 true <nil>
	// true
}

// A service mounts the state routes under a prefix of its own.
func ExampleJob_QueryHandler() {
	ctx := context.Background()
	sales := push.New(push.Config[Sale]{})
	j, err := arkflow.NewJob("shops").Source("sales", sales).KeyBy("Shop").
		Aggregate("totals", job.Running(job.Count("Sales"), job.Sum("Amount", "Total"))).
		Sink("out", drop.Config{}).Build()
	if err != nil {
		log.Fatal(err)
	}
	go j.Run(ctx)
	defer j.Stop(ctx)
	if err := sales.PushWait(ctx, Sale{"north", 5}, Sale{"north", 7}); err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/state/", http.StripPrefix("/state", j.QueryHandler("s3cret")))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, token := range []string{"s3cret", ""} {
		req, _ := http.NewRequest("GET", srv.URL+"/state/totals?key=north", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(body))
	}
	// Output:
	// 200 {"key":"north","operator":"totals","rows":[{"Shop":"north","Sales":2,"Total":12}]}
	// 401 {"error":"state queries need the bearer token"}
}

// A service pages through every shop's total, two at a time.
func ExampleScanRows() {
	ctx := context.Background()
	sales := push.New(push.Config[Sale]{})
	j, err := arkflow.NewJob("shops").Source("sales", sales).KeyBy("Shop").
		Aggregate("totals", job.Running(job.Count("Sales"), job.Sum("Amount", "Total"))).
		Sink("out", drop.Config{}).Build()
	if err != nil {
		log.Fatal(err)
	}
	go j.Run(ctx)
	defer j.Stop(ctx)
	if err := sales.PushWait(ctx, Sale{"north", 5}, Sale{"south", 3}, Sale{"east", 1}, Sale{"north", 7}); err != nil {
		log.Fatal(err)
	}
	var all []ShopTotal
	for opts := (arkflow.ScanOptions{Limit: 2}); ; {
		page, next, err := arkflow.ScanRows[ShopTotal](ctx, j, "totals", opts)
		if err != nil {
			log.Fatal(err)
		}
		all = append(all, page...)
		if opts.After = next; next == "" {
			break
		}
	}
	slices.SortFunc(all, func(a, b ShopTotal) int { return strings.Compare(a.Shop, b.Shop) })
	fmt.Println(all)
	// Output: [{east 1 1} {north 2 12} {south 1 3}]
}
