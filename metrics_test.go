package arkflow_test

import (
	"context"
	"fmt"
	"log"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// clicksAt is a memory source of (user, ts) rows, one batch per slice.
func clicksAt(batches ...[]any) *mem.Source {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	var recs []arrow.RecordBatch
	for _, rows := range batches {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := 0; i < len(rows); i += 2 {
			b.Field(0).(*array.StringBuilder).Append(rows[i].(string))
			b.Field(1).(*array.Int64Builder).Append(int64(rows[i+1].(int)))
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	src, err := mem.NewSourceFrom(recs)
	if err != nil {
		log.Fatal(err)
	}
	return src
}

// Two one-second windows fire at the watermark, a third at the end of the
// input; a row behind the watermark is dropped. Counters are totals and
// sum over the window's two subtasks; open_windows is a gauge (0 once
// everything fired); the operator's watermark is the minimum over its
// subtasks, math.MaxInt64 once the bounded input ended.
func ExampleMetrics_Operator() {
	src := clicksAt(
		[]any{"ann", 100, "bob", 300, "ann", 900},
		[]any{"bob", 1200}, // watermark 1200: [0 s, 1 s) fires for ann and bob
		[]any{"ann", 400},  // late: dropped
	)
	j, err := arkflow.NewJob("clicks").
		Source("in", src, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n")), arkflow.WithParallelism(2)).
		Sink("out", mem.NewSink()).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	w := j.Metrics().Operator("w")
	fmt.Println("windows fired:", w.Counters["windows_fired"])
	fmt.Println("late rows dropped:", w.Counters["late_dropped"])
	fmt.Println("open windows:", w.Gauges["open_windows"])
	fmt.Println("input ended:", w.Watermark == math.MaxInt64)
	// Output:
	// windows fired: 3
	// late rows dropped: 1
	// open windows: 0
	// input ended: true
}

// Operator sums rows, batches and counters over an operator's tasks, sums
// only the gauges whose sum means something (open_windows, not a WAL's
// cursor), and takes the minimum watermark.
func TestOperatorAggregatesTasks(t *testing.T) {
	t.Parallel()
	m := arkflow.Metrics{Tasks: []arkflow.TaskMetrics{
		{Task: "w-0", Operator: "w", RowsIn: 3, BatchesIn: 1, Watermark: 500,
			Counters: map[string]int64{"windows_fired": 2, "late_dropped": 1}, Gauges: map[string]int64{"open_windows": 4}},
		{Task: "w-1", Operator: "w", RowsIn: 5, BatchesIn: 2, Watermark: 300,
			Counters: map[string]int64{"windows_fired": 1}, Gauges: map[string]int64{"open_windows": 1}},
		{Task: "in-0", Operator: "in", Watermark: math.MinInt64,
			Counters: map[string]int64{"wal_replayed": 7}, Gauges: map[string]int64{"wal_cursor": 40, "wal_last": 41}},
		{Task: "in-1", Operator: "in", Watermark: 100,
			Counters: map[string]int64{"wal_replayed": 1}, Gauges: map[string]int64{"wal_cursor": 12, "wal_last": 12}},
		{Task: "out-0", Operator: "out", Watermark: math.MaxInt64},
	}}
	w := m.Operator("w")
	if w.RowsIn != 8 || w.BatchesIn != 3 || w.Watermark != 300 {
		t.Errorf("w: rows %d batches %d watermark %d, want 8, 3, 300", w.RowsIn, w.BatchesIn, w.Watermark)
	}
	if want := map[string]int64{"windows_fired": 3, "late_dropped": 1}; !maps.Equal(w.Counters, want) {
		t.Errorf("w counters %v, want %v", w.Counters, want)
	}
	if want := map[string]int64{"open_windows": 5}; !maps.Equal(w.Gauges, want) {
		t.Errorf("w gauges %v, want %v", w.Gauges, want)
	}
	in := m.Operator("in")
	if in.Watermark != math.MinInt64 {
		t.Errorf("a task before its first watermark holds the operator's back: got %d", in.Watermark)
	}
	if want := map[string]int64{"wal_replayed": 8}; !maps.Equal(in.Counters, want) || len(in.Gauges) != 0 {
		t.Errorf("in: counters %v gauges %v, want %v and no gauges (a WAL's cursor is per task)", in.Counters, in.Gauges, want)
	}
	if out := m.Operator("out"); out.Watermark != math.MaxInt64 || out.Counters != nil || out.Gauges != nil {
		t.Errorf("out: %+v", out)
	}
	if none := m.Operator("ghost"); none.Watermark != math.MinInt64 || none.RowsIn != 0 {
		t.Errorf("unknown operator: %+v", none)
	}
}

// Each producer files its metrics where they belong: totals in Counters,
// values that go up and down in Gauges.
func TestMetricsCountersAndGauges(t *testing.T) {
	t.Parallel()
	src := clicksAt([]any{"ann", 100, "bob", 300}, []any{"bob", 1500}, []any{"ann", 200})
	j, err := arkflow.NewJob("kinds").
		Durability(job.Durability{Path: t.TempDir()}).
		Source("in", src, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", mem.NewSink()).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]int64) []string { return slices.Sorted(maps.Keys(m)) }
	want := map[string][2][]string{
		"w-0":  {{"late_dropped", "late_routed", "late_updated", "null_timestamp_dropped", "null_timestamp_routed", "replayed_skipped", "windows_fired"}, {"open_windows"}},
		"in-0": {{"wal_parked_timeouts", "wal_replayed"}, {"wal_cursor", "wal_last"}},
	}
	for _, task := range j.Metrics().Tasks {
		w, ok := want[task.Task]
		if !ok {
			continue
		}
		if got := keys(task.Counters); !slices.Equal(got, w[0]) {
			t.Errorf("%s counters %v, want %v", task.Task, got, w[0])
		}
		if got := keys(task.Gauges); !slices.Equal(got, w[1]) {
			t.Errorf("%s gauges %v, want %v", task.Task, got, w[1])
		}
		delete(want, task.Task)
	}
	if len(want) > 0 {
		t.Errorf("no metrics for %v", slices.Sorted(maps.Keys(want)))
	}
	w := j.Metrics().Operator("w")
	if w.Counters["windows_fired"] != 3 || w.Counters["late_dropped"] != 1 || w.Watermark != math.MaxInt64 {
		t.Errorf("w: %+v", w)
	}
}
