// Package redis provides the "redis" input and output, on go-redis (pure
// Go). The root package does not import it: import it for its
// registration (the arkflow command does).
//
//	import _ "github.com/arkflow-rs/arkflow-go/connectors/redis"
//
// The keys are ArkFlow's (mode {type: single {url} | cluster {urls}};
// the input's redis_type {type: subscribe {subscribe: {type: channels
// {channels} | patterns {patterns}}} | list {list}}; the output's
// redis_type {type: publish {channel} | list {key} | hashes {key, field}
// | strings {key}} and value_field), with additions: redis_type stream
// for the input {streams, group, consumer, field, block_ms} and the output
// {key, field}; consumer and block_ms for lists; tls; format, schema and
// batch_size. URLs are redis://[user:password@]host:port[/db], or
// rediss:// for TLS.
//
// # Input: streams (redis_type stream), exact positions
//
//	input_type: redis
//	config:
//	  mode: {type: single, url: redis://localhost:6379}
//	  redis_type: {type: stream, streams: [orders:eu, orders:us], group: totals}
//	  schema: [{name: user, type: string}, {name: amount, type: int64}]
//
// Partition p reads streams[p] through the consumer group (created at
// the first start, from the stream's beginning), as consumer (default
// "arkflow"); subtask s of P reads the partitions p with p % P == s. Every
// entry is one row: the payload in its field (default "value") decoded as
// one JSON object into the schema (format json, internal/rowjson's
// rules) or kept as bytes in a binary column "value" (format raw, the
// default without a schema); then __meta_source, __meta_partition,
// __meta_offset, __meta_topic (the stream) and __meta_timestamp (the
// entry ID's milliseconds).
//
// Offsets are entry IDs: MS-SEQ is MS·2^20 + SEQ, which keeps their
// order and fits an int64 for SEQ below 2^20 and MS below 2^43 (the year
// 2248); an entry with another ID fails the source, naming it
// (auto-generated IDs always fit). An entry is acknowledged (XACK) only
// once it and every entry before it in its stream were acknowledged by
// every sink they reached (or folded into committed state): the group's
// pending entries are the entries from the contiguous acknowledged
// frontier on. At Connect the source moves the group (XGROUP SETID) to
// where the partition resumes, and acknowledges the pending entries below
// it: after a restore, the checkpoint's position, so a restore reads
// again exactly what came after it and the job's replay rules give every
// entry once to the state; without one, the group's first pending entry
// (whichever consumer of the group read it: a dead one's entries are
// taken over), so a restart reads again what was read and not
// acknowledged (at-least-once; redis_reclaimed_total counts them). The stream must
// still hold those entries: trim (XTRIM, MAXLEN) only below what every
// checkpoint kept holds. Each stream is read by one subtask: another
// consumer in the same group would be moved back by every restart.
//
// An entry whose payload does not decode, or that has no payload field,
// fails the source with an error naming the stream, entry ID and field,
// after the batch of the entries before it: bad input is never skipped.
// As a job fails and restarts at the same entry, fix or remove it first.
//
// # Input: lists (redis_type list), at-least-once
//
// Partition p pops list[p]: every element moves atomically (LMOVE, or
// BLMOVE waiting block_ms) from the head of the list to the tail of the
// processing list LIST:processing:CONSUMER, and is removed from it
// (LREM) once acknowledged as entries are. A restart reads the
// processing list's elements again first. Lists have no positions: a
// restore of a checkpoint does not read again what was acknowledged after
// it. In a cluster, give list keys a hash tag ({...}) so that the
// processing list lives in the same slot.
//
// # Input: pub/sub (redis_type subscribe), at-most-once
//
// Subtask 0 subscribes to the channels (SUBSCRIBE) or patterns
// (PSUBSCRIBE); __meta_topic is the channel. Redis keeps nothing: a
// message published while the source is not subscribed is never read.
// The source cannot read again (connectors.Unrewindable): with a
// durability block, the runtime keeps what it read in the write-ahead log
// until a checkpoint holds it (package connectors, "Sources that cannot
// read again").
//
// # Output
//
//	output_type: redis
//	config:
//	  mode: {type: single, url: redis://localhost:6379}
//	  redis_type: {type: hashes, key: totals, field: {type: expr, expr: user}}
//	  value_field: total_json
//
// Each row is one command: XADD key * field value (stream; field default
// "value"), RPUSH key value (list: appended at the tail, so the list
// input pops rows in order), PUBLISH channel value, HSET key field value,
// or SET key value. The value is value_field's bytes (a string or binary
// column), or the row as a JSON object without its __meta_* columns.
// channel, key and field are strings, ArkFlow's {type: value, value}, or
// {type: expr, expr}: an expression of the expression language over the
// row's columns (a column name is the simplest) giving a string, an
// integer or a timestamp (its milliseconds since the epoch), computed per
// row; a null fails the write. The rows of a write
// go in one pipeline, and Write returns once Redis answered every
// command. A write that fails on a connection error is sent again whole,
// up to 10 times: at-least-once (an XADD or RPUSH may be there twice;
// HSET and SET write the same value again, so keyed by the row's key they
// are effectively-once). PUBLISH reaches the subscribers connected then.
//
// # TLS
//
// A rediss:// URL, or a tls block {ca, client_cert, client_key}, makes
// the connection TLS (server certificates are checked against tls.ca, or
// the system's roots without it).
//
// # Metrics
//
// connectors.Metered, exported by Job.Collector with the task's labels:
// redis_pending_entries{stream} (entries a streams source read and has
// not acknowledged) and redis_reclaimed_total{stream} (entries read again
// after a restart).
package redis
