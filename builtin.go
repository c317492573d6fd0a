package arkflow

// The connectors every job can use without importing anything. Connectors
// with heavy or cgo dependencies (Kafka) register when their package is
// imported.
import (
	_ "github.com/arkflow-rs/arkflow-go/connectors/drop"
	_ "github.com/arkflow-rs/arkflow-go/connectors/file"
	_ "github.com/arkflow-rs/arkflow-go/connectors/generate"
	_ "github.com/arkflow-rs/arkflow-go/connectors/memory"
	_ "github.com/arkflow-rs/arkflow-go/connectors/stdout"
)
