// Package durable gives any source a write-ahead log (R-WAL-1..7): every
// batch a source reads is appended to the WAL before it enters the
// pipeline, acknowledgements move the WAL cursor contiguously, and a restart
// replays what was not acknowledged before reading new input.
//
// The spec turns it on with a durability block, job-wide (the spec's
// top-level durability) or per source (sources[i].durability). A source's
// block is merged over the job-wide one field by field.
package durable

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/config"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Config is a durability block.
type Config struct {
	// Enabled defaults to true when a block exists.
	Enabled *bool `json:"enabled"`
	// Path is the WAL's base directory (local backend). The WAL of subtask
	// k of source S lives in {path}/{S}/{k}. Default: the runtime's data
	// directory, {data_dir}/{job}/wal.
	Path string `json:"path"`
	// Sync is always | group_commit (default) | periodic | none.
	// ArkFlow's per_entry is accepted as always.
	Sync string `json:"sync"`
	// SyncIntervalMS is the periodic mode's fsync interval (default 100).
	SyncIntervalMS int64 `json:"sync_interval_ms"`
	// ParkLeaseMS bounds how long an acknowledgement waits for an earlier
	// one before reporting the gap (default 60000, R-WAL-4).
	ParkLeaseMS int64 `json:"park_lease_ms"`
	// DrainTimeoutMS bounds how long a graceful stop waits for pending
	// acknowledgements (default 30000, R-WAL-5).
	DrainTimeoutMS int64 `json:"drain_timeout_ms"`
	// SegmentBytes is the local segment size (default 32 MiB).
	SegmentBytes int64 `json:"segment_bytes"`
	// Retain keeps segments the cursor has passed (debugging).
	Retain bool `json:"retain"`
	// NoRecycle deletes the local segments the cursor has passed instead
	// of writing the next segments over them (walog.LocalOptions.NoRecycle):
	// acknowledged entries are then gone from disk at once, and syncs cost
	// more (BENCHMARKS.md, WAL).
	NoRecycle bool `json:"no_recycle"`
	// Backend selects local (default) or object_store storage.
	Backend *Backend `json:"backend"`
}

// Backend is where the WAL is kept.
type Backend struct {
	// Type is local (default) or object_store.
	Type string `json:"type"`
	// NodeID names this process's WAL namespace in the bucket. Required
	// for object_store; it must survive restarts and be unique per
	// process, and is unrelated to any Kafka transactional_id.
	NodeID string `json:"node_id"`
	// StreamID names the job's WAL inside the node's namespace (default
	// the job ID).
	StreamID string `json:"stream_id"`
	// Prefix is the key prefix (default arkflow/wal).
	Prefix string `json:"prefix"`
	S3     *S3    `json:"s3"`
}

// S3 is an S3-compatible endpoint. Empty credentials are taken from
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, an empty endpoint from
// AWS_ENDPOINT_URL (else AWS), as for the checkpoint store (internal/blob).
type S3 struct {
	Bucket          string `json:"bucket"`
	Region          string `json:"region"`
	Endpoint        string `json:"endpoint"`
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	// AllowHTTP permits a plain-HTTP endpoint (default: TLS).
	AllowHTTP bool `json:"allow_http"`
}

// Backend types.
const (
	BackendLocal       = "local"
	BackendObjectStore = "object_store"
)

// Problem is a mistake in a durability block. Field is the full path in
// the spec: durability.x for the job-wide block, sources[i].durability.x
// for a source's.
type Problem struct {
	Field, Reason string
	// JobWide marks problems of the job-wide block, which every source
	// inheriting it reports again.
	JobWide bool
}

