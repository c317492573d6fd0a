package runtime

// This file holds the restore at start: selecting the checkpoint or
// savepoint (falling back past corrupt artifacts), emptying and refilling
// the state store from its snapshots (with the relayout of rescale.go when
// the parallelism changed), the positions the sources resume from and the
// watermarks the operators resume at.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// selectRestore picks the checkpoint or savepoint to start from
// (spec.recovery, or Options.FromSavepoint), or nil. It runs before the
// state store is opened: a checkpoint that must not be used (downgrade,
// format change) fails the start with the state untouched, byte for byte.
//
// Select checks manifests only (Want.DeferStateChecks): the restore
// verifies each state object as it reads it, and on a missing or corrupt
// one selects again with the artifact excluded (see restore), so that
// every state byte is downloaded and hashed once.
func (r *Runtime) selectRestore(ctx context.Context, cat *ckptstore.Catalog) (*ckptstore.Manifest, error) {
	m, _, err := r.selectRestoreExcluding(ctx, cat, nil)
	return m, err
}

// CheckRestore makes the choice a start makes before it touches anything
// (selectRestore: Options.FromSavepoint, Options.FromCheckpoint or
// spec.recovery, the compatibility rules, the fallbacks, the parallelism
// checks) against store instead of the spec's, and stops there: no state
// is opened, nothing is written, and the state objects are not read (a
// start checks them as it restores them). It returns what a start would
// restore (nil: nothing, and the job would start without state), the
// candidates passed over, and the error the start would fail with. A
// spec without a checkpoint block restores nothing.
func (r *Runtime) CheckRestore(ctx context.Context, store ckptstore.Store) (*ckptstore.Manifest, []ckptstore.Skipped, error) {
	cp := r.g.Spec.Checkpoint
	if cp == nil {
		return nil, nil, nil
	}
	cat, err := ckptstore.NewCatalog(store, r.g.Spec.ID, ckptstore.Options{Retention: cp.Retention, Logger: r.log})
	if err != nil {
		return nil, nil, err
	}
	return r.selectRestoreExcluding(ctx, cat, nil)
}

// RefusedError marks the errors of selectRestore that are its decision
// that the start must not go on (an incompatible artifact, a savepoint
// that is missing or unusable, a parallelism change no relayout can
// make, recovery fail with something to restore), as opposed to a store
// it could not read. It reads as the error it holds.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }

// Unwrap returns the error it holds.
func (e *RefusedError) Unwrap() error { return e.Err }

// selectRestoreExcluding is selectRestore passing over the artifacts in
// exclude; it also returns the candidates passed over (each logged).
func (r *Runtime) selectRestoreExcluding(ctx context.Context, cat *ckptstore.Catalog, exclude []string) (*ckptstore.Manifest, []ckptstore.Skipped, error) {
	spec := r.g.Spec
	want := ckptstore.Want{Target: ckptstore.LatestCheckpoint, JobVersion: spec.Version, FormatVersion: r.formatVersion(), PlannedTasks: r.plannedTasks(),
		MaxParallelism: spec.MaxParallelism, DeferStateChecks: true, Exclude: exclude}
	exact := ""
	if r.opts.FromCheckpoint != "" && r.opts.FromSavepoint == "" {
		id, err := NormalizeCheckpointRef(ckptstore.KindCheckpoint, r.opts.FromCheckpoint)
		if err != nil {
			return nil, nil, fmt.Errorf("restoring checkpoint %q: %w", r.opts.FromCheckpoint, err)
		}
		if !slices.Contains(exclude, id) {
			exact = id
		}
	}
	switch {
	case r.opts.FromSavepoint != "":
		want.Target, want.Name = ckptstore.NamedSavepoint, r.opts.FromSavepoint
	case exact != "":
		want.Target, want.Name = ckptstore.ExactCheckpoint, exact
	case spec.Recovery == job.RecoverLatestSavepoint && r.opts.FromCheckpoint == "":
		want.Target = ckptstore.LatestSavepoint
	}
	m, skipped, err := cat.Select(ctx, want)
	all := skipped
	if exact != "" && err == nil && m == nil {
		// The checkpoint the Hub named is not usable: fall back as
		// latest_checkpoint would, past it.
		for _, s := range skipped {
			r.log.Warn("checkpoint not usable", "kind", s.Kind, "checkpoint", s.ID, "reason", s.Reason)
		}
		r.log.Warn("the checkpoint to restore is not usable; falling back to the latest committed one before it", "checkpoint", exact)
		want.Target, want.Name = ckptstore.LatestCheckpoint, ""
		want.Exclude = append(slices.Clone(exclude), exact)
		m, skipped, err = cat.Select(ctx, want)
		all = append(all, skipped...)
	}
	for _, s := range skipped {
		r.log.Warn("checkpoint not usable", "kind", s.Kind, "checkpoint", s.ID, "reason", s.Reason)
	}
	if err != nil {
		err = fmt.Errorf("selecting a checkpoint to restore: %w", err)
		if errors.As(err, new(*ckptstore.IncompatibleError)) {
			err = &RefusedError{err}
		}
		return nil, all, err
	}
	if m == nil {
		if r.opts.FromSavepoint != "" {
			return nil, all, &RefusedError{fmt.Errorf("savepoint %q was not found or is not usable in %s", r.opts.FromSavepoint, cat.Store().URI())}
		}
		return nil, all, nil
	}
	if ops := r.coPartitionedRescaled(r.manifestLayout(m), r.planLayout()); len(ops) > 0 {
		return nil, all, &RefusedError{fmt.Errorf("parallelism: %s %s changes the parallelism of %s, whose rows arrive partitioned by their source (keyed_by) and whose keyed state is kept per subtask: it cannot be redistributed; start with the old parallelism, or re-key through a Kafka topic into a job of the new one",
			m.Kind, m.CheckpointID, strings.Join(ops, ", "))}
	}
	if spec.Recovery == job.RecoverFail && r.opts.FromSavepoint == "" && r.opts.FromCheckpoint == "" {
		return nil, all, &RefusedError{fmt.Errorf("recovery is %q and %s %s exists: start from it with recovery latest_checkpoint, from a savepoint, or remove it", job.RecoverFail, m.Kind, m.CheckpointID)}
	}
	return m, all, nil
}

