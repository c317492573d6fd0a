package nats

import "errors"

// EXTERNAL: errors callers branch on.

// ErrClosed is returned by Connect, Read, Write and WriteAsync after
// Close.
var ErrClosed = errors.New("nats: closed")

// INTERNAL

// errNotConnected is returned by Read and Write before Connect.
var errNotConnected = errors.New("nats: not connected (Connect first)")
