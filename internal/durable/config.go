// Package durable gives any source a write-ahead log (kept by
// internal/walog): every batch a source reads is appended to the WAL
// before it enters the pipeline, acknowledgements move the WAL cursor
// contiguously, and a restart replays what was not acknowledged before
// reading new input.
//
// The spec turns it on with a durability block, job-wide (the spec's
// top-level durability) or per source (sources[i].durability). A source's
// block is merged over the job-wide one key by key (job.Durability is the
// block's type; Resolve merges, fills in defaults and validates).
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

// Resolve returns the effective durability of a source: the job-wide block
// merged with the source's own, with the defaults that depend on no
// runtime setting filled in (Sync, Backend.Type), or nil when durability
// is off or the blocks have problems. at is the source's path in the spec
// (sources[i]).
//
// The merge is by key, as job.Durability describes: the source's block is
// decoded over the job-wide one, so a key the source's block writes
// (inside backend and backend.s3 too) replaces the job-wide value and a
// key it leaves out is inherited.
//
// Each problem is a *job.FieldError whose Path is the full spec path of
// the key at fault: sources[i].durability.key when the source's block
// writes it, durability.key when it comes from the job-wide block (so
// every source inheriting it reports the same error, which a caller
// reports once).
func Resolve(s *job.Spec, src *job.Source, at string) (*job.Durability, []*job.FieldError) {
	jobRaw, srcRaw := s.Durability, src.Durability
	if len(jobRaw) == 0 && len(srcRaw) == 0 {
		return nil, nil
	}
	var cfg job.Durability
	var probs []*job.FieldError
	add := func(path, format string, args ...any) {
		probs = append(probs, &job.FieldError{Path: path, Reason: fmt.Sprintf(format, args...)})
	}
	decode := func(raw json.RawMessage, base string) map[string]any {
		if len(raw) == 0 {
			return nil
		}
		var probe job.Durability
		if errs := config.Decode(raw, &probe); len(errs) > 0 {
			for _, e := range errs {
				add(config.Join(base, e.Path), "%s", e.Reason)
			}
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
	if len(probs) > 0 {
		return nil, probs
	}
	if cfg.Enabled != nil && !*cfg.Enabled {
		return nil, nil
	}
	// bad reports a problem with the key at path (dotted, inside the
	// block), blaming the source's block when it writes the path's first
	// key (a source's backend replaces or completes the job's).
	bad := func(path, format string, args ...any) {
		first, _, _ := strings.Cut(path, ".")
		if _, ok := srcKeys[first]; ok {
			add(at+".durability."+path, format, args...)
			return
		}
		add("durability."+path, format, args...)
	}
	switch walog.SyncMode(cfg.Sync) {
	case "":
		cfg.Sync = "group_commit" // walog.SyncGroupCommit, as job.SyncMode
	case "per_entry":
		cfg.Sync = "always" // walog.SyncAlways
	case walog.SyncAlways, walog.SyncGroupCommit, walog.SyncPeriodic, walog.SyncNone:
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
		case "", job.WALBackendLocal:
			b.Type = job.WALBackendLocal
		case job.WALBackendObjectStore:
			if b.NodeID == "" {
				bad("backend.node_id", "is required for object_store and must be non-empty (it names this process's WAL namespace in the bucket and must survive restarts; it is unrelated to any Kafka transactional_id)")
			}
			if b.S3 == nil || b.S3.Bucket == "" {
				bad("backend.s3.bucket", "is required for object_store")
			}
			if cfg.Path != "" {
				bad("path", "is for the local backend; object_store keeps the WAL in the bucket")
			}
			if b.S3 != nil {
				if err := checkEndpoint(b.S3.Endpoint, b.S3.AllowHTTP); err != nil {
					bad("backend.s3.endpoint", "%s", strings.TrimPrefix(err.Error(), "durability.backend.s3.endpoint "))
				}
			}
		default:
			bad("backend.type", "must be local or object_store (got %q)", b.Type)
		}
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return &cfg, nil
}

// ObjectStore reports whether the WAL is kept in an object store.
func ObjectStore(c *job.Durability) bool {
	return c.Backend != nil && c.Backend.Type == job.WALBackendObjectStore
}

// Dir is the local WAL directory of one source subtask.
func Dir(c *job.Durability, dataDir, jobID, sourceID string, subtask int) (string, error) {
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
func Options(c *job.Durability) walog.Options {
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
