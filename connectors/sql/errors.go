package sql

import (
	"errors"
	"time"
)

// EXTERNAL: errors callers branch on.

// ErrClosed is returned by Read and Write after Close.
var ErrClosed = errors.New("sql: closed")

// INTERNAL

// errNotConnected is returned by Read and Write before Connect.
var errNotConnected = errors.New("sql: not connected (Connect first)")

// closeTimeout bounds closing a PostgreSQL connection (its goodbye
// message).
const closeTimeout = 5 * time.Second
