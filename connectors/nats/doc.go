// Package nats provides the "nats" input and output, on nats.go (pure
// Go) and its jetstream package. The root package does not import it:
// import it for its registration (the arkflow command does).
//
//	import _ "github.com/arkflow-rs/arkflow-go/connectors/nats"
//
// The keys are ArkFlow's (url; mode {type: regular {subject,
// queue_group} | jet_stream {stream, consumer_name, durable_name}}; auth
// {username, password, token}; the output's mode subject and
// value_field), with additions: tls, auth.creds_file, format, schema,
// batch_size; mode.subjects, ack_wait_ms and max_ack_pending for
// JetStream; msg_id_fields for the JetStream output.
//
// # Input: core subjects (mode type regular), at-most-once
//
//	input_type: nats
//	config: {url: nats://localhost:4222, mode: {type: regular, subject: "clicks.>", queue_group: counters}}
//
// Every message is one row: its payload decoded as one JSON object into
// the declared schema (format json, internal/rowjson's rules, as the file
// and kafka inputs do) or kept as bytes in a binary column "value"
// (format raw, the default without a schema); then __meta_source,
// __meta_partition, __meta_offset, __meta_topic (the subject) and
// __meta_timestamp (null: core messages have none). Core NATS keeps
// nothing: a message published while no subtask is subscribed (before
// the start, during a restart or a reconnect) is never read, and one the
// client drops as a slow consumer neither (nats_dropped_messages_total).
// With a queue group every subtask subscribes, and the server gives each
// message to one member; without one only subtask 0 subscribes. The
// source cannot read again (connectors.Unrewindable): with a durability
// block, the runtime keeps what it read in the write-ahead log until a
// checkpoint holds it, and replays it from there after a crash (package
// connectors, "Sources that cannot read again").
//
// # Input: JetStream (mode type jet_stream), exact positions
//
//	config:
//	  url: tls://nats.example.com:4222
//	  mode: {type: jet_stream, stream: ORDERS, consumer_name: orders-totals, subjects: [orders.eu, orders.us]}
//	  schema: [{name: user, type: string}, {name: amount, type: int64}]
//
// Partition p reads mode.subjects[p] through a durable pull consumer of
// its own, consumer_name-p (without subjects, one partition reads the
// whole stream through consumer_name); subtask s of P reads the
// partitions p with p % P == s. Offsets are stream sequences, and
// __meta_timestamp is the message's time in the stream. The source owns
// its consumers: at Connect it creates or updates them (ack policy all,
// deliver all) and resets them (the consumer reset API: nats-server 2.14
// or later) to the restored position, or without one to the ack floor.
// A message is acknowledged only once it and every message before it in
// its partition were acknowledged by every sink they reached (or folded
// into committed state): the ack floor is the contiguous acknowledged
// frontier. So a restore of a checkpoint reads again exactly what came
// after the checkpoint's positions, and the job's replay rules give every
// message once to the state; without checkpoints a restart reads again
// what was read and not yet acknowledged (at-least-once). The stream must
// still hold those messages: a restored position below its first
// sequence fails the source (a limits-retention stream keeps acknowledged
// messages; work-queue and interest retention delete them, and a warning
// says so). A message the server delivers again because its ack wait ran
// out while the job held it is skipped (nats_redeliveries_skipped_total).
//
// A payload that does not decode fails the source with an error naming
// the stream, subject, sequence (or offset) and field, after the batch of
// the messages before it: bad input is never skipped. As a job fails and
// restarts at the same message, fix or remove it first.
//
// # Output
//
//	output_type: nats
//	config: {url: nats://localhost:4222, mode: {type: jet_stream, subject: totals}, msg_id_fields: [user, window_start]}
//
// Each row is one message: value_field's bytes, or the row as a JSON
// object without its __meta_* columns. Core NATS (regular): a write
// returns once the server has every message (a flush), which it passes
// to the subscribers connected then: at-most-once for them. JetStream: a
// write returns once the stream acknowledged every message, each with a
// Nats-Msg-Id of the job's ID and the row's source position, or the
// values of msg_id_fields (rows out of a window or an aggregate carry no
// position: name their key and window start). The stream stores a
// message ID once within its duplicate window (default 2 minutes): rows a
// restart writes again after a crash are stored once if the restart comes
// within it, effectively-once (nats_publish_duplicates_total counts the
// messages it dropped). Set the stream's duplicate window above the
// checkpoint interval plus a restart's time.
//
// # TLS and auth
//
// A tls:// URL, or a tls block {ca, client_cert, client_key}, makes the
// connection TLS. auth gives a username and password, a token or a
// credentials file (creds_file), one of them.
//
// # Metrics
//
// connectors.Metered, exported by Job.Collector with the task's labels:
// nats_consumer_pending_messages{subject} and
// nats_redeliveries_skipped_total{subject} of a JetStream source,
// nats_dropped_messages_total of a core one, and
// nats_publish_duplicates_total of a JetStream sink.
package nats
