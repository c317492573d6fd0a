package kafkatest

import (
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Message is one record Produce writes: its key, value and timestamp.
type Message struct {
	Key, Value []byte
	Time       time.Time
}

// Produce writes records [from, to) of each of partitions partitions of
// topic with an idempotent producer, record i of partition p being
// record(p, i), spread evenly over pace (0: at once), and checks that
// record i landed at offset i, which tests that compute their expected
// output from offsets rely on. A full local queue is waited out, not
// failed.
func Produce(brokers, topic string, partitions, from, to int, pace time.Duration, record func(partition, i int) Message) error {
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": brokers, "enable.idempotence": true, "linger.ms": 2, "go.logs.channel.enable": true})
	if err != nil {
		return err
	}
	go func() {
		for range p.Logs() {
		}
	}()
	defer p.Close()
	dr := make(chan kafka.Event, partitions*(to-from))
	const ticks = 100
	began := time.Now()
	for i := from; i < to; i++ {
		if pace > 0 {
			// Record i is due at began + pace·(i-from)/(to-from), in ticks.
			due := began.Add(pace * time.Duration((i-from)*ticks/(to-from)) / ticks)
			time.Sleep(time.Until(due))
		}
		for part := range partitions {
			r := record(part, i)
			m := &kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: int32(part)},
				Key:            r.Key, Value: r.Value, Timestamp: r.Time, Opaque: i,
			}
			for {
				err := p.Produce(m, dr)
				if err == nil {
					break
				}
				var ke kafka.Error
				if errors.As(err, &ke) && ke.Code() == kafka.ErrQueueFull {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				return fmt.Errorf("produce: %w", err)
			}
		}
	}
	for n := partitions * (to - from); n > 0; n-- {
		m := (<-dr).(*kafka.Message)
		if m.TopicPartition.Error != nil {
			return fmt.Errorf("delivery: %w", m.TopicPartition.Error)
		}
		if i := m.Opaque.(int); int64(m.TopicPartition.Offset) != int64(i) {
			return fmt.Errorf("record %d of partition %d landed at offset %d: the expected results assume offset %d", i, m.TopicPartition.Partition, m.TopicPartition.Offset, i)
		}
	}
	return nil
}
