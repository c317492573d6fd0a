package ckptstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/arkflow-rs/arkflow-go/internal/objsum"
	"hash"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Catalog defaults.
const (
	// DefaultRetention is how many completed checkpoints Commit keeps
	// (ArkFlow v1's checkpoint.retention default).
	DefaultRetention = 3
	// DefaultVerifyConcurrency bounds the state objects Select reads at
	// once.
	DefaultVerifyConcurrency = 4
	// maxManifestBytes bounds a manifest read into memory.
	maxManifestBytes = 64 << 20
	// cleanupTimeout bounds best-effort deletes made after a failure.
	cleanupTimeout = 30 * time.Second
)

// Options configure a Catalog. The zero value works.
type Options struct {
	// Retention is how many completed checkpoints Commit keeps, newest
	// by id (default DefaultRetention, 3). Savepoints are never deleted by
	// retention.
	Retention int
	// VerifyConcurrency bounds how many state objects Select reads at
	// once (default DefaultVerifyConcurrency, 4).
	VerifyConcurrency int
	// Logger receives warnings about cleanup that failed (retention, the
	// removal of a manifest whose commit failed). Default: discarded.
	Logger *slog.Logger
	// Now stamps CreatedMS on manifests Commit gets without one (default
	// time.Now).
	Now func() time.Time
}

// Catalog lays out the checkpoints and savepoints of one job in a Store,
// commits them, selects one to restore, and applies retention. See the
// package documentation for the layout and the rules.
//
// A Catalog is safe for concurrent use, but a job's catalog must have one
// writer at a time (one process calling NextID, Commit and Delete): the
// store has no lock. Manifests are written with Create, so two writers
// cannot overwrite each other's manifest, but they could still race on
// LATEST.
type Catalog struct {
	store Store
	job   string
	opts  Options

	// mu serializes NextID, Commit's writes and Delete, and guards lastID.
	mu sync.Mutex
	// lastID is the highest id this catalog issued or committed.
	lastID ID
	// retainMu serializes retention, which Commit runs after releasing mu
	// (so that NextID and the next checkpoint do not wait for deletes).
	retainMu sync.Mutex
	// openMu guards open: the directories (Dir) PutState found without a
	// manifest, so it checks each only once; Commit removes them.
	openMu sync.Mutex
	open   map[string]bool
}

