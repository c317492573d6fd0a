package sql

// This file holds the metrics the SQL source and sink report to their job
// (connectors.Metered): the statements run again after an error that may
// pass, and how far each source partition has read. All are kept in
// memory: nothing is asked of the database.

import (
	"strconv"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Metric family names (without the job's arkflow_ prefix).
const (
	// MetricRetries counts the writes (sink) or queries (source) a task
	// ran again after an error that may pass: a serialization failure, a
	// deadlock, a lost connection, a busy SQLite file. A rising count
	// with no failure means the database is contended or flaky.
	MetricRetries = "sql_retries_total"
	// MetricTrackingValue is the last tracking value a source partition
	// read (Unix microseconds for a timestamp column): compare it with
	// the table's maximum to see how far behind the source is.
	MetricTrackingValue = "sql_source_tracking_value"
)

// retries is declared by the input and the output alike: a job with both
// exports one family.
var retries = connectors.MetricFamily{Name: MetricRetries, Kind: connectors.Counter,
	Help: "Queries (SQL source) or batch writes (SQL sink) a task ran again after an error that may pass: a serialization failure, a deadlock, a lost connection, a busy SQLite file."}

// MetricFamilies declares the source's metrics (connectors.MetricFamilies).
func (in *Input) MetricFamilies() []connectors.MetricFamily {
	return []connectors.MetricFamily{
		retries,
		{Name: MetricTrackingValue, Kind: connectors.Gauge, Labels: []string{"partition"},
			Help: "The last tracking value a SQL source partition read (Unix microseconds for a timestamp column)."},
	}
}

// Metrics returns the source's retries and the last tracking value of
// every partition that read a row or was sought (connectors.Metered).
func (s *Source) Metrics() []connectors.Metric {
	out := []connectors.Metric{{Name: MetricRetries, Value: float64(s.r.retries.Load())}}
	for _, p := range s.assigned {
		c := s.cursors[p]
		if c.known.Load() {
			out = append(out, connectors.Metric{Name: MetricTrackingValue, LabelValues: []string{strconv.Itoa(int(p))}, Value: float64(c.value.Load())})
		}
	}
	return out
}

// MetricFamilies declares the sink's metrics (connectors.MetricFamilies).
func (o *Output) MetricFamilies() []connectors.MetricFamily {
	return []connectors.MetricFamily{retries}
}

// Metrics returns the sink's retries (connectors.Metered).
func (s *Sink) Metrics() []connectors.Metric {
	return []connectors.Metric{{Name: MetricRetries, Value: float64(s.r.retries.Load())}}
}
