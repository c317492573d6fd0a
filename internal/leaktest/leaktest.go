// Package leaktest is the goroutine-leak check the engine's TestMain
// functions share: goleak, with the few goroutines that belong to the
// process rather than to anything a test started.
package leaktest

import (
	"testing"

	"go.uber.org/goleak"
)

// Ignored are the goroutines a test may leave that are not leaks: the
// idle keep-alive connections in HTTP clients' pools (to MinIO, to a
// Hub's test server), which their transports close after an idle
// timeout. They belong to the connection pool, not to a job, an Agent or
// a Hub, whose own goroutines all must end.
var Ignored = []goleak.Option{
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
}

// VerifyTestMain runs the tests and fails the package if a goroutine
// other than Ignored outlives them; opts add to Ignored (goleak.Cleanup
// among them).
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, append(append([]goleak.Option(nil), Ignored...), opts...)...)
}