// NewCatalog returns the catalog of jobID's artifacts in store. The store
// is borrowed.
func NewCatalog(store Store, jobID string, opts Options) (*Catalog, error) {
	if store == nil {
		return nil, errors.New("checkpoint: NewCatalog: nil store")
	}
	if err := validJobID(jobID); err != nil {
		return nil, fmt.Errorf("checkpoint: NewCatalog: %w", err)
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("checkpoint: NewCatalog: retention %d must not be negative", opts.Retention)
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.VerifyConcurrency <= 0 {
		opts.VerifyConcurrency = DefaultVerifyConcurrency
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Catalog{store: store, job: jobID, opts: opts, open: map[string]bool{}}, nil
}

// Store returns the catalog's store.
func (c *Catalog) Store() Store { return c.store }

// JobID returns the catalog's job.
func (c *Catalog) JobID() string { return c.job }

// Layout. Keys are relative to the store's root.

func kindDir(kind Kind) string { return string(kind) + "s" }

// Dir returns the key prefix of a checkpoint (id is ID.String()) or a
// savepoint (id is its name): "{job}/checkpoints/{id}/" or
// "{job}/savepoints/{name}/".
func (c *Catalog) Dir(kind Kind, id string) string {
	return c.job + "/" + kindDir(kind) + "/" + id + "/"
}

// ManifestKey returns the key of a manifest: Dir(kind, id)+"manifest.json".
func (c *Catalog) ManifestKey(kind Kind, id string) string { return c.Dir(kind, id) + "manifest.json" }

// StateKey returns the key of a task's state object:
// Dir(kind, id)+"state/{task}.snap".
func (c *Catalog) StateKey(kind Kind, id, taskID string) string {
	return c.Dir(kind, id) + "state/" + taskID + ".snap"
}

// LatestKey returns the key of the pointer to the newest committed
// checkpoint: "{job}/checkpoints/LATEST".
func (c *Catalog) LatestKey() string { return c.job + "/checkpoints/LATEST" }

// checkRef validates a kind and an id (a checkpoint id or a savepoint name).
func checkRef(kind Kind, id string) error {
	switch kind {
	case KindCheckpoint:
		_, err := ParseID(id)
		return err
	case KindSavepoint:
		if err := validName("savepoint name", id); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		return nil
	}
	return fmt.Errorf("checkpoint: kind %q is neither %q nor %q", kind, KindCheckpoint, KindSavepoint)
}

// listing is what a LIST of a kind's directory found.
type listing struct {
	// keys maps an id (or a savepoint name) to its objects' keys.
	keys map[string][]string
	// ids are the entries of keys, sorted (checkpoint ids sort by number).
	ids []string
	// manifests holds the ids that have a manifest.json.
	manifests map[string]bool
}

// list groups the objects under a kind's directory by id. For
// checkpoints, entries whose name is not an id (LATEST, strays) are
// skipped.
func (c *Catalog) list(ctx context.Context, kind Kind) (listing, error) {
	prefix := c.job + "/" + kindDir(kind) + "/"
	keys, err := c.store.List(ctx, prefix)
	if err != nil {
		return listing{}, fmt.Errorf("checkpoint: listing %ss of job %q: %w", kind, c.job, err)
	}
	l := listing{keys: map[string][]string{}, manifests: map[string]bool{}}
	for _, k := range keys {
		rest := strings.TrimPrefix(k, prefix)
		id, file, ok := strings.Cut(rest, "/")
		if !ok || checkRef(kind, id) != nil {
			continue // LATEST, or a stray object
		}
		if _, ok := l.keys[id]; !ok {
			l.ids = append(l.ids, id)
		}
		l.keys[id] = append(l.keys[id], k)
		if file == "manifest.json" {
			l.manifests[id] = true
		}
	}
	sort.Strings(l.ids)
	return l, nil
}

// readLatest reads LATEST. A missing LATEST is (0, nil, nil); an
// unreadable one (bad contents) is (0, corrupt, nil); a store failure is
// an error.
func (c *Catalog) readLatest(ctx context.Context) (id ID, corrupt error, err error) {
	key := c.LatestKey()
	rc, err := c.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("checkpoint: reading %s: %w", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 64))
	if err != nil {
		return 0, nil, fmt.Errorf("checkpoint: reading %s: %w", key, err)
	}
	id, perr := ParseID(strings.TrimSuffix(string(b), "\n"))
	if perr != nil {
		return 0, &CorruptError{Key: key, Reason: "LATEST does not hold a checkpoint id", Err: perr}, nil
	}
	return id, nil, nil
}

// NextID returns the id for the next checkpoint: one more than the highest
// id in the store (any object under checkpoints/{id}/, or LATEST) and than
// any id this catalog issued before. Ids are therefore never reused, even
// after a restart or after retention deleted older checkpoints (the newest
// committed one is always kept). NextID writes nothing: an id whose
// checkpoint is abandoned before it writes an object may be issued again
// by another Catalog, which is harmless.
func (c *Catalog) NextID(ctx context.Context) (ID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, err := c.list(ctx, KindCheckpoint)
	if err != nil {
		return 0, err
	}
	latest, _, err := c.readLatest(ctx)
	if err != nil {
		return 0, err
	}
	next := max(c.lastID, latest)
	if n := len(l.ids); n > 0 {
		top, _ := ParseID(l.ids[n-1])
		next = max(next, top)
	}
	next++
	c.lastID = next
	return next, nil
}

// PutState streams a task's state object to StateKey(kind, id, taskID),
// computing its size and SHA-256 on the way, and returns its manifest
// entry (URI is the key; NodeID is left for the caller). r is read to EOF
// and never held in memory as a whole (the s3 store buffers one part). If
// r has a Len() int method (bytes.Reader, bytes.Buffer, strings.Reader),
// the size is announced to the store.
//
// The object is not part of any checkpoint until Commit writes a manifest
// that lists it.
func (c *Catalog) PutState(ctx context.Context, kind Kind, id, taskID string, r io.Reader) (StateSnapshot, error) {
	return c.putState(ctx, kind, id, taskID, r, nil)
}

// PutStateSum is PutState for a reader whose producer hashes what it
// produces (a state snapshot's ObjectChecksum), so that the bytes are
// hashed once: sum is called after r was read to EOF and the object was
// written, and returns the checksum of every byte r gave ("crc64nvme:" and
// the hex CRC-64/NVME, or "sha256:" and the hex SHA-256;
// internal/objsum) and their count. A count that differs from what the catalog read, or a
// malformed checksum, fails the call (the object is then written but in
// no manifest).
func (c *Catalog) PutStateSum(ctx context.Context, kind Kind, id, taskID string, r io.Reader, sum func() (checksum string, n int64, err error)) (StateSnapshot, error) {
	if sum == nil {
		return StateSnapshot{}, errors.New("checkpoint: PutStateSum: nil sum")
	}
	return c.putState(ctx, kind, id, taskID, r, sum)
}

func (c *Catalog) putState(ctx context.Context, kind Kind, id, taskID string, r io.Reader, sum func() (string, int64, error)) (StateSnapshot, error) {
	if err := checkRef(kind, id); err != nil {
		return StateSnapshot{}, err
	}
	if err := validName("task_id", taskID); err != nil {
		return StateSnapshot{}, fmt.Errorf("checkpoint: %w", err)
	}
	if err := c.checkOpen(ctx, kind, id); err != nil {
		return StateSnapshot{}, err
	}
	size := int64(-1)
	if l, ok := r.(interface{ Len() int }); ok {
		size = int64(l.Len())
	}
	key := c.StateKey(kind, id, taskID)
	hr := &hashReader{r: r}
	if sum == nil {
		hr.h = objsum.NewCRC64()
	}
	if err := c.store.Put(ctx, key, hr, size); err != nil {
		return StateSnapshot{}, fmt.Errorf("checkpoint: writing the state of task %q for %s %s: %w", taskID, kind, id, err)
	}
	snap := StateSnapshot{TaskID: taskID, URI: key, Bytes: hr.n}
	if sum == nil {
		snap.Checksum = objsum.Format(objsum.CRC64NVME, hr.h.Sum(nil))
		return snap, nil
	}
	checksum, n, err := sum()
	switch {
	case err != nil:
		return StateSnapshot{}, fmt.Errorf("checkpoint: the state of task %q for %s %s: %w", taskID, kind, id, err)
	case n != hr.n:
		return StateSnapshot{}, fmt.Errorf("checkpoint: the state of task %q for %s %s: its producer counted %d bytes, %d were written", taskID, kind, id, n, hr.n)
	case !objsum.Valid(checksum):
		return StateSnapshot{}, fmt.Errorf("checkpoint: the state of task %q for %s %s: checksum %q is neither crc64nvme:<16 hex digits> nor sha256:<64 hex digits>", taskID, kind, id, checksum)
	}
	snap.Checksum = checksum
	return snap, nil
}

// checkOpen refuses to write into an artifact that has a manifest: its
// state objects are immutable once it is committed (overwriting one would
// corrupt it), and a savepoint name is never reused.
func (c *Catalog) checkOpen(ctx context.Context, kind Kind, id string) error {
	dir := c.Dir(kind, id)
	c.openMu.Lock()
	open := c.open[dir]
	c.openMu.Unlock()
	if open {
		return nil
	}
	rc, err := c.store.Get(ctx, c.ManifestKey(kind, id))
	if err == nil {
		rc.Close()
		return fmt.Errorf("checkpoint: %s %s already has a manifest; its state cannot change: %w", kind, id, ErrExists)
	}
	if !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("checkpoint: writing state for %s %s: %w", kind, id, err)
	}
	c.openMu.Lock()
	c.open[dir] = true
	c.openMu.Unlock()
	return nil
}

type hashReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (h *hashReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if h.h != nil {
		h.h.Write(p[:n])
	}
	h.n += int64(n)
	return n, err
}

// Commit seals m and makes it durable, which completes the checkpoint or
// savepoint:
//
//  1. It checks m: JobID (filled in if empty) must be the catalog's job,
//     the fields must be well-formed, CheckTasks must pass, and every
//     state entry must be the object StateKey names for its task. CreatedMS
//     is stamped if zero, PlannedTasks sorted. A checkpoint whose id is not
//     above LATEST's is refused with ErrSuperseded.
//  2. It writes manifest.json with Create, so a manifest is never
//     overwritten: an existing savepoint name (or checkpoint id) with other
//     contents fails with ErrExists.
//  3. For a checkpoint, it then moves LATEST to m's id. This is the commit
//     point: until LATEST names it, Select passes the checkpoint over, and
//     the previous one stays selected. If the manifest or LATEST cannot be
//     written, Commit returns an error, LATEST is unchanged, and the
//     manifest is removed again (best effort).
//  4. It applies retention: of the checkpoints up to m's id, the newest
//     Retention that have a manifest are kept and every other one is
//     deleted, its manifest first, so that a partly deleted checkpoint is
//     never selectable. Checkpoints above m's id (in flight) and
//     savepoints are left alone. A failed delete is logged, not returned:
//     the checkpoint is committed, and the next Commit retries. NextID and
//     the next Commit do not wait for retention.
//
// The state objects are not read again: Select verifies them.
func (c *Catalog) Commit(ctx context.Context, m *Manifest) error {
	id, err := c.commit(ctx, m)
	if err != nil || id == 0 {
		return err
	}
	c.retainMu.Lock()
	defer c.retainMu.Unlock()
	c.retain(ctx, id)
	return nil
}

// commit does Commit's checks and writes; it returns the id committed, or
// 0 for a savepoint.
func (c *Catalog) commit(ctx context.Context, m *Manifest) (ID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.JobID == "" {
		m.JobID = c.job
	}
	if m.JobID != c.job {
		return 0, fmt.Errorf("checkpoint: commit: manifest job_id %q is not this catalog's job %q", m.JobID, c.job)
	}
	if m.Kind == KindSavepoint && m.CheckpointID == "" {
		m.CheckpointID = m.Name
	}
	if m.CreatedMS == 0 {
		m.CreatedMS = c.opts.Now().UnixMilli()
	}
	m.normalize()
	sort.Strings(m.PlannedTasks)
	if err := m.validate(); err != nil {
		return 0, fmt.Errorf("checkpoint: commit: manifest %q: %w", m.CheckpointID, err)
	}
	if err := m.CheckTasks(); err != nil {
		return 0, fmt.Errorf("checkpoint: commit: refusing an incomplete manifest: %w", err)
	}
	dirID := m.dirID()
	if err := c.checkStateKeys(m, dirID); err != nil {
		return 0, fmt.Errorf("checkpoint: commit: %w", err)
	}
	var id ID
	if m.Kind == KindCheckpoint {
		id, _ = ParseID(m.CheckpointID)
		latest, _, err := c.readLatest(ctx)
		if err != nil {
			return 0, fmt.Errorf("checkpoint: commit %s %s: %w", m.Kind, dirID, err)
		}
		if id <= latest {
			return 0, fmt.Errorf("checkpoint: commit %s %s: LATEST is %s: %w", m.Kind, dirID, latest, ErrSuperseded)
		}
	}
	if err := m.Seal(); err != nil {
		return 0, err
	}
	body, err := m.Encode()
	if err != nil {
		return 0, err
	}
	key := c.ManifestKey(m.Kind, dirID)
	c.openMu.Lock()
	delete(c.open, c.Dir(m.Kind, dirID))
	c.openMu.Unlock()
	if err := c.store.Create(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		if errors.Is(err, ErrExists) {
			// A retried PUT that had been applied finds its own bytes.
			if same, rerr := c.sameObject(ctx, key, body); rerr != nil || !same {
				return 0, fmt.Errorf("checkpoint: commit %s %s: %s already exists: %w", m.Kind, dirID, key, ErrExists)
			}
		} else {
			if m.Kind == KindCheckpoint {
				c.cleanup(ctx, key, "its write failed, and it may have been applied")
			}
			return 0, fmt.Errorf("checkpoint: commit %s %s: writing the manifest (LATEST is unchanged): %w", m.Kind, dirID, err)
		}
	}
	if m.Kind == KindSavepoint {
		return 0, nil
	}
	latest := []byte(id.String() + "\n")
	if err := c.store.Put(ctx, c.LatestKey(), bytes.NewReader(latest), int64(len(latest))); err != nil {
		c.cleanup(ctx, key, "LATEST could not be moved to it")
		return 0, fmt.Errorf("checkpoint: commit %s %s: the manifest is written but moving LATEST failed, so it is not committed: %w", m.Kind, dirID, err)
	}
	c.lastID = max(c.lastID, id)
	return id, nil
}

// dirID is the directory name of m: its id, or its savepoint name.
func (m *Manifest) dirID() string {
	if m.Kind == KindSavepoint {
		return m.Name
	}
	return m.CheckpointID
}

