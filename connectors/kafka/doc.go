// Package kafka provides the "kafka" input and output, on
// confluent-kafka-go (librdkafka, bundled; the package needs cgo). It is
// the only package of the module that imports confluent-kafka-go, and the
// root package does not import it: import it for its registration.
//
//	import _ "github.com/arkflow-rs/arkflow-go/connectors/kafka"
//
// The arkflow command imports it, so specs with input_type or output_type
// "kafka" run from the CLI.
//
// # Input
//
//	input_type: kafka
//	config:
//	  brokers: [localhost:9092]
//	  topics: [orders]
//	  consumer_group: orders-copy
//	  start_from_latest: false      # partitions without a position or a committed offset start at the beginning
//	  schema: [{name: id, type: int64}, {name: amount, type: float64}, {name: ts, type: timestamp}]
//	  batch_size: 1024              # records per batch, at most
//	  properties: {fetch.max.bytes: 52428800}
//
// Every record becomes one row: its value is decoded as one JSON object
// into the declared schema (format json, the default with a schema;
// internal/rowjson's rules, a null value gives a row of nulls), or kept as
// bytes in a binary column "value" (format raw, the default without one).
// Rows carry __meta_source (the operator ID), __meta_partition,
// __meta_offset, __meta_topic, __meta_key (binary, null without a key) and
// __meta_timestamp (the record's timestamp, ms) (R-KAFKA-3). Event time may
// come from __meta_timestamp or from a value column: name it in the
// source's time block.
//
// A batch holds records of one partition in offset order: the ones that
// were available without waiting, at most batch_size. Its Partition is the
// Kafka partition number.
//
// Assignment (R-KAFKA-2). A source with parallelism 1 subscribes to the
// topics with consumer_group: the group assigns it the partitions (all of
// them, unless other consumers share the group), and rebalances move them;
// a revoked partition commits its frontier first. With parallelism P > 1,
// subtask s is assigned partition p of every topic with p % P == s
// (explicit assignment, no group membership; partitions added to a topic
// later are read after a restart). A subscription's Connect waits (30 s at
// most) for the group's first assignment, so positions cover its
// partitions from the start. Either way every partition
// starts at an explicit offset: the position restored from a checkpoint
// (or the WAL), else the group's committed offset, else the partition's
// beginning (end with start_from_latest). Restored positions merge into the
// full assignment: partitions without one keep that configured start. The
// consumer runs with auto.offset.reset=error, so an offset the broker no
// longer has fails the source instead of silently skipping or re-reading
// records; reconnects resume from the partitions' positions.
//
// Positions (R-KAFKA-1) are, per topic-partition, the contiguous
// acknowledged frontier: the offset after the longest prefix of delivered
// batches that were all acknowledged. A batch acknowledged before an
// earlier one waits for it; a failed acknowledgement stops the frontier
// there. Auto commit is off: the frontier is committed to consumer_group
// with CommitOffsets, at most every 100 ms after acknowledgements, when
// partitions are revoked, and at Close. Behind a WAL (a durability block)
// that happens only once the WAL cursor covers the rows.
//
// The consumer reads with librdkafka's default isolation.level,
// read_committed: records of aborted transactions are never read.
//
// # Output
//
//	output_type: kafka
//	config:
//	  brokers: [localhost:9092]
//	  topic: orders-copy            # or ArkFlow's {type: value, value: orders-copy}
//	  key: user                     # column of the record key (string, binary, integer); optional
//	  value_field: payload          # optional: a string/binary column as the value; default: the row as JSON
//	  compression: lz4              # none (default), gzip, snappy, lz4, zstd
//	  acks: all                     # default
//
// The value is the row as one JSON object without its __meta_* columns,
// as the file output writes lines, unless value_field names a column.
// At-least-once by default: Write returns once the broker acknowledged
// every record of the batch (delivery reports), so the sources commit only
// delivered rows; a failure replays them after a restart.
//
// # Exactly-once (L2)
//
//	exactly_once: true
//	transactional_id: orders-copy-{subtask}   # stable across restarts; unique per producer
//
// exactly_once needs a non-empty transactional_id (validation error
// naming sinks[i].config.transactional_id otherwise). Connect calls
// InitTransactions (60 s), which fences older producers with the same id
// and aborts their open transactions, so a zombie's writes never become
// visible to read_committed consumers. Every Write is one transaction:
// begin, produce every row, commit (30 s). The rows are acknowledged, and
// the WAL cursor and the sources' commits advance, only after the commit
// (R-KAFKA-4). An abortable error aborts the transaction and writes the
// same rows again in a new one; a fatal producer error rebuilds the
// producer and does the same; fencing fails the write, and every later
// one, with ErrFenced (a fenced sink never takes the id back). The batch
// is one atomic unit: read_committed consumers see all of its rows or
// none.
//
// Exactly-once stands on at-least-once ingestion: give the input a
// durability block, so that a crash between reading and writing loses
// nothing. It does not remove duplicates from a crash after a commit and
// before the source's offsets were committed: those rows are written again
// in a new transaction. (Committing the input's offsets inside the
// output's transaction, L3, is not implemented yet; transactional_offsets
// is rejected.)
//
// # TLS and SASL
//
// Both sides pass properties to librdkafka as they are, so whatever
// librdkafka supports works: TLS with a private CA, mutual TLS, SASL
// (PLAIN, SCRAM, OAUTHBEARER, GSSAPI where librdkafka was built with it).
// Keys the connector sets itself (bootstrap.servers, group.id,
// enable.auto.commit, auto.offset.reset, transactional.id, acks, …) are
// validation errors naming the config key to use instead.
//
//	config:
//	  brokers: [kafka-1.example.com:9093]
//	  topics: [orders]
//	  consumer_group: orders-copy
//	  properties:
//	    security.protocol: SASL_SSL
//	    ssl.ca.location: /etc/kafka/ca.pem
//	    ssl.certificate.location: /etc/kafka/client.pem   # mutual TLS
//	    ssl.key.location: /etc/kafka/client.key
//	    sasl.mechanisms: SCRAM-SHA-512
//	    sasl.username: arkflow
//	    sasl.password: ${KAFKA_PASSWORD}                  # expanded by your deployment, not by arkflow
//
// In Go, the same configuration:
//
//	kafka.SourceConfig{
//		Brokers:       []string{"kafka-1.example.com:9093"},
//		Topics:        []string{"orders"},
//		ConsumerGroup: "orders-copy",
//		Properties: kafka.Properties{
//			"security.protocol": "SSL",
//			"ssl.ca.location":   "/etc/kafka/ca.pem",
//		},
//	}
//
// # Logging
//
// librdkafka's log lines go to the task's logger (the job's slog.Logger)
// with the attribute connector=kafka; librdkafka's "debug" property turns
// on its debug contexts.
package kafka