// restore fills st from the selected manifest and returns the source
// positions to resume from. It runs before any operator is created and
// before any source connects: state and positions first, then input.
//
// A state object that is missing or corrupt (wrong size or SHA-256, or a
// snapshot that does not parse) makes the artifact unusable, as Select
// would have found had it read the objects: what was restored is
// discarded and the next valid artifact is selected and restored
// instead; if there is none, the job starts without state, as
// when Select finds nothing usable. Other failures (the store, the disk)
// fail the start.
//
// fresh says st was created empty by this start: it holds no floors to
// carry and nothing to empty, so the first attempt does not wait for a
// store still opening in the background.
func (r *Runtime) restore(ctx context.Context, cat *ckptstore.Catalog, st statestore.Backend, m *ckptstore.Manifest, fresh bool) (map[string][]connectors.Position, error) {
	carry, err := r.prepareCarry(st, m, fresh)
	if err != nil {
		return nil, err
	}
	m, err = r.restoreUsable(ctx, cat, st, m, fresh)
	if err != nil || m == nil {
		return nil, err
	}
	if err := r.adoptRestored(st, m, carry); err != nil {
		return nil, r.failRestore(st, err)
	}
	oldPar := manifestParallelism(m)
	r.restoredWatermarks = restoredWatermarks(r.g.Spec, r.g.Plan, m.WatermarksMS, oldPar)
	r.ckpt.mu.Lock()
	r.ckpt.watermarks = m.WatermarksMS
	r.ckpt.mu.Unlock()
	return r.restoredPositions(m, oldPar), nil
}

// failRestore empties st after a restore failed and returns err (joined
// with the emptying's own failure). A restore that fails leaves no
// partial state behind: the next start may restore nothing (another
// checkpoint, none at all).
func (r *Runtime) failRestore(st statestore.Backend, err error) error {
	if derr := r.emptyState(st); derr != nil {
		err = errors.Join(err, derr)
	}
	return err
}

// prepareCarry reads the floors st holds for m, saves them beside the
// store and returns them (nil when none are carried). They are read
// before the restore empties the store,
// and kept beside it until the restore is done: a kill in between must
// not lose them. A fresh store holds none, and after a rescale the local
// store's floors belong to other subtasks: they are not carried (the
// windows acknowledged since m fire again).
func (r *Runtime) prepareCarry(st statestore.Backend, m *ckptstore.Manifest, fresh bool) (*markCarry, error) {
	if fresh || len(rescaled(r.manifestLayout(m), r.planLayout())) != 0 {
		return nil, nil
	}
	carry, err := r.carriedMarks(st, m)
	if err != nil {
		return nil, err
	}
	if err := r.saveCarry(carry); err != nil {
		return nil, err
	}
	return carry, nil
}