// checkStateKeys checks that every state entry is the object its task's
// StateKey names, so that an artifact is self-contained and retention of
// another one can never break it.
func (c *Catalog) checkStateKeys(m *Manifest, dirID string) error {
	for _, s := range m.StateSnapshots {
		if want := c.StateKey(m.Kind, dirID, s.TaskID); s.URI != want {
			return fmt.Errorf("manifest %q: the state of task %q is at %q, not at %q", m.CheckpointID, s.TaskID, s.URI, want)
		}
	}
	return nil
}

func (c *Catalog) sameObject(ctx context.Context, key string, body []byte) (bool, error) {
	rc, err := c.store.Get(ctx, key)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	cur, err := io.ReadAll(io.LimitReader(rc, int64(len(body))+1))
	if err != nil {
		return false, err
	}
	return bytes.Equal(cur, body), nil
}

// cleanup deletes a manifest whose commit failed, best effort, even if
// ctx is done.
func (c *Catalog) cleanup(ctx context.Context, key, why string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := c.store.Delete(ctx, key); err != nil {
		c.opts.Logger.Warn("checkpoint: removing a manifest whose commit failed did not work; Select passes it over while LATEST names an older checkpoint",
			"manifest", key, "why", why, "error", err)
	}
}

// retain deletes the checkpoints up to committed beyond the newest
// Retention with a manifest.
func (c *Catalog) retain(ctx context.Context, committed ID) {
	l, err := c.list(ctx, KindCheckpoint)
	if err != nil {
		if ctx.Err() != nil {
			// The job is ending; the next commit applies retention.
			c.opts.Logger.Debug("checkpoint: retention left to the next commit", "error", err)
			return
		}
		c.opts.Logger.Warn("checkpoint: retention skipped", "error", err)
		return
	}
	kept := 0
	for i := len(l.ids) - 1; i >= 0; i-- {
		idStr := l.ids[i]
		id, _ := ParseID(idStr)
		if id > committed {
			continue // in flight
		}
		if id == committed || (l.manifests[idStr] && kept < c.opts.Retention) {
			kept++
			continue
		}
		if err := c.deleteDir(ctx, KindCheckpoint, idStr, l.keys[idStr]); err != nil {
			c.opts.Logger.Warn("checkpoint: retention: deleting a checkpoint failed; the next commit retries", "checkpoint", idStr, "error", err)
		}
	}
}

