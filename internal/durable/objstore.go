package durable

import (
	"context"
	"errors"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/wal"
)

func openObjectStore(ctx context.Context, cfg *Config, opts wal.Options, info connectors.TaskInfo) (*wal.Log, error) {
	return nil, errors.New("object_store WAL backend not wired yet")
}
