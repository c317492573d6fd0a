package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/blob"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
)

// Kind says whether an artifact is a checkpoint or a savepoint.
type Kind string

// The kinds of artifact.
const (
	// KindCheckpoint is a periodic (or requested) checkpoint, named by its
	// id, a sequence number; retention deletes old ones.
	KindCheckpoint Kind = "checkpoint"
	// KindSavepoint is a named savepoint, which retention never deletes.
	KindSavepoint Kind = "savepoint"
)

// Store is a checkpoint store opened for reading: the checkpoints and
// savepoints the jobs whose spec names it (checkpoint.object_store_uri)
// wrote there. It never writes, so it is safe to use beside running jobs.
// A Store is safe for concurrent use and holds nothing that needs
// closing.
type Store struct {
	st ckptstore.Store
}

// Open opens the checkpoint store at uri: file:///abs/dir for a local
// directory, s3://bucket/prefix for an S3-compatible bucket, as in a
// spec's checkpoint.object_store_uri. opts reach an s3:// store (fields
// left empty come from the environment); a file:// store ignores them.
// The directory or bucket must exist (Open creates nothing). ctx bounds
// only opening (for s3://, the bucket check).
func Open(ctx context.Context, uri string, opts StoreOptions) (*Store, error) {
	if err := ckptstore.CheckStore(uri, internalOptions(opts)); err != nil {
		return nil, err
	}
	if u, err := url.Parse(uri); err == nil && u.Scheme == "file" {
		// The file store creates a missing root; a reader must not.
		if fi, err := os.Stat(u.Path); err != nil {
			return nil, fmt.Errorf("checkpoint: object store %q: %w", uri, err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("checkpoint: object store %q: %s is not a directory", uri, u.Path)
		}
	}
	st, err := ckptstore.OpenStore(ctx, uri, internalOptions(opts))
	if err != nil {
		return nil, err
	}
	return &Store{st: st}, nil
}

// internalOptions is the engine's form of StoreOptions (the root
// package's WithCheckpointStore makes the same conversion).
func internalOptions(o StoreOptions) ckptstore.StoreOptions {
	return ckptstore.StoreOptions{
		Options: blob.Options{Endpoint: o.Endpoint, Region: o.Region, AccessKeyID: o.AccessKeyID,
			SecretAccessKey: o.SecretAccessKey, AllowHTTP: o.AllowHTTP},
		PartSize: o.PartSize, UploadConcurrency: o.UploadConcurrency, DownloadConcurrency: o.DownloadConcurrency,
	}
}

// URI returns the store's location as given to Open (normalized), without
// credentials.
func (s *Store) URI() string { return s.st.URI() }

// Jobs returns the ids of the jobs that have checkpoints or savepoints in
// the store, sorted. It lists every object of the store.
func (s *Store) Jobs(ctx context.Context) ([]string, error) {
	return ckptstore.Jobs(ctx, s.st)
}

// Info describes one checkpoint or savepoint: what its manifest records
// and whether a restore could use it. Its JSON (arkflow checkpoint list
// --json) has the snake_case names of its tags, times in RFC 3339.
type Info struct {
	// Job is the job's id.
	Job  string `json:"job"`
	Kind Kind   `json:"kind"`
	// ID is a checkpoint's id (20 digits, in id order) or a savepoint's
	// name.
	ID string `json:"id"`
	// Latest is set on the checkpoint the store's LATEST pointer names:
	// the one a restart of the job restores (with recovery
	// latest_checkpoint, the default).
	Latest bool `json:"latest"`
	// Completed is set when the artifact is whole: its manifest is
	// there, decodes and passes its checksum, lists exactly the planned
	// tasks, and (for a checkpoint) was committed — its id is not above
	// the one LATEST names. A restore passes over one that is not.
	// Whether its state objects are intact is what Verify checks.
	Completed bool `json:"completed"`
	// Problem says why it is not Completed ("" when it is).
	Problem string `json:"problem,omitempty"`
	// JobVersion and FormatVersion are the job version and state format
	// that wrote it; a job restores only an artifact of its own format and
	// of its own version or an older one (see Check).
	JobVersion    uint64 `json:"job_version"`
	FormatVersion int    `json:"format_version"`
	// Generation is the deployment generation that wrote it.
	Generation uint64 `json:"generation"`
	// MaxParallelism is the number of key groups its keyed state is split
	// into (0: written before it was recorded).
	MaxParallelism int `json:"max_parallelism"`
	// PlanDigest identifies the plan that wrote it (job.Plan.Digest).
	PlanDigest string `json:"plan_digest,omitempty"`
	// Created is when it was committed (zero when the manifest does not
	// say).
	Created time.Time `json:"created,omitzero"`
	// Bytes is the total size of its state objects.
	Bytes int64 `json:"bytes"`
	// Tasks are the tasks of the plan that wrote it, sorted by id, with
	// what it holds for each. Empty when the manifest could not be read.
	Tasks []Task `json:"tasks"`
}

// Task is what an artifact holds for one task of the plan that wrote it.
type Task struct {
	// ID is the task's id: "{operator}-{subtask}".
	ID string `json:"id"`
	// Attempt and Node name the task attempt whose cut it holds and the
	// node that ran it ("" if the manifest lists no attempt for it).
	Attempt string `json:"attempt,omitempty"`
	Node    string `json:"node,omitempty"`
	// StateBytes is the size of its state object, and StateChecksum the
	// checksum recorded for it ("crc64nvme:…" or "sha256:…"); 0 and ""
	// for a task without state.
	StateBytes    int64  `json:"state_bytes"`
	StateChecksum string `json:"state_checksum,omitempty"`
	// Watermark is the watermark it resumes at (zero when none was
	// recorded).
	Watermark time.Time `json:"watermark,omitzero"`
	// Positions are where a source task resumes reading, per partition.
	Positions []connectors.Position `json:"positions,omitempty"`
}

// List describes every checkpoint (by ascending id) and then every
// savepoint (by name) of job in the store, the incomplete ones too. It
// reads every manifest, but no state object.
func (s *Store) List(ctx context.Context, job string) ([]Info, error) {
	cat, err := s.catalog(job)
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, kind := range []ckptstore.Kind{ckptstore.KindCheckpoint, ckptstore.KindSavepoint} {
		sums, err := cat.List(ctx, kind)
		if err != nil {
			return nil, err
		}
		latest, err := latestOf(sums)
		if err != nil {
			return nil, err
		}
		for _, sum := range sums {
			out = append(out, info(job, sum, latest))
		}
	}
	return out, nil
}

// Inspect describes one checkpoint (kind KindCheckpoint, id its id, with
// or without leading zeros) or savepoint (KindSavepoint, id its name) of
// job. One the store does not hold at all is an error matching
// ErrNotFound; one that is there but not Completed is described, with its
// Problem.
func (s *Store) Inspect(ctx context.Context, job string, kind Kind, id string) (Info, error) {
	_, sum, latest, err := s.find(ctx, job, kind, id)
	if err != nil {
		return Info{}, err
	}
	return info(job, sum, latest), nil
}

// Verify reads every state object of a Completed checkpoint or savepoint
// and checks its size and checksum against the manifest, as a restore
// does while it restores them: nil means a restore would find them
// intact. A missing object is an error matching ErrNotFound, a damaged
// one an error matching ErrCorrupt, each naming the object; an artifact
// that is not Completed is an error giving its Problem. It reads all of
// the artifact's state.
func (s *Store) Verify(ctx context.Context, job string, kind Kind, id string) error {
	cat, sum, latest, err := s.find(ctx, job, kind, id)
	if err != nil {
		return err
	}
	if in := info(job, sum, latest); !in.Completed {
		return fmt.Errorf("checkpoint: %s %q of job %q is not complete: %s", in.Kind, in.ID, job, in.Problem)
	}
	return cat.Verify(ctx, sum.Manifest)
}

// find lists the artifacts of job's kind and returns the one with id, and
// the checkpoint LATEST names.
func (s *Store) find(ctx context.Context, job string, kind Kind, id string) (*ckptstore.Catalog, ckptstore.Summary, ckptstore.ID, error) {
	var none ckptstore.Summary
	cat, err := s.catalog(job)
	if err != nil {
		return nil, none, 0, err
	}
	k, id, err := ref(kind, id)
	if err != nil {
		return nil, none, 0, err
	}
	// The catalog lists a kind at a time; a store holds few enough
	// artifacts of a job (retention) that reading their manifests is cheap.
	sums, err := cat.List(ctx, k)
	if err != nil {
		return nil, none, 0, err
	}
	latest, err := latestOf(sums)
	if err != nil {
		return nil, none, 0, err
	}
	for _, sum := range sums {
		if sum.ID == id {
			return cat, sum, latest, nil
		}
	}
	return nil, none, 0, fmt.Errorf("checkpoint: job %q has no %s %q in %s: %w", job, kind, id, s.URI(), ErrNotFound)
}

// catalog returns the catalog of job, checking its id.
func (s *Store) catalog(job string) (*ckptstore.Catalog, error) {
	if job == "" {
		return nil, errors.New("checkpoint: job is empty (the id of the job whose artifacts to read)")
	}
	cat, err := ckptstore.NewCatalog(s.st, job, ckptstore.Options{})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: job: %w", errors.Unwrap(err))
	}
	return cat, nil
}