// deleteDir deletes an artifact's objects, the manifest first.
func (c *Catalog) deleteDir(ctx context.Context, kind Kind, id string, keys []string) error {
	man := c.ManifestKey(kind, id)
	if err := c.store.Delete(ctx, man); err != nil {
		return err
	}
	for _, k := range keys {
		if k == man {
			continue
		}
		if err := c.store.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes an artifact: a savepoint (an explicit operator action;
// retention never does it), or a checkpoint that is not the one LATEST
// names (e.g. one whose Commit failed or was superseded). The manifest
// goes first, so a partly deleted artifact is never selectable. Deleting
// an absent artifact is not an error.
func (c *Catalog) Delete(ctx context.Context, kind Kind, id string) error {
	if err := checkRef(kind, id); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if kind == KindCheckpoint {
		latest, _, err := c.readLatest(ctx)
		if err != nil {
			return fmt.Errorf("checkpoint: delete %s %s: %w", kind, id, err)
		}
		if n, _ := ParseID(id); n == latest {
			return fmt.Errorf("checkpoint: delete %s %s: it is the latest committed checkpoint (LATEST names it); commit a newer one first", kind, id)
		}
	}
	keys, err := c.store.List(ctx, c.Dir(kind, id))
	if err != nil {
		return fmt.Errorf("checkpoint: delete %s %s: %w", kind, id, err)
	}
	if err := c.deleteDir(ctx, kind, id, keys); err != nil {
		return fmt.Errorf("checkpoint: delete %s %s: %w", kind, id, err)
	}
	return nil
}

// Target says what Select looks for.
type Target int

const (
	// LatestCheckpoint: the newest committed checkpoint (the one LATEST
	// names), falling back to older ones.
	LatestCheckpoint Target = iota + 1
	// LatestSavepoint: the newest savepoint by CreatedMS (then by name),
	// falling back to older ones.
	LatestSavepoint
	// NamedSavepoint: the savepoint Want.Name.
	NamedSavepoint
	// ExactCheckpoint: the checkpoint whose id is Want.Name (a Hub's
	// recovery names one), if it was committed: an id above
	// LATEST's never was. No fallback: the caller decides what to do when
	// it is unusable.
	ExactCheckpoint
)

// String describes the target for people, such as "latest checkpoint".
func (t Target) String() string {
	switch t {
	case LatestCheckpoint:
		return "latest checkpoint"
	case LatestSavepoint:
		return "latest savepoint"
	case NamedSavepoint:
		return "named savepoint"
	case ExactCheckpoint:
		return "checkpoint by id"
	}
	return fmt.Sprintf("Target(%d)", int(t))
}

// Want describes what the restoring job can use.
type Want struct {
	Target Target
	// Name is the savepoint's name, for NamedSavepoint.
	Name string
	// JobVersion is the restoring job's version: artifacts of this or an
	// older version qualify (an older one is an upgrade).
	JobVersion uint64
	// FormatVersion is the restoring job's state format: only artifacts
	// of exactly this format qualify.
	FormatVersion int
	// PlannedTasks is the restoring plan's task set. An artifact of the
	// same job version must have been written by the same operators; their
	// parallelism may differ (a rescale).
	PlannedTasks []string
	// MaxParallelism is the restoring job's max_parallelism: an artifact
	// cut with another one is incompatible (its state is keyed by another
	// number of key groups). 0 skips the check; so does an artifact that
	// does not record it (written before it was recorded).
	MaxParallelism int
	// DeferStateChecks makes Select check manifests only, not read the
	// state objects: the caller verifies each object while it restores
	// it (OpenStateSized and the entry's checksum) and, if one is
	// missing or corrupt, discards what it restored and selects again
	// with the artifact in Exclude. That reads every state byte once
	// instead of twice.
	DeferStateChecks bool
	// Exclude lists artifacts (checkpoint ids or savepoint names) to pass
	// over as unusable, e.g. one whose state turned out corrupt during a
	// restore. They are reported among the skipped.
	Exclude []string
}

func (w Want) validate() error {
	var errs []error
	switch w.Target {
	case LatestCheckpoint, LatestSavepoint:
	case NamedSavepoint:
		if err := validName("savepoint name", w.Name); err != nil {
			errs = append(errs, err)
		}
	case ExactCheckpoint:
		if _, err := ParseID(w.Name); err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("target %d is not LatestCheckpoint, LatestSavepoint, NamedSavepoint or ExactCheckpoint", int(w.Target)))
	}
	if w.FormatVersion <= 0 {
		errs = append(errs, fmt.Errorf("format version %d must be positive", w.FormatVersion))
	}
	if len(w.PlannedTasks) == 0 {
		errs = append(errs, errors.New("planned tasks are empty"))
	}
	seen := map[string]bool{}
	for _, t := range w.PlannedTasks {
		if seen[t] {
			errs = append(errs, fmt.Errorf("planned task %q appears twice", t))
		}
		seen[t] = true
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("checkpoint: select: %w", err)
	}
	return nil
}

// Skipped is a candidate Select passed over, and why.
type Skipped struct {
	Kind Kind
	// ID is the checkpoint id or the savepoint name.
	ID string
	// Reason says why, for people.
	Reason string
	// Err is the underlying error, if any: a *CorruptError, a
	// *TaskSetError (joined), or ErrNotFound for a missing object.
	Err error
}

// String renders the candidate as "<kind> <id>: <reason>".
func (s Skipped) String() string { return fmt.Sprintf("%s %s: %s", s.Kind, s.ID, s.Reason) }

// Select finds the artifact to restore. It writes
// nothing, and reads the store only.
//
// Candidates are tried newest first. For LatestCheckpoint: the checkpoint
// LATEST names, then the older ones by descending id; checkpoints above
// LATEST were never committed and are skipped (if LATEST is missing or
// unreadable, every checkpoint with a manifest is a candidate). For
// LatestSavepoint: every savepoint, by descending CreatedMS, then name.
// For NamedSavepoint: that one.
//
// A candidate is skipped, with the reason in the returned list, and the
// next one tried, if its manifest is missing, does not decode, fails its
// checksum, belongs to another job or id, fails CheckTasks, or if a state
// object is missing or differs in size or SHA-256 from its entry (state
// objects are streamed, never held in memory). These are artifacts that
// never completed or were damaged; the previous valid one is the right
// fallback. With Want.DeferStateChecks the state objects are not read
// here: the caller checks them as it restores, and selects again with
// the artifact in Want.Exclude if one fails.
//
// The first candidate whose manifest is intact is checked for compatibility
// with want: the same FormatVersion, a JobVersion no newer
// than want's (older is an upgrade; newer, a downgrade), the same
// MaxParallelism, and, at the same JobVersion, the same operators in
// PlannedTasks (their parallelism may differ: a rescale). If it is not compatible, Select
// stops there and returns an *IncompatibleError: falling back to an older
// compatible artifact would roll the job back in time behind the
// operator's back. (The compatibility check comes before the state objects
// are read, so a rejected restore touches no state.)
//
// The outcomes:
//
//   - (m, skipped, nil): restore m; skipped lists newer candidates passed
//     over.
//   - (nil, skipped, nil): nothing to restore. skipped is empty if there
//     was no candidate at all, else it says why each was unusable.
//   - (nil, skipped, *IncompatibleError): there is an artifact, and it
//     must not be used. The job must not start from scratch either.
//   - (nil, nil, err): the store failed (listing, or reading an object for
//     another reason than its absence). Nothing was decided; retry later.
//     Select never falls back because of a store failure.
func (c *Catalog) Select(ctx context.Context, want Want) (*Manifest, []Skipped, error) {
	if err := want.validate(); err != nil {
		return nil, nil, err
	}
	sel := &selection{c: c, want: want, planned: slices.Sorted(slices.Values(want.PlannedTasks))}
	switch want.Target {
	case LatestCheckpoint:
		return sel.latestCheckpoint(ctx)
	case LatestSavepoint:
		return sel.latestSavepoint(ctx)
	case NamedSavepoint:
		return sel.namedSavepoint(ctx)
	case ExactCheckpoint:
		return sel.exactCheckpoint(ctx)
	}
	return nil, nil, nil
}

// selection is one Select in progress: what it wants and the candidates
// it has passed over so far. Each target's method returns Select's
// outcome.
type selection struct {
	c       *Catalog
	want    Want
	planned []string // want.PlannedTasks, sorted
	skipped []Skipped
}

// try evaluates one candidate (m, when its manifest is decoded already)
// and records why it was skipped, if it was.
func (s *selection) try(ctx context.Context, kind Kind, id string, m *Manifest) (*Manifest, error) {
	got, skip, err := s.c.evaluate(ctx, kind, id, m, s.want, s.planned)
	if skip != nil {
		s.skipped = append(s.skipped, *skip)
	}
	return got, err
}

// first tries the candidates in order and returns the first usable one,
// or the first failure that stops the selection.
func (s *selection) first(ctx context.Context, kind Kind, ids []string) (*Manifest, []Skipped, error) {
	for _, id := range ids {
		m, err := s.try(ctx, kind, id, nil)
		if m != nil || err != nil {
			return m, skippedOrNil(s.skipped, err), err
		}
	}
	return nil, s.skipped, nil
}

// latestCheckpoint tries the checkpoint LATEST names, then the older ones
// by descending id; newer ones were never committed and are skipped.
// Without a readable LATEST every checkpoint with a manifest is a
// candidate.
func (s *selection) latestCheckpoint(ctx context.Context) (*Manifest, []Skipped, error) {
	l, err := s.c.list(ctx, KindCheckpoint)
	if err != nil {
		return nil, nil, err
	}
	latest, corrupt, err := s.c.readLatest(ctx)
	if err != nil {
		return nil, nil, err
	}
	if corrupt != nil {
		s.skipped = append(s.skipped, Skipped{Kind: KindCheckpoint, ID: "LATEST", Reason: "the LATEST pointer is unreadable; trying every checkpoint", Err: corrupt})
	}
	var candidates []string
	if latest != 0 {
		candidates = append(candidates, latest.String())
	}
	for i := len(l.ids) - 1; i >= 0; i-- {
		idStr := l.ids[i]
		if !l.manifests[idStr] {
			continue // in flight, or never completed
		}
		id, _ := ParseID(idStr)
		switch {
		case latest == 0:
			candidates = append(candidates, idStr)
		case id > latest:
			s.skipped = append(s.skipped, Skipped{Kind: KindCheckpoint, ID: idStr,
				Reason: fmt.Sprintf("not committed: LATEST names the older checkpoint %s (its commit failed or did not finish)", latest)})
		case id < latest:
			candidates = append(candidates, idStr)
		}
	}
	return s.first(ctx, KindCheckpoint, candidates)
}

// latestSavepoint tries every savepoint whose manifest decodes, by
// descending CreatedMS, then name.
func (s *selection) latestSavepoint(ctx context.Context) (*Manifest, []Skipped, error) {
	l, err := s.c.list(ctx, KindSavepoint)
	if err != nil {
		return nil, nil, err
	}
	var decoded []*Manifest
	for _, name := range l.ids {
		if !l.manifests[name] {
			continue
		}
		m, skip, err := s.c.readManifest(ctx, KindSavepoint, name)
		if err != nil {
			return nil, nil, err
		}
		if skip != nil {
			s.skipped = append(s.skipped, *skip)
			continue
		}
		decoded = append(decoded, m)
	}
	sort.Slice(decoded, func(i, j int) bool {
		a, b := decoded[i], decoded[j]
		if a.CreatedMS != b.CreatedMS {
			return a.CreatedMS > b.CreatedMS
		}
		return a.Name > b.Name
	})
	for _, m := range decoded {
		got, err := s.try(ctx, KindSavepoint, m.Name, m)
		if got != nil || err != nil {
			return got, skippedOrNil(s.skipped, err), err
		}
	}
	return nil, s.skipped, nil
}

// namedSavepoint tries the savepoint want names.
func (s *selection) namedSavepoint(ctx context.Context) (*Manifest, []Skipped, error) {
	// A savepoint without a single object is "nothing there".
	keys, err := s.c.store.List(ctx, s.c.Dir(KindSavepoint, s.want.Name))
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: select: %w", err)
	}
	if len(keys) == 0 {
		return nil, nil, nil
	}
	return s.first(ctx, KindSavepoint, []string{s.want.Name})
}

// exactCheckpoint tries the checkpoint want names, unless LATEST names an
// older one (it was never committed).
func (s *selection) exactCheckpoint(ctx context.Context) (*Manifest, []Skipped, error) {
	latest, corrupt, err := s.c.readLatest(ctx)
	if err != nil {
		return nil, nil, err
	}
	id, _ := ParseID(s.want.Name)
	if corrupt == nil && id > latest {
		s.skipped = append(s.skipped, Skipped{Kind: KindCheckpoint, ID: s.want.Name,
			Reason: fmt.Sprintf("not committed: LATEST names the older checkpoint %s", latest)})
		return nil, s.skipped, nil
	}
	return s.first(ctx, KindCheckpoint, []string{s.want.Name})
}

// skippedOrNil drops the list when a store failure is returned.
func skippedOrNil(s []Skipped, err error) []Skipped {
	var inc *IncompatibleError
	if err != nil && !errors.As(err, &inc) {
		return nil
	}
	return s
}

const noManifest = "no manifest.json (incomplete or deleted)"

// readManifest reads and decodes a manifest and checks it belongs where
// it was found. A problem with its contents is a skip; a store failure an
// error.
func (c *Catalog) readManifest(ctx context.Context, kind Kind, id string) (*Manifest, *Skipped, error) {
	skip := func(reason string, err error) (*Manifest, *Skipped, error) {
		return nil, &Skipped{Kind: kind, ID: id, Reason: reason, Err: err}, nil
	}
	key := c.ManifestKey(kind, id)
	rc, err := c.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return skip(noManifest, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: select: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	rc.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: select: reading %s: %w", key, err)
	}
	if len(b) > maxManifestBytes {
		return skip(fmt.Sprintf("manifest.json is larger than %d bytes", maxManifestBytes), &CorruptError{Key: key, Reason: "too large"})
	}
	m, err := DecodeManifest(b)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) && ce.Key == "" {
			ce.Key = key
		}
		return skip("corrupt manifest: "+err.Error(), err)
	}
	switch {
	case m.JobID != c.job:
		return skip(fmt.Sprintf("the manifest belongs to job %q (was it copied?)", m.JobID), nil)
	case m.Kind != kind:
		return skip(fmt.Sprintf("the manifest is a %s, found among %ss", m.Kind, kind), nil)
	case m.dirID() != id:
		return skip(fmt.Sprintf("the manifest is for %s %q (was it copied?)", kind, m.dirID()), nil)
	}
	return m, nil, nil
}

