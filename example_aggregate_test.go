package arkflow_test

import (
	"context"
	"fmt"
	"log"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
)

// payments is one batch of (user, amount) rows.
func payments(users []string, amounts []float64) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(users, nil)
	b.Field(1).(*array.Float64Builder).AppendValues(amounts, nil)
	return b.NewRecordBatch()
}

// perUser prints rows of (user, count, sum), sorted.
func perUser(out *mem.Sink) {
	var lines []string
	for _, rec := range out.Records() {
		for i := 0; i < int(rec.NumRows()); i++ {
			lines = append(lines, fmt.Sprintf("%s: n=%d total=%.1f",
				rec.Column(0).(*array.String).Value(i),
				rec.Column(1).(*array.Int64).Value(i),
				rec.Column(2).(*array.Float64).Value(i)))
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}

// A running aggregate takes the same job.Count, job.Sum, … values as a
// window (window.Tumbling(size, job.Count("n"), …)). job.Running emits
// the keys each batch touched, with their totals so far; job.Final
// would emit every key once, at the end of the input.
func ExampleBuilder_Aggregate() {
	src, err := mem.NewSourceFrom([]arrow.RecordBatch{
		payments([]string{"ann", "bob"}, []float64{10, 5}),
		payments([]string{"ann"}, []float64{2.5}),
	})
	if err != nil {
		log.Fatal(err)
	}
	out := mem.NewSink()
	j, err := arkflow.NewJob("spend").
		Source("payments", src).
		KeyBy("user").
		Aggregate("per-user", job.Running(job.Count("n"), job.Sum("amount", "total"))).
		Sink("out", out).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	for _, rec := range out.Records() {
		for i := 0; i < int(rec.NumRows()); i++ {
			fmt.Printf("%s: n=%d total=%.1f\n", rec.Column(0).(*array.String).Value(i),
				rec.Column(1).(*array.Int64).Value(i), rec.Column(2).(*array.Float64).Value(i))
		}
	}
	// Output:
	// ann: n=1 total=10.0
	// bob: n=1 total=5.0
	// ann: n=2 total=12.5
}

// From with several operators merges their branches into the next
// operator; KeyBy before it partitions each of the edges by user.
func ExampleBuilder_From() {
	web, err := mem.NewSourceFrom([]arrow.RecordBatch{payments([]string{"ann", "bob"}, []float64{10, 5})})
	if err != nil {
		log.Fatal(err)
	}
	app, err := mem.NewSourceFrom([]arrow.RecordBatch{payments([]string{"ann"}, []float64{2.5})})
	if err != nil {
		log.Fatal(err)
	}
	out := mem.NewSink()
	j, err := arkflow.NewJob("spend").
		Parallelism(2).
		Source("web", web).
		Source("app", app).
		From("web", "app").KeyBy("user").
		Aggregate("per-user", job.Final(job.Count("n"), job.Sum("amount", "total"))).
		Sink("out", out).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range j.Spec().Edges {
		fmt.Printf("%s -> %s partitioned=%v\n", e.From, e.To, e.Partitioned)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	perUser(out)
	// Output:
	// app -> per-user partitioned=true
	// per-user -> out partitioned=false
	// web -> per-user partitioned=true
	// ann: n=2 total=12.5
	// bob: n=1 total=5.0
}
