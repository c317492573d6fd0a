//go:build !cgo

package streambuf

import (
	"strings"
	"testing"
)

// Without cgo no SQL engine is linked in: a join is refused, saying what
// to import.
func TestJoinNeedsAnEngine(t *testing.T) {
	cfg := `{"interval": "1s", "join": {"query": "SELECT 1", "codec": {"type": "json"}}}`
	_, err := New("tumbling_window", []byte(cfg), epoch, Options{Inputs: []string{"a", "b"}, Decode: decodeJSON})
	if err == nil || !strings.Contains(err.Error(), "connectors/duckdb") {
		t.Fatalf("got %v", err)
	}
}
