package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// consumerConfig is the librdkafka configuration of a source subtask.
// Offsets are committed explicitly (CommitOffsets of the contiguous
// frontier), and auto.offset.reset is "error": every start is an explicit
// offset, so an offset the broker no longer has fails the source instead of
// silently skipping or re-reading data (R-KAFKA-2).
func consumerConfig(c *SourceConfig) *kafka.ConfigMap {
	m := kafka.ConfigMap{}
	for k, v := range c.Properties {
		m[k] = v
	}
	m["bootstrap.servers"] = strings.Join(c.Brokers, ",")
	m["group.id"] = c.ConsumerGroup
	if c.ClientID != "" {
		m["client.id"] = c.ClientID
	}
	m["enable.auto.commit"] = false
	m["enable.auto.offset.store"] = false
	m["auto.offset.reset"] = "error"
	m["enable.partition.eof"] = false
	// Subscription: the rebalance callback assigns explicit offsets.
	return &m
}

// producerConfig is the librdkafka configuration of a sink subtask.
func producerConfig(c *SinkConfig, transactionalID string) *kafka.ConfigMap {
	m := kafka.ConfigMap{}
	for k, v := range c.Properties {
		m[k] = v
	}
	m["bootstrap.servers"] = strings.Join(c.Brokers, ",")
	if c.ClientID != "" {
		m["client.id"] = c.ClientID
	}
	m["compression.type"] = c.Compression
	m["acks"] = c.Acks
	// Delivery reports carry only topic, partition, offset and error: the
	// sink never looks at the key and value again.
	m["go.delivery.report.fields"] = "none"
	if transactionalID != "" {
		m["transactional.id"] = transactionalID
		m["enable.idempotence"] = true
	}
	return &m
}

// metadataClient is what topic metadata lookups need (Consumer, Producer
// and AdminClient all have it).
type metadataClient interface {
	GetMetadata(topic *string, allTopics bool, timeoutMs int) (*kafka.Metadata, error)
}

// partitionCounts returns the number of partitions of every topic. A topic
// the brokers do not know is an error naming it.
func partitionCounts(c metadataClient, topics []string, timeout time.Duration) (map[string]int, error) {
	out := make(map[string]int, len(topics))
	for _, t := range topics {
		md, err := c.GetMetadata(&t, false, int(timeout.Milliseconds()))
		if err != nil {
			return nil, fmt.Errorf("kafka: metadata of topic %q: %w", t, err)
		}
		tm, ok := md.Topics[t]
		if !ok {
			return nil, fmt.Errorf("kafka: topic %q does not exist", t)
		}
		if tm.Error.Code() != kafka.ErrNoError {
			if tm.Error.Code() == kafka.ErrUnknownTopicOrPart || tm.Error.Code() == kafka.ErrUnknownTopic {
				return nil, fmt.Errorf("kafka: topic %q does not exist (create it first; the source does not create topics)", t)
			}
			return nil, fmt.Errorf("kafka: metadata of topic %q: %w", t, tm.Error)
		}
		if len(tm.Partitions) == 0 {
			return nil, fmt.Errorf("kafka: topic %q has no partitions", t)
		}
		out[t] = len(tm.Partitions)
	}
	return out, nil
}

// kafkaError returns err as a kafka.Error.
func kafkaError(err error) (kafka.Error, bool) {
	var ke kafka.Error
	ok := errors.As(err, &ke)
	return ke, ok
}

// isFenced reports whether err means a newer producer with the same
// transactional.id took over (zombie fencing).
func isFenced(err error) bool {
	ke, ok := kafkaError(err)
	if !ok {
		return false
	}
	switch ke.Code() {
	case kafka.ErrFenced, kafka.ErrProducerFenced, kafka.ErrInvalidProducerEpoch:
		return true
	}
	return false
}

// logLevel maps a librdkafka syslog level to slog.
func logLevel(level int) slog.Level {
	switch {
	case level <= 3:
		return slog.LevelError
	case level == 4:
		return slog.LevelWarn
	case level == 5:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}
