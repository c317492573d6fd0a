package stream_test

import (
	"fmt"

	"github.com/arkflow-rs/arkflow-go/stream"
)

// A Stream config with two mistakes: Validate reports both, each with its
// path, without building anything that touches the outside world.
func ExampleValidate() {
	cfg, err := stream.Parse([]byte(`
streams:
  - input:
      type: http
      address: 127.0.0.1:8090
      path: /ingest
    buffer:
      type: sliding_window
      window_size: 2
      slide_size: 5
      interval: 1s
    pipeline:
      processors:
        - type: vrl
          statement: ".x = 1"
    output:
      type: stdout
`), ".yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(stream.Validate(cfg))
	// Output:
	// streams[0].buffer.window_size: must be ≥ slide_size (got window_size 2, slide_size 5)
	// streams[0].pipeline.processors[0].type: processor "vrl" is not available here (VRL has no Go implementation): use a sql processor, or a Go function in a Job
}

// Durations are written as in ArkFlow (humantime), where m is a minute.
func ExampleParseDuration() {
	for _, s := range []string{"500ms", "1h 30m", "2 days", "10m"} {
		d, err := stream.ParseDuration(s)
		fmt.Println(s, "=", d, err)
	}
	// Output:
	// 500ms = 500ms <nil>
	// 1h 30m = 1h30m0s <nil>
	// 2 days = 48h0m0s <nil>
	// 10m = 10m0s <nil>
}

// Notes say which valid streams would be better as Jobs: here a window
// buffer, which groups rows by when they arrive.
func ExampleNotes() {
	cfg, err := stream.Parse([]byte(`
streams:
  - input: {type: memory, messages: ['{"v": 1}']}
    buffer: {type: tumbling_window, interval: 10s}
    pipeline: {processors: [{type: json_to_arrow}]}
    output: {type: stdout}
`), ".yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range stream.Notes(cfg) {
		fmt.Println(n.Path)
	}
	// Output:
	// streams[0].buffer
}