// evaluate decides about one candidate (m, if already read). It returns
// the manifest to restore, or a skip, or an error (*IncompatibleError, or
// a store failure).
func (c *Catalog) evaluate(ctx context.Context, kind Kind, id string, m *Manifest, want Want, planned []string) (*Manifest, *Skipped, error) {
	if m == nil {
		var skip *Skipped
		var err error
		if m, skip, err = c.readManifest(ctx, kind, id); m == nil {
			return nil, skip, err
		}
	}
	skip := func(reason string, err error) (*Manifest, *Skipped, error) {
		return nil, &Skipped{Kind: kind, ID: id, Reason: reason, Err: err}, nil
	}
	if slices.Contains(want.Exclude, id) {
		return skip("excluded by the caller (its state could not be restored)", nil)
	}
	if err := m.CheckTasks(); err != nil {
		return skip("incomplete task set: "+err.Error(), err)
	}
	if err := c.checkStateKeys(m, id); err != nil {
		return skip(err.Error(), err)
	}
	if inc := compatible(m, id, want, planned); inc != nil {
		return nil, nil, inc
	}
	if want.DeferStateChecks {
		return m, nil, nil
	}
	if reason, err := c.verifyStates(ctx, m); err != nil {
		return nil, nil, err
	} else if reason != nil {
		return skip(reason.Reason, reason.Err)
	}
	return m, nil, nil
}

