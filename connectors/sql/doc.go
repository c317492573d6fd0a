// Package sql provides the "sql" input and output, for PostgreSQL (through
// pgx, TLS by the connection string's sslmode) and SQLite files (through
// modernc.org/sqlite, pure Go). The root package does not import it:
// import it for its registration (the arkflow command does).
//
//	import _ "github.com/arkflow-rs/arkflow-go/connectors/sql"
//
// The database block is ArkFlow's: output_type (or input_type) is
// {type: postgres, uri, ssl?: {ssl_mode, root_cert, client_cert,
// client_key}} or {type: sqlite, path}. The ssl block's fields become the
// connection string's sslmode, sslrootcert, sslcert and sslkey.
//
// # Output
//
//	output_type: sql
//	config:
//	  output_type: {type: postgres, uri: "postgres://app@db:5432/app?sslmode=verify-full"}
//	  table_name: clicks_per_minute
//	  mode: upsert                      # or insert (the default)
//	  keys: [user, window_start]        # the table's primary key or a unique index
//	  columns: [user, window_start, window_end, clicks]
//
// Every row of a batch becomes one row of the table, its columns into the
// table's columns of the same names (columns lists which; by default all
// but the __meta_* ones), in one transaction per batch: a batch is in the
// table whole or not at all. With mode upsert each row is
// INSERT … ON CONFLICT (keys) DO UPDATE SET every other column, so
// writing a batch again changes nothing. Connect checks the table first:
// a column the rows have and the table lacks, a column whose type does
// not take the rows' values, or keys that are no unique index are errors
// naming the column (or the keys), before any row is written. A row the
// database refuses fails the write with the row's place in the batch
// (and the column, when the database names it), and nothing of the batch
// stays. Serialization failures, deadlocks, lost connections and busy
// SQLite files are retried max_retries times (default 8) with a backoff
// from 100 ms to 5 s, on a new connection where the old one broke.
//
// Delivery is at-least-once: a batch is acknowledged once its transaction
// committed, and a restart writes again what came after the last
// checkpoint. Upserts make that effectively-once: a window's results
// upserted on (key, window_start) are the same rows however often the job
// was killed, which cmd/arkflow's TestSQLUpsertSurvivesSIGKILL
// proves against PostgreSQL.
//
// Values: integers and floats go into numeric columns, strings into text
// ones (and json, uuid, enums), binary into bytea or BLOB, booleans into
// boolean (SQLite: 0 and 1), timestamps into timestamp, timestamptz or
// date (SQLite: the integer in the Arrow unit into INTEGER, REAL or
// NUMERIC columns, RFC 3339 text in UTC, as many fraction digits as the
// unit has, into others).
//
// # Input
//
//	input_type: sql
//	config:
//	  input_type: {type: sqlite, path: events.db}
//	  table_name: events                # or select_sql, see below
//	  tracking_column: id
//	  schema: [{name: id, type: int64}, {name: user, type: string}, {name: ts, type: int64}]
//	  batch_size: 1024
//	  poll_interval_ms: 1000
//
// The input polls a query for the rows whose tracking column is above the
// last value read, in tracking order, at most batch_size at a time; when a
// round finds nothing it waits poll_interval_ms. select_sql is the query
// in the database's own dialect with the placeholders :last, :limit
// (batch_size + 1) and (with several partitions) :partition, e.g.
//
//	SELECT id, user, ts FROM events WHERE id > :last ORDER BY id LIMIT :limit
//
// and table_name writes that query for the declared columns. The rows'
// values become the declared schema's types, and a value that does not
// fit stops the source with an error naming the column and the row's
// tracking value; nothing of that batch is delivered.
//
// The tracking value is the position: every row carries it as
// __meta_offset, the acknowledged frontier of each partition is
// checkpointed, and a restore resumes with the rows from it on, exactly.
// The tracking column is an int64 column (a serial id, Unix milliseconds)
// or, in PostgreSQL, a timestamp, whose position is in Unix
// microseconds. Rows may share a tracking value: a batch never ends
// inside such a run (batch_size must exceed the longest one). What
// polling cannot see: a row inserted later with a tracking value at or
// below one already read, such as a serial id whose transaction commits
// after a later id's did. Write each table's rows from one transaction at
// a time, or track a column those writers set in commit order.
//
// partitions > 1 deals the rows into partitions read by the job's source
// subtasks in parallel, each with its own position: by partition_column
// mod partitions with table_name, by :partition in select_sql.
//
// Metrics (connectors.Metered): sql_retries_total counts the statements
// run again; sql_source_tracking_value{partition} is the last tracking
// value each source partition read.
//
// ARCHITECTURE.md ("SQL connector") describes the transactions, the table
// check, the retries and the input's positions in full.
package sql
