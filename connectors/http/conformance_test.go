package httpconn

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// confInput is the conformance suite's input: a real HTTP input whose
// sources, once the first connects, get data[p] POSTed to partition p in
// order, batchSize rows a request (a request is a batch).
type confInput struct {
	*input
	data      [][]conformance.Row
	batchSize int
	once      sync.Once
}

func (c *confInput) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	s, err := c.input.NewSource(info)
	if err != nil {
		return nil, err
	}
	return &accepting{source: s.(*source), onConnect: func() { c.once.Do(c.postAll) }}, nil
}

// postAll posts every partition's rows, each partition in order, from
// goroutines that stop at the first answer other than 200 (the source
// closed before reading them).
func (c *confInput) postAll() {
	url := "http://" + c.boundAddr() + c.cfg.Path
	for p, rows := range c.data {
		go func() {
			for i := 0; i < len(rows); i += c.batchSize {
				var body bytes.Buffer
				for _, r := range rows[i:min(i+c.batchSize, len(rows))] {
					body.Write(r.JSON())
					body.WriteByte('\n')
				}
				resp, err := http.Post(fmt.Sprintf("%s?partition=%d", url, p), "application/x-ndjson", &body)
				if err != nil {
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return
				}
			}
		}()
	}
}

func TestConformance(t *testing.T) {
	conformance.TestSource(t, conformance.SourceHarness{
		Features: conformance.SourceFeatures{Unrewindable: true},
		New: func(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
			in := newTestInput(t, map[string]any{
				"address": "127.0.0.1:0", "path": "/rows", "format": "ndjson",
				"schema": conformance.Declared(), "partitions": len(data),
			})
			return &confInput{input: in, data: data, batchSize: batchSize}
		},
	})
	conformance.TestSink(t, conformance.SinkHarness{
		New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
			srv := newStore(t, nil)
			out := newTestOutput(t, map[string]any{"url": srv.URL + "/in"}, schema)
			return out, srv.readBack
		},
	})
}
