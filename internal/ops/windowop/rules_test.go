package windowop_test

// One test per event-time rule of the requirements (null event times,
// the watermark before classification, late policies, aggregate types,
// late updates, sessions, window conventions), asserting the exact
// outcome; and the window operator's validation errors.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	arkflow "github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// ---- a running job fed batch by batch ----

// stream is a pipeline over an open memory source: batches are appended
// while the job runs, and the test observes outputs and gauges in between.
type stream struct {
	t         *testing.T
	schema    *arrow.Schema
	src       *mem.Source
	out, late *mem.Sink
	job       *arkflow.Job
	done      chan error
	rows      int64 // rows appended
}

// startStream starts p over an open source with one partition (p.parts is
// ignored).
func startStream(t *testing.T, p pipeline) *stream {
	t.Helper()
	s := &stream{t: t, schema: p.schema, src: mem.NewSource(p.schema, 1), out: mem.NewSink(), late: mem.NewSink(), done: make(chan error, 1)}
	j, err := p.builder(s.src, s.out, s.late).Build()
	if err != nil {
		t.Fatal(err)
	}
	s.job = j
	ctx, cancel := context.WithCancel(context.Background())
	go func() { s.done <- j.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		s.src.Close()
		<-j.Done()
	})
	// Metrics are read only once the job runs: the runtime publishes a
	// task's gauges while it starts without synchronization (a data race
	// in internal/runtime, reported separately); the state lock orders
	// the start before this read.
	polltest.Eventually(t, "the job to run", func() bool { return j.Status() == arkflow.Running }, func() string { return "status " + j.Status().String() })
	return s
}

func (s *stream) window() arkflow.TaskMetrics { return s.job.Metrics().Operator("w") }

func (s *stream) state() string {
	w := s.window()
	return fmt.Sprintf("window rows in %d, gauges %s, out %d rows, late %d rows", w.RowsIn, gaugeLine(allMetrics(w)), s.out.NumRows(), s.late.NumRows())
}

// push appends one batch and waits until the window has received it. The
// watermark the batch moved has then been processed (it travels ahead of
// the batch), so windows_fired is final for it; effects of the batch's own
// rows need polltest.Eventually.
func (s *stream) push(lines ...string) {
	s.t.Helper()
	rec := batchOf(s.t, s.schema, lines...)
	defer rec.Release()
	if err := s.src.Append(0, rec); err != nil {
		s.t.Fatal(err)
	}
	s.rows += int64(len(lines))
	want := s.rows
	polltest.Eventually(s.t, fmt.Sprintf("the window to receive %d rows", want), func() bool { return s.window().RowsIn >= want }, s.state)
}

// gauge returns one gauge of the window operator.
func (s *stream) gauge(name string) int64 { return allMetrics(s.window())[name] }

// waitGauge waits until a gauge has the value.
func (s *stream) waitGauge(name string, v int64) {
	s.t.Helper()
	polltest.Eventually(s.t, fmt.Sprintf("%s = %d", name, v), func() bool { return s.gauge(name) == v }, s.state)
}

// waitRows waits until the sink holds n rows and returns them.
func (s *stream) waitRows(snk *mem.Sink, n int64) []string {
	s.t.Helper()
	polltest.Eventually(s.t, fmt.Sprintf("%d rows in the sink", n), func() bool { return snk.NumRows() >= n }, s.state)
	return rowsOf(s.t, snk.Records())
}

// finish closes the source and waits for the job to end.
func (s *stream) finish() error {
	s.t.Helper()
	s.src.Close()
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		s.t.Fatalf("the job did not end after its source closed; state: %s", s.state())
		return nil
	}
}

func winRow(k string, start, end string, aggs string, update bool) string {
	return fmt.Sprintf(`{"k":%q,"window_start":"1970-01-01T%sZ","window_end":"1970-01-01T%sZ",%s,"__arkflow_window_update":%v}`, k, start, end, aggs, update)
}

func wantRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %s\nwant %s", what, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// ---- Null event times ----

// With the route policy a null event time goes to the late sink
// (with its original columns), counted as null_timestamp_routed; it never
// opens or joins a window.
func TestNullTimestampRouted(t *testing.T) {
	t.Parallel()
	schema := mustSchema(t, "k:string ts:int64 v:int64")
	rec := batchOf(t, schema, `{"k":"a","ts":null,"v":1}`, `{"k":"a","ts":10,"v":2}`, `{"k":"b","v":3}`)
	defer rec.Release()
	res := pipeline{schema: schema, parts: [][]arrow.RecordBatch{{rec}}, def: window.Tumbling(time.Second, job.Count("n"), job.Sum("v", "total")),
		time: []timeOpt{routeLate("late")}, route: true}.run(t)
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantRows(t, "late sink", rowsOf(t, res.late), []string{`{"k":"a","ts":null,"v":1}`, `{"k":"b","ts":null,"v":3}`})
	wantRows(t, "window output", rowsOf(t, res.out), []string{winRow("a", "00:00:00.000", "00:00:01.000", `"n":1,"total":2`, false)})
	g := res.gauges
	if g[windowop.MetricNullRouted] != 2 || g[windowop.MetricNullDropped] != 0 || g[windowop.MetricLateRouted] != 0 || g[windowop.MetricOpenWindows] != 0 {
		t.Fatalf("gauges %s", gaugeLine(g))
	}
}

