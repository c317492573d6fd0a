package redis

import "errors"

// ErrClosed is returned by Connect, Read and Write after Close.
var ErrClosed = errors.New("redis: closed")

// errNotConnected is returned by Read and Write before Connect.
var errNotConnected = errors.New("redis: not connected (Connect first)")
