//go:build cgo

package streambuf

import (
	"testing"

	_ "github.com/arkflow-rs/arkflow-go/connectors/duckdb"
)

// TestJoinDataDriven runs testdata/join, whose queries need DuckDB.
func TestJoinDataDriven(t *testing.T) { runStory(t, "testdata/join") }