// compatible applies the compatibility rules Select documents.
func compatible(m *Manifest, id string, want Want, planned []string) *IncompatibleError {
	inc := &IncompatibleError{Kind: m.Kind, ID: id, JobVersion: m.JobVersion, FormatVersion: m.FormatVersion,
		WantJobVersion: want.JobVersion, WantFormatVersion: want.FormatVersion}
	switch {
	case m.FormatVersion != want.FormatVersion:
		inc.Reason = IncompatibleFormat
	case m.JobVersion > want.JobVersion:
		inc.Reason = IncompatibleDowngrade
	case want.MaxParallelism > 0 && m.MaxParallelism > 0 && m.MaxParallelism != want.MaxParallelism:
		inc.Reason = IncompatibleMaxParallelism
		inc.MaxParallelism, inc.WantMaxParallelism = m.MaxParallelism, want.MaxParallelism
	case m.JobVersion == want.JobVersion && !slices.Equal(operatorsOf(m.PlannedTasks), operatorsOf(planned)):
		inc.Reason = IncompatiblePlan
		inc.Detail = diffTasks(operatorsOf(m.PlannedTasks), operatorsOf(planned))
	default:
		return nil
	}
	return inc
}

// operatorsOf returns the operators of a task set ("op-3" → "op"),
// sorted, each once.
func operatorsOf(tasks []string) []string {
	var ops []string
	for _, t := range tasks {
		op := t
		if i := strings.LastIndexByte(t, '-'); i > 0 {
			op = t[:i]
		}
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return slices.Compact(ops)
}

// diffTasks describes how the artifact's operators differ from the job's.
func diffTasks(have, want []string) string {
	var gone, added []string
	for _, t := range have {
		if _, ok := slices.BinarySearch(want, t); !ok {
			gone = append(gone, t)
		}
	}
	for _, t := range want {
		if _, ok := slices.BinarySearch(have, t); !ok {
			added = append(added, t)
		}
	}
	short := func(s []string) string {
		if len(s) > 5 {
			return strings.Join(s[:5], ", ") + fmt.Sprintf(" and %d more", len(s)-5)
		}
		return strings.Join(s, ", ")
	}
	var parts []string
	if len(gone) > 0 {
		parts = append(parts, "operators not in this job: "+short(gone))
	}
	if len(added) > 0 {
		parts = append(parts, "operators missing from it: "+short(added))
	}
	return strings.Join(parts, "; ")
}

// verifyStates streams every state object of m and checks its size and
// SHA-256, VerifyConcurrency at a time. It returns the first problem with
// an object's contents (or absence) as a skip, or a store failure.
func (c *Catalog) verifyStates(ctx context.Context, m *Manifest) (*Skipped, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		skip    *Skipped
		failure error
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, c.opts.VerifyConcurrency)
	for _, s := range m.StateSnapshots {
		mu.Lock()
		stop := skip != nil || failure != nil
		mu.Unlock()
		if stop {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := c.verifyState(ctx, s)
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if skip != nil || failure != nil {
				return // the first problem wins; later ones may be our cancel
			}
			switch {
			case errors.Is(err, ErrNotFound):
				skip = &Skipped{Kind: m.Kind, ID: m.dirID(), Reason: fmt.Sprintf("the state of task %q is missing (%s)", s.TaskID, s.URI), Err: err}
			case IsCorruption(err):
				skip = &Skipped{Kind: m.Kind, ID: m.dirID(), Reason: fmt.Sprintf("the state of task %q is corrupt: %v", s.TaskID, err), Err: err}
			default:
				failure = fmt.Errorf("checkpoint: select: verifying the state of task %q: %w", s.TaskID, err)
			}
			cancel()
		}()
	}
	wg.Wait()
	if failure != nil {
		return nil, failure
	}
	return skip, nil
}

func (c *Catalog) verifyState(ctx context.Context, s StateSnapshot) error {
	rc, err := c.OpenState(ctx, s)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}

// OpenState opens a state object listed in a manifest of this catalog's
// job. The reader checks the bytes as they stream: more bytes than the
// entry says fail at once, and at the end a short object or a SHA-256
// mismatch makes Read return a *CorruptError instead of io.EOF. The check
// happens only when Read reaches the end, so read to io.EOF
// (statestore.Backend.Restore does: it reads past its trailer and fails, leaving
// nothing restored, on any read error). The caller must Close it; ctx
// bounds the reads too.
func (c *Catalog) OpenState(ctx context.Context, s StateSnapshot) (io.ReadCloser, error) {
	if err := ValidKey(s.URI); err != nil {
		return nil, fmt.Errorf("checkpoint: state of task %q: %w", s.TaskID, err)
	}
	if !strings.HasPrefix(s.URI, c.job+"/") {
		return nil, fmt.Errorf("checkpoint: state of task %q: %q is not under job %q", s.TaskID, s.URI, c.job)
	}
	h, prefix, ok := objsum.New(s.Checksum)
	if !ok || s.Bytes < 0 {
		return nil, fmt.Errorf("checkpoint: state of task %q: invalid entry (checksum %q, bytes %d)", s.TaskID, s.Checksum, s.Bytes)
	}
	var rc io.ReadCloser
	var err error
	if g, ok := c.store.(rangeGetter); ok && g.rangesAtOnce() > 1 && s.Bytes >= rangeMin {
		rc = openRanged(ctx, g, s.URI, s.Bytes)
	} else if rc, err = c.store.Get(ctx, s.URI); err != nil {
		return nil, err
	}
	return &verifyReader{rc: rc, h: h, prefix: prefix, want: s}, nil
}

