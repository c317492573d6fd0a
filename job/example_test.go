package job_test

import (
	"fmt"
	"log"

	arkflow "github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/job"
)

// A source's watermark block with the extensions beyond ArkFlow v1:
// advance per_row, and a watermark that follows the clock while every
// partition is idle. Unknown values are refused with their field path.
func ExampleWatermark() {
	spec, err := job.Parse([]byte(`
id: clicks
operators: [{id: in, kind: source}, {id: out, kind: sink}]
edges: [{id: e, from: in, to: out}]
sources:
  - operator_id: in
    input_type: generate
    config: {fields: [{name: ts, type: timestamp}]}
    time:
      mode: event_time
      timestamp_field: ts
      watermark:
        strategy: bounded_out_of_orderness
        out_of_orderness_ms: 200
        advance: per_row
        idle_timeout_ms: 10000
        all_idle: advance
        all_idle_delay_ms: 5000
sinks: [{operator_id: out, output_type: drop}]
`))
	if err != nil {
		log.Fatal(err)
	}
	w := spec.Sources[0].Time.Watermark
	fmt.Println(w.Advance == job.AdvancePerRow, w.AllIdle == job.AllIdleAdvance, w.AllIdleDelayMS)

	w.Advance, w.AllIdle = "per_batch", job.AllIdleHold
	fmt.Println(arkflow.Validate(spec))
	// Output:
	// true true 5000
	// job "clicks": operator "in": sources[0].time.watermark.advance: must be batch or per_row (got "per_batch")
	// job "clicks": operator "in": sources[0].time.watermark.all_idle_delay_ms: is only used with all_idle "advance" (all_idle is "hold")
}
