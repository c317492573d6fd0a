package window_test

import (
	"context"
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
		Source("payments", src, arkflow.EventTime("ts", arkflow.AllowedLateness(500*time.Millisecond), arkflow.LateUpdate())).
		KeyBy("user").
		Window("per-second", window.Tumbling(time.Second).Count("n").Sum("amount", "total")).
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

// Where a batch splits under advance per_row: 100 comes after 2100 made
// the watermark 2100, and 150 meets the same watermark, so one cut is
// enough; the in-order rows around them need none.
func ExampleTracker_Cuts() {
	tr := window.NewTracker(&job.Watermark{Strategy: job.BoundedOutOfOrderness, Advance: job.AdvancePerRow}, []int{0}, 0)
	fmt.Println("per row:", tr.PerRow())
	ts := []int64{900, 2100, 100, 150, 2200}
	valid := []bool{true, true, true, true, true}
	for _, c := range tr.Cuts(0, ts, valid, nil) {
		fmt.Printf("before row %d (ts %d): watermark %d\n", c.Row, ts[c.Row], c.WM)
	}
	wm, _ := tr.Observe(0, 2200, 0) // then the whole batch, as under advance batch
	fmt.Println("after the batch:", wm)
	// Output:
	// per row: true
	// before row 2 (ts 100): watermark 2100
	// after the batch: 2200
}

// With all_idle advance, a tick while every partition is idle moves the
// watermark to now - all_idle_delay_ms - out_of_orderness_ms.
func ExampleTracker_Tick() {
	idle := int64(1000)
	tr := window.NewTracker(&job.Watermark{Strategy: job.BoundedOutOfOrderness, OutOfOrdernessMS: 200,
		IdleTimeoutMS: &idle, AllIdle: job.AllIdleAdvance, AllIdleDelayMS: 5000}, []int{0}, 0)
	fmt.Println(tr.Observe(0, 10_000, 0))
	fmt.Println(tr.Tick(1_000))  // idle, but the clock is behind: held
	fmt.Println(tr.Tick(20_000)) // 20,000 - 5,000 - 200
	// Output:
	// 9800 true
	// 9800 false
	// 14800 true
}
