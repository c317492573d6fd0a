package websocket

import "github.com/arkflow-rs/arkflow-go/connectors"

// Metric family names (without the job's arkflow_ prefix).
const (
	// MetricConnected is 1 while the source's connection is open, 0 while
	// it is connecting again. Frames the server sends meanwhile are lost.
	MetricConnected = "websocket_connected"
	// MetricReconnects counts the connections opened again after one was
	// lost.
	MetricReconnects = "websocket_reconnects_total"
)

// MetricFamilies declares the source's metrics (connectors.MetricFamilies).
func (in *input) MetricFamilies() []connectors.MetricFamily {
	return []connectors.MetricFamily{
		{Name: MetricConnected, Kind: connectors.Gauge, Help: "1 while a WebSocket source's connection is open, 0 while it connects again (frames sent meanwhile are lost)."},
		{Name: MetricReconnects, Kind: connectors.Counter, Help: "Connections a WebSocket source opened again after one was lost."},
	}
}

// Metrics returns the connection's state and the reconnections of the
// subtask that reads (connectors.Metered).
func (s *source) Metrics() []connectors.Metric {
	if !s.reads {
		return nil
	}
	up := 0.0
	if s.up.Load() {
		up = 1
	}
	return []connectors.Metric{
		{Name: MetricConnected, Value: up},
		{Name: MetricReconnects, Value: float64(s.reconnects.Load())},
	}
}

var (
	_ connectors.MetricFamilies = (*input)(nil)
	_ connectors.Metered        = (*source)(nil)
)
