package connectors

// This file holds the way a source or sink reports metrics of its own:
// optional interfaces the runtime finds by type
// assertion. The Input or Output declares its metric families before the
// job runs (so that a Prometheus collector can describe them), and each
// Source or Sink reports their values when the job's metrics are read (a
// scrape), so a connector keeps its values as it likes (atomic counters,
// or a client library's own caches) and pays nothing per row for them.

// MetricKind says whether a metric only goes up or goes up and down.
type MetricKind uint8

const (
	// Gauge is a value now (a lag, a size).
	Gauge MetricKind = iota
	// Counter is a total since the source or sink was created; it only
	// goes up.
	Counter
)

// MetricFamily declares a metric a connector's sources or sinks report.
type MetricFamily struct {
	// Name is the family's name without the arkflow_ prefix, in
	// Prometheus's conventions: snake case, base units, a counter's
	// ending in _total (e.g. kafka_consumer_lag_messages).
	Name string
	Help string
	Kind MetricKind
	// Labels are the names of the labels that tell apart the values of
	// the family within one task, such as topic and partition, in
	// Prometheus's syntax ([a-zA-Z_][a-zA-Z0-9_]*) and other than job,
	// operator and subtask, which the job adds. Their values must stay
	// few: bounded by the partitions a subtask reads, never by keys or
	// offsets.
	Labels []string
}

// MetricFamilies is implemented by an Input or Output whose sources or
// sinks report metrics (Metered): it lists every family they may report.
// The runtime calls it once, before the job runs.
type MetricFamilies interface {
	MetricFamilies() []MetricFamily
}

// Metric is one value of a declared family.
type Metric struct {
	// Name is the family's (MetricFamily.Name).
	Name string
	// LabelValues are the values of the family's Labels, in their order.
	LabelValues []string
	Value       float64
}

// Metered is implemented by sources and sinks that report metrics of their
// own; their Input or Output declares the families (MetricFamilies), and
// values of undeclared families are ignored. A job's metrics export them
// with the task's labels added: Job.Collector as arkflow_<Name>{job,
// operator, subtask, <Labels>}. Metrics is called from other goroutines
// than Read or Write, while the connector runs and after it closed (it
// then returns its last values, or nothing), so it must be safe for
// concurrent use, and cheap (no network round trip): each scrape calls it.
type Metered interface {
	Metrics() []Metric
}
