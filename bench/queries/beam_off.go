//go:build !beam

package queries

import (
	"context"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// beamSides are the queries' Beam sides, by name: none without the build
// tag beam (beam.go), which keeps Apache Beam's SDK and its dependencies
// out of the default build.
var beamSides = map[string]func(context.Context, *nexmark.Events) (Digest, error){}
