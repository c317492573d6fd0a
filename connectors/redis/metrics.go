package redis

// This file holds the metrics the Redis sources report to their job
// (connectors.Metered), from counters the source keeps: nothing is asked
// of the server when the job's metrics are read.

import "github.com/arkflow-rs/arkflow-go/connectors"

// Metric family names (without the job's arkflow_ prefix).
const (
	// MetricPendingEntries is a stream partition's entries the source read
	// and has not acknowledged (XACK) yet: its share of the group's
	// pending entries list. It grows while rows wait in open windows.
	MetricPendingEntries = "redis_pending_entries"
	// MetricReclaimed counts entries a stream source read again after a
	// restart that the group had delivered before (pending entries of the
	// previous run, or entries after a restored checkpoint's position).
	MetricReclaimed = "redis_reclaimed_total"
)

// MetricFamilies declares the sources' metrics
// (connectors.MetricFamilies).
func (in *input) MetricFamilies() []connectors.MetricFamily {
	if in.cfg.RedisType.Type != TypeStream {
		return nil
	}
	return []connectors.MetricFamily{
		{
			Name: MetricPendingEntries, Kind: connectors.Gauge, Labels: []string{"stream"},
			Help: "Entries of a Redis stream the source read and has not acknowledged (XACK) yet.",
		},
		{
			Name: MetricReclaimed, Kind: connectors.Counter, Labels: []string{"stream"},
			Help: "Entries of a Redis stream the source read again after a restart that the consumer group had delivered before.",
		},
	}
}

// Metrics returns every partition's pending and reclaimed entries
// (connectors.Metered).
func (s *streamSource) Metrics() []connectors.Metric {
	out := make([]connectors.Metric, 0, 2*len(s.parts))
	for _, p := range s.parts {
		out = append(out,
			connectors.Metric{Name: MetricPendingEntries, LabelValues: []string{p.key}, Value: float64(p.unackedN.Load())},
			connectors.Metric{Name: MetricReclaimed, LabelValues: []string{p.key}, Value: float64(p.reclaimed.Load())})
	}
	return out
}

var (
	_ connectors.MetricFamilies = (*input)(nil)
	_ connectors.Metered        = (*streamSource)(nil)
)