// Resolve returns the effective durability of a source: the job-wide block
// merged with the source's own, or nil when durability is off or the blocks
// have problems. at is the source's path in the spec (sources[i]).
func Resolve(s *job.Spec, src *job.Source, at string) (*Config, []Problem) {
	jobRaw, srcRaw := s.Durability, src.Durability
	if len(jobRaw) == 0 && len(srcRaw) == 0 {
		return nil, nil
	}
	var cfg Config
	var probs []Problem
	ok := true
	p := problemAdder(func(field, format string, args ...any) {
		probs = append(probs, Problem{Field: field, Reason: fmt.Sprintf(format, args...), JobWide: len(field) >= len("durability") && field[:len("durability")] == "durability"})
	})
	decode := func(raw json.RawMessage, base string) map[string]any {
		if len(raw) == 0 {
			return nil
		}
		var probe Config
		if errs := config.Decode(raw, &probe); len(errs) > 0 {
			for _, e := range errs {
				p(config.Join(base, e.Path), "%s", e.Reason)
			}
			ok = false
			return nil
		}
		config.Decode(raw, &cfg) // merge over what is there
		var keys map[string]any
		_ = json.Unmarshal(raw, &keys)
		if keys == nil {
			keys = map[string]any{}
		}
		return keys
	}
	decode(jobRaw, "durability")
	srcKeys := decode(srcRaw, at+".durability")
	if !ok {
		return nil, probs
	}
	where := func(key string) string {
		if _, ok := srcKeys[key]; ok {
			return at + ".durability." + key
		}
		return "durability." + key
	}
	if cfg.Enabled != nil && !*cfg.Enabled {
		return nil, nil
	}
	bad := func(key, format string, args ...any) {
		p(where(key), format, args...)
		ok = false
	}
	switch cfg.Sync {
	case "":
		cfg.Sync = string(walog.SyncGroupCommit)
	case "per_entry":
		cfg.Sync = string(walog.SyncAlways)
	case string(walog.SyncAlways), string(walog.SyncGroupCommit), string(walog.SyncPeriodic), string(walog.SyncNone):
	default:
		bad("sync", "must be one of always, group_commit, periodic, none (got %q)", cfg.Sync)
	}
	for _, f := range []struct {
		key string
		v   int64
	}{{"sync_interval_ms", cfg.SyncIntervalMS}, {"park_lease_ms", cfg.ParkLeaseMS}, {"drain_timeout_ms", cfg.DrainTimeoutMS}, {"segment_bytes", cfg.SegmentBytes}} {
		if f.v < 0 {
			bad(f.key, "must not be negative (got %d)", f.v)
		}
	}
	if cfg.SegmentBytes > 0 && cfg.SegmentBytes < 4096 {
		bad("segment_bytes", "must be at least 4096 (got %d)", cfg.SegmentBytes)
	}
	if b := cfg.Backend; b != nil {
		switch b.Type {
		case "", BackendLocal:
			b.Type = BackendLocal
		case BackendObjectStore:
			if b.NodeID == "" {
				bad("backend", "backend.node_id is required for object_store and must be non-empty (it names this process's WAL namespace in the bucket and must survive restarts; it is unrelated to any Kafka transactional_id)")
			}
			if b.S3 == nil || b.S3.Bucket == "" {
				bad("backend", "backend.s3.bucket is required for object_store")
			}
			if cfg.Path != "" {
				bad("path", "is for the local backend; object_store keeps the WAL in the bucket")
			}
			if b.S3 != nil {
				if err := checkEndpoint(b.S3.Endpoint, b.S3.AllowHTTP); err != nil {
					bad("backend", "%s", strings.TrimPrefix(err.Error(), "durability."))
				}
			}
		default:
			bad("backend", "backend.type must be local or object_store (got %q)", b.Type)
		}
	}
	if !ok {
		return nil, probs
	}
	return &cfg, nil
}

type problemAdder func(field, format string, args ...any)

// ObjectStore reports whether the WAL is kept in an object store.
func (c *Config) ObjectStore() bool { return c.Backend != nil && c.Backend.Type == BackendObjectStore }

// Dir is the local WAL directory of one source subtask.
func (c *Config) Dir(dataDir, jobID, sourceID string, subtask int) (string, error) {
	base := c.Path
	if base == "" {
		if dataDir == "" {
			return "", fmt.Errorf("source %s has durability on but no WAL path: set durability.path, or give a data directory (arkflow.WithDataDir, arkflow run --data-dir)", sourceID)
		}
		base = filepath.Join(dataDir, jobID, "wal")
	}
	return filepath.Join(base, sourceID, strconv.Itoa(subtask)), nil
}

// Options returns the WAL options of the block.
func (c *Config) Options() walog.Options {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return walog.Options{
		Sync:         walog.SyncMode(c.Sync),
		SyncInterval: ms(c.SyncIntervalMS),
		ParkLease:    ms(c.ParkLeaseMS),
		DrainTimeout: ms(c.DrainTimeoutMS),
	}
}

func envOr(v, name string) string {
	if v != "" {
		return v
	}
	return os.Getenv(name)
}
