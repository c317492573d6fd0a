package hubclient_test

import (
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/leaktest"
)

// TestMain runs the tests and fails if a goroutine outlives them (an
// Agent's loops or a job not stopped when Run's context ends).
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}
