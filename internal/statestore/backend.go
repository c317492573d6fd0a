package statestore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/arkflow-rs/arkflow-go/internal/jobdefaults"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Key identifies a state entry.
type Key struct {
	Job       string
	Operator  string
	Namespace string
	// KeyGroup is the key group of the user key, in [0, max_parallelism).
	KeyGroup int
	User     []byte
}

// Entry is a live state entry.
type Entry struct {
	Key   Key
	Value []byte
	// ExpiresAt is the Unix time in ms after which the entry is gone; 0
	// means never.
	ExpiresAt int64
}

// Mutation is a put or a delete.
type Mutation struct {
	Key       Key
	Value     []byte
	ExpiresAt int64 // for puts: Unix ms, 0 = never
	Delete    bool
}

// Scope selects entries: one job, one operator (or every operator when
// empty), a range of key groups. The zero Groups is group 0 only; use
// AllKeyGroups for every group.
type Scope struct {
	Job      string
	Operator string
	Groups   job.KeyGroupRange
}

// SnapshotInfo describes a written snapshot.
type SnapshotInfo struct {
	Entries int64
	Bytes   int64
	// Checksum is "crc64nvme:" and the hex CRC-64/NVME of the whole
	// snapshot stream up to its trailer; the trailer repeats it, so a
	// reader can verify the stream by itself.
	Checksum string
	// ObjectCRC64 is "crc64nvme:" and the hex CRC-64/NVME of every byte
	// written, trailer included, from the same pass: the checksum of the
	// object the stream becomes, which a checkpoint's manifest records
	// (internal/objsum).
	ObjectCRC64 string
}

// RestoreInfo describes a restore.
type RestoreInfo struct {
	Entries int64 // entries written
	Skipped int64 // entries outside the scope's key groups, or expired
	Bytes   int64 // bytes read
	// Checksum is the stream's trailer's: "crc64nvme:" and 16 hex digits
	// (format version 2), or "sha256:" and 64 (version 1).
	Checksum string
}

// Backend is an embedded store of keyed state. Implementations are safe
// for concurrent use. Expiry is wall-clock time: callers pass processing
// time as now (Badger also expires entries on its own, by the wall clock).
type Backend interface {
	// Get returns the value of k if it exists and has not expired at now
	// (Unix ms).
	Get(k Key, now int64) (value []byte, expiresAt int64, ok bool, err error)
	// Apply writes the mutations atomically, in order.
	Apply(muts []Mutation) error
	// Scan calls fn for every entry in scope that has not expired at now,
	// in key order (operator, key group, namespace, user key). The entry's
	// slices are valid only during the call. An error from fn stops the
	// scan and is returned.
	Scan(scope Scope, now int64, fn func(Entry) error) error
	// Snapshot streams every entry in scope not expired at now to w, in the
	// snapshot format (see snapshot.go), without holding the state in
	// memory.
	Snapshot(w io.Writer, scope Scope, now int64) (SnapshotInfo, error)
	// Restore reads a snapshot and writes the entries in scope's key
	// groups that have not expired at now (their expiry travels with them;
	// expired entries are not resurrected). The scope must be empty in this
	// store (several tasks of one job may restore their own key-group
	// ranges). A corrupt or truncated stream is an error, and then nothing
	// of it remains in the store.
	Restore(r io.Reader, scope Scope, now int64) (RestoreInfo, error)
	// Size returns the bytes (keys and values) an operator's live entries
	// take, or every operator's of the job when operator is empty.
	Size(job, operator string) (int64, error)
	// Close releases the store. It is idempotent.
	Close() error
}

// Measurer is implemented by backends that count an operator's keys
// while they measure its size (both of this package do).
type Measurer interface {
	// Measure returns what Size does and the number of live keys it
	// counted them over.
	Measure(job, operator string) (bytes, keys int64, err error)
}