// restoreUsable restores m's state into st; while that fails because m's
// state is missing or corrupt, it excludes m and restores the next
// artifact Select gives instead. It returns the manifest restored, or nil
// when none is left: st is then empty and laid out for the plan, and the
// recovery is done. Other failures empty st and are returned.
func (r *Runtime) restoreUsable(ctx context.Context, cat *ckptstore.Catalog, st statestore.Backend, m *ckptstore.Manifest, fresh bool) (*ckptstore.Manifest, error) {
	var exclude []string
	for {
		r.log.Info("restoring", "kind", m.Kind, "checkpoint", m.CheckpointID, "job_version", m.JobVersion, "snapshots", len(m.StateSnapshots))
		err := r.restoreState(ctx, cat, st, m, fresh)
		fresh = false // a failed attempt may have left entries
		if err == nil {
			return m, nil
		}
		if !restoreCorrupt(err) {
			return nil, r.failRestore(st, err)
		}
		r.log.Warn("checkpoint not usable: its state could not be restored; selecting the previous one", "kind", m.Kind, "checkpoint", m.CheckpointID, "error", err)
		id := m.CheckpointID
		if m.Kind == ckptstore.KindSavepoint {
			id = m.Name
		}
		exclude = append(exclude, id)
		if m, _, err = r.selectRestoreExcluding(ctx, cat, exclude); err != nil {
			return nil, r.failRestore(st, err)
		}
		if m == nil {
			if err := r.emptyState(st); err != nil {
				return nil, err
			}
			if err := r.saveLayout(); err != nil {
				return nil, err
			}
			r.ckpt.mu.Lock()
			r.ckpt.status.Recovery = RecoveryProgress{Done: true}
			r.ckpt.mu.Unlock()
			r.log.Warn("no usable checkpoint left; starting without restored state")
			return nil, nil
		}
	}
}

// adoptRestored makes m's restored state the run's: the floors carried
// for m are kept, the state is laid out for the plan (relayout after a
// rescale, then the layout saved), a restored checkpoint is noted as cut
// by its attempt's run, and the carry is dropped. The caller empties st
// on error.
func (r *Runtime) adoptRestored(st statestore.Backend, m *ckptstore.Manifest, carry *markCarry) error {
	if carry != nil && carry.id == m.CheckpointID {
		if err := r.keepMarks(st, carry); err != nil {
			return err
		}
	}
	if m.MaxParallelism == 0 {
		r.log.Warn("restore: the checkpoint does not record its max_parallelism (it was written by an older arkflow-go); its state is restored as if cut with this job's", "kind", m.Kind, "checkpoint", m.CheckpointID, "max_parallelism", r.g.Spec.MaxParallelism)
	}
	if err := r.relayout(st, m); err != nil {
		return err
	}
	if err := r.saveLayout(); err != nil {
		return err
	}
	if a, ok := r.localAttempt(m); m.Kind == ckptstore.KindCheckpoint && ok {
		// The restored state is m's: a restore of m again may keep
		// what this run acknowledges on top of it.
		_, _, run := cutAttempt(a.AttemptID)
		r.noteCut(st, m.CheckpointID, run, true)
	}
	r.dropCarry()
	r.ckpt.mu.Lock()
	r.ckpt.status.Restored = string(m.Kind) + " " + m.CheckpointID
	r.ckpt.mu.Unlock()
	return nil
}

// manifestParallelism returns the parallelism of each operator when m was
// cut: the number of its planned tasks.
func manifestParallelism(m *ckptstore.Manifest) map[string]int {
	oldPar := map[string]int{}
	for _, t := range m.PlannedTasks {
		if op, _, ok := splitTask(t); ok {
			oldPar[op]++
		}
	}
	return oldPar
}

// restoredPositions returns the positions each source task of the plan
// resumes from, given m and the parallelism it was cut at.
func (r *Runtime) restoredPositions(m *ckptstore.Manifest, oldPar map[string]int) map[string][]connectors.Position {
	spec := r.g.Spec
	// Positions by source task: a task that recorded its own gets them;
	// after a parallelism change every subtask gets all of its operator's
	// (each keeps the partitions it reads).
	byTask := map[string][]connectors.Position{}
	byOp := map[string][]connectors.Position{}
	for _, p := range m.SourcePositions {
		op, _, ok := splitTask(p.TaskID)
		if !ok {
			continue
		}
		pos := connectors.Position{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset}
		byTask[p.TaskID] = append(byTask[p.TaskID], pos)
		byOp[op] = append(byOp[op], pos)
	}
	// Every source task gets its entry, empty when it had consumed nothing
	// at the checkpoint: that is a position too (the configured start), and
	// a WAL that has moved on since must not be trusted over it.
	out := map[string][]connectors.Position{}
	for _, t := range r.g.Plan.Tasks {
		if o, _ := spec.Operator(t.OperatorID); o != nil && o.Kind == job.KindSource {
			out[t.ID] = []connectors.Position{}
		}
		if oldPar[t.OperatorID] == t.Parallelism {
			if ps, ok := byTask[t.ID]; ok {
				out[t.ID] = ps
			}
		} else if ps, ok := byOp[t.OperatorID]; ok {
			out[t.ID] = ps
		}
	}
	return out
}