// With drop and update a null event time is dropped, counted in
// null_timestamp_dropped, acknowledged (the bounded job completes: a held
// acknowledgement would not stop it, but it would stay unacknowledged; see
// also the white-box TestNullTimestampAckCompletesAtOnce), and never
// held: while the job runs, with only null event times received, no window
// is open.
func TestNullTimestampDroppedNeverHeld(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"drop", "update"} {
		t.Run(policy, func(t *testing.T) {
			opts := []timeOpt{lateness(time.Hour)}
			if policy == "update" {
				opts = append(opts, lateUpdate())
			}
			schema := mustSchema(t, "k:string ts:timestamp_ms v:int64")
			s := startStream(t, pipeline{schema: schema, def: window.Tumbling(time.Second, job.Count("n")), time: opts})
			s.push(`{"k":"a","v":1}`, `{"k":"b","ts":null,"v":2}`)
			s.waitGauge(windowop.MetricNullDropped, 2)
			if open := s.gauge(windowop.MetricOpenWindows); open != 0 {
				t.Fatalf("open_windows = %d after null event times only", open)
			}
			s.push(`{"k":"a","ts":5,"v":3}`, `{"k":"c","v":4}`)
			s.waitGauge(windowop.MetricNullDropped, 3)
			if open := s.gauge(windowop.MetricOpenWindows); open != 1 {
				t.Fatalf("open_windows = %d, want 1 (the window of ts=5 only)", open)
			}
			if err := s.finish(); err != nil {
				t.Fatal(err)
			}
			m := s.job.Metrics()
			if m.Status != arkflow.Stopped {
				t.Fatalf("job status %s", m.Status)
			}
			if in, w := m.Operator("in"), m.Operator("w"); in.RowsOut != 4 || w.RowsIn != 4 {
				t.Fatalf("source emitted %d rows, window received %d; want 4 and 4", in.RowsOut, w.RowsIn)
			}
			g := allMetrics(m.Operator("w"))
			if g[windowop.MetricNullDropped] != 3 || g[windowop.MetricNullRouted] != 0 || g[windowop.MetricLateDropped] != 0 || g[windowop.MetricOpenWindows] != 0 {
				t.Fatalf("gauges %s", gaugeLine(g))
			}
			wantRows(t, "output", rowsOf(t, s.out.Records()), []string{winRow("a", "00:00:00.000", "00:00:01.000", `"n":1`, false)})
		})
	}
}

// ---- The watermark advances before rows are classified ----

// In the batch [2100, 100] (size 1000, out_of_orderness 0) the
// watermark advances to 2100 first, so 100 goes to the late policy at
// once: routed, in the late sink and in no window. 2100 is truly in the
// future: it is held (open_windows 1, nothing emitted) and emitted when its
// window fires.
func TestWatermarkAdvancesBeforeRowsAreClassified(t *testing.T) {
	t.Parallel()
	schema := mustSchema(t, "k:string ts:int64 v:int64")
	s := startStream(t, pipeline{schema: schema, def: window.Tumbling(time.Second, job.Count("n"), job.Sum("v", "total")),
		time: []timeOpt{routeLate("late")}, route: true})
	s.push(`{"k":"a","ts":2100,"v":1}`, `{"k":"a","ts":100,"v":2}`)
	wantRows(t, "late sink", s.waitRows(s.late, 1), []string{`{"k":"a","ts":100,"v":2}`})
	s.waitGauge(windowop.MetricOpenWindows, 1)
	if n := s.out.NumRows(); n != 0 || s.gauge(windowop.MetricWindowsFired) != 0 {
		t.Fatalf("%d rows emitted before any window could fire", n)
	}
	if g := allMetrics(s.window()); g[windowop.MetricLateRouted] != 1 || g[windowop.MetricLateDropped] != 0 {
		t.Fatalf("gauges %s", gaugeLine(g))
	}
	// 2999 does not fire [2000, 3000); 3000 does.
	s.push(`{"k":"b","ts":2999,"v":4}`)
	if s.gauge(windowop.MetricWindowsFired) != 0 {
		t.Fatalf("a window fired at watermark 2999; state %s", s.state())
	}
	s.push(`{"k":"a","ts":3000,"v":8}`)
	wantRows(t, "window output", s.waitRows(s.out, 2), []string{
		winRow("a", "00:00:02.000", "00:00:03.000", `"n":1,"total":1`, false),
		winRow("b", "00:00:02.000", "00:00:03.000", `"n":1,"total":4`, false),
	})
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	rows := rowsOf(t, s.out.Records())
	for _, r := range rows {
		if strings.Contains(r, `"total":2`) || strings.Contains(r, `"window_start":"1970-01-01T00:00:00.000Z"`) {
			t.Fatalf("the late row reached a window: %s", r)
		}
	}
	wantRows(t, "late sink at the end", rowsOf(t, s.late.Records()), []string{`{"k":"a","ts":100,"v":2}`})
}

// ---- Late policies ----

// An event past its window's end + allowed lateness follows the
// late policy: drop (counted), route (to the late sink, original columns)
// or update (which can only update within the lateness: past it, dropped).
func TestLatePolicies(t *testing.T) {
	t.Parallel()
	schema := mustSchema(t, "k:string ts:int64 v:int64")
	b1 := batchOf(t, schema, `{"k":"a","ts":500,"v":1}`)
	b2 := batchOf(t, schema, `{"k":"a","ts":1500,"v":2}`)
	b3 := batchOf(t, schema, `{"k":"a","ts":600,"v":4}`)
	defer b1.Release()
	defer b2.Release()
	defer b3.Release()
	fired := []string{
		winRow("a", "00:00:00.000", "00:00:01.000", `"n":1,"total":1`, false),
		winRow("a", "00:00:01.000", "00:00:02.000", `"n":1,"total":2`, false),
	}
	for _, c := range []struct {
		name      string
		opts      []timeOpt
		out, late []string
		gauge     string
	}{
		{"drop", nil, fired, nil, windowop.MetricLateDropped},
		{"drop-within-lateness", []timeOpt{lateness(time.Hour)}, fired, nil, windowop.MetricLateDropped},
		{"route", []timeOpt{routeLate("late")}, fired, []string{`{"k":"a","ts":600,"v":4}`}, windowop.MetricLateRouted},
		{"update-past-lateness", []timeOpt{lateUpdate(), lateness(500 * time.Millisecond)}, fired, nil, windowop.MetricLateDropped},
		{"update-within-lateness", []timeOpt{lateUpdate(), lateness(501 * time.Millisecond)},
			[]string{fired[0], winRow("a", "00:00:00.000", "00:00:01.000", `"n":2,"total":5`, true), fired[1]}, nil, windowop.MetricLateUpdated},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := pipeline{schema: schema, parts: [][]arrow.RecordBatch{{b1, b2, b3}}, def: window.Tumbling(time.Second, job.Count("n"), job.Sum("v", "total")),
				time: c.opts, route: c.name == "route"}.run(t)
			if res.err != nil {
				t.Fatal(res.err)
			}
			wantRows(t, "output", rowsOf(t, res.out), c.out)
			wantRows(t, "late sink", rowsOf(t, res.late), c.late)
			for _, g := range []string{windowop.MetricLateDropped, windowop.MetricLateRouted, windowop.MetricLateUpdated} {
				want := int64(0)
				if g == c.gauge {
					want = 1
				}
				if res.gauges[g] != want {
					t.Errorf("%s = %d, want %d (gauges %s)", g, res.gauges[g], want, gaugeLine(res.gauges))
				}
			}
		})
	}
}

