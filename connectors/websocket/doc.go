// Package websocket provides the "websocket" input: a client of a
// WebSocket server (github.com/coder/websocket, pure Go) that reads the
// frames the server sends. The root package does not import it: import it
// for its registration (the arkflow command does).
//
//	import _ "github.com/arkflow-rs/arkflow-go/connectors/websocket"
//
// The keys are ArkFlow's (url, headers, timeout in seconds), with
// additions: tls, format, schema, batch_size, max_message_bytes and
// reconnect {initial_ms, max_ms}.
//
//	input_type: websocket
//	config:
//	  url: wss://feed.example.com/ticks
//	  headers: {Authorization: "Bearer ..."}
//	  schema: [{name: symbol, type: string}, {name: price, type: float64}]
//
// # Rows
//
// Text and binary frames are read alike. With format json (the default
// with a schema) a frame holds one JSON object, or several, one per line
// (NDJSON); each is a row, decoded into the declared schema by
// internal/rowjson's rules as the file, kafka and nats inputs do. With
// format raw (the default without a schema) each frame is one row, its
// bytes in a binary column "value". Then come __meta_source,
// __meta_partition (0), __meta_offset and __meta_timestamp: when the
// frame arrived. A frame larger than max_message_bytes (default 1 MiB)
// fails the source, naming the key, as does a row that does not decode
// (naming its offset and the field, after the batch of the rows before
// it): input is never cut or skipped.
//
// # Delivery: at-most-once
//
// A WebSocket server keeps nothing for a client: the source reads what the
// server sends while it is connected, and nothing else. One connection is
// opened, by subtask 0 (every subtask would read every frame again).
// Connect fails when the server cannot be reached; a connection lost
// later is opened again, waiting reconnect.initial_ms (default 100), then
// twice as long after each failed attempt up to reconnect.max_ms (default
// 10000), with jitter. Frames sent while the source is not connected (a
// restart, a reconnection) are lost; websocket_connected and
// websocket_reconnects_total tell when. The source cannot read again
// (connectors.Unrewindable): with a durability block and checkpoints,
// what it read is kept in the write-ahead log until a checkpoint holds
// it, and replayed from there after a crash (package connectors,
// "Sources that cannot read again"), so what was read is not lost.
//
// # TLS
//
// A wss:// URL is TLS, verified against the system's roots, or the tls
// block's ca; tls.client_cert and tls.client_key present a client
// certificate.
//
// # Metrics
//
// connectors.Metered, exported by Job.Collector with the task's labels:
// websocket_connected (gauge) and websocket_reconnects_total.
package websocket
