// Package httpconn is the HTTP connector: the "http" input, a server that
// takes rows POSTed to it, and the "http" output, a client that sends
// rows to a URL. Both are net/http only. Import it for its side effect of
// registering the type with connectors (the arkflow command does):
//
//	import _ "github.com/arkflow-rs/arkflow-go/connectors/http"
//
// # The input
//
// ArkFlow's keys: address (host:port, required), path (default "/"),
// cors_enabled (default false) and auth, {type: basic, username,
// password} or {type: bearer, token}, compared in constant time.
// Additions: format json | ndjson | raw (json: a body is one object or
// an array of objects; ndjson: one object per line; raw: the body as
// bytes in a binary column "value", one row per request; the default is
// json with a schema, raw without), schema (the columns a JSON row decodes
// into, as for connectors/nats), max_body_bytes (default 1 MiB),
// tls {cert, key} (serve https), partitions (default 1: requests go
// round-robin, or to the partition their ?partition=N query names),
// max_pending (default 65536 rows received and not yet taken),
// max_in_flight (default 64 requests read and handled at once: memory
// stays below about max_in_flight × max_body_bytes), busy_wait_ms
// (default 1000) and idempotency {header, retention}.
//
//	sources:
//	  - operator_id: in
//	    input_type: http
//	    durability: {path: wal}
//	    config:
//	      address: 0.0.0.0:8000
//	      path: /clicks
//	      format: ndjson
//	      schema: [{name: user, type: string}, {name: ts, type: int64}]
//	      auth: {type: bearer, token: s3cret}
//	      idempotency: {header: Idempotency-Key}
//
// Answers, each with a JSON body (Response): 200 once the job took every
// row of the request (see below); 405 for a method other than POST (with
// cors_enabled, OPTIONS gets 204 and the CORS headers); 401 on missing or
// wrong credentials; 413 for a body over max_body_bytes; 400 for a body
// that does not decode, naming the element (json) or line (ndjson) and
// the field, or a row without an event time when the job reads the input
// under event time; 429 with Retry-After when max_pending rows wait, or
// max_in_flight requests are handled, and no room came within
// busy_wait_ms; 503 with Retry-After while the job is not
// running. Whatever the error, nothing of the request's body entered the
// job: a request is taken whole or not at all.
//
// # Delivery: what a 200 means
//
// With a durability block on the source (arkflow.Durable in Go), 200 comes
// after the rows are in the write-ahead log: they survive a crash
// (SIGKILL) of the process and are processed after a restart. Without
// one, 200 means the job took the rows into its pipeline: a crash loses
// those not yet processed. This is the promise of connectors/push (whose
// queue the input is built on), and the source is likewise unrewindable:
// a restore replays the WAL instead of reading the input again.
//
// # Idempotent requests
//
// A client that loses an answer cannot tell whether its rows were taken,
// and retries. With an idempotency block, a request whose header
// (default Idempotency-Key) holds a key K is taken once: its row i has the
// key "K/i", and rows whose key was accepted before are answered 200 again,
// counted in Response.Duplicates, without entering the job. A retry of a
// request whose first try is still in flight waits for its outcome. The keys
// seen are kept beside the WAL and survive a crash exactly as idempotent
// pushes do (connectors/push, "Idempotent pushes"), so the block needs
// durability on a local path: a job without one is refused, naming the
// field. The newest retention keys (default 1000000) are remembered.
// Without the block the header is ignored.
//
// # The output
//
// ArkFlow's keys: url (required), method (POST, PUT or PATCH; default
// POST), timeout_ms (per request, default 5000), retry_count (default 3),
// headers (a map), body_field and auth, in ArkFlow's form
// {Basic: {username, password}} or {Bearer: {token}}, or the input's
// {type: basic | bearer, ...}. Additions: format json (default: one
// request per batch whose body is a JSON array of its rows, without the
// __meta_* columns) | ndjson (one request per batch, a JSON object a
// line) | per-row (ArkFlow's way, and the default with body_field: one
// request per row, whose body is body_field's bytes or the row as an
// object), and tls {ca, client_cert, client_key}.
//
// A write returns once the server answered 2xx to every request of the
// batch. A 5xx, a 429 or a connection error is retried retry_count times,
// with exponential backoff from 100 ms (doubling, up to 5 s, each wait
// drawn from its upper half); any other status fails the write with the
// status and an excerpt of the response body. The job then restarts from
// its last checkpoint, so the output is at-least-once: a server that must
// count each row once deduplicates, by the row's key or window.
//
// # Metrics
//
// The input reports http_server_requests_total{code},
// http_server_rejected_total{reason}, http_server_rows_total and
// http_server_duplicate_rows_total; the output
// http_client_requests_total{code} and http_client_retries_total.
package httpconn