// ---- Aggregate output types ----

// castInts casts an int64 column to another integer type.
func castInts(t *testing.T, col *array.Int64, to arrow.DataType) arrow.Array {
	b := array.NewBuilder(memory.DefaultAllocator, to)
	defer b.Release()
	for i := 0; i < col.Len(); i++ {
		if col.IsNull(i) {
			b.AppendNull()
			continue
		}
		v := col.Value(i)
		switch bb := b.(type) {
		case *array.Int32Builder:
			bb.Append(int32(v))
		case *array.Int16Builder:
			bb.Append(int16(v))
		case *array.Int8Builder:
			bb.Append(int8(v))
		case *array.Uint32Builder:
			bb.Append(uint32(v))
		case *array.Uint16Builder:
			bb.Append(uint16(v))
		case *array.Uint8Builder:
			bb.Append(uint8(v))
		default:
			t.Errorf("castInts: %s", to)
		}
	}
	return b.NewArray()
}

// Aggregates keep the input's numeric type: sum/min/max of
// Float64 are Float64, of Float32 Float32, of every integer type Int64; avg
// is Float64, count Int64; min/max of a timestamp keep its type. An empty
// or all-null group gives null (not 0, not a sentinel). NaN: sum and avg
// propagate it; min and max ignore it unless every value is NaN.
func TestAggregateOutputTypesAndNulls(t *testing.T) {
	t.Parallel()
	schema := mustSchema(t, "k:string ts:int64 i:int64 f64:float64 f32:float32 at:timestamp_us")
	ints := []struct {
		name string
		t    arrow.DataType
	}{
		{"i32", arrow.PrimitiveTypes.Int32}, {"i16", arrow.PrimitiveTypes.Int16}, {"i8", arrow.PrimitiveTypes.Int8},
		{"u32", arrow.PrimitiveTypes.Uint32}, {"u16", arrow.PrimitiveTypes.Uint16}, {"u8", arrow.PrimitiveTypes.Uint8},
	}
	mapped := append([]arrow.Field(nil), schema.Fields()...)
	for _, c := range ints {
		mapped = append(mapped, arrow.Field{Name: c.name, Type: c.t, Nullable: true})
	}
	mappedSchema := arrow.NewSchema(mapped, nil)
	widen := func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		cols := make([]arrow.Array, 0, len(mapped))
		for i := range schema.NumFields() {
			c := rec.Column(i)
			c.Retain()
			cols = append(cols, c)
		}
		for _, c := range ints {
			cols = append(cols, castInts(t, rec.Column(2).(*array.Int64), c.t))
		}
		out := array.NewRecordBatch(mappedSchema, cols, rec.NumRows())
		for _, c := range cols {
			c.Release()
		}
		return out, nil
	}
	aggs := []job.Aggregate{job.Count("n")}
	type col struct {
		name string
		want arrow.DataType
	}
	var want []col
	add := func(name string, t arrow.DataType) { want = append(want, col{name, t}) }
	add("n", arrow.PrimitiveTypes.Int64)
	for _, src := range []struct {
		field string
		out   arrow.DataType
	}{
		{"i", arrow.PrimitiveTypes.Int64},
		{"f64", arrow.PrimitiveTypes.Float64},
		{"f32", arrow.PrimitiveTypes.Float32},
		{"i32", arrow.PrimitiveTypes.Int64}, {"i16", arrow.PrimitiveTypes.Int64}, {"i8", arrow.PrimitiveTypes.Int64},
		{"u32", arrow.PrimitiveTypes.Int64}, {"u16", arrow.PrimitiveTypes.Int64}, {"u8", arrow.PrimitiveTypes.Int64},
	} {
		aggs = append(aggs, job.Sum(src.field, "sum_"+src.field), job.Min(src.field, "min_"+src.field), job.Max(src.field, "max_"+src.field), job.Avg(src.field, "avg_"+src.field))
		add("sum_"+src.field, src.out)
		add("min_"+src.field, src.out)
		add("max_"+src.field, src.out)
		add("avg_"+src.field, arrow.PrimitiveTypes.Float64)
	}
	tsUS := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	aggs = append(aggs, job.Min("at", "min_at"), job.Max("at", "max_at"), job.First("i32", "first_i32"), job.Last("f32", "last_f32"))
	add("min_at", tsUS)
	add("max_at", tsUS)
	add("first_i32", arrow.PrimitiveTypes.Int32)
	add("last_f32", arrow.PrimitiveTypes.Float32)

	rec := batchOf(t, schema,
		// key a: values; key b: every value null (an all-null group).
		`{"k":"a","ts":1,"i":3,"f64":1.5,"f32":0.25,"at":10}`,
		`{"k":"a","ts":2,"i":-5,"f64":-0.5,"f32":-2,"at":5}`,
		`{"k":"b","ts":3}`,
		`{"k":"a","ts":4}`,
	)
	defer rec.Release()
	src, err := mem.NewSourceFrom([]arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	out := mem.NewSink()
	j, err := arkflow.NewJob("types").
		Source("in", src, arkflow.EventTime{Field: "ts", OutOfOrderness: time.Hour}).
		Map("widen", widen, arkflow.WithSchema(mappedSchema)).
		KeyBy("k").
		Window("w", window.Tumbling(time.Second, aggs...)).
		Sink("out", out).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := out.Records()
	if len(recs) == 0 {
		t.Fatal("no output")
	}
	for _, r := range recs {
		s := r.Schema()
		if s.Field(0).Name != "k" || s.Field(1).Name != window.ColumnStart || s.Field(2).Name != window.ColumnEnd ||
			s.Field(s.NumFields()-1).Name != window.ColumnUpdate || s.Field(s.NumFields()-1).Type.ID() != arrow.BOOL {
			t.Fatalf("output columns: %s", s)
		}
		tsMS := &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
		if !arrow.TypeEqual(s.Field(1).Type, tsMS) || !arrow.TypeEqual(s.Field(2).Type, tsMS) {
			t.Fatalf("window_start/window_end types %s %s, want %s", s.Field(1).Type, s.Field(2).Type, tsMS)
		}
		for _, c := range want {
			idx := s.FieldIndices(c.name)
			if len(idx) != 1 {
				t.Fatalf("no column %q in %s", c.name, s)
			}
			if got := s.Field(idx[0]).Type; !arrow.TypeEqual(got, c.want) {
				t.Errorf("column %s: type %s, want %s", c.name, got, c.want)
			}
		}
	}
	got := rowsOf(t, recs)
	if len(got) != 2 {
		t.Fatalf("got %d rows, want 2: %q", len(got), got)
	}
	var a, b map[string]any
	if err := json.Unmarshal([]byte(got[0]), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got[1]), &b); err != nil {
		t.Fatal(err)
	}
	// Key a: exact values.
	for name, v := range map[string]any{
		"n": 3.0, "sum_i": -2.0, "min_i": -5.0, "max_i": 3.0, "avg_i": -1.0,
		"sum_f64": 1.0, "min_f64": -0.5, "max_f64": 1.5, "avg_f64": 0.5,
		"sum_f32": -1.75, "min_f32": -2.0, "max_f32": 0.25, "avg_f32": -0.875,
		"sum_i8": -2.0, "min_u8": 3.0, "max_u8": 251.0, // uint8(-5) = 251
		"min_at": "1970-01-01T00:00:00.000005Z", "max_at": "1970-01-01T00:00:00.000010Z",
		"first_i32": 3.0, "last_f32": -2.0,
	} {
		if a[name] != v {
			t.Errorf("key a: %s = %v, want %v", name, a[name], v)
		}
	}
	// Key b: every aggregate of a field is null; count counts the row.
	if b["k"] != "b" || b["n"] != 1.0 {
		t.Fatalf("second row: %s", got[1])
	}
	for _, c := range want {
		if c.name == "n" {
			continue
		}
		if v, ok := b[c.name]; !ok || v != nil {
			t.Errorf("all-null group: %s = %v, want null", c.name, v)
		}
	}
	// The arrays themselves hold nulls (not a zero value with a JSON
	// rendering quirk).
	last := recs[len(recs)-1]
	for i := 3; i < int(last.NumCols())-1; i++ {
		if last.Schema().Field(i).Name == "n" {
			continue
		}
		if !last.Column(i).IsNull(int(last.NumRows()) - 1) {
			t.Errorf("column %s of the all-null group is not null", last.Schema().Field(i).Name)
		}
	}
}

