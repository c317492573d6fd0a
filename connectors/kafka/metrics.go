package kafka

// This file holds the metrics the Kafka source and sink report to their
// job (connectors.Metered): the consumer lag of every
// partition a source reads, and a transactional sink's commits and
// aborts. Everything is read when the job's metrics are, from counters
// and librdkafka's local caches: nothing is asked of the brokers.

import (
	"strconv"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Metric family names (without the job's arkflow_ prefix).
const (
	// MetricConsumerLag is a source partition's consumer lag: the
	// partition's high watermark (the offset after its last record, as
	// librdkafka last learned it from a fetch) minus the consumer's
	// position (the offset after the last record it read). Rows read but
	// not yet processed do not count.
	MetricConsumerLag = "kafka_consumer_lag_messages"
	// MetricTxnCommitted and MetricTxnAborted count a transactional sink's
	// committed and aborted transactions.
	MetricTxnCommitted = "kafka_transactions_committed_total"
	MetricTxnAborted   = "kafka_transactions_aborted_total"
)

// MetricFamilies declares the source's consumer lag
// (connectors.MetricFamilies).
func (in *Input) MetricFamilies() []connectors.MetricFamily {
	return []connectors.MetricFamily{{
		Name: MetricConsumerLag, Kind: connectors.Gauge, Labels: []string{"topic", "partition"},
		Help: "Records of a Kafka partition the source's task has not read yet: the partition's high watermark, as the consumer last fetched it, minus the consumer's position.",
	}}
}

// Metrics returns the consumer lag of every partition the source is
// assigned whose position and high watermark librdkafka knows (after its
// first fetch of the partition); nothing before Connect or after Close
// (connectors.Metered). It asks no broker.
func (s *Source) Metrics() []connectors.Metric {
	s.metricsMu.Lock()
	defer s.metricsMu.Unlock()
	c := s.metricsConsumer
	if c == nil {
		return nil
	}
	s.mu.Lock()
	parts := make([]kafka.TopicPartition, 0, len(s.assigned))
	for k, on := range s.assigned {
		if on {
			topic := k.topic
			parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: k.part})
		}
	}
	s.mu.Unlock()
	if len(parts) == 0 {
		return nil
	}
	pos, err := c.Position(parts)
	if err != nil {
		return nil
	}
	out := make([]connectors.Metric, 0, len(pos))
	for _, p := range pos {
		if p.Topic == nil || p.Offset < 0 {
			continue // not fetched yet
		}
		_, hi, err := c.GetWatermarkOffsets(*p.Topic, p.Partition)
		if err != nil || hi < 0 {
			continue
		}
		out = append(out, connectors.Metric{
			Name:        MetricConsumerLag,
			LabelValues: []string{*p.Topic, strconv.Itoa(int(p.Partition))},
			Value:       float64(max(hi-int64(p.Offset), 0)),
		})
	}
	return out
}

// MetricFamilies declares the sink's transaction counters
// (connectors.MetricFamilies).
func (o *Output) MetricFamilies() []connectors.MetricFamily {
	return []connectors.MetricFamily{
		{Name: MetricTxnCommitted, Kind: connectors.Counter, Help: "Transactions a transactional Kafka sink's task committed."},
		{Name: MetricTxnAborted, Kind: connectors.Counter, Help: "Transactions a transactional Kafka sink's task aborted."},
	}
}

// Metrics returns a transactional sink's commits and aborts; nothing for
// a sink that is not transactional (connectors.Metered).
func (s *Sink) Metrics() []connectors.Metric {
	if !s.cfg.ExactlyOnce {
		return nil
	}
	return []connectors.Metric{
		{Name: MetricTxnCommitted, Value: float64(s.txnCommits.Load())},
		{Name: MetricTxnAborted, Value: float64(s.txnAborts.Load())},
	}
}
