package conformance_test

import (
	"testing"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// newMyInput stands for your connector's constructor: an input whose
// partition p holds data[p] in order, cut into batches of batchSize rows.
func newMyInput(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
	t.Skip("stands for a real connector")
	return nil
}

// A connector's test runs the source suite over fresh inputs the harness
// makes: every row read once, positions that follow acknowledgements,
// seeks, subtasks, cancellation (see TestSource for the list).
func ExampleTestSource() {
	_ = func(t *testing.T) { // the body of func TestConformance(t *testing.T) in your package
		conformance.TestSource(t, conformance.SourceHarness{
			Features: conformance.SourceFeatures{Bounded: true},
			New:      newMyInput,
		})
	}
}
