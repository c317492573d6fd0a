package runtime

// This file holds a run of part of a job: a job whose
// placement units run on several nodes, each process running some units
// (Options.Tasks), with checkpoints the Hub drives in two phases and
// commits only with every planned task:
//
//  1. CheckpointPart: every node cuts its own tasks with the normal
//     barrier protocol under the id the Hub chose, uploads their state
//     under that artifact's directory and writes a sealed part manifest
//     listing only its tasks. Nothing is committed.
//  2. CommitParts (or CommitJobParts on a node that does not run the
//     job): one node merges the parts of the nodes the Hub names into a
//     manifest whose planned tasks are the whole plan's, and commits it
//     (LATEST moves for a checkpoint); a unit without its part leaves it
//     uncommitted.
//
// A source behind a WAL that holds its entries for checkpoints
// (connectors.Unrewindable) lets them go only once an artifact holding
// its positions is committed. A node that merged the commit knows at
// once; the others learn it at their next part round or commit command:
// releaseCommitted reads the committed manifests of the artifacts this
// run wrote parts of (newest first) and releases with the positions the
// newest committed one recorded for this process's sources. Until then,
// entries stay held: never released early, at worst late by one round.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/job"
)

// maxPendingParts bounds the artifacts a run remembers writing parts of
// whose commit it has not seen.
const maxPendingParts = 64

// errPartial refuses a checkpoint the runtime would commit alone while it
// runs only part of the job.
var errPartial = errors.New("this process runs part of the job: its checkpoints are parts the Hub commits (CheckpointPart, CommitParts)")

// ValidateTasks checks that tasks is a set of plan tasks made of whole
// placement units: a unit split between this process and another would
// need data to cross processes, and there is no cross-node shuffle.
func ValidateTasks(plan *job.Plan, tasks []string) error {
	in := map[string]bool{}
	var unknown []string
	for _, t := range tasks {
		if _, ok := planner.Task(plan, t); !ok {
			unknown = append(unknown, t)
		}
		in[t] = true
	}
	if len(unknown) > 0 {
		return fmt.Errorf("job %q: tasks %s are not tasks of its plan (version %d)", plan.JobID, strings.Join(unknown, ", "), plan.Version)
	}
	var splits []string
	for _, u := range plan.PlacementUnits {
		var have, miss []string
		for _, t := range u.Tasks {
			if in[t] {
				have = append(have, t)
			} else {
				miss = append(miss, t)
			}
		}
		if len(have) > 0 && len(miss) > 0 {
			splits = append(splits, fmt.Sprintf("placement unit %s (tasks %s) would be split: %s here, %s elsewhere",
				u.ID, strings.Join(u.Tasks, ", "), strings.Join(have, ", "), strings.Join(miss, ", ")))
		}
	}
	if len(splits) > 0 {
		return fmt.Errorf("job %q: a process runs whole placement units only, since no data crosses processes: %s", plan.JobID, strings.Join(splits, "; "))
	}
	return nil
}

// isLocal reports whether task runs in this process.
func (r *Runtime) isLocal(task string) bool { return r.local == nil || r.local[task] }

// Partial reports whether this process runs only part of the job's
// tasks (Options.Tasks).
func (r *Runtime) Partial() bool { return r.local != nil }

