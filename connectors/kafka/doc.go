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
// __meta_timestamp (the record's timestamp, ms). Event time may
// come from __meta_timestamp or from a value column: name it in the
// source's time block.
//
// A batch holds records of one partition in offset order: the ones that
// were available without waiting, at most batch_size. Its Partition is the
// Kafka partition number.
//
// Assignment. A source with parallelism 1 subscribes to the
// topics with consumer_group: the group assigns it the partitions (all of
// them, unless other consumers share the group), and rebalances move them;
// a revoked partition commits its frontier first.
//
// It joins the group as a static member (KIP-345): its group.instance.id
// is "arkflow.JOB.OPERATOR.SUBTASK" (the job's ID, the source operator's
// ID, 0), stable across restarts and distinct for every source task,
// also across jobs sharing a group (job IDs have no '.'; an id longer than
// the brokers' 249 characters keeps a prefix and ends in a hash). A
// restart, after a crash, a SIGKILL or a clean stop, takes the member's
// place and its partitions at once, without a rebalance; a dynamic member
// would first wait for the old member's session to expire (BENCHMARKS.md,
// "Kafka restart at parallelism 1"). The log says "joining the consumer
// group as a static member" with the id, then FirstRecordMessage for each
// partition as reading resumes. With transactional_offsets the output
// commits the offsets with the restarted member's group metadata, which
// carries the same id. The costs:
//
//   - a static member does not leave the group when it stops: a job that
//     is stopped (or dies) and is not restarted holds its partitions for
//     session.timeout.ms (librdkafka's default, 45 s, kept; set it in
//     properties) before other consumers sharing the group get them. The
//     timeout does not slow a restart: within it the restart takes the
//     member's place, after it the member is gone and the restart joins
//     as any new member;
//   - two consumers with the same id cannot both be members: the newer
//     one takes the older one's place, and the older source fails with
//     ErrInstanceFenced (for instance when the same job runs in two
//     processes). A fenced consumer is not closed (confluent-kafka-go
//     v2.11.1 cannot close a consumer after a fatal error); it ends with
//     the process.
//
// properties: {group.instance.id: NAME} sets the id instead: 1–249
// letters, digits, '.', '_' or '-' (a validation error naming
// sources[i].config.properties.group.instance.id otherwise); "" turns
// static membership off, for a dynamic member that leaves the group at a
// clean stop. Subscription stays (rather than explicit assignment with
// the group only for offsets, as Flink's source does): partitions move
// between consumers sharing the group, and partitions added to a topic are
// read without a restart.
//
// With parallelism P > 1, subtask s is assigned partition p of every
// topic with p % P == s (explicit assignment, no group membership, so no
// group.instance.id either; partitions added to a topic later are read
// after a restart). A subscription's Connect waits (30 s at most) for the
// group's first assignment, so positions cover its partitions from the
// start. Either way every partition
// starts at an explicit offset: the position restored from a checkpoint
// (or the WAL), else the group's committed offset, else the partition's
// beginning (end with start_from_latest). Restored positions merge into the
// full assignment: partitions without one keep that configured start. The
// consumer runs with auto.offset.reset=error, so an offset the broker no
// longer has fails the source instead of silently skipping or re-reading
// records; reconnects resume from the partitions' positions.
//
// Positions are, per topic-partition, the contiguous
// acknowledged frontier: the offset after the longest prefix of delivered
// batches that were all acknowledged. A batch acknowledged before an
// earlier one waits for it; a failed acknowledgement stops the frontier
// there. Auto commit is off: the frontier is committed to consumer_group
// with CommitOffsets, at most every 100 ms after acknowledgements, when
// partitions are revoked, and at Close. Behind a WAL (a durability block)
// that happens only once the WAL cursor covers the rows. With
// transactional_offsets the source commits nothing: the paired output does
// (see L3 below).
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
// the WAL cursor and the sources' commits advance, only after the commit.
// An abortable error aborts the transaction and writes the
// same rows again in a new one; a fatal producer error rebuilds the
// producer and does the same; fencing fails the write, and every later
// one, with ErrFenced (a fenced sink never takes the id back). The batch
// is one atomic unit: read_committed consumers see all of its rows or
// none.
//
// Exactly-once stands on at-least-once ingestion: every source feeding an
// exactly-once output needs a durability block, job-wide or its own
// (validation error naming sinks[i].config.exactly_once otherwise);
// checkpoints alone do not count, as a source that cannot replay would
// lose what it read after the last one.
// With checkpoints, transaction.timeout.ms (properties; librdkafka's
// default 60000) must exceed checkpoint.interval_ms (validation error
// naming sinks[i].config.properties.transaction.timeout.ms). L2 does not
// remove duplicates from a crash after a commit and before the source's
// offsets were committed: those rows are written again in a new
// transaction. L3 closes that window.
//
// # Exactly-once with transactional offsets (L3)
//
//	input:                                   # sources[0].config
//	  topics: [orders]                       # exactly one topic
//	  consumer_group: orders-copy
//	  transactional_offsets: true
//	output:                                  # sinks[0].config
//	  exactly_once: true
//	  transactional_id: orders-copy-{subtask}
//	  offset_commit_group: orders-copy       # the input's consumer_group
//
// An input with transactional_offsets registers its sources, when they
// connect, in an in-process registry under consumer_group, and commits no
// offsets itself: acknowledgements only move its in-memory contiguous
// frontier (which checkpoints and the WAL still record as positions). The
// output whose offset_commit_group names the group commits offsets with
// SendOffsetsToTransaction inside the transaction that writes the rows:
//
//   - for every partition of the batch, derived from the rows'
//     __meta_topic, __meta_partition and __meta_offset columns (rows of
//     other sources, and batches without these columns, contribute none):
//     min(max __meta_offset in the batch + 1, the input's contiguous
//     frontier);
//   - when the output's rows carry that metadata (a pass-through
//     pipeline), also every other partition the input reads, at its
//     frontier: a frontier never covers a record whose outputs were not
//     all written and acknowledged, so committing it skips nothing, and it
//     commits the batch a partition wrote last as soon as any later
//     transaction runs;
//   - behind a WAL, the frontier is what the WAL cursor covers: the
//     source is sought past what the WAL holds while the WAL replays its
//     entries itself, so until those are acknowledged the source's own
//     frontier runs ahead of what was processed, and afterwards it trails
//     the acknowledgements by the cursor's persistence
//     (connectors.CoverageAware; a partition the cursor covers nothing of
//     yet gets no offset);
//   - only when beyond what this output already committed, and what the
//     group had committed when the partition was assigned: the group
//     offset never moves back.
//
// The consumer group metadata is asked of the input's consumer for every
// transaction, so a rebalance fences the commit of partitions the input
// no longer reads (the transaction aborts and the batch is written again;
// partitions no source reads get no offset). The group's offsets
// therefore move only with committed transactions: an aborted transaction
// leaves them where they were, and its rows are never visible to
// read_committed consumers. A subscribed input that gets a partition back
// after a rebalance resumes at its own frontier (nothing was committed at
// the revocation). The input reads the group's committed offsets without
// waiting for open transactions (require_stable off): after a crash
// inside a transaction, that one stays open until the output's
// InitTransactions fences it, and outputs connect after inputs.
//
// Why the frontier clamps, and what it costs. The runtime acknowledges a
// batch to its source only after every output derived from it was
// written: for this output, after the transaction writing it committed.
// While a transaction is open, the frontier therefore covers the batches
// acknowledged before it, not its own rows; and it never covers rows
// another branch of the graph (fan-out, routes, another sink) still holds
// or failed. Committing the batch's own max + 1 instead could skip such
// rows after a crash; committing the frontier never skips anything. The
// price is that the group offset trails the output by the batch being
// written. The duplicate bound of L3:
//
//   - a crash (SIGKILL, power loss) duplicates at most the batch whose
//     transaction was the last to commit (the tail; one source batch, of
//     one partition, for a pass-through job): a restart writes it again in
//     a new transaction. The acknowledgement of a committed batch reaches
//     the source (or the WAL cursor) asynchronously, so each transaction
//     first waits, up to 100 ms, for the previous one's rows to be
//     acknowledged; only a batch whose acknowledgement took longer (held
//     by a slower output of a fan-out, or failed) adds to the tail;
//   - a clean stop duplicates nothing: Close runs one more transaction
//     holding only offsets, every partition the input read at its final
//     frontier, which by then covers every written batch;
//   - restarts resume from the group's offsets only for partitions without
//     a checkpoint or WAL position: restored positions win. A
//     restored position can be older than the group offset (a checkpoint
//     taken earlier, a WAL cursor lagging the acknowledgements); the
//     output then drops the replayed rows whose __meta_offset lies below
//     the group's committed offset (what it committed itself, or what the
//     group held when the input was assigned the partition) instead of
//     writing them again: a committed offset C means every output derived
//     from the records before C was already written. So the bound stays
//     the tail whatever position the restart resumed from — for rows that
//     carry the metadata. Window results carry none; for them the
//     engine keeps the window's floor instead: a restore from a
//     checkpoint on the node that cut it keeps the watermark below which
//     every fired window was acknowledged, which the acknowledgement of
//     each firing writes after its transaction committed, so the windows
//     written since the checkpoint are not fired again, and a restart
//     writes again at most the firing whose commit preceded the kill
//     (measured: none in 40 kills). This holds with L2 too. A restore on
//     another node, or from a savepoint, or of a job whose sources route
//     or update late rows, rolls the floor back with the checkpoint:
//     there the duplicates are bounded by what the restored positions
//     replay, as with L2. Aggregates without windows have no floor and
//     that L2 bound. The flip side: starting
//     from an older savepoint on purpose, to process records again,
//     writes nothing for the records the group committed; reset the
//     group's offsets to the savepoint's positions first, or use a new
//     consumer_group.
//
// L3 fails closed: an input with transactional_offsets whose
// consumer_group no exactly-once kafka output of the job names in
// offset_commit_group is a validation error at startup naming the group
// and both keys (its offsets would never be committed); so is an
// offset_commit_group that no such input of the job feeds, an
// offset_commit_group without exactly_once, and a transactional input
// with more than one topic. A write whose offset_commit_group has no live
// transactional input in the process fails with ErrUnpairedGroup. Pairing
// is in-process: the input and the output must run in the same process.
// Keep the pipeline between them free of operators that drop the
// __meta_* columns (windows and aggregates emit rows without them): such
// batches commit no offsets, and since the input commits none itself, a
// restart from the group offsets replays their records; behind a WAL or
// checkpoints, restarts resume from those positions instead (and window
// results have the tail bound above). A Go function (map, udf, process) whose output
// keeps the __meta_* columns must keep them of the row it derives the
// output from: the output drops rows whose offset the group committed.
// Several output subtasks may commit the same group; each commits only
// clamped offsets, so the group can move back (more replay), never past
// an unacknowledged record.
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