// NaN as documented in internal/agg: sum and avg propagate it;
// min and max ignore it unless every non-null value is NaN.
func TestAggregateNaN(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"float64", "float32"} {
		schema := mustSchema(t, "k:string ts:int64 v:"+typ)
		rec := batchOf(t, schema,
			`{"k":"some","ts":1,"v":2}`, `{"k":"some","ts":2,"v":"NaN"}`, `{"k":"some","ts":3,"v":-1}`,
			`{"k":"all","ts":4,"v":"NaN"}`, `{"k":"all","ts":5,"v":null}`, `{"k":"all","ts":6,"v":"NaN"}`)
		res := pipeline{schema: schema, parts: [][]arrow.RecordBatch{{rec}},
			def:  window.Tumbling(time.Second, job.Sum("v", "s"), job.Avg("v", "a"), job.Min("v", "lo"), job.Max("v", "hi")),
			time: outOfOrderness(1000)}.run(t)
		rec.Release()
		if res.err != nil {
			t.Fatal(res.err)
		}
		wantRows(t, typ, rowsOf(t, res.out), []string{
			winRow("some", "00:00:00.000", "00:00:01.000", `"s":"NaN","a":"NaN","lo":-1,"hi":2`, false),
			winRow("all", "00:00:00.000", "00:00:01.000", `"s":"NaN","a":"NaN","lo":"NaN","hi":"NaN"`, false),
		})
	}
}

// ---- Late updates and the lateness deadline ----

