package arkflow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/arkflow-rs/arkflow-go/wal"
)

// Durability puts a write-ahead log in front of a source:
// every batch it reads is appended to the log, and made durable per Sync,
// before it enters the pipeline; acknowledgements move the log's cursor
// only over contiguous acknowledged entries; a restart replays everything
// after the cursor before reading new input, and resumes the source after
// what the log holds. Zero fields take the defaults. The spec keeps
// durations in milliseconds: one between 0 and 1 ms is a mistake Build
// reports (it would become 0, the default).
type Durability struct {
	// Path is the WAL's base directory: subtask k of source S keeps its
	// log in Path/S/k. Default: the data directory (WithDataDir), under
	// <job>/wal.
	Path string
	// Sync is when an append becomes durable: wal.SyncGroupCommit
	// (default), wal.SyncAlways, wal.SyncPeriodic or wal.SyncNone.
	Sync wal.SyncMode
	// SyncInterval is the periodic mode's fsync interval (default 100 ms).
	SyncInterval time.Duration
	// ParkLease bounds how long an acknowledgement waits behind an earlier
	// one before the gap is reported (default 60 s).
	ParkLease time.Duration
	// DrainTimeout bounds how long a graceful stop waits for pending
	// acknowledgements (default 30 s).
	DrainTimeout time.Duration
	// SegmentBytes is the size of local segment files (default 32 MiB).
	SegmentBytes int64
	// Retain keeps segments the cursor has passed (for debugging).
	Retain bool
	// NoRecycle deletes the local segments the cursor has passed instead
	// of writing the next segments over them: acknowledged entries are
	// gone from disk at once, and syncs cost more (BENCHMARKS.md, WAL).
	NoRecycle bool
	// ObjectStore keeps the log in an S3-compatible bucket instead of a
	// local directory.
	ObjectStore *WALObjectStore
}

// WALObjectStore is an S3-compatible bucket for write-ahead logs. Empty
// credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
type WALObjectStore struct {
	// NodeID names this process's namespace in the bucket; it must be
	// unique per process and stable across restarts (not a Kafka
	// transactional_id). Required.
	NodeID string
	// StreamID names the job's logs in the node's namespace (default the
	// job ID).
	StreamID string
	// Prefix is the key prefix (default arkflow/wal).
	Prefix          string
	Bucket          string
	Endpoint        string
	Region          string
	AccessKeyID     string
	SecretAccessKey string
	// AllowHTTP permits a plain-HTTP endpoint; without it the WAL talks
	// TLS. An empty Endpoint comes from AWS_ENDPOINT_URL, else
	// s3.amazonaws.com.
	AllowHTTP bool
}

// problems are durations the spec's milliseconds cannot hold: above 0 but
// below 1 ms, which would become 0 and so the default.
func (d Durability) problems() []string {
	var out []string
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"SyncInterval", d.SyncInterval}, {"ParkLease", d.ParkLease}, {"DrainTimeout", d.DrainTimeout}} {
		if f.v > 0 && f.v < time.Millisecond {
			out = append(out, fmt.Sprintf("%s: must be 0 (the default) or at least 1ms (got %s)", f.name, f.v))
		}
	}
	return out
}

// spec returns the durability block as a spec stores it.
func (d Durability) spec() json.RawMessage {
	ms := func(v time.Duration) int64 { return v.Milliseconds() }
	m := map[string]any{}
	set := func(k string, v any, zero bool) {
		if !zero {
			m[k] = v
		}
	}
	set("path", d.Path, d.Path == "")
	set("sync", d.Sync, d.Sync == "")
	set("sync_interval_ms", ms(d.SyncInterval), d.SyncInterval == 0)
	set("park_lease_ms", ms(d.ParkLease), d.ParkLease == 0)
	set("drain_timeout_ms", ms(d.DrainTimeout), d.DrainTimeout == 0)
	set("segment_bytes", d.SegmentBytes, d.SegmentBytes == 0)
	set("retain", d.Retain, !d.Retain)
	set("no_recycle", d.NoRecycle, !d.NoRecycle)
	if o := d.ObjectStore; o != nil {
		m["backend"] = map[string]any{
			"type": "object_store", "node_id": o.NodeID, "stream_id": o.StreamID, "prefix": o.Prefix,
			"s3": map[string]any{"bucket": o.Bucket, "endpoint": o.Endpoint, "region": o.Region,
				"access_key_id": o.AccessKeyID, "secret_access_key": o.SecretAccessKey, "allow_http": o.AllowHTTP},
		}
	}
	raw, _ := json.Marshal(m)
	return raw
}

// Durable gives one source a write-ahead log (see Durability). It is
// merged over the job-wide Builder.Durability, field by field. Only valid on
// a Source.
func Durable(d Durability) SourceOption {
	return sourceOption(func(s *opSettings) {
		for _, p := range d.problems() {
			s.problems = append(s.problems, [2]string{"Durable(arkflow.Durability{...})", p})
		}
		s.durability = d.spec()
	})
}

// Durability gives every source of the job a write-ahead log (see
// Durability); a source's own Durable option is merged over it.
func (b *Builder) Durability(d Durability) *Builder {
	for _, p := range d.problems() {
		b.callProblem("", ".Durability(arkflow.Durability{...})", "%s", p)
	}
	b.spec.Durability = d.spec()
	return b
}
