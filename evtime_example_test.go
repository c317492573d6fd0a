package arkflow_test

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

var annRows = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// annAt is a batch of clicks of ann at the given event times (ms).
func annAt(ts ...int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, annRows)
	defer b.Release()
	for _, t := range ts {
		b.Field(0).(*array.StringBuilder).Append("ann")
		b.Field(1).(*array.Int64Builder).Append(t)
	}
	return b.NewRecordBatch()
}

// printWindows prints each window row of a per-second count.
func printWindows(out *mem.Sink) {
	for _, rec := range out.Records() {
		for i := 0; i < int(rec.NumRows()); i++ {
			fmt.Printf("[%d, %d): %d\n", rec.Column(1).(*array.Timestamp).Value(i),
				rec.Column(2).(*array.Timestamp).Value(i), rec.Column(3).(*array.Int64).Value(i))
		}
	}
}

// In-order clicks, batched so that one batch crosses a window boundary.
// With the default rule the watermark moves with the whole batch first, so
// 100 and 900 meet the watermark 1100 and are late; PerRow
// classifies each row against the watermark before it.
func ExampleEventTime_perRow() {
	for _, perRow := range []bool{false, true} {
		src, err := mem.NewSourceFrom([]arrow.RecordBatch{annAt(100, 900, 1100), annAt(1900, 2100)})
		if err != nil {
			log.Fatal(err)
		}
		out := mem.NewSink()
		j, err := arkflow.NewJob("clicks").
			Source("in", src, arkflow.EventTime{Field: "ts", PerRow: perRow}).
			KeyBy("user").
			Window("per-second", window.Tumbling(time.Second, job.Count("clicks"))).
			Sink("out", out).
			Build()
		if err != nil {
			log.Fatal(err)
		}
		if err := j.Run(context.Background()); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("per row %v: %d late\n", perRow, j.Metrics().Operator("per-second").Counters["late_dropped"])
		printWindows(out)
	}
	// Output:
	// per row false: 3 late
	// [1000, 2000): 1
	// [2000, 3000): 1
	// per row true: 0 late
	// [0, 1000): 2
	// [1000, 2000): 2
	// [2000, 3000): 1
}

// A source that goes quiet: its last window fires once every partition
// has been idle and the clock has moved past the window's end by the
// delay, without new clicks and without the end of the input.
func ExampleEventTime_advanceWhenIdle() {
	src := mem.NewSource(annRows, 1) // never closed: an unbounded input
	out := mem.NewSink()
	j, err := arkflow.NewJob("quiet").
		Source("in", src, arkflow.EventTime{Field: "ts", IdleTimeout: 20 * time.Millisecond, AdvanceWhenIdle: 50 * time.Millisecond}).
		KeyBy("user").
		Window("per-100ms", window.Tumbling(100*time.Millisecond, job.Count("clicks"))).
		Sink("out", out).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	// Event times are wall-clock milliseconds.
	if err := src.Append(0, annAt(time.Now().UnixMilli())); err != nil {
		log.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); out.NumRows() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Println("windows fired while the source was quiet:", out.NumRows())
	if err := j.Stop(context.Background()); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// windows fired while the source was quiet: 1
}

// Drain ends an unbounded job and fires its open windows; Stop would keep
// them (with checkpoints, open for the next run).
func ExampleJob_Drain() {
	src := mem.NewSource(annRows, 1) // never closed: an unbounded input
	out := mem.NewSink()
	j, err := arkflow.NewJob("clicks").
		Source("in", src, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("per-second", window.Tumbling(time.Second, job.Count("clicks"))).
		Sink("out", out).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	if err := src.Append(0, annAt(100, 200)); err != nil {
		log.Fatal(err)
	}
	if err := src.Append(0, annAt(1100)); err != nil {
		log.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); j.Metrics().Operator("per-second").RowsIn < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	// [0, 1000) has fired (the watermark is 1100); [1000, 2000) is open.
	if err := j.Drain(context.Background()); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	printWindows(out)
	// Output:
	// [0, 1000): 2
	// [1000, 2000): 1
}
