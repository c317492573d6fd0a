package checkpoint

// The connectors a spec can use without importing anything, as in the
// root package: Check builds the spec, which finds its input and output
// types in the registry.
import (
	_ "github.com/arkflow-rs/arkflow-go/connectors/drop"
	_ "github.com/arkflow-rs/arkflow-go/connectors/file"
	_ "github.com/arkflow-rs/arkflow-go/connectors/generate"
	_ "github.com/arkflow-rs/arkflow-go/connectors/memory"
	_ "github.com/arkflow-rs/arkflow-go/connectors/stdout"
)