// Within allowed lateness, update modifies the same (key,
// window) aggregate and re-emits the full corrected row with
// __arkflow_window_update = true. Once the watermark passes end +
// allowed_lateness the window's state is freed (open_windows, read while
// the job runs), and later rows for it are dropped and counted.
func TestUpdateWithinLatenessThenFreed(t *testing.T) {
	t.Parallel()
	schema := mustSchema(t, "k:string ts:int64 v:int64")
	s := startStream(t, pipeline{schema: schema,
		def:  window.Tumbling(time.Second, job.Count("n"), job.Sum("v", "total"), job.Max("v", "hi")),
		time: []timeOpt{lateUpdate(), lateness(time.Second)}})
	s.push(`{"k":"a","ts":500,"v":1}`, `{"k":"b","ts":700,"v":10}`)
	s.waitGauge(windowop.MetricOpenWindows, 2)
	// Watermark 1500: [0, 1000) fires for a and b and is kept until 2000.
	s.push(`{"k":"a","ts":1500,"v":2}`)
	wantRows(t, "first firing", s.waitRows(s.out, 2), []string{
		winRow("a", "00:00:00.000", "00:00:01.000", `"n":1,"total":1,"hi":1`, false),
		winRow("b", "00:00:00.000", "00:00:01.000", `"n":1,"total":10,"hi":10`, false),
	})
	s.waitGauge(windowop.MetricOpenWindows, 3) // a and b in [0,1000) kept, a in [1000,2000)
	// A late row within the deadline: a's [0, 1000) is corrected and
	// emitted again in full; b's is untouched.
	s.push(`{"k":"a","ts":600,"v":4}`)
	rows := s.waitRows(s.out, 3)
	wantRows(t, "update", rows[2:], []string{winRow("a", "00:00:00.000", "00:00:01.000", `"n":2,"total":5,"hi":4`, true)})
	s.waitGauge(windowop.MetricLateUpdated, 1)
	if open := s.gauge(windowop.MetricOpenWindows); open != 3 {
		t.Fatalf("open_windows = %d after an update, want 3 (the update reuses the window)", open)
	}
	// Again: the same aggregate keeps accumulating.
	s.push(`{"k":"a","ts":999,"v":8}`)
	rows = s.waitRows(s.out, 4)
	wantRows(t, "second update", rows[3:], []string{winRow("a", "00:00:00.000", "00:00:01.000", `"n":3,"total":13,"hi":8`, true)})
	// Watermark 2000 = end + lateness of [0, 1000): freed; [1000, 2000)
	// fires (2000 >= 2000 + 1000? no: it is kept until 3000).
	s.push(`{"k":"c","ts":2000,"v":100}`)
	rows = s.waitRows(s.out, 5)
	wantRows(t, "second firing", rows[4:], []string{winRow("a", "00:00:01.000", "00:00:02.000", `"n":1,"total":2,"hi":2`, false)})
	s.waitGauge(windowop.MetricOpenWindows, 2) // a's [1000,2000) kept, c's [2000,3000) open
	// Past the deadline: dropped and counted, no output.
	s.push(`{"k":"a","ts":100,"v":1000}`, `{"k":"b","ts":999,"v":1000}`)
	s.waitGauge(windowop.MetricLateDropped, 2)
	if s.gauge(windowop.MetricLateUpdated) != 2 || s.out.NumRows() != 5 {
		t.Fatalf("rows past the deadline changed something: %s", s.state())
	}
	// Until watermark 3000, a's [1000, 2000) still takes updates.
	s.push(`{"k":"a","ts":1999,"v":1}`)
	rows = s.waitRows(s.out, 6)
	wantRows(t, "update of [1000, 2000)", rows[5:], []string{winRow("a", "00:00:01.000", "00:00:02.000", `"n":2,"total":3,"hi":2`, true)})
	// Watermark 3000 fires c's [2000, 3000) and frees a's [1000, 2000):
	// a row for it is now dropped, not an update.
	s.push(`{"k":"c","ts":3000,"v":1}`)
	rows = s.waitRows(s.out, 7)
	wantRows(t, "third firing", rows[6:], []string{winRow("c", "00:00:02.000", "00:00:03.000", `"n":1,"total":100,"hi":100`, false)})
	s.waitGauge(windowop.MetricOpenWindows, 2) // c's [2000,3000) kept, c's [3000,4000) open
	s.push(`{"k":"a","ts":1500,"v":1}`)
	s.waitGauge(windowop.MetricLateDropped, 3)
	if s.gauge(windowop.MetricLateUpdated) != 3 || s.gauge(windowop.MetricOpenWindows) != 2 {
		t.Fatalf("a row for a freed window changed something: %s", s.state())
	}
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	g := allMetrics(s.job.Metrics().Operator("w"))
	if g[windowop.MetricOpenWindows] != 0 || g[windowop.MetricLateDropped] != 3 || g[windowop.MetricLateUpdated] != 3 || g[windowop.MetricWindowsFired] != 5 {
		t.Fatalf("final gauges %s", gaugeLine(g))
	}
}

// After the deadline, rows for the window follow the policy:
// drop → dropped and counted; route → routed (inside the lateness too:
// allowed lateness only matters to update).
func TestAfterDeadlineFollowsPolicy(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"drop", "route", "update"} {
		t.Run(policy, func(t *testing.T) {
			opts := []timeOpt{lateness(time.Second)}
			switch policy {
			case "route":
				opts = append(opts, routeLate("late"))
			case "update":
				opts = append(opts, lateUpdate())
			}
			schema := mustSchema(t, "k:string ts:int64 v:int64")
			s := startStream(t, pipeline{schema: schema, def: window.Tumbling(time.Second, job.Count("n")), time: opts, route: policy == "route"})
			s.push(`{"k":"a","ts":500,"v":1}`)
			s.push(`{"k":"a","ts":1500,"v":2}`) // fires [0,1000), deadline 2000
			s.push(`{"k":"a","ts":600,"v":3}`)  // late, inside the deadline
			s.push(`{"k":"a","ts":2000,"v":4}`) // frees [0,1000)
			s.push(`{"k":"a","ts":700,"v":5}`)  // past the deadline
			var late []string
			switch policy {
			case "drop":
				s.waitGauge(windowop.MetricLateDropped, 2)
			case "route":
				s.waitGauge(windowop.MetricLateRouted, 2)
				late = []string{`{"k":"a","ts":600,"v":3}`, `{"k":"a","ts":700,"v":5}`}
			case "update":
				s.waitGauge(windowop.MetricLateDropped, 1)
			}
			if policy == "update" {
				s.waitGauge(windowop.MetricOpenWindows, 2) // [1000,2000) kept for updates, [2000,3000) open
			} else {
				// Under drop and route nothing can change a fired window,
				// so it is freed when it fires: only [2000,3000) is open.
				s.waitGauge(windowop.MetricOpenWindows, 1)
			}
			if err := s.finish(); err != nil {
				t.Fatal(err)
			}
			wantRows(t, "late sink", rowsOf(t, s.late.Records()), late)
			want := []string{winRow("a", "00:00:00.000", "00:00:01.000", `"n":1`, false)}
			if policy == "update" {
				want = append(want, winRow("a", "00:00:00.000", "00:00:01.000", `"n":2`, true))
			}
			want = append(want, winRow("a", "00:00:01.000", "00:00:02.000", `"n":1`, false), winRow("a", "00:00:02.000", "00:00:03.000", `"n":1`, false))
			wantRows(t, "output", rowsOf(t, s.out.Records()), want)
			if g := allMetrics(s.job.Metrics().Operator("w")); g[windowop.MetricOpenWindows] != 0 {
				t.Fatalf("gauges at the end %s", gaugeLine(g))
			}
		})
	}
}

// ---- Session windows ----