// restoreState empties the state of every stateful operator of the plan
// and fills it from the manifest's snapshots. Snapshots are restored into
// the key groups of the task that wrote them, so a changed parallelism
// needs nothing more: all subtasks share the store.
//
// The snapshots go in at once through statestore.LayerRestorer (Badger: each
// snapshot becomes a read-only layer under the store, downloaded as it
// is), or statestore.BulkRestorer when the store holds nothing else, each
// object's checksum checked by the pass that parses it; otherwise one by
// one through Backend.Restore.
func (r *Runtime) restoreState(ctx context.Context, cat *ckptstore.Catalog, st statestore.Backend, m *ckptstore.Manifest, fresh bool) error {
	spec := r.g.Spec
	ns := stateJob(spec)
	if !fresh {
		if err := r.emptyState(st); err != nil {
			return err
		}
	}
	oldPar := map[string]int{}
	for _, t := range m.PlannedTasks {
		if op, _, ok := splitTask(t); ok {
			oldPar[op]++
		}
	}
	now := r.opts.Clock.Now().UnixMilli()
	var (
		snaps  []ckptstore.StateSnapshot
		scopes []statestore.Scope
	)
	for _, s := range m.StateSnapshots {
		op, sub, ok := splitTask(s.TaskID)
		if !ok {
			return fmt.Errorf("restore: state snapshot of task %q: not an operator-subtask id", s.TaskID)
		}
		if o, _ := spec.Operator(op); o == nil {
			r.log.Warn("restore: the job no longer has this operator; its state is not restored", "task", s.TaskID)
			continue
		}
		if !r.snapshotWanted(op, sub, oldPar[op], spec.MaxParallelism) {
			continue // another process's key groups
		}
		snaps = append(snaps, s)
		scopes = append(scopes, statestore.Scope{Job: ns, Operator: op, Groups: keys.RangeFor(spec.MaxParallelism, oldPar[op], sub)})
	}
	var total int64
	for _, s := range snaps {
		total += s.Bytes
	}
	r.ckpt.mu.Lock()
	r.ckpt.status.Recovery = RecoveryProgress{BytesTotal: total, SnapshotsTotal: len(snaps)}
	r.ckpt.mu.Unlock()
	progress := func(s ckptstore.StateSnapshot, info statestore.RestoreInfo) {
		r.ckpt.mu.Lock()
		p := &r.ckpt.status.Recovery
		p.BytesRestored += info.Bytes
		p.KeysRestored += info.Entries
		p.SnapshotsRestored++
		done := p.BytesRestored
		r.ckpt.mu.Unlock()
		r.log.Info("restore progress", "task", s.TaskID, "keys", info.Entries, "bytes_restored", done, "bytes_total", total)
	}
	var restoreAll func([]statestore.RestoreSource, int64, func(int, statestore.RestoreInfo)) ([]statestore.RestoreInfo, error)
	if lr, ok := st.(statestore.LayerRestorer); ok {
		restoreAll = lr.RestoreLayers
	} else if bulk, ok := st.(statestore.BulkRestorer); ok {
		restoreAll = bulk.RestoreEmpty
	}
	if restoreAll != nil && len(snaps) > 0 {
		srcs := make([]statestore.RestoreSource, len(snaps))
		for i, s := range snaps {
			srcs[i] = statestore.RestoreSource{Scope: scopes[i], Checksum: s.Checksum,
				Open: func() (io.ReadCloser, error) { return cat.OpenStateSized(ctx, s) }}
		}
		_, err := restoreAll(srcs, now, func(i int, info statestore.RestoreInfo) { progress(snaps[i], info) })
		switch {
		case err == nil:
			r.ckpt.mu.Lock()
			r.ckpt.status.Recovery.Done = true
			r.ckpt.mu.Unlock()
			return nil
		case errors.Is(err, statestore.ErrNotEmpty):
			r.log.Info("restore: the state store holds other entries; restoring snapshot by snapshot")
		default:
			var re *statestore.RestoreError
			if errors.As(err, &re) && re.Index >= 0 && re.Index < len(snaps) {
				return fmt.Errorf("restore: state of %s: %w", snaps[re.Index].TaskID, err)
			}
			return fmt.Errorf("restore: %w", err)
		}
	}
	for i, s := range snaps {
		scope := scopes[i]
		rc, err := cat.OpenState(ctx, s)
		if err != nil {
			return fmt.Errorf("restore: opening the state of %s: %w", s.TaskID, err)
		}
		info, err := st.Restore(rc, scope, now)
		rc.Close()
		if err != nil {
			return fmt.Errorf("restore: state of %s: %w", s.TaskID, err)
		}
		progress(s, info)
	}
	r.ckpt.mu.Lock()
	r.ckpt.status.Recovery.Done = true
	r.ckpt.mu.Unlock()
	return nil
}

