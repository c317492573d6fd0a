// Package stream runs ArkFlow's Stream configs: a YAML, JSON or TOML file
// whose top level lists streams, each an input, an optional buffer, a
// pipeline of processors and an output (plus error_output and a
// durability block), beside logging and health_check blocks. Parse and
// Load decode one; Validate checks it as deeply as a start would, without
// side effects; Run runs it in the process; Notes says which streams would
// be better as Jobs. The arkflow command runs them with arkflow run FILE
// and ArkFlow's own arkflow -c FILE [--validate].
//
// A Stream runs on its own path beside Jobs, sharing their connectors,
// write-ahead log and SQL engine: input (through the WAL when the stream
// has a durability block) → buffer → processors on pipeline.thread_num
// workers → output, in input order whatever thread_num is. Rows are
// acknowledged to the input once the output wrote them (at-least-once);
// an output error leaves them unacknowledged, so a source that can read
// again, or the WAL after a restart, gives them again. A kafka output with
// exactly_once writes each batch in one transaction (and with L3 commits
// the input's offsets in it); see examples/streams/eos-kafka.yaml.
//
// Inputs and outputs are the connectors' (generate, memory,
// multiple_inputs, file (csv, json, parquet or arrow, ArkFlow's
// input_type), http, websocket, kafka, mqtt, nats, redis, sql;
// stdout, drop, file, http, kafka, mqtt, nats, redis, sql), with
// ArkFlow's keys. A raw payload arrives in the binary column __value__;
// an output without a codec writes __value__ when a batch has it (kafka,
// mqtt, nats, redis and stdout, unless the config names a value_field),
// otherwise each row as a JSON object. Processors: json_to_arrow,
// arrow_to_json, batch and sql (DuckDB, with the cgo package
// connectors/duckdb linked in; the arkflow command has it). Codecs: json
// and debezium_json on inputs, json on outputs. Buffers: memory,
// tumbling_window, session_window and sliding_window, and the window
// buffers' join.
//
// # Differences from ArkFlow
//
// Stricter:
//   - Unknown keys are errors with their path (ArkFlow ignores them, so a
//     misspelt or misplaced key silently does nothing there), and so are
//     an unknown logging level (ArkFlow: info) and a thread_num of 0.
//   - ${VAR} and ${VAR:-default} in string values are replaced from the
//     environment, and an unset VAR without a default is an error ($${ is
//     a literal ${); ArkFlow takes them literally.
//   - Validation builds everything (every input and output, every query
//     compiled, the connectors' cross-component checks such as the L3
//     offset pairing) without creating a file, binding a port or
//     starting a timer (it reads a file input's header or footer for its
//     columns); ArkFlow's --validate only parses the file.
//
// Where ArkFlow has a defect, this package does the correct thing:
//   - Output order is input order: ArkFlow numbers batches as its workers
//     finish them, so with thread_num > 1 its output can come out of order.
//   - tumbling_window and session_window emit the last open window at the
//     end of input (ArkFlow drops it), a window's batches oldest first
//     (ArkFlow: newest first), and a session closes exactly gap after its
//     last row (ArkFlow: between gap and 2·gap).
//   - sliding_window (counting batches, as in ArkFlow, never time) emits
//     the batches never part of a full window as a last partial window at
//     the end of input (ArkFlow never emits them), and acknowledges a batch
//     once every window holding it is written.
//   - The batch processor acknowledges what it holds only once the joined
//     batch is written (ArkFlow acknowledges at once and loses what it
//     holds at a crash or stop), emits on its timeout without waiting for
//     the next batch, and emits the rest at the end of input.
//   - json_to_arrow infers the schema over all rows of a batch (ArkFlow:
//     the first row only, then drops new keys and truncates floats in an
//     integer field); arrow_to_json replaces an existing __value__
//     (ArkFlow adds a second one). See internal/arrowjson for the rest.
//   - A join window in which an input has no rows emits nothing (ArkFlow
//     emits an empty batch); multiple_inputs ends when every input has
//     ended (ArkFlow: when the first does).
//   - Run returns when every input has ended (ArkFlow's engine waits for
//     a signal), and a stop drains: what was read goes out first.
//   - health_check routes are served when the block sets enabled: true or
//     an address (ArkFlow serves them on 127.0.0.1:8080 by default).
//
// Temporaries (redis) give a sql processor's temporary_list its tables:
// for each batch the key (a value, or the distinct values of an expr over
// the batch) is looked up (string keys by MGET, list keys by LRANGE) and
// the values decoded as JSON objects. Output keys written {type: expr}
// (a kafka topic, a redis key, …) are DataFusion SQL in ArkFlow: here the
// SQL engine computes them over the batch before the write.
//
// Otherwise different:
//   - The sql processor runs on DuckDB, not DataFusion: SQL dialects
//     differ at the edges; unaliased calls over columns are named as
//     DataFusion names them (avg(flow.value), count(*)).
//   - Not available, each refused with a hint: the processors vrl,
//     python, protobuf_to_arrow and arrow_to_protobuf (use a sql
//     processor, or a Go function in a Job); pulsar, modbus, mongodb and
//     influxdb; ballista; the protobuf and schema_registry codecs; the sql
//     input over files; temporaries other than redis. The durability block's
//     object_store backend keeps the log in the bucket as a Job's does;
//     ArkFlow's tuning keys for it (segment, cursor, parallel_put,
//     compression, …) are accepted and not used (Notes says so).
//   - A query whose input columns are known only once rows arrive (after
//     json_to_arrow, a codec or a join) is checked for syntax only.
//
// Durations (interval, timeout, gap) are humantime's, as in ArkFlow: see
// ParseDuration.
package stream
