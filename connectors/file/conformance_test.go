package file

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

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

// TestConformanceSourceInputType runs the suite over the input_type form
// of every format: row i of the file belongs to partition i mod n.
func TestConformanceSourceInputType(t *testing.T) {
	for _, format := range []string{FormatCSV, FormatJSON, FormatParquet, FormatArrow} {
		t.Run(format, func(t *testing.T) {
			conformance.TestSource(t, conformance.SourceHarness{
				Features: conformance.SourceFeatures{Bounded: true},
				New: func(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
					var rows []conformance.Row
					for i := 0; ; i++ {
						p, r := i%len(data), i/len(data)
						if r >= len(data[p]) {
							break
						}
						rows = append(rows, data[p][r])
					}
					path := filepath.Join(t.TempDir(), "in."+format)
					if err := os.WriteFile(path, encodeRows(t, format, rows), 0o644); err != nil {
						t.Fatal(err)
					}
					in, err := NewInput(SourceConfig{ArkFlow: &InputTypeConfig{Type: format, Path: path}, Partitions: len(data), BatchSize: batchSize})
					if err != nil {
						t.Fatal(err)
					}
					return in
				},
			})
		})
	}
}

// encodeRows writes rows as a file of the given format.
func encodeRows(t *testing.T, format string, rows []conformance.Row) []byte {
	var buf bytes.Buffer
	switch format {
	case FormatCSV:
		w := csv.NewWriter(&buf)
		w.Write([]string{"id", "name"})
		for _, r := range rows {
			w.Write([]string{fmt.Sprint(r.ID), r.Name})
		}
		w.Flush()
	case FormatJSON:
		for _, r := range rows {
			buf.Write(append(r.JSON(), '\n'))
		}
	default:
		schema := conformance.Schema()
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for _, r := range rows {
			b.Field(0).(*array.Int64Builder).Append(r.ID)
			b.Field(1).(*array.StringBuilder).Append(r.Name)
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		var err error
		if format == FormatParquet {
			err = pqarrow.WriteTable(array.NewTableFromRecords(schema, []arrow.RecordBatch{rec}), &buf, 3, nil, pqarrow.DefaultWriterProps())
		} else {
			w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
			if err = w.Write(rec); err == nil {
				err = w.Close()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
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