// localTasks are the tasks this process runs, sorted.
func (r *Runtime) localTasks() []string {
	if r.local == nil {
		return r.plannedTasks()
	}
	ts := make([]string, 0, len(r.local))
	for t := range r.local {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// SetGeneration sets the generation the next manifests record: a Hub that
// moves some units after a failure bumps the job's generation, and the
// units that kept running adopt it without a restart.
func (r *Runtime) SetGeneration(g uint64) { r.generation.Store(g) }

// Generation returns the generation manifests record.
func (r *Runtime) Generation() uint64 { return r.generation.Load() }

// NormalizeCheckpointRef returns the catalog's form of a Hub's artifact
// reference: a checkpoint id as 20 digits (ckptstore.ParseHubID), a
// savepoint name checked.
func NormalizeCheckpointRef(kind ckptstore.Kind, ref string) (string, error) {
	if kind == ckptstore.KindCheckpoint {
		id, err := ckptstore.ParseHubID(ref)
		if err != nil {
			return "", err
		}
		return id.String(), nil
	}
	if ref == "" {
		return "", errors.New("a savepoint needs a name")
	}
	if err := ckptstore.ValidKey(ref); err != nil || strings.Contains(ref, "/") {
		return "", fmt.Errorf("savepoint name %q: use letters, digits, '-', '_' and '.'", ref)
	}
	return ref, nil
}

// CheckpointPart cuts this process's tasks for the checkpoint id (or the
// savepoint named ref) the Hub chose, uploads their state under the
// artifact's directory, writes their part manifest and returns its key.
// The artifact is not committed: CommitParts does that with every
// node's part. It first releases what committed artifacts allow (see
// releaseCommitted).
func (r *Runtime) CheckpointPart(ctx context.Context, kind ckptstore.Kind, ref string) (string, error) {
	id, err := NormalizeCheckpointRef(kind, ref)
	if err != nil {
		return "", err
	}
	r.releaseCommitted(ctx)
	name := ""
	if kind == ckptstore.KindSavepoint {
		name = id
	}
	_, key, err := r.round(ctx, kind, id, name, true)
	return key, err
}

// CommitParts merges the parts of nodes for the artifact ref into one
// manifest over the whole plan and commits it (ckptstore.CommitParts).
// When it is of the kind a restart restores, this process's sources
// behind WALs release what it holds. A runtime that is not running (never
// run: a node that merges the commit of a job it does not run) opens the
// spec's checkpoint store for it.
func (r *Runtime) CommitParts(ctx context.Context, kind ckptstore.Kind, ref string, nodes []string) (*ckptstore.Manifest, error) {
	id, err := NormalizeCheckpointRef(kind, ref)
	if err != nil {
		return nil, err
	}
	r.ckpt.mu.Lock()
	cat := r.ckpt.catalog
	r.ckpt.mu.Unlock()
	if cat == nil {
		// Not running (a node that merges a commit of a job it does not
		// run): the spec's store is enough.
		if r.g.Spec.Checkpoint == nil {
			return nil, ErrNoCheckpoints
		}
		if cat, err = r.openCatalog(ctx); err != nil {
			return nil, err
		}
	}
	m, err := ckptstore.CommitParts(ctx, cat, ckptstore.Parts{Kind: kind, ID: id, Nodes: nodes, PlannedTasks: r.plannedTasks(), PlanDigest: r.g.Plan.Digest})
	if err != nil {
		return nil, err
	}
	if kind == r.restartKind() {
		r.committed(m)
	}
	r.releaseCommitted(ctx)
	return m, nil
}

// committed applies a committed artifact of the restart kind to this
// run: the watermarks it recorded (ops.Task.CheckpointWatermark) and the
// positions of this process's sources, which their WALs may let go of.
// Parts of it and of older artifacts are no longer pending.
func (r *Runtime) committed(m *ckptstore.Manifest) {
	pos := map[string][]connectors.Position{}
	for _, p := range m.SourcePositions {
		if r.isLocal(p.TaskID) {
			pos[p.TaskID] = append(pos[p.TaskID], connectors.Position{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset})
		}
	}
	// A source task that had consumed nothing has no entry: an empty
	// position list is its position too.
	for _, t := range m.PlannedTasks {
		if _, ok := pos[t]; !ok && r.isLocal(t) {
			if op, _, ok := splitTask(t); ok {
				if o, _ := r.g.Spec.Operator(op); o != nil && o.Kind == job.KindSource {
					pos[t] = []connectors.Position{}
				}
			}
		}
	}
	id := m.CheckpointID
	if m.Kind == ckptstore.KindSavepoint {
		id = m.Name
	}
	r.ckpt.mu.Lock()
	r.ckpt.watermarks = m.WatermarksMS
	if i := slices.Index(r.parts, id); i >= 0 {
		r.parts = slices.Clone(r.parts[i+1:])
	} else if m.Kind == ckptstore.KindCheckpoint {
		// Older checkpoints' parts can no longer be committed (their
		// ids are not above LATEST).
		r.parts = slices.DeleteFunc(slices.Clone(r.parts), func(p string) bool { return p <= id })
	}
	r.ckpt.mu.Unlock()
	r.checkpointCompleted(pos)
}

// releaseCommitted looks for the newest artifact this run wrote a part
// of that has been committed since (by whichever node merged it) and
// applies it (committed). A store failure is logged: the entries stay
// held until a later check.
func (r *Runtime) releaseCommitted(ctx context.Context) {
	r.ckpt.mu.Lock()
	cat, pending := r.ckpt.catalog, slices.Clone(r.parts)
	r.ckpt.mu.Unlock()
	if cat == nil || len(pending) == 0 {
		return
	}
	kind := r.restartKind()
	var latest ckptstore.ID
	if kind == ckptstore.KindCheckpoint {
		var err error
		if latest, err = cat.Latest(ctx); err != nil {
			r.log.Warn("checking which checkpoint parts were committed", "error", err)
			return
		}
	}
	for i := len(pending) - 1; i >= 0; i-- {
		id := pending[i]
		if kind == ckptstore.KindCheckpoint {
			if n, err := ckptstore.ParseID(id); err != nil || n > latest {
				continue // not committed (yet)
			}
		}
		m, err := cat.ReadManifest(ctx, kind, id)
		if errors.Is(err, ckptstore.ErrNotFound) {
			continue
		}
		if err != nil {
			r.log.Warn("reading a committed manifest", "kind", kind, "checkpoint", id, "error", err)
			continue
		}
		r.committed(m)
		return
	}
}

// snapshotWanted reports whether the snapshot of subtask sub of op (cut
// at oldPar subtasks, out of maxPar key groups) holds key groups a task
// of this process owns: a partial run restores only those, so the bytes
// it reads follow the key groups it takes (after a rescale, a snapshot
// that straddles two units is read by both).
func (r *Runtime) snapshotWanted(op string, sub, oldPar, maxPar int) bool {
	if r.local == nil {
		return true
	}
	rg := keys.RangeFor(maxPar, oldPar, sub)
	for _, t := range planner.OperatorTasks(r.g.Plan, op) {
		if !r.local[t.ID] {
			continue
		}
		own := t.Partitions[0].KeyGroup
		if own.Start <= rg.End && rg.Start <= own.End {
			return true
		}
	}
	return false
}
