// Package duckdb runs the SQL of map operators ({"sql": "SELECT … FROM
// flow WHERE …"}, Builder.SQL) on DuckDB, embedded through cgo. Import it
// for its registration:
//
//	import _ "github.com/arkflow-rs/arkflow-go/connectors/duckdb"
//
// The arkflow command includes it. Without it (or without cgo) a job
// with a sql map fails validation and says to import it. Each subtask
// runs its own in-memory database, which reads the batch in place as
// the table (flow unless table_name says otherwise) and can read no
// file, URL or extension. Unaliased expressions are named the DuckDB
// way: sum(value), where ArkFlow names sum(flow.value); and a sum of
// integers is a decimal(38, 0) (DuckDB's HUGEINT): cast it, as in
// sum(value)::BIGINT, for an int64.
package duckdb
