// Package stream reads and validates ArkFlow's Stream configs: a YAML or
// JSON file whose top level lists streams, each an input, an optional
// buffer, a pipeline of processors and an output (plus error_output),
// beside logging and health_check blocks. Parse and Load decode one;
// Validate checks it as deeply as a start would, without side effects.
// Running a Stream config is not available yet.
//
// Validate builds every input and output through the connectors registry
// (generate, memory, file, http, websocket, kafka, mqtt, nats, redis, sql,
// multiple_inputs; stdout, drop, http, kafka, mqtt, nats, redis, sql),
// checks the processors json_to_arrow, arrow_to_json, batch and sql (its
// query compiled by the registered SQL engine) and the buffers memory,
// tumbling_window, session_window and sliding_window with ArkFlow's keys.
// Every problem comes at once, each with its path, as Errors.
//
// # Differences from ArkFlow
//
//   - Unknown keys are errors with their path (ArkFlow ignores them, so a
//     misspelt or misplaced key silently does nothing there), and so are
//     an unknown logging level (ArkFlow: info) and a thread_num of 0.
//   - ${VAR} and ${VAR:-default} in string values are replaced from the
//     environment, and an unset VAR without a default is an error ($${ is
//     a literal ${); ArkFlow takes them literally.
//   - TOML files are refused: convert them to YAML (same keys).
//   - Where this library's connector of a name takes other keys than
//     ArkFlow's (file's input_type and query, kafka's fetch_* keys,
//     stdout's append_newline), Validate names the key and what to write
//     instead;
//     nothing is mapped silently. The connectors put a raw payload in the
//     binary column value (ArkFlow: __value__).
//   - Not available, each refused with a hint: the processors vrl, python,
//     protobuf_to_arrow and arrow_to_protobuf (use a sql processor, or a Go
//     function in a Job); pulsar, modbus, mongodb and influxdb; ballista;
//     codecs on inputs and outputs (connectors use format); temporary
//     tables; the durability block.
//   - A query whose input columns are known only once rows arrive (after
//     json_to_arrow, in a join) is checked for syntax only.
//
// Durations (interval, timeout, gap) are humantime's, as in ArkFlow: see
// ParseDuration.
package stream
