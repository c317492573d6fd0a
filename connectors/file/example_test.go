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

// Read a csv file in ArkFlow's input_type form: the columns and their
// types come from the header and the rows.
func Example_inputType() {
	dir, err := os.MkdirTemp("", "file-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "orders.csv"), filepath.Join(dir, "big.jsonl")
	if err := os.WriteFile(in, []byte("id,amount,paid\n1,9.5,true\n2,120,false\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	src := file.SourceConfig{ArkFlow: &file.InputTypeConfig{Type: file.FormatCSV, Path: in}}
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
	// Output: {"id":2,"amount":120,"paid":false}
}
