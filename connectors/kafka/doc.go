// Package kafka provides the "kafka" input and output, on
// confluent-kafka-go (librdkafka, bundled; the package needs cgo). It is
// the only package of the module that imports confluent-kafka-go, and the
// root package does not import it: import it for its registration (the
// arkflow command does).
//
//	import _ "github.com/arkflow-rs/arkflow-go/connectors/kafka"
//
// Input (SourceConfig, input_type kafka): every record is one row, its
// value decoded as a JSON object into the declared schema (or kept as raw
// bytes), with __meta_topic, __meta_partition, __meta_offset, __meta_key
// and __meta_timestamp. With parallelism 1 the source subscribes with its
// consumer_group as a static member (group.instance.id
// "arkflow.JOB.OPERATOR.SUBTASK"), so a restart takes its partitions back
// without a rebalance; with parallelism P, subtask s reads the partitions
// p with p % P == s. Every partition starts at the restored position, else
// the group's committed offset, else its beginning (end with
// start_from_latest). Offsets are committed at the contiguous acknowledged
// frontier, never past a row not yet written.
//
//	input_type: kafka
//	config: {brokers: [localhost:9092], topics: [orders], consumer_group: orders-copy}
//
// Output (SinkConfig, output_type kafka): each row as one JSON object (or
// one column as the value), keyed by an optional column; at-least-once by
// default: a batch is acknowledged once the broker acknowledged every
// record.
//
// Exactly-once: exactly_once with a stable transactional_id writes the
// batches in transactions, each batch acknowledged only after the commit
// of the one holding it (L2; every source feeding it needs a durability
// block). A transaction holds up to 4 batches, produced as they come,
// and commits when full or 20 ms after it began. With transactional_offsets
// on the input and offset_commit_group on the output, the input's offsets
// are committed inside the transaction that writes the rows (L3; one
// batch a transaction): a crash duplicates at most the last committed
// batch, a clean stop nothing.
// Misconfigurations (an unpaired group, a transaction timeout below the
// checkpoint interval, a property the connector sets itself) are
// validation errors naming the key.
//
// TLS and SASL: properties go to librdkafka as they are (security.protocol,
// ssl.*, sasl.*). librdkafka's log lines go to the job's logger with
// connector=kafka.
//
// Metrics (connectors.Metered; Job.Collector exports them with the
// task's labels): the source reports each assigned partition's consumer
// lag, kafka_consumer_lag_messages{topic,partition} (the high watermark
// librdkafka last fetched minus the consumer's position, read from its
// caches: no broker round trip); an exactly-once sink its
// kafka_transactions_committed_total and kafka_transactions_aborted_total.
//
// ARCHITECTURE.md ("Kafka connector") describes assignment, static
// membership and its costs, frontier commits, both exactly-once levels and
// their duplicate bounds in full.
package kafka
