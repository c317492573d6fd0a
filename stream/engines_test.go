//go:build cgo

package stream_test

// The cgo connectors the command links: the DuckDB SQL engine that
// compiles sql processors' queries, and Kafka.
import (
	_ "github.com/arkflow-rs/arkflow-go/connectors/duckdb"
	_ "github.com/arkflow-rs/arkflow-go/connectors/kafka"
)