// emptyState deletes the state of every stateful operator of the spec,
// and the runtime's own entries.
func (r *Runtime) emptyState(st statestore.Backend) error {
	drop, ok := st.(statestore.Dropper)
	if !ok {
		return fmt.Errorf("the state backend cannot be emptied for a restore")
	}
	ns := stateJob(r.g.Spec)
	if err := drop.Drop(statestore.Scope{Job: ns, Operator: runtimeStateOp, Groups: statestore.AllKeyGroups}); err != nil {
		return fmt.Errorf("restore: emptying the runtime's state: %w", err)
	}
	for _, op := range r.g.Spec.Operators {
		if r.statefulOp(&op) {
			if err := drop.Drop(statestore.Scope{Job: ns, Operator: op.ID, Groups: statestore.AllKeyGroups}); err != nil {
				return fmt.Errorf("restore: emptying the state of %s: %w", op.ID, err)
			}
		}
	}
	return nil
}

// restoreCorrupt reports whether a restore failed because of the
// artifact (a state object missing, of the wrong size or hash, or not a
// valid snapshot) rather than the store or the disk. Every store marks
// its corruption with the one marker, ckptstore.ErrCorrupt; the
// exception is the local state directory (statestore.ErrCorrupt, which
// matches the marker too): it is not the artifact's fault, and falling
// back past every checkpoint would start the job without its state.
func restoreCorrupt(err error) bool {
	if errors.Is(err, statestore.ErrCorrupt) {
		return false
	}
	return errors.Is(err, ckptstore.ErrCorrupt) || errors.Is(err, ckptstore.ErrNotFound)
}

// restoredWatermarks picks the checkpoint's watermarks a restart starts
// from. Operators behind the sources resume at theirs: rows replayed from
// the positions that belong to windows which had fired before the
// checkpoint are late again, as they were then, instead of reopening those
// windows with part of their rows.
//
// A source does not resume at its own: its watermark at the cut was
// reached by rows after its position, which are read again, so another
// input of a shared operator could otherwise let that operator's
// watermark pass rows not yet re-read. A source chained with operators (a
// single input) resumes at theirs, which is no later than what they had
// seen.
//
// After a rescale (the operator's parallelism differs from oldPar's,
// which counts the checkpoint's tasks by operator) each task of the
// operator resumes at the lowest watermark the operator's tasks recorded:
// at a cut every subtask behind a keyed edge has seen the same watermarks
// (it receives from every upstream subtask), and the lowest makes no
// replayed row late that was not late then.
func restoredWatermarks(spec *job.Spec, plan *job.Plan, wms map[string]int64, oldPar map[string]int) map[string]int64 {
	out := map[string]int64{}
	low := map[string]int64{}
	for task, wm := range wms {
		if op, _, ok := splitTask(task); ok {
			if cur, seen := low[op]; !seen || wm < cur {
				low[op] = wm
			}
		}
	}
	for _, t := range plan.Tasks {
		if o, _ := spec.Operator(t.OperatorID); o == nil || o.Kind == job.KindSource {
			continue
		}
		if oldPar[t.OperatorID] == t.Parallelism {
			if wm, ok := wms[t.ID]; ok {
				out[t.ID] = wm
			}
		} else if wm, ok := low[t.OperatorID]; ok {
			out[t.ID] = wm
		}
	}
	for _, c := range plan.Chains {
		if o, _ := spec.Operator(c.Head); o == nil || o.Kind != job.KindSource {
			continue
		}
		for sub := 0; sub < c.Parallelism; sub++ {
			low, found := int64(0), false
			for _, op := range c.Operators[1:] {
				if wm, ok := out[planner.TaskID(op, sub)]; ok && (!found || wm < low) {
					low, found = wm, true
				}
			}
			if found {
				out[planner.TaskID(c.Head, sub)] = low
			}
		}
	}
	return out
}