// An event that bridges two sessions merges them; the merged
// session fires once, with count and sum equal to the sums of both plus
// the bridging event.
func TestSessionsMergeAndFireOnce(t *testing.T) {
	t.Parallel()
	schema := mustSchema(t, "k:string ts:int64 v:int64")
	s := startStream(t, pipeline{schema: schema, def: window.Session(300*time.Millisecond, job.Count("n"), job.Sum("v", "total"), job.Min("v", "lo"), job.Max("v", "hi")),
		time: outOfOrderness(1000)})
	s.push(`{"k":"a","ts":0,"v":1}`, `{"k":"a","ts":100,"v":2}`) // [0, 400)
	s.push(`{"k":"a","ts":650,"v":4}`, `{"k":"b","ts":720,"v":64}`)
	s.push(`{"k":"a","ts":800,"v":8}`) // [650, 1100)
	s.waitGauge(windowop.MetricOpenWindows, 3)
	s.push(`{"k":"a","ts":375,"v":16}`) // [375, 675) bridges both
	s.waitGauge(windowop.MetricOpenWindows, 2)
	if s.gauge(windowop.MetricWindowsFired) != 0 {
		t.Fatalf("fired early: %s", s.state())
	}
	// Watermark 1100 (2100 - 1000): a's merged session [0, 1100) fires.
	s.push(`{"k":"c","ts":2100,"v":0}`)
	wantRows(t, "merged session", s.waitRows(s.out, 2), []string{
		winRow("b", "00:00:00.720", "00:00:01.020", `"n":1,"total":64,"lo":64,"hi":64`, false),
		winRow("a", "00:00:00.000", "00:00:01.100", `"n":5,"total":31,"lo":1,"hi":16`, false),
	})
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	rows := rowsOf(t, s.out.Records())
	n := 0
	for _, r := range rows {
		if strings.HasPrefix(r, `{"k":"a"`) {
			n++
		}
	}
	if n != 1 || len(rows) != 3 {
		t.Fatalf("key a emitted %d times (want once); rows %q", n, rows)
	}
	if g := allMetrics(s.job.Metrics().Operator("w")); g[windowop.MetricWindowsFired] != 3 || g[windowop.MetricOpenWindows] != 0 {
		t.Fatalf("gauges %s", gaugeLine(g))
	}
}

// A late bridging event within allowed lateness
// under update merges the two fired sessions and re-emits the merged
// session with update = true and the combined aggregate.
func TestSessionLateBridgeUnderUpdate(t *testing.T) {
	t.Parallel()
	schema := mustSchema(t, "k:string ts:int64 v:int64")
	s := startStream(t, pipeline{schema: schema, def: window.Session(300*time.Millisecond, job.Count("n"), job.Sum("v", "total")),
		time: []timeOpt{lateUpdate(), lateness(10 * time.Second)}})
	s.push(`{"k":"a","ts":0,"v":1}`)
	s.push(`{"k":"a","ts":500,"v":2}`)  // fires [0,300)
	s.push(`{"k":"a","ts":2000,"v":4}`) // fires [500,800)
	s.waitRows(s.out, 2)
	s.waitGauge(windowop.MetricOpenWindows, 3)
	s.push(`{"k":"a","ts":250,"v":8}`) // bridges [0,300) and [500,800)
	rows := s.waitRows(s.out, 3)
	wantRows(t, "output", rows, []string{
		winRow("a", "00:00:00.000", "00:00:00.300", `"n":1,"total":1`, false),
		winRow("a", "00:00:00.500", "00:00:00.800", `"n":1,"total":2`, false),
		winRow("a", "00:00:00.000", "00:00:00.800", `"n":3,"total":11`, true),
	})
	s.waitGauge(windowop.MetricOpenWindows, 2) // the merged session and [2000, 2300)
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	if g := allMetrics(s.job.Metrics().Operator("w")); g[windowop.MetricLateUpdated] != 1 || g[windowop.MetricOpenWindows] != 0 {
		t.Fatalf("gauges %s", gaugeLine(g))
	}
}

// ---- Window and watermark conventions ----

// step is one row pushed as a batch, and windows_fired after it.
type step struct {
	row   string
	fired int64
}

// firing pushes batches one at a time and checks windows_fired after each
// (the watermark a batch moves is processed before the batch).
func firing(t *testing.T, p pipeline, steps []step) *stream {
	t.Helper()
	s := startStream(t, p)
	for i, st := range steps {
		s.push(st.row)
		if got := s.gauge(windowop.MetricWindowsFired); got != st.fired {
			t.Fatalf("step %d (%s): windows_fired = %d, want %d", i, st.row, got, st.fired)
		}
	}
	return s
}

// Windows are half-open (an event at exactly end belongs to the
// next window) and fire once the watermark >= end.
func TestHalfOpenAndFiringAtEnd(t *testing.T) {
	t.Parallel()
	schema := mustSchema(t, "k:string ts:int64 v:int64")
	s := firing(t, pipeline{schema: schema, def: window.Tumbling(time.Second, job.Count("n"), job.Sum("v", "total"))}, []step{
		{`{"k":"a","ts":0,"v":1}`, 0},
		{`{"k":"a","ts":999,"v":2}`, 0},
		{`{"k":"a","ts":1000,"v":4}`, 1}, // watermark 1000 >= end 1000
		{`{"k":"a","ts":1999,"v":8}`, 1},
		{`{"k":"a","ts":2000,"v":16}`, 2},
	})
	wantRows(t, "output", s.waitRows(s.out, 2), []string{
		winRow("a", "00:00:00.000", "00:00:01.000", `"n":2,"total":3`, false),
		winRow("a", "00:00:01.000", "00:00:02.000", `"n":2,"total":12`, false),
	})
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
}

// Out_of_orderness delays firing by that much; monotonous uses
// the max event time.
func TestOutOfOrdernessAndMonotonous(t *testing.T) {
	t.Parallel()
	schema := mustSchema(t, "k:string ts:int64 v:int64")
	def := window.Tumbling(time.Second, job.Count("n"))
	s := firing(t, pipeline{schema: schema, def: def, time: outOfOrderness(250)}, []step{
		{`{"k":"a","ts":10,"v":1}`, 0},
		{`{"k":"a","ts":1000,"v":1}`, 0},
		{`{"k":"a","ts":1249,"v":1}`, 0}, // watermark 999
		{`{"k":"a","ts":900,"v":1}`, 0},  // not late: joins [0, 1000)
		{`{"k":"a","ts":1250,"v":1}`, 1}, // watermark 1000
	})
	wantRows(t, "bounded", s.waitRows(s.out, 1), []string{winRow("a", "00:00:00.000", "00:00:01.000", `"n":2`, false)})
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	s = firing(t, pipeline{schema: schema, def: def, time: []timeOpt{ooo(time.Hour), monotonous()}}, []step{
		{`{"k":"a","ts":10,"v":1}`, 0},
		{`{"k":"a","ts":999,"v":1}`, 0},
		{`{"k":"a","ts":1000,"v":1}`, 1},
		{`{"k":"a","ts":999,"v":1}`, 1}, // late
	})
	s.waitGauge(windowop.MetricLateDropped, 1)
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
}

