package window_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// Per-user totals per second of event time, with late events updating
// their window for half a second after it fired.
func ExampleTumbling() {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
		{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	batch := func(users []string, ts []int64, amounts []int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		b.Field(0).(*array.StringBuilder).AppendValues(users, nil)
		for _, t := range ts {
			b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(t))
		}
		b.Field(2).(*array.Int64Builder).AppendValues(amounts, nil)
		return b.NewRecordBatch()
	}
	src, err := mem.NewSourceFrom([]arrow.RecordBatch{
		batch([]string{"ann", "bob", "ann"}, []int64{100, 300, 900}, []int64{5, 7, 1}),
		batch([]string{"bob"}, []int64{1200}, []int64{3}), // watermark 1200: [0,1s) fires
		batch([]string{"ann"}, []int64{400}, []int64{10}), // late, within 500 ms: an update
	})
	if err != nil {
		log.Fatal(err)
	}
	out := mem.NewSink()
	j, err := arkflow.NewJob("totals").
		Source("payments", src, arkflow.EventTime{Field: "ts", AllowedLateness: 500 * time.Millisecond, LateUpdate: true}).
		KeyBy("user").
		Window("per-second", window.Tumbling(time.Second, job.Count("n"), job.Sum("amount", "total"))).
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
			start := rec.Column(1).(*array.Timestamp).Value(i).ToTime(arrow.Millisecond)
			fmt.Printf("%s [%s, +1s) n=%d total=%d update=%v\n",
				rec.Column(0).(*array.String).Value(i), start.UTC().Format("15:04:05.000"),
				rec.Column(3).(*array.Int64).Value(i), rec.Column(4).(*array.Int64).Value(i),
				rec.Column(5).(*array.Boolean).Value(i))
		}
	}
	// Output:
	// ann [00:00:00.000, +1s) n=2 total=6 update=false
	// bob [00:00:00.000, +1s) n=1 total=7 update=false
	// ann [00:00:00.000, +1s) n=3 total=16 update=true
	// bob [00:00:01.000, +1s) n=1 total=3 update=false
}

// A definition is written to a spec as the window operator's config.
func ExampleDefinition_MarshalJSON() {
	b, err := json.Marshal(window.Sliding(time.Minute, 10*time.Second, job.Count("n"), job.Avg("amount", "mean")))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))
	// Output:
	// {"window":{"type":"sliding","size_ms":60000,"slide_ms":10000},"aggregates":[{"function":"count","as":"n"},{"function":"avg","field":"amount","as":"mean"}]}
}
