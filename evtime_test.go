package arkflow_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
)

// perRowYAML is a declarative job: rows in order, batched so that one
// batch straddles a window boundary, and a watermark block whose last
// lines are extra.
func perRowYAML(extra string) string {
	return `id: evtime
operators:
  - {id: in, kind: source}
  - {id: w, kind: window, stateful: true, key_field: k,
     config: {window: {type: tumbling, size_ms: 1000}, aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: w, partitioned: true}
  - {id: b, from: w, to: out}
sources:
  - operator_id: in
    input_type: memory
    config:
      schema: [{name: k, type: string}, {name: ts, type: int64}]
      rows: [{k: a, ts: 100}, {k: a, ts: 900}, {k: a, ts: 1100}, {k: a, ts: 1900}, {k: a, ts: 2100}]
      batch_size: 3
    time:
      mode: event_time
      timestamp_field: ts
      watermark:
        strategy: bounded_out_of_orderness
        out_of_orderness_ms: 0
` + extra + `sinks:
  - {operator_id: out, output_type: drop}
`
}

// Event-time options, declaratively: the new watermark fields in YAML are
// what the Builder's options write, and advance per_row keeps the in-order
// rows the seeds' rule (the watermark advances before a batch's rows are
// classified) drops.
func TestEventTimeOptionsInYAML(t *testing.T) {
	t.Parallel()
	extra := "        advance: per_row\n        idle_timeout_ms: 60000\n        all_idle: advance\n        all_idle_delay_ms: 5000\n"
	spec, err := job.Parse([]byte(perRowYAML(extra)))
	if err != nil {
		t.Fatal(err)
	}
	built := arkflow.NewJob("evtime").
		Source("in", tsConfig(), arkflow.EventTime{Field: "ts", PerRow: true, IdleTimeout: time.Minute, AdvanceWhenIdle: 5 * time.Second}).
		Sink("out", mem.NewSink()).Spec()
	if got, want := spec.Sources[0].Time, built.Sources[0].Time; !reflect.DeepEqual(got, want) {
		t.Fatalf("YAML time %+v %+v, the Builder's %+v %+v", got, got.Watermark, want, want.Watermark)
	}
	for _, c := range []struct {
		name       string
		extra      string
		late, wins int64
	}{
		// Batches [100 900 1100] [1900 2100]: under batch, 100 and 900 meet
		// the watermark 1100 and are late, as 1900 meets 2100.
		{"batch", "", 3, 2},
		{"per_row", extra, 0, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, err := job.Parse([]byte(perRowYAML(c.extra)))
			if err != nil {
				t.Fatal(err)
			}
			j, err := arkflow.FromSpec(spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			m := j.Metrics().Operator("w").Counters
			if m["late_dropped"] != c.late || m["windows_fired"] != c.wins {
				t.Fatalf("late_dropped %d windows_fired %d, want %d %d", m["late_dropped"], m["windows_fired"], c.late, c.wins)
			}
		})
	}
	// An unknown value is refused with its path, from YAML as from JSON.
	bad, err := job.Parse([]byte(perRowYAML("        advance: per_batch\n")))
	if err != nil {
		t.Fatal(err)
	}
	err = arkflow.Validate(bad)
	if err == nil || !strings.Contains(err.Error(), `sources[0].time.watermark.advance: must be batch or per_row (got "per_batch")`) {
		t.Fatalf("Validate: %v", err)
	}
}