// OpenStateSized is OpenState without the checksum: the reader checks
// the object's size only (a longer object fails at once, a shorter one
// at the end with a *CorruptError instead of io.EOF). It is for a caller
// that hashes the bytes itself and compares the result with s.Checksum,
// e.g. statestore.RestoreSource.Checksum, so that a restore reads and hashes
// every byte once.
func (c *Catalog) OpenStateSized(ctx context.Context, s StateSnapshot) (io.ReadCloser, error) {
	rc, err := c.OpenState(ctx, s)
	if err != nil {
		return nil, err
	}
	rc.(*verifyReader).h = nil
	return rc, nil
}

type verifyReader struct {
	rc     io.ReadCloser
	h      hash.Hash
	prefix string // of h's checksum
	n      int64
	want   StateSnapshot
	err    error // sticky
}

func (v *verifyReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.rc.Read(p)
	if v.h != nil {
		v.h.Write(p[:n])
	}
	v.n += int64(n)
	if v.n > v.want.Bytes {
		v.err = &CorruptError{Key: v.want.URI, Reason: fmt.Sprintf("the object is longer than the %d bytes its manifest entry says", v.want.Bytes)}
		return 0, v.err
	}
	if err == io.EOF {
		if v.n != v.want.Bytes {
			v.err = &CorruptError{Key: v.want.URI, Reason: fmt.Sprintf("the object has %d bytes, its manifest entry says %d", v.n, v.want.Bytes)}
			return n, v.err
		}
		if v.h != nil { // nil for OpenStateSized: the caller checks the checksum
			if sum := objsum.Format(v.prefix, v.h.Sum(nil)); sum != v.want.Checksum {
				v.err = &CorruptError{Key: v.want.URI, Reason: fmt.Sprintf("the object hashes to %s, its manifest entry says %s", sum, v.want.Checksum)}
				return n, v.err
			}
		}
		v.err = io.EOF
	} else if err != nil {
		v.err = err
	}
	return n, err
}

func (v *verifyReader) Close() error { return v.rc.Close() }

// Summary describes one artifact in a List.
type Summary struct {
	Kind Kind
	// ID is the checkpoint id or the savepoint name.
	ID string
	// Manifest is the decoded, checksum-verified manifest; nil if it is
	// missing or unreadable (then Err says why).
	Manifest *Manifest
	Err      error
	// Latest is set on the checkpoint LATEST names.
	Latest bool
}

// List describes every checkpoint (by ascending id) or savepoint (by
// name) in the store, including incomplete ones (no manifest yet, or a
// corrupt one: Err says so). It reads every manifest, but no state
// object; Select is what verifies an artifact.
func (c *Catalog) List(ctx context.Context, kind Kind) ([]Summary, error) {
	if !kind.valid() {
		return nil, fmt.Errorf("checkpoint: list: kind %q is neither %q nor %q", kind, KindCheckpoint, KindSavepoint)
	}
	l, err := c.list(ctx, kind)
	if err != nil {
		return nil, err
	}
	var latest ID
	if kind == KindCheckpoint {
		if latest, _, err = c.readLatest(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]Summary, 0, len(l.ids))
	for _, id := range l.ids {
		s := Summary{Kind: kind, ID: id}
		if kind == KindCheckpoint {
			n, _ := ParseID(id)
			s.Latest = n == latest
		}
		m, skip, err := c.readManifest(ctx, kind, id)
		if err != nil {
			return nil, err
		}
		if skip != nil {
			s.Err = errors.New(skip.Reason)
			if skip.Err != nil {
				s.Err = fmt.Errorf("%s: %w", skip.Reason, skip.Err)
			}
		}
		s.Manifest = m
		out = append(out, s)
	}
	return out, nil
}

// Verify reads every state object of m, a manifest of this catalog's job,
// and checks its size and checksum against its entry, as Select does
// without Want.DeferStateChecks: the error names the first object that is
// missing (it wraps ErrNotFound) or corrupt (a *CorruptError), or is the
// store's failure. The objects are streamed, VerifyConcurrency at a time.
func (c *Catalog) Verify(ctx context.Context, m *Manifest) error {
	skip, err := c.verifyStates(ctx, m)
	if err != nil {
		return err
	}
	if skip != nil {
		return fmt.Errorf("checkpoint: %s %s: %s: %w", skip.Kind, skip.ID, skip.Reason, skip.Err)
	}
	return nil
}

// Jobs returns the ids of the jobs that have checkpoints or savepoints in
// store (any object under {job}/checkpoints/ or {job}/savepoints/),
// sorted. It lists the whole store.
func Jobs(ctx context.Context, store Store) ([]string, error) {
	keys, err := store.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: listing %s: %w", store.URI(), err)
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range keys {
		parts := strings.SplitN(k, "/", 3)
		if len(parts) < 3 || (parts[1] != kindDir(KindCheckpoint) && parts[1] != kindDir(KindSavepoint)) || validJobID(parts[0]) != nil {
			continue
		}
		if !seen[parts[0]] {
			seen[parts[0]] = true
			out = append(out, parts[0])
		}
	}
	sort.Strings(out)
	return out, nil
}
