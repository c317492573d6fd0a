package kafka_test

import (
	"context"
	"log"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/kafka"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Kafka → Kafka with exactly-once output, TLS to the brokers, and a
// write-ahead log in front of the source (compile-only: it needs brokers).
func Example() {
	tls := kafka.Properties{
		"security.protocol": "SSL",
		"ssl.ca.location":   "/etc/kafka/ca.pem",
	}
	j, err := arkflow.NewJob("orders-copy").
		Source("in", kafka.SourceConfig{
			Brokers:       []string{"kafka-1.example.com:9093"},
			Topics:        []string{"orders"},
			ConsumerGroup: "orders-copy",
			Schema:        connectors.Schema{{Name: "id", Type: "int64"}, {Name: "amount", Type: "float64"}},
			Properties:    tls,
		}, arkflow.Durable(job.Durability{})).
		Sink("out", kafka.SinkConfig{
			Brokers:         []string{"kafka-1.example.com:9093"},
			Topic:           "orders-copy",
			Key:             "id",
			ExactlyOnce:     true,
			TransactionalID: "orders-copy-{subtask}",
			Properties:      tls,
		}).
		Build(arkflow.WithDataDir("./data"))
	if err != nil {
		log.Fatal(err) // every config problem at once, e.g. .Sink("out", ...): transactional_id
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
