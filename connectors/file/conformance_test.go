package file

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

func TestConformanceSource(t *testing.T) {
	conformance.TestSource(t, conformance.SourceHarness{
		Features: conformance.SourceFeatures{Bounded: true},
		New: func(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
			// Line i belongs to partition i mod n: interleave the partitions.
			var lines []byte
			for i := 0; ; i++ {
				p, r := i%len(data), i/len(data)
				if r >= len(data[p]) {
					break
				}
				lines = append(append(lines, data[p][r].JSON()...), '\n')
			}
			path := filepath.Join(t.TempDir(), "in.jsonl")
			if err := os.WriteFile(path, lines, 0o644); err != nil {
				t.Fatal(err)
			}
			in, err := NewInput(SourceConfig{Path: path, Schema: conformance.Declared(), Partitions: len(data), BatchSize: batchSize})
			if err != nil {
				t.Fatal(err)
			}
			return in
		},
	})
}

func TestConformanceSink(t *testing.T) {
	conformance.TestSink(t, conformance.SinkHarness{
		Features: conformance.SinkFeatures{Ordered: true},
		New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			f, _ := connectors.LookupOutput(Type)
			out, err := f(connectors.BuildContext{Config: json.RawMessage(fmt.Sprintf(`{"path":%q}`, path))}, schema)
			if err != nil {
				t.Fatal(err)
			}
			return out, func(t *testing.T, n int) []map[string]any {
				data, err := os.ReadFile(path)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				return conformance.DecodeLines(t, data)
			}
		},
	})
}
