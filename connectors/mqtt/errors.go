package mqtt

import "errors"

// EXTERNAL: errors callers branch on.

// ErrClosed is returned by Connect, Read, Write and WriteAsync after
// Close.
var ErrClosed = errors.New("mqtt: closed")

// INTERNAL

// errNotConnected is returned by Read and Write before Connect.
var errNotConnected = errors.New("mqtt: not connected (Connect first)")
