package websocket

import (
	"testing"

	ws "github.com/coder/websocket"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// The suite of sources that cannot read again, against a real WebSocket
// server: rows are sent, a frame each, to the connections open.
func TestConformanceSource(t *testing.T) {
	conformance.TestUnrewindableSource(t, conformance.UnrewindableHarness{
		Features: conformance.SourceFeatures{Meta: []string{connectors.MetaTimestamp}},
		New: func(t *testing.T, batchSize int) (connectors.Input, conformance.Send) {
			srv := newServer(t, false, nil)
			in := buildInput(t, SourceConfig{URL: srv.url(), Schema: conformance.Declared(), BatchSize: batchSize})
			return in, func(t *testing.T, rows []conformance.Row) {
				for _, r := range rows {
					srv.send(t, ws.MessageText, r.JSON())
				}
			}
		},
	})
}
