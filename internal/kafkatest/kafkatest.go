// Package kafkatest holds the Kafka helpers the module's integration tests
// share: creating a topic on the test broker, producing numbered records
// at a pace, and reading a topic back to its end. Only tests import it (it brings in librdkafka through
// confluent-kafka-go, as connectors/kafka does).
package kafkatest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// CreateTopic creates topic with the given number of partitions on
// brokers and waits until the metadata shows every partition.
func CreateTopic(t testing.TB, brokers, topic string, partitions int) {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers, "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}})
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			t.Fatalf("creating topic %s: %v", topic, r.Error)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		md, err := a.GetMetadata(&topic, false, 5000)
		if err == nil && len(md.Topics[topic].Partitions) == partitions && md.Topics[topic].Error.Code() == kafka.ErrNoError {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not visible: %v %v", topic, err, md)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Record is a record read back.
type Record struct {
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       string
	Value     []byte
}

// ReadAll reads topic from the beginning to the current end of each of its
// partitions, with isolation ("read_committed" or "read_uncommitted"),
// joining no group and committing nothing. A job writing the topic with
// read_committed readers stops them at the last stable offset.
func ReadAll(t testing.TB, brokers, topic string, partitions int, isolation string) []Record {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": brokers, "group.id": fmt.Sprintf("kafkatest-reader-%d", time.Now().UnixNano()),
		"isolation.level": isolation, "enable.auto.commit": false, "enable.partition.eof": true,
		"go.logs.channel.enable": true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range c.Logs() {
		}
	}()
	defer c.Close()
	var parts []kafka.TopicPartition
	for p := range partitions {
		parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: int32(p), Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(parts); err != nil {
		t.Fatal(err)
	}
	var out []Record
	eof := map[int32]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(eof) < partitions {
		if time.Now().After(deadline) {
			t.Fatalf("reading %s (%s): %d of %d partitions at their end after 60 s (%d records)", topic, isolation, len(eof), partitions, len(out))
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				t.Fatalf("reading %s: %v", topic, e.TopicPartition.Error)
			}
			delete(eof, e.TopicPartition.Partition)
			out = append(out, Record{e.TopicPartition.Partition, int64(e.TopicPartition.Offset), e.Timestamp, string(e.Key), e.Value})
		case kafka.PartitionEOF:
			eof[e.Partition] = true
		case kafka.Error:
			if e.IsFatal() {
				t.Fatal(e)
			}
		}
	}
	return out
}
