package wal

import "github.com/arkflow-rs/arkflow-go/internal/corruption"

// SyncMode says when an append to the write-ahead log is made durable. In
// a spec it is the durability block's sync key.
type SyncMode string

// Sync modes. See the package documentation for what each loses in a crash.
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

// ErrCorrupt is the module's one corruption marker (the same value as
// checkpoint.ErrCorrupt and arkflow.ErrCorrupt): errors.Is(err, ErrCorrupt)
// is true for an error about a damaged log — a segment with a bad record
// that is not a torn tail (the message names the segment and the offset),
// a cursor whose every slot fails its checks, an object-store manifest
// that is not valid JSON — and false for I/O errors.
var ErrCorrupt = corruption.Err
