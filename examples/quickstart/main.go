// Quickstart: a small, real job on embedded defaults, no servers needed.
//
// Click events are generated deterministically (4 partitions, read by 2
// source subtasks). A map computes each event's value in cents, a filter
// keeps clicks and purchases, and a keyed stage (KeyBy user → running
// aggregate on 2 subtasks) counts each user's actions, sums what they spent
// and remembers when they were last seen. Rows of one user arrive from
// every source partition and still meet in one subtask: the keyed edge
// routes by key group, not by source subtask.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
)

func main() {
	clicks := generate.Config{
		Seed:       42,
		Count:      250_000, // events per partition
		Partitions: 4,
		BatchSize:  4096,
		Fields: []generate.Field{
			{Name: "user", Type: "string", Prefix: generate.Ptr("user-"), Cardinality: 25},
			{Name: "action", Type: "string", Values: []string{"view", "view", "view", "view", "click", "click", "buy"}},
			{Name: "price", Type: "float64", Min: generate.Ptr(1.0), Max: generate.Ptr(120.0)},
			{Name: "ts", Type: "timestamp", Unit: "ms", StartMs: generate.Ptr(int64(1_767_225_600_000)), StepMs: generate.Ptr(int64(7))},
		},
	}
	results := memory.NewSink()

	j, err := arkflow.NewJob("quickstart").
		Parallelism(2).
		Source("clicks", clicks).
		Columns("value", job.Columns{Set: []job.Column{{Name: "cents", Expr: "if(action == 'buy', to_int(round(price * 100)), 0)"}}}).
		Where("engaged", "action != 'view'").
		KeyBy("user").
		Aggregate("per-user", job.Final(job.Count("actions"), job.Sum("cents", "spent_cents"), job.Max("ts", "last_seen"))).
		Sink("results", results, arkflow.WithParallelism(1)).
		Build()
	if err != nil {
		log.Fatal(err) // every problem, each naming its operator and field
	}
	fmt.Printf("plan:\n%s\n", j.Plan())

	start := time.Now()
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	elapsed := time.Since(start)

	m := j.Metrics()
	in := m.Operator("clicks").RowsOut
	fmt.Printf("processed %d events in %v (%.1f M events/s); %d kept by the filter\n\n",
		in, elapsed.Round(time.Millisecond), float64(in)/elapsed.Seconds()/1e6, m.Operator("engaged").RowsOut)

	type row struct {
		user     string
		actions  int64
		spent    int64
		lastSeen time.Time
	}
	var rows []row
	for _, rec := range results.Records() {
		users := rec.Column(0).(*array.String)
		actions := rec.Column(1).(*array.Int64)
		spent := rec.Column(2).(*array.Int64)
		seen := rec.Column(3).(*array.Timestamp)
		unit := rec.Schema().Field(3).Type.(*arrow.TimestampType).Unit
		for i := 0; i < int(rec.NumRows()); i++ {
			rows = append(rows, row{users.Value(i), actions.Value(i), spent.Value(i), seen.Value(i).ToTime(unit)})
		}
	}
	sort.Slice(rows, func(a, b int) bool { return rows[a].spent > rows[b].spent })
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "user\tactions\tspent\tlast seen (UTC)\t")
	for _, r := range rows[:min(10, len(rows))] {
		fmt.Fprintf(w, "%s\t%d\t%.2f\t%s\t\n", r.user, r.actions, float64(r.spent)/100, r.lastSeen.UTC().Format(time.DateTime))
	}
	w.Flush()
	fmt.Printf("\n%d users; top 10 by spend shown\n", len(rows))
}
