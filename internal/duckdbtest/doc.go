// Package duckdbtest is the baseline of the benchmarks that measure SQL
// against DuckDB called directly: duckdb-go's own Arrow interface, which
// exists only under its duckdb_arrow build tag (and cgo). Without them the
// package is empty.
package duckdbtest
