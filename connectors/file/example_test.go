package file_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/file"
)

// Read JSON lines, keep some, append them to another file.
func Example() {
	dir, err := os.MkdirTemp("", "file-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "orders.jsonl"), filepath.Join(dir, "big.jsonl")
	lines := `{"id":1,"amount":9.5}` + "\n" + `{"id":2,"amount":120}` + "\n"
	if err := os.WriteFile(in, []byte(lines), 0o644); err != nil {
		log.Fatal(err)
	}
	src := file.SourceConfig{Path: in, Schema: connectors.Schema{{Name: "id", Type: "int64"}, {Name: "amount", Type: "float64"}}}
	j, err := arkflow.NewJob("copy").Source("in", src).Where("big", "amount > 100").
		Sink("out", file.SinkConfig{Path: out}).Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(b))
	// Output: {"id":2,"amount":120}
}