// An event is late for a window when the watermark has reached
// the window's end, whether or not the window held data; the operator
// watermark never moves backwards (an older batch does not lower it).
func TestLateForEmptyWindow(t *testing.T) {
	t.Parallel()
	schema := mustSchema(t, "k:string ts:int64 v:int64")
	s := startStream(t, pipeline{schema: schema, def: window.Tumbling(time.Second, job.Count("n")),
		time: []timeOpt{routeLate("late")}, route: true})
	s.push(`{"k":"a","ts":5000,"v":1}`)
	s.push(`{"k":"b","ts":4000,"v":2}`) // [4000,5000) is empty and late at watermark 5000
	s.push(`{"k":"b","ts":5999,"v":3}`)
	wantRows(t, "late", s.waitRows(s.late, 1), []string{`{"k":"b","ts":4000,"v":2}`})
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	wantRows(t, "output", rowsOf(t, s.out.Records()), []string{
		winRow("a", "00:00:05.000", "00:00:06.000", `"n":1`, false),
		winRow("b", "00:00:05.000", "00:00:06.000", `"n":1`, false),
	})
}

// ---- determinism ----

// Determinism: the same input in the same order gives byte-identical
// output, for every window kind and policy, over several partitions.
func TestDeterminismSameInputSameOutput(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(42, 1))
	schema := mustSchema(t, "k:string ts:int64 v:float64")
	const parts = 3
	batches := make([][]arrow.RecordBatch, parts)
	for p := range parts {
		base := int64(0)
		for range 8 {
			var lines []string
			for range 1 + r.IntN(20) {
				base += r.Int64N(300)
				ts := base - r.Int64N(2000) // some late
				if r.IntN(15) == 0 {
					lines = append(lines, fmt.Sprintf(`{"k":"k%d","v":%g}`, r.IntN(5), r.Float64()))
					continue
				}
				lines = append(lines, fmt.Sprintf(`{"k":"k%d","ts":%d,"v":%g}`, r.IntN(5), ts, math.Round(r.Float64()*1000)/8))
			}
			batches[p] = append(batches[p], batchOf(t, schema, lines...))
		}
	}
	defer func() {
		for _, bs := range batches {
			for _, b := range bs {
				b.Release()
			}
		}
	}()
	aggs := []job.Aggregate{job.Count("n"), job.Sum("v", "s"), job.Avg("v", "a"), job.Min("v", "lo"), job.Max("v", "hi"), job.First("v", "f"), job.Last("v", "l")}
	defs := map[string]window.Definition{
		"tumbling": window.Tumbling(700*time.Millisecond, aggs...),
		"sliding":  window.Sliding(1000*time.Millisecond, 300*time.Millisecond, aggs...),
		"session":  window.Session(150*time.Millisecond, aggs...),
	}
	for name, d := range defs {
		for _, policy := range []string{"drop", "route", "update"} {
			t.Run(name+"/"+policy, func(t *testing.T) {
				opts := []timeOpt{ooo(400 * time.Millisecond), lateness(time.Second)}
				switch policy {
				case "route":
					opts = append(opts, routeLate("late"))
				case "update":
					opts = append(opts, lateUpdate())
				}
				p := pipeline{schema: schema, parts: batches, def: d, time: opts, route: policy == "route"}
				var first string
				for run := range 4 {
					res := p.run(t)
					if res.err != nil {
						t.Fatal(res.err)
					}
					got := strings.Join(rowsOf(t, res.out), "\n") + "\n--late--\n" + strings.Join(rowsOf(t, res.late), "\n") + "\n" + gaugeLine(res.gauges)
					if run == 0 {
						first = got
						if len(res.out) == 0 {
							t.Fatal("no output")
						}
						continue
					}
					if got != first {
						t.Fatalf("run %d differs from run 0:\n%s\n---\n%s", run, got, first)
					}
				}
			})
		}
	}
}

// ---- Validation: bad window specs ----

const baseSpec = `{
  "id": "v",
  "operators": [
    {"id": "in", "kind": "source"},
    {"id": "w", "kind": "window", "stateful": true, "key_field": "k",
     "config": {"window": {"type": "tumbling", "size_ms": 1000},
                "aggregates": [{"function": "count", "as": "n"}, {"function": "sum", "field": "v", "as": "total"}]}},
    {"id": "out", "kind": "sink"},
    {"id": "late", "kind": "sink"},
    {"id": "tag", "kind": "map", "config": {"set": [{"name": "x", "expr": "v * 2"}]}}
  ],
  "edges": [
    {"id": "in-w", "from": "in", "to": "w", "partitioned": true},
    {"id": "w-out", "from": "w", "to": "out"},
    {"id": "in-tag", "from": "in", "to": "tag"},
    {"id": "tag-late", "from": "tag", "to": "late"}
  ],
  "sources": [{"operator_id": "in", "input_type": "memory",
               "config": {"schema": [{"name": "k", "type": "string"}, {"name": "ts", "type": "int64"},
                                     {"name": "v", "type": "float64"}, {"name": "s", "type": "string"}]},
               "time": {"mode": "event_time", "timestamp_field": "ts",
                        "watermark": {"strategy": "bounded_out_of_orderness", "out_of_orderness_ms": 0},
                        "allowed_lateness_ms": 0, "late_event_policy": "drop"}}],
  "sinks": [{"operator_id": "out", "output_type": "memory"}, {"operator_id": "late", "output_type": "memory"}]
}`

// validate applies mutate to the base spec (as decoded JSON), parses it
// and validates it.
func validate(t *testing.T, mutate func(m map[string]any)) error {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(baseSpec), &m); err != nil {
		t.Fatal(err)
	}
	mutate(m)
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := job.Parse(raw)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return arkflow.Validate(spec)
}

func windowOp(m map[string]any) map[string]any {
	return m["operators"].([]any)[1].(map[string]any)
}

func windowConfig(m map[string]any) map[string]any {
	return windowOp(m)["config"].(map[string]any)
}

func sourceTime(m map[string]any) map[string]any {
	return m["sources"].([]any)[0].(map[string]any)["time"].(map[string]any)
}

