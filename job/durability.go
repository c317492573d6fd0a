package job

// Durability is a durability block (extension): it puts a write-ahead log
// in front of a source. Every batch the source reads is appended to the
// log, and made durable per Sync, before it enters the pipeline;
// acknowledgements move the log's cursor over the contiguous acknowledged
// prefix; a restart replays every entry after the cursor before reading
// new input. See package wal for what each sync mode can lose.
//
// A spec holds it job-wide (Spec.Durability) or per source
// (Source.Durability), as JSON. A source's block is merged over the
// job-wide one key by key: every key the source's block writes replaces
// the job-wide value, and every key it leaves out is inherited (inside
// backend and backend.s3 too). A zero field is left out when the block is
// encoded (omitempty), so in Go a zero field inherits; only Enabled, a
// pointer, can be written as false. Zero durations and sizes take the
// defaults.
type Durability struct {
	// Enabled switches the log on or off. A block is on by its presence:
	// nil means on; false switches off a block a source inherits.
	Enabled *bool `json:"enabled,omitempty"`
	// Path is the base directory of a local log: subtask k of source S
	// keeps its log in Path/S/k. Default: the runtime's data directory
	// (arkflow.WithDataDir), under <job id>/wal. Not for the object store.
	Path string `json:"path,omitempty"`
	// Sync is when an append becomes durable: SyncGroupCommit (the
	// default), SyncAlways, SyncPeriodic or SyncNone.
	// ArkFlow's "per_entry" is read as always.
	Sync SyncMode `json:"sync,omitempty"`
	// SyncIntervalMS is the periodic mode's fsync interval (default 100).
	SyncIntervalMS int64 `json:"sync_interval_ms,omitempty"`
	// ParkLeaseMS bounds how long an acknowledgement waits behind an
	// earlier one before the gap is reported and retried (default 60000).
	ParkLeaseMS int64 `json:"park_lease_ms,omitempty"`
	// DrainTimeoutMS bounds how long a graceful stop waits for pending
	// acknowledgements (default 30000).
	DrainTimeoutMS int64 `json:"drain_timeout_ms,omitempty"`
	// SegmentBytes is the size of a local segment file (default 32 MiB;
	// at least 4096).
	SegmentBytes int64 `json:"segment_bytes,omitempty"`
	// Retain keeps the segments the cursor has passed (for debugging: the
	// directory then grows without bound).
	Retain bool `json:"retain,omitempty"`
	// NoRecycle deletes the local segments the cursor has passed instead
	// of writing the next segments over them: acknowledged entries are
	// gone from disk at once, and syncs cost more (docs/benchmarks/wal.md).
	NoRecycle bool `json:"no_recycle,omitempty"`
	// Backend is where the log is kept; nil is a local directory.
	Backend *WALBackend `json:"backend,omitempty"`
}

// WAL backend types (WALBackend.Type).
const (
	// WALBackendLocal keeps the log in a local directory (Durability.Path).
	WALBackendLocal = "local"
	// WALBackendObjectStore keeps the log in an S3-compatible bucket.
	WALBackendObjectStore = "object_store"
)

// WALBackend is where a write-ahead log is kept.
type WALBackend struct {
	// Type is WALBackendLocal (empty means local) or
	// WALBackendObjectStore.
	Type string `json:"type,omitempty"`
	// NodeID names this process's namespace in the bucket. Required for
	// the object store; it must be unique per process and stable across
	// restarts, and is unrelated to any Kafka transactional_id.
	NodeID string `json:"node_id,omitempty"`
	// StreamID names the job's logs in the node's namespace (default the
	// job ID).
	StreamID string `json:"stream_id,omitempty"`
	// Prefix is the key prefix (default arkflow/wal).
	Prefix string `json:"prefix,omitempty"`
	// S3 is the bucket. Required for the object store.
	S3 *WALObjectStore `json:"s3,omitempty"`
}

// WALObjectStore is an S3-compatible bucket for write-ahead logs. Empty
// credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, an
// empty endpoint from AWS_ENDPOINT_URL (else s3.amazonaws.com), as for
// the s3:// checkpoint store.
type WALObjectStore struct {
	// Bucket is the bucket's name. Required; the bucket must exist.
	Bucket string `json:"bucket,omitempty"`
	// Region is the bucket's region (empty: the endpoint's default).
	Region string `json:"region,omitempty"`
	// Endpoint is the S3 endpoint, as a host[:port] or an http(s) URL.
	Endpoint string `json:"endpoint,omitempty"`
	// AccessKeyID is the access key (empty: AWS_ACCESS_KEY_ID).
	AccessKeyID string `json:"access_key_id,omitempty"`
	// SecretAccessKey is the secret key (empty: AWS_SECRET_ACCESS_KEY).
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	// AllowHTTP permits a plain-HTTP endpoint; without it the log talks
	// TLS.
	AllowHTTP bool `json:"allow_http,omitempty"`
}

// SyncMode says when an append to the write-ahead log is made durable. In
// a spec it is the durability block's sync key.
type SyncMode string

// Sync modes. Package wal says what each loses in a crash.
const (
	// SyncAlways fsyncs every entry before the append returns.
	SyncAlways SyncMode = "always"
	// SyncGroupCommit lets concurrent appends share one fsync; each
	// still returns only after its own entry is durable. The default.
	SyncGroupCommit SyncMode = "group_commit"
	// SyncPeriodic returns at once and fsyncs every sync interval.
	SyncPeriodic SyncMode = "periodic"
	// SyncNone leaves flushing to the operating system (and close).
	SyncNone SyncMode = "none"
)