// ref checks a kind and an id and returns the id as the store keeps it.
func ref(kind Kind, id string) (ckptstore.Kind, string, error) {
	switch kind {
	case KindCheckpoint:
		n, err := ckptstore.ParseHubID(id)
		if err != nil {
			return "", "", err // "checkpoint: id …"
		}
		return ckptstore.KindCheckpoint, n.String(), nil
	case KindSavepoint:
		if id == "" || ckptstore.ValidKey(id) != nil || strings.Contains(id, "/") {
			return "", "", fmt.Errorf("checkpoint: savepoint name %q: use letters, digits, '-', '_' and '.'", id)
		}
		return ckptstore.KindSavepoint, id, nil
	}
	return "", "", fmt.Errorf("checkpoint: kind %q is neither %q nor %q", kind, KindCheckpoint, KindSavepoint)
}

// latestOf returns the id LATEST names among a listing's checkpoints (0:
// none, or a listing of savepoints).
func latestOf(sums []ckptstore.Summary) (ckptstore.ID, error) {
	for _, sum := range sums {
		if sum.Latest {
			return ckptstore.ParseID(sum.ID)
		}
	}
	return 0, nil
}

// info describes a catalog summary.
func info(job string, sum ckptstore.Summary, latest ckptstore.ID) Info {
	in := Info{Job: job, Kind: Kind(sum.Kind), ID: sum.ID, Latest: sum.Latest}
	m := sum.Manifest
	switch {
	case sum.Err != nil:
		in.Problem = sum.Err.Error()
	case m == nil:
		in.Problem = "no manifest.json"
	}
	if m == nil {
		return in
	}
	in.JobVersion, in.FormatVersion, in.Generation = m.JobVersion, m.FormatVersion, m.Generation
	in.MaxParallelism, in.PlanDigest = m.MaxParallelism, m.PlanDigest
	if m.CreatedMS > 0 {
		in.Created = time.UnixMilli(m.CreatedMS).UTC()
	}
	tasks := map[string]*Task{}
	task := func(id string) *Task {
		if t, ok := tasks[id]; ok {
			return t
		}
		t := &Task{ID: id}
		tasks[id] = t
		return t
	}
	for _, id := range m.PlannedTasks {
		task(id)
	}
	for _, a := range m.TaskAttempts {
		t := task(a.TaskID)
		t.Attempt, t.Node = a.AttemptID, a.NodeID
	}
	for _, st := range m.StateSnapshots {
		t := task(st.TaskID)
		t.StateBytes, t.StateChecksum = st.Bytes, st.Checksum
		in.Bytes += st.Bytes
	}
	for id, wm := range m.WatermarksMS {
		task(id).Watermark = time.UnixMilli(wm).UTC()
	}
	for _, p := range m.SourcePositions {
		t := task(p.TaskID)
		t.Positions = append(t.Positions, connectors.Position{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset})
	}
	for _, t := range tasks {
		in.Tasks = append(in.Tasks, *t)
	}
	sort.Slice(in.Tasks, func(i, j int) bool { return in.Tasks[i].ID < in.Tasks[j].ID })
	if in.Problem != "" {
		return in
	}
	if err := m.CheckTasks(); err != nil {
		in.Problem = "incomplete task set: " + err.Error()
		return in
	}
	if sum.Kind == ckptstore.KindCheckpoint && latest != 0 {
		if id, err := ckptstore.ParseID(sum.ID); err == nil && id > latest {
			in.Problem = fmt.Sprintf("not committed: LATEST names the older checkpoint %s (its commit failed or did not finish)", latest)
			return in
		}
	}
	in.Completed = true
	return in
}