// wantProblem checks that err holds a ValidationError with exactly this
// operator, field path and reason.
func wantProblem(t *testing.T, err error, op, field, reason string) {
	t.Helper()
	ves := job.AsValidationErrors(err)
	if ves == nil {
		t.Fatalf("got %v, want validation errors", err)
	}
	for _, e := range ves {
		if e.Operator == op && e.Field == field && e.Reason == reason {
			if e.Job != "v" {
				t.Errorf("error names job %q", e.Job)
			}
			want := fmt.Sprintf("job %q: operator %q: %s: %s", "v", op, field, reason)
			if e.Error() != want {
				t.Errorf("message %q, want %q", e.Error(), want)
			}
			return
		}
	}
	var got []string
	for _, e := range ves {
		got = append(got, fmt.Sprintf("[%s] %s: %s", e.Operator, e.Field, e.Reason))
	}
	t.Fatalf("no error [%s] %s: %s among:\n%s", op, field, reason, strings.Join(got, "\n"))
}

func TestValidateBaseSpecIsValid(t *testing.T) {
	t.Parallel()
	if err := validate(t, func(map[string]any) {}); err != nil {
		t.Fatalf("the base spec does not validate: %v", err)
	}
}

// Window size 0.
func TestValidateWindowSizeZero(t *testing.T) {
	t.Parallel()
	err := validate(t, func(m map[string]any) {
		windowConfig(m)["window"] = map[string]any{"type": "tumbling", "size_ms": 0}
	})
	wantProblem(t, err, "w", "operators[1].config.window.size_ms", "must be > 0 (got 0)")
}

// A slide larger than the size; a negative gap.
func TestValidateSlideLargerThanSize(t *testing.T) {
	t.Parallel()
	err := validate(t, func(m map[string]any) {
		windowConfig(m)["window"] = map[string]any{"type": "sliding", "size_ms": 1000, "slide_ms": 2000}
	})
	wantProblem(t, err, "w", "operators[1].config.window.slide_ms", "must be <= size_ms=1000 (got 2000): a slide larger than the window would skip events")
	err = validate(t, func(m map[string]any) {
		windowConfig(m)["window"] = map[string]any{"type": "session", "gap_ms": -1}
	})
	wantProblem(t, err, "w", "operators[1].config.window.gap_ms", "must be > 0 (got -1)")
}

// An unknown aggregate function.
func TestValidateUnknownAggregateFunction(t *testing.T) {
	t.Parallel()
	err := validate(t, func(m map[string]any) {
		windowConfig(m)["aggregates"] = []any{map[string]any{"function": "count", "as": "n"}, map[string]any{"function": "median", "field": "v"}}
	})
	wantProblem(t, err, "w", "operators[1].config.aggregates[1].function", `unknown aggregate function "median" (known: count, sum, min, max, avg, first, last)`)
}

// Sum of a string column.
func TestValidateSumOfStringField(t *testing.T) {
	t.Parallel()
	err := validate(t, func(m map[string]any) {
		windowConfig(m)["aggregates"] = []any{map[string]any{"function": "sum", "field": "s", "as": "total"}}
	})
	wantProblem(t, err, "w", "operators[1].config.aggregates[0].field", `sum cannot aggregate column "s" of type utf8 (it needs a numeric column)`)
}

// An event-time field of a non-time type.
func TestValidateTimestampFieldNotATime(t *testing.T) {
	t.Parallel()
	err := validate(t, func(m map[string]any) { sourceTime(m)["timestamp_field"] = "s" })
	wantProblem(t, err, "in", "sources[0].time.timestamp_field", `column "s" has type utf8; event time needs int64 (milliseconds) or a timestamp`)
	err = validate(t, func(m map[string]any) { sourceTime(m)["timestamp_field"] = "nope" })
	wantProblem(t, err, "in", "sources[0].time.timestamp_field", `unknown column "nope" (columns: k, ts, v, s, __meta_source, __meta_partition, __meta_offset)`)
}

// A window with parallelism 2 not fed by a keyed edge.
func TestValidateWindowNotKeyed(t *testing.T) {
	t.Parallel()
	err := validate(t, func(m map[string]any) {
		windowOp(m)["parallelism"] = 2
		m["edges"].([]any)[0].(map[string]any)["partitioned"] = false
	})
	wantProblem(t, err, "w", "operators[1].key_field", `rows of one key must all reach the same subtask: make every input edge of "w" partitioned, give it parallelism 1, or (when the input is already partitioned by this key) declare the source's keyed_by "k"`)
	// With parallelism 1 an unpartitioned edge is fine.
	if err := validate(t, func(m map[string]any) { m["edges"].([]any)[0].(map[string]any)["partitioned"] = false }); err != nil {
		t.Fatalf("parallelism 1 without a keyed edge: %v", err)
	}
}

// The route policy naming an operator that is not a sink, or none.
func TestValidateRouteToNonSink(t *testing.T) {
	t.Parallel()
	err := validate(t, func(m map[string]any) {
		sourceTime(m)["late_event_policy"] = "route"
		sourceTime(m)["late_event_route"] = "tag"
	})
	wantProblem(t, err, "in", "sources[0].time.late_event_route", `operator "tag" has kind "map"; late rows are routed to a sink`)
	err = validate(t, func(m map[string]any) {
		sourceTime(m)["late_event_policy"] = "route"
		sourceTime(m)["late_event_route"] = "ghost"
	})
	wantProblem(t, err, "in", "sources[0].time.late_event_route", `unknown operator "ghost" (operators: "in", "late", "out", "tag", "w")`)
	err = validate(t, func(m map[string]any) { sourceTime(m)["late_event_policy"] = "route" })
	wantProblem(t, err, "in", "sources[0].time.late_event_route", `late_event_policy "route" needs late_event_route naming a sink operator`)
}

// Every problem is reported at once.
func TestValidateAllProblemsAtOnce(t *testing.T) {
	t.Parallel()
	err := validate(t, func(m map[string]any) {
		windowConfig(m)["window"] = map[string]any{"type": "tumbling", "size_ms": 0}
		windowConfig(m)["aggregates"] = []any{map[string]any{"function": "median", "field": "v"}, map[string]any{"function": "sum", "field": "s"}}
	})
	wantProblem(t, err, "w", "operators[1].config.window.size_ms", "must be > 0 (got 0)")
	wantProblem(t, err, "w", "operators[1].config.aggregates[0].function", `unknown aggregate function "median" (known: count, sum, min, max, avg, first, last)`)
	wantProblem(t, err, "w", "operators[1].config.aggregates[1].field", `sum cannot aggregate column "s" of type utf8 (it needs a numeric column)`)
}
