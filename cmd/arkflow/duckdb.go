//go:build cgo

package main

// The SQL of map operators runs on DuckDB, through cgo. A build without
// cgo has no SQL engine; specs with a sql map then fail validation and
// say so.
import _ "github.com/arkflow-rs/arkflow-go/connectors/duckdb"
