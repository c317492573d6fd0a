//go:build cgo

package stream_test

import (
	"context"
	"fmt"

	_ "github.com/arkflow-rs/arkflow-go/connectors/duckdb" // the sql processor's engine

	"github.com/arkflow-rs/arkflow-go/stream"
)

// A Stream config runs in the process: three messages through a sql
// processor to stdout, which writes each row's __value__ as a line, as
// ArkFlow does. Run returns when the memory input has given everything.
func ExampleRun() {
	cfg, err := stream.Parse([]byte(`
streams:
  - input:
      type: memory
      messages: ["ann", "bob", "cyd"]
    pipeline:
      thread_num: 2
      processors:
        - type: sql
          query: "SELECT CAST(upper(CAST(__value__ AS VARCHAR)) AS BLOB) AS __value__ FROM flow"
    output:
      type: stdout
`), ".yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := stream.Run(context.Background(), cfg); err != nil {
		fmt.Println(err)
	}
	// Output:
	// ANN
	// BOB
	// CYD
}
