package hubclient_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests and fails if a goroutine outlives them (an
// Agent's loops or a job not stopped when Run's context ends).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