// Measure returns the bytes and keys of an operator's live entries (see
// Backend.Size); keys is -1 for a backend that only measures bytes.
func Measure(b Backend, job, operator string) (bytes, keys int64, err error) {
	if m, ok := b.(Measurer); ok {
		return m.Measure(job, operator)
	}
	n, err := b.Size(job, operator)
	return n, -1, err
}

// ScanNamespace calls fn, as Scan does, for every entry of scope in one
// namespace whose user key starts with prefix and that has not expired at
// now, in key order. The scope must name an operator. Keys are ordered by
// key group, then namespace, so the backends seek once per key group
// instead of reading the scope's other namespaces: an operator that reads
// one namespace when it starts reads that, not all of its state (after a
// restore, not the restored layers' other pages from disk). A Backend of
// another package is scanned whole and filtered.
func ScanNamespace(b Backend, scope Scope, namespace string, prefix []byte, now int64, fn func(Entry) error) error {
	if scope.Operator == "" {
		return fmt.Errorf("state: scanning namespace %q of job %q: the scope names no operator", namespace, scope.Job)
	}
	sub, err := keySubPrefix(namespace, prefix)
	if err != nil {
		return err
	}
	if ns, ok := b.(namespaceScanner); ok {
		return ns.scanSub(scope, sub, now, fn)
	}
	return b.Scan(scope, now, func(e Entry) error {
		if e.Key.Namespace != namespace || !bytes.HasPrefix(e.Key.User, prefix) {
			return nil
		}
		return fn(e)
	})
}

// namespaceScanner is a Backend that scans part of a scope (see
// scopeIter's sub).
type namespaceScanner interface {
	scanSub(scope Scope, sub []byte, now int64, fn func(Entry) error) error
}

// Backend names.
const (
	Badger = job.BackendBadger
	Memory = job.BackendMemory
)

// Options configure Open. The zero value (with Dir set) opens Badger with
// format version 1.
type Options struct {
	// Backend is "badger" (default; also for ArkFlow's "embedded_kv") or
	// "memory".
	Backend string
	// Dir is Badger's directory; it is created if missing. Ignored by the
	// memory backend.
	Dir string
	// FormatVersion is the state format this program writes (default 1).
	// A directory stamped with another version is refused before anything
	// in it is touched.
	FormatVersion int
	// Logger receives Badger's logs at debug level (default: discarded).
	Logger *slog.Logger
	// InMemory runs Badger without a directory (tests, benchmarks).
	InMemory bool
	// OpenInBackground, when Dir does not exist or is empty, makes Open
	// return once the directory is created, stamped and locked, and open
	// Badger's files in the background (10–20 ms, most of it zeroing the
	// first memtable): the first call that needs them waits, and fails
	// with that open's error if it failed, as do Ready and Close. A
	// restore (LayerRestorer) downloads meanwhile. Other directories
	// open before Open returns.
	OpenInBackground bool
}

// Ready waits until a backend opened with OpenInBackground is open and
// returns the error of that open; it returns nil at once otherwise.
func Ready(b Backend) error {
	if bb, ok := b.(*badgerBackend); ok {
		return bb.waitOpen()
	}
	return nil
}

// ErrFormat is returned (wrapped) by Open for a directory written with
// another state format version; nothing in the directory was changed.
var ErrFormat = errors.New("state: format version mismatch")

// ErrNotState is returned (wrapped) by Open for a non-empty directory that
// is not an ArkFlow state directory.
var ErrNotState = errors.New("state: not an arkflow state directory")

// ErrClosed is returned by calls on a closed backend.
var ErrClosed = errors.New("state: closed")

// Open opens a backend.
func Open(opts Options) (Backend, error) {
	if opts.FormatVersion == 0 {
		opts.FormatVersion = jobdefaults.StateFormatVersion
	}
	switch opts.Backend {
	case "", Badger, job.BackendEmbeddedKV:
		return openBadger(opts)
	case Memory:
		return NewMemory(), nil
	}
	return nil, fmt.Errorf("state: unknown backend %q (known: badger, memory, embedded_kv)", opts.Backend)
}
