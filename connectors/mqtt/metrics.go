package mqtt

// This file holds the metrics the MQTT sources and sinks report to their
// job (connectors.Metered), from counters they keep: nothing is asked of
// the broker when the job's metrics are read.

import "github.com/arkflow-rs/arkflow-go/connectors"

// Metric family names (without the job's arkflow_ prefix).
const (
	// MetricRedelivered counts the QoS 1 messages a source received with
	// the DUP flag: the broker delivered them again, after a reconnect,
	// because it had no PUBACK for them.
	MetricRedelivered = "mqtt_messages_redelivered_total"
	// MetricRedeliveriesSkipped counts the redelivered messages a source
	// skipped because it had taken them before (their PUBACK was lost, or
	// not yet sent); the others were read, as they were never taken.
	MetricRedeliveriesSkipped = "mqtt_redeliveries_skipped_total"
	// MetricReconnects counts the times a source's or sink's client
	// reconnected to the broker after losing the connection.
	MetricReconnects = "mqtt_reconnects_total"
)

// MetricFamilies declares the sources' metrics
// (connectors.MetricFamilies).
func (in *input) MetricFamilies() []connectors.MetricFamily {
	return []connectors.MetricFamily{
		{Name: MetricRedelivered, Kind: connectors.Counter,
			Help: "QoS 1 messages an MQTT source received again (DUP flag) after a reconnect, as the broker had no PUBACK for them."},
		{Name: MetricRedeliveriesSkipped, Kind: connectors.Counter,
			Help: "Redelivered MQTT messages a source skipped as messages it had taken before."},
		reconnectsFamily,
	}
}

var reconnectsFamily = connectors.MetricFamily{Name: MetricReconnects, Kind: connectors.Counter,
	Help: "Times an MQTT client reconnected to the broker after losing the connection."}

// Metrics returns the source's counters (connectors.Metered).
func (s *source) Metrics() []connectors.Metric {
	if !s.subscribes {
		return nil
	}
	return []connectors.Metric{
		{Name: MetricRedelivered, Value: float64(s.redelivered.Load())},
		{Name: MetricRedeliveriesSkipped, Value: float64(s.skipped.Load())},
		{Name: MetricReconnects, Value: float64(max(s.connects.Load()-1, 0))},
	}
}

// MetricFamilies declares the sinks' metrics (connectors.MetricFamilies).
func (o *output) MetricFamilies() []connectors.MetricFamily {
	return []connectors.MetricFamily{reconnectsFamily}
}

// Metrics returns the sink's reconnects (connectors.Metered).
func (s *sink) Metrics() []connectors.Metric {
	return []connectors.Metric{{Name: MetricReconnects, Value: float64(max(s.connects.Load()-1, 0))}}
}

var (
	_ connectors.MetricFamilies = (*output)(nil)
	_ connectors.Metered        = (*source)(nil)
	_ connectors.Metered        = (*sink)(nil)
)
