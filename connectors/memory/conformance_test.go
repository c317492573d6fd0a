package memory_test

import (
	"encoding/json"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
	"github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

// memoryInput returns a memory input holding data, in batches of
// batchSize rows; closed makes it bounded.
func memoryInput(t *testing.T, data [][]conformance.Row, batchSize int, closed bool) connectors.Input {
	src := memory.NewSource(conformance.Schema(), len(data))
	for p, rows := range data {
		for i := 0; i < len(rows); i += batchSize {
			rec := conformance.NewRecord(rows[i:min(i+batchSize, len(rows))])
			if err := src.Append(p, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
	}
	if closed {
		src.Close()
	}
	return input(t, `{}`, src)
}

func TestConformanceBounded(t *testing.T) {
	conformance.TestSource(t, conformance.SourceHarness{
		Features: conformance.SourceFeatures{Bounded: true},
		New: func(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
			return memoryInput(t, data, batchSize, true)
		},
	})
}

func TestConformanceOpen(t *testing.T) {
	conformance.TestSource(t, conformance.SourceHarness{
		New: func(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
			return memoryInput(t, data, batchSize, false)
		},
	})
}

func TestConformanceSink(t *testing.T) {
	conformance.TestSink(t, conformance.SinkHarness{
		Features: conformance.SinkFeatures{Ordered: true},
		New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
			snk := memory.NewSink()
			f, _ := connectors.LookupOutput("memory")
			out, err := f(connectors.BuildContext{Config: json.RawMessage(`{}`), Bound: snk}, schema)
			if err != nil {
				t.Fatal(err)
			}
			return out, func(t *testing.T, n int) []map[string]any {
				var buf []byte
				for _, rec := range snk.Records() {
					var err error
					if buf, err = rowjson.AppendRecord(buf, rec); err != nil {
						t.Fatal(err)
					}
				}
				return conformance.DecodeLines(t, buf)
			}
		},
	})
}
