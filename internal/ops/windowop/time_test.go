package windowop_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// End to end: the same instant in Int64 ms and in Timestamp s,
// ms, µs and ns lands in the same window, and -1 ms (in every unit that can
// express it) lands in [-1000, 0).
func TestEventTimeSameWindowInEveryUnitEndToEnd(t *testing.T) {
	t.Parallel()
	const instant = 1_704_164_645_000 // 2024-01-02T03:04:05Z
	inputs := []struct {
		typ    string
		v, neg int64 // the instant, and -1 ms (or -1 s for seconds)
		negWin string
	}{
		{"int64", instant, -1, "1969-12-31T23:59:59.000Z"},
		{"timestamp_s", instant / 1000, -1, "1969-12-31T23:59:59.000Z"},
		{"timestamp_ms", instant, -1, "1969-12-31T23:59:59.000Z"},
		{"timestamp_us", instant * 1000, -1, "1969-12-31T23:59:59.000Z"},
		{"timestamp_ns", instant * 1_000_000, -1, "1969-12-31T23:59:59.000Z"},
	}
	for _, in := range inputs {
		schema := mustSchema(t, "k:string ts:"+in.typ)
		rec := batchOf(t, schema,
			`{"k":"neg","ts":`+itoa(in.neg)+`}`,
			`{"k":"a","ts":`+itoa(in.v)+`}`)
		res := pipeline{schema: schema, parts: [][]arrow.RecordBatch{{rec}}, def: window.Tumbling(1e9, job.Count("n")),
			time: outOfOrderness(instant + 10_000)}.run(t)
		rec.Release()
		if res.err != nil {
			t.Fatalf("%s: %v", in.typ, res.err)
		}
		got := rowsOf(t, res.out)
		want := []string{
			`{"k":"neg","window_start":"` + in.negWin + `","window_end":"1970-01-01T00:00:00.000Z","n":1,"__arkflow_window_update":false}`,
			`{"k":"a","window_start":"2024-01-02T03:04:05.000Z","window_end":"2024-01-02T03:04:06.000Z","n":1,"__arkflow_window_update":false}`,
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", in.typ, got, want)
		}
	}
}

// End to end: a Timestamp(s) value whose milliseconds overflow
// int64 fails the job with an error naming the field; nothing is emitted.
func TestEventTimeOverflowFailsTheJobNamingTheField(t *testing.T) {
	t.Parallel()
	schema := mustSchema(t, "k:string happened_at:timestamp_s")
	ok := batchOf(t, schema, `{"k":"a","happened_at":1}`)
	bad := batchOf(t, schema, `{"k":"a","happened_at":2}`, `{"k":"a","happened_at":9223372036854776}`)
	defer ok.Release()
	defer bad.Release()
	res := pipeline{schema: schema, parts: [][]arrow.RecordBatch{{ok, bad}}, field: "happened_at",
		def: window.Tumbling(1e9, job.Count("n"))}.run(t)
	if res.err == nil {
		t.Fatal("the job succeeded; want an error naming the field")
	}
	var te *eventtime.TimeError
	if !errors.As(res.err, &te) || te.Field != "happened_at" || te.Value != 9223372036854776 || te.Unit != "s" {
		t.Fatalf("got %v (%T), want a *eventtime.TimeError for happened_at", res.err, res.err)
	}
	if !strings.Contains(res.err.Error(), `"happened_at"`) {
		t.Fatalf("the error does not name the field: %v", res.err)
	}
	if rows := rowsOf(t, res.out); len(rows) != 0 {
		t.Fatalf("a failed job emitted windows: %q", rows)
	}
}

// Spec.Check reports every problem with its path.
func TestSpecCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spec windowop.Spec
		want []string
	}{
		{windowop.Spec{Type: "tumbling", SizeMS: 1000}, nil},
		{windowop.Spec{Type: "tumbling"}, []string{"w.size_ms: must be > 0 (got 0)"}},
		{windowop.Spec{Type: "tumbling", SizeMS: -5}, []string{"w.size_ms: must be > 0 (got -5)"}},
		{windowop.Spec{Type: "sliding", SizeMS: 5, SlideMS: 2}, nil},
		{windowop.Spec{Type: "sliding", SizeMS: 5, SlideMS: 5}, nil},
		{windowop.Spec{Type: "sliding", SizeMS: 5, SlideMS: 6}, []string{"w.slide_ms: must be <= size_ms=5 (got 6): a slide larger than the window would skip events"}},
		{windowop.Spec{Type: "sliding", SizeMS: 5}, []string{"w.slide_ms: must be > 0 (got 0)"}},
		{windowop.Spec{Type: "sliding", SizeMS: 100000, SlideMS: 10}, nil},
		{windowop.Spec{Type: "sliding", SizeMS: 100010, SlideMS: 10}, []string{"w.slide_ms: size_ms/slide_ms = 10001 windows per event is more than 10000"}},
		{windowop.Spec{Type: "session", GapMS: 10}, nil},
		{windowop.Spec{Type: "session"}, []string{"w.gap_ms: must be > 0 (got 0)"}},
		{windowop.Spec{Type: "hopping", SizeMS: 1}, []string{`w.type: must be tumbling, sliding or session (got "hopping")`}},
	} {
		var got []string
		for _, e := range c.spec.Check("w") {
			got = append(got, e.Error())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%+v: got %q, want %q", c.spec, got, c.want)
		}
	}
}
