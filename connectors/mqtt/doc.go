// Package mqtt provides the "mqtt" input and output (MQTT 3.1.1), on
// eclipse/paho.mqtt.golang (pure Go). The root package does not import
// it: import it for its registration (the arkflow command does).
//
//	import _ "github.com/arkflow-rs/arkflow-go/connectors/mqtt"
//
// The keys are ArkFlow's (host, port, client_id, username, password,
// qos, clean_session, keep_alive in seconds; the input's topics; the
// output's topic, retain and value_field; the tls block {enabled, ca,
// client_cert, client_key}), with additions: the input's format, schema
// and batch_size. Defaults: port 1883, qos 1, keep_alive 60, and for the
// input clean_session false (ArkFlow's is true): the broker keeps the
// client's session, subscriptions and QoS 1 messages not yet acknowledged,
// across a restart (the output's is true: a restarted sink starts a new
// session, as its client lost what it had in flight). client_id is
// required: it names that session, subtask 0's (which keeps it when the
// parallelism changes); subtask s > 0 is client_id-s.
//
// # Input
//
//	input_type: mqtt
//	config: {host: broker, client_id: clicks-job, topics: ["clicks/#"], schema: [{name: user, type: string}, {name: ts, type: int64}]}
//
// Every message is one row: its payload decoded as one JSON object into
// the declared schema (format json, internal/rowjson's rules) or kept as
// bytes in a binary column "value" (format raw, the default without a
// schema); then __meta_source, __meta_partition, __meta_offset (a count
// of the messages read, going on across restarts), __meta_topic and
// __meta_mark (a QoS 1 message's packet identifier and a hash of its
// topic and payload; null for QoS 0). Subtask 0 alone subscribes: one
// partition (the broker keeps each topic's order); with shared subscriptions
// ($share/GROUP/FILTER, all topics shared) every subtask subscribes, a
// partition each, and the broker gives each message to one of them.
//
// # Delivery guarantee
//
// QoS 0: at-most-once; a message published while the source is not
// connected, or lost with a connection, is never read. QoS 1 with
// clean_session false: the source acknowledges a message (PUBACK) only
// once it is safe, and the broker delivers what it has no PUBACK for
// again after a reconnect. With a durability block (a write-ahead log) a
// message is safe, and acknowledged, once the log holds it; the runtime
// replays the log after a crash, and keeps it until a checkpoint holds
// its rows (package connectors, "Sources that cannot read again"): no
// message is lost, and none is counted twice, as the source recognises
// the redelivery of a message whose PUBACK a crash lost by its mark (the
// log's rows carry the marks; the durable source's keeper file beside
// the log, KEYS, or KEYS-s for subtask s > 0, keeps those of the rows it
// let go; so the durability must use a local path). One case escapes the
// marks: a message identical (topic and payload) to the last one with its
// packet identifier, redelivered because a crash came before the log held
// it, is taken for that one and skipped; payloads that repeat verbatim
// (without a time or a sequence number) can lose a message so. Without a durability block a message is
// acknowledged once every sink acknowledged the rows derived from it (a
// row a window holds: once the window fired and its result was written):
// at-least-once for a job without state (a restore of a checkpoint puts
// back state without the rows read after it). The broker sends at most
// max_inflight_messages (Mosquitto: 20 by default) messages without a
// PUBACK: a job that holds rows in open windows needs a durability block,
// or its windows wait forever (the source warns in its log when it waits
// with messages unacknowledged). With event time, keep the
// out_of_orderness above the event-time span of batch_size messages: the
// runtime moves the watermark per batch. A payload that does not
// decode fails the source with an error naming the topic, offset, packet
// identifier and field, after the batch of the messages before it; it is
// not acknowledged, and the broker delivers it again: fix or remove it.
//
// # Output
//
//	output_type: mqtt
//	config: {host: broker, client_id: totals-job, topic: {type: expr, expr: "concat('totals/', user)"}, qos: 1}
//
// Each row is one message: value_field's bytes, or the row as a JSON
// object without its __meta_* columns, published with qos and retain to
// topic: a string, {type: value, value: TOPIC}, or {type: expr, expr:
// EXPR}, an expression of package expr over the row's columns giving a
// string (a column name, or concat of literals and columns). A write
// returns once every message is acknowledged as its QoS has it (QoS 0
// written to the connection, 1 PUBACK, 2 PUBCOMP), or with an error:
// at-least-once for QoS 1 and 2 (a write waits up to 30 s for a client
// that reconnects; rows a restart writes again are published again); QoS
// 0 is at-most-once (a write while the client reconnects fails, one to a
// connection going down before the client noticed is lost).
//
// # TLS
//
// A tls block (enabled defaults to true) makes the connection TLS (ssl://
// host:port): ca names the CA that signed the broker's certificate
// (default: the system's roots); client_cert and client_key give a client
// certificate for brokers that require one.
//
// # Metrics
//
// connectors.Metered, exported by Job.Collector with the task's labels:
// mqtt_messages_redelivered_total and mqtt_redeliveries_skipped_total of
// a source, and mqtt_reconnects_total of sources and sinks.
package mqtt
