package kafka

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// consumerConfig is the librdkafka configuration of a source subtask.
// Offsets are committed explicitly (CommitOffsets of the contiguous
// frontier), and auto.offset.reset is "error": every start is an explicit
// offset, so an offset the broker no longer has fails the source instead of
// silently skipping or re-reading data.
func consumerConfig(c *SourceConfig) *kafka.ConfigMap {
	m := kafka.ConfigMap{}
	for k, v := range c.Properties {
		m[k] = v
	}
	// Static membership is for a subscribing source only (Source.Connect
	// sets it): a consumer that assigns partitions itself joins no group,
	// and with an instance id its offset commits would be checked against
	// a member it never became.
	delete(m, groupInstanceIDKey)
	for _, k := range c.fetchKeys() {
		if k.value > 0 {
			m[k.property] = k.value
		}
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

// groupInstanceID is the group.instance.id of a subscribing source: the
// one in its properties ("" turns static membership off), else
// defaultInstanceID.
func groupInstanceID(c *SourceConfig, info connectors.TaskInfo) string {
	if id, ok := c.Properties[groupInstanceIDKey]; ok {
		return id
	}
	return defaultInstanceID(info.JobID, info.OperatorID, info.Subtask)
}

// defaultInstanceID is "arkflow.JOB.OPERATOR.SUBTASK": stable across
// restarts of the job, and distinct for every source task, also across
// jobs sharing a consumer group. Job IDs have no '.', so the parts cannot
// run into each other (operator IDs may hold '.', but the subtask is
// after the last one). Job and operator IDs are at most 128 characters
// each, so the id can be longer than brokers accept (249): then, as for
// characters brokers do not accept (in IDs not checked by a job spec),
// the id keeps a prefix, with '_' for such characters, and ends in a hash
// of the whole, which keeps distinct tasks apart.
func defaultInstanceID(jobID, operatorID string, subtask int) string {
	id := "arkflow." + jobID + "." + operatorID + "." + strconv.Itoa(subtask)
	if checkInstanceID(id) == "" {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	suffix := "." + hex.EncodeToString(sum[:8])
	b := []byte(id)
	for i, c := range b {
		if !instanceIDChar(c) {
			b[i] = '_'
		}
	}
	if n := maxInstanceIDLen - len(suffix); len(b) > n {
		b = b[:n]
	}
	return string(b) + suffix
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
