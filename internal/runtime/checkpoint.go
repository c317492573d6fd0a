package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// CheckpointStatus is a runtime's checkpoint health and recovery progress.
type CheckpointStatus struct {
	// Enabled is false when the spec has no checkpoint block.
	Enabled bool
	// Healthy is false after a failed round, until one succeeds
	// ("degraded": the previous checkpoint is still the one a restart
	// uses).
	Healthy   bool
	Completed int64
	Failures  int64
	LastError string
	// Last is the newest committed checkpoint of this run.
	LastID       string
	LastDuration time.Duration
	// LastPause is how long the sources were held for the cut.
	LastPause time.Duration
	LastBytes int64
	// Restored names the checkpoint or savepoint the run started from.
	Restored string
	Recovery RecoveryProgress
}

// RecoveryProgress counts a restore's state (R-CKPT-8).
type RecoveryProgress struct {
	BytesRestored, BytesTotal int64
	KeysRestored              int64
	SnapshotsRestored         int
	SnapshotsTotal            int
	Done                      bool
}

// ErrNoCheckpoints is returned by Checkpoint and Savepoint when the spec
// has no checkpoint block.
var ErrNoCheckpoints = errors.New("the job has no checkpoint block (spec.checkpoint with an object_store_uri)")

// statefulOp reports whether an operator may keep keyed state, so that
// checkpoints snapshot it: its factory says it does (ops.Built.State), or
// the spec marks it stateful or keyed.
func (r *Runtime) statefulOp(op *job.Operator) bool {
	switch op.Kind {
	case job.KindSource, job.KindSink:
		return false
	}
	return r.g.Ops[op.ID].State || op.Stateful || op.KeyField != ""
}

// openCatalog opens the checkpoint store of the spec, or returns nil when
// checkpoints are off.
func (r *Runtime) openCatalog(ctx context.Context) (*ckptstore.Catalog, error) {
	cp := r.g.Spec.Checkpoint
	if cp == nil {
		return nil, nil
	}
	store, err := ckptstore.OpenStore(ctx, cp.ObjectStoreURI, r.opts.CheckpointStore)
	if err != nil {
		return nil, fmt.Errorf("opening the checkpoint store: %w", err)
	}
	if r.opts.WrapStore != nil {
		store = r.opts.WrapStore(store)
	}
	return ckptstore.NewCatalog(store, r.g.Spec.ID, ckptstore.Options{Retention: cp.Retention, Logger: r.log})
}

func (r *Runtime) formatVersion() int {
	if s := r.g.Spec.State; s != nil && s.FormatVersion > 0 {
		return s.FormatVersion
	}
	return job.DefaultStateFormatVersion
}

func (r *Runtime) plannedTasks() []string {
	var ts []string
	for _, t := range r.g.Plan.Tasks {
		ts = append(ts, t.ID)
	}
	sort.Strings(ts)
	return ts
}

// selectRestore picks the checkpoint or savepoint to start from
// (spec.recovery, or Options.FromSavepoint), or nil. It runs before the
// state store is opened: a checkpoint that must not be used (downgrade,
// format change) fails the start with the state untouched, byte for byte
// (R-CKPT-6).
//
// Select checks manifests only (Want.DeferStateChecks): the restore
// verifies each state object as it reads it, and on a missing or corrupt
// one selects again with the artifact excluded (see restore), so that
// every state byte is downloaded and hashed once.
func (r *Runtime) selectRestore(ctx context.Context, cat *ckptstore.Catalog) (*ckptstore.Manifest, error) {
	return r.selectRestoreExcluding(ctx, cat, nil)
}

// selectRestoreExcluding is selectRestore passing over the artifacts in
// exclude.
func (r *Runtime) selectRestoreExcluding(ctx context.Context, cat *ckptstore.Catalog, exclude []string) (*ckptstore.Manifest, error) {
	spec := r.g.Spec
	want := ckptstore.Want{Target: ckptstore.LatestCheckpoint, JobVersion: spec.Version, FormatVersion: r.formatVersion(), PlannedTasks: r.plannedTasks(),
		MaxParallelism: spec.MaxParallelism, DeferStateChecks: true, Exclude: exclude}
	switch {
	case r.opts.FromSavepoint != "":
		want.Target, want.Name = ckptstore.NamedSavepoint, r.opts.FromSavepoint
	case spec.Recovery == job.RecoverLatestSavepoint:
		want.Target = ckptstore.LatestSavepoint
	}
	m, skipped, err := cat.Select(ctx, want)
	for _, s := range skipped {
		r.log.Warn("checkpoint not usable", "kind", s.Kind, "id", s.ID, "reason", s.Reason)
	}
	if err != nil {
		return nil, fmt.Errorf("selecting a checkpoint to restore: %w", err)
	}
	if m == nil {
		if r.opts.FromSavepoint != "" {
			return nil, fmt.Errorf("savepoint %q was not found or is not usable in %s", r.opts.FromSavepoint, cat.Store().URI())
		}
		return nil, nil
	}
	if spec.Recovery == job.RecoverFail && r.opts.FromSavepoint == "" {
		return nil, fmt.Errorf("recovery is %q and %s %s exists: start from it with recovery latest_checkpoint, from a savepoint, or remove it", job.RecoverFail, m.Kind, m.CheckpointID)
	}
	return m, nil
}

// restore fills st from the selected manifest and returns the source
// positions to resume from. It runs before any operator is created and
// before any source connects: state and positions first, then input
// (R-CKPT-1, R-CKPT-8).
//
// A state object that is missing or corrupt (wrong size or SHA-256, or a
// snapshot that does not parse) makes the artifact unusable, as Select
// would have found had it read the objects: what was restored is
// discarded and the next valid artifact is selected and restored
// instead (R-CKPT-8); if there is none, the job starts without state, as
// when Select finds nothing usable. Other failures (the store, the disk)
// fail the start.
//
// fresh says st was created empty by this start: it holds no floors to
// carry and nothing to empty, so the first attempt does not wait for a
// store still opening in the background.
func (r *Runtime) restore(ctx context.Context, cat *ckptstore.Catalog, st statestore.Backend, m *ckptstore.Manifest, fresh bool) (map[string][]connectors.Position, error) {
	spec := r.g.Spec
	var exclude []string
	// A restore that fails leaves no partial state behind: the next
	// start may restore nothing (another checkpoint, none at all).
	fail := func(err error) (map[string][]connectors.Position, error) {
		if derr := r.emptyState(st); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	// Read before the restore empties the store, and kept beside it
	// until the restore is done: a kill in between must not lose them.
	var carry *markCarry
	// After a rescale the local store's floors belong to other subtasks:
	// they are not carried (the windows acknowledged since m fire again).
	if !fresh && len(rescaled(r.manifestLayout(m), r.planLayout())) == 0 {
		var err error
		if carry, err = r.carriedMarks(st, m); err != nil {
			return nil, err
		}
		if err := r.saveCarry(carry); err != nil {
			return nil, err
		}
	}
	for {
		r.log.Info("restoring", "kind", m.Kind, "id", m.CheckpointID, "job_version", m.JobVersion, "snapshots", len(m.StateSnapshots))
		err := r.restoreState(ctx, cat, st, m, fresh)
		fresh = false // a failed attempt may have left entries
		if err == nil {
			break
		}
		if !restoreCorrupt(err) {
			return fail(err)
		}
		r.log.Warn("checkpoint not usable: its state could not be restored; selecting the previous one", "kind", m.Kind, "id", m.CheckpointID, "error", err)
		id := m.CheckpointID
		if m.Kind == ckptstore.KindSavepoint {
			id = m.Name
		}
		exclude = append(exclude, id)
		if m, err = r.selectRestoreExcluding(ctx, cat, exclude); err != nil {
			return fail(err)
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
	if carry != nil && carry.id == m.CheckpointID {
		if err := r.keepMarks(st, carry); err != nil {
			return fail(err)
		}
	}
	if m.MaxParallelism == 0 {
		r.log.Warn("restore: the checkpoint does not record its max_parallelism (it was written by an older arkflow-go); its state is restored as if cut with this job's", "kind", m.Kind, "id", m.CheckpointID, "max_parallelism", spec.MaxParallelism)
	}
	if err := r.relayout(st, m); err != nil {
		return fail(err)
	}
	if err := r.saveLayout(); err != nil {
		return fail(err)
	}
	if m.Kind == ckptstore.KindCheckpoint && len(m.TaskAttempts) > 0 {
		// The restored state is m's: a restore of m again may keep
		// what this run acknowledges on top of it.
		_, _, run := cutAttempt(m.TaskAttempts[0].AttemptID)
		r.noteCut(st, m.CheckpointID, run, true)
	}
	r.dropCarry()
	r.ckpt.mu.Lock()
	r.ckpt.status.Restored = string(m.Kind) + " " + m.CheckpointID
	r.ckpt.mu.Unlock()
	oldPar := map[string]int{}
	for _, t := range m.PlannedTasks {
		if op, _, ok := splitTask(t); ok {
			oldPar[op]++
		}
	}
	r.restoredWatermarks = restoredWatermarks(spec, r.g.Plan, m.WatermarksMS, oldPar)
	r.ckpt.mu.Lock()
	r.ckpt.watermarks = m.WatermarksMS
	r.ckpt.mu.Unlock()
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
	return out, nil
}

// restoreState empties the state of every stateful operator of the plan
// and fills it from the manifest's snapshots. Snapshots are restored into
// the key groups of the task that wrote them, so a changed parallelism
// needs nothing more: all subtasks share the store.
//
// The snapshots go in at once through statestore.LayerRestorer (Badger: each
// snapshot becomes a read-only layer under the store, downloaded as it
// is), or statestore.BulkRestorer when the store holds nothing else, each
// object's SHA-256 checked by the pass that parses it; otherwise one by
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
	var total int64
	for _, s := range m.StateSnapshots {
		total += s.Bytes
	}
	r.ckpt.mu.Lock()
	r.ckpt.status.Recovery = RecoveryProgress{BytesTotal: total, SnapshotsTotal: len(m.StateSnapshots)}
	r.ckpt.mu.Unlock()
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
		snaps = append(snaps, s)
		scopes = append(scopes, statestore.Scope{Job: ns, Operator: op, Groups: job.RangeFor(spec.MaxParallelism, oldPar[op], sub)})
	}
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

// The runtime's own entries in the state store live under this operator
// name, which no job operator can take (ids do not start with "__").
const runtimeStateOp = "__arkflow_runtime"

// lineageKey holds the checkpoints cut from this store's state since it
// was last restored, one per line ("id run", the run's token is also in
// the checkpoint's attempt ids), oldest first, at most lineageLen (see
// carriedMarks).
func lineageKey(ns string) statestore.Key {
	return statestore.Key{Job: ns, Operator: runtimeStateOp, Namespace: "lineage", User: []byte("checkpoints")}
}

const lineageLen = 64

// markCarry is what carriedMarks read: the marks (ops.Carrier) of the
// local store, valid on top of checkpoint id.
type markCarry struct {
	id, run string
	marks   []statestore.Mutation
}

// carrier returns the Carrier of operator op, or nil.
func (r *Runtime) carrier(op string) ops.Carrier { return r.g.Ops[op].Carry }

// decodeMark decodes a mark stored under k (ok false when k's operator
// carries none or v is not a mark).
func (r *Runtime) decodeMark(k statestore.Key, v []byte) (int64, bool) {
	c := r.carrier(k.Operator)
	if c == nil {
		return 0, false
	}
	return c.DecodeMark(v)
}

// carriedMarks reads the marks (a window's floor: see windowop.floor)
// the local store holds when they may be kept across the restore of m:
// m is a checkpoint (not a savepoint, not chosen by the caller) a run cut
// from this very store's state (its note names m's id and the run token
// of m's attempt ids, so a checkpoint of the same id cut elsewhere does
// not match), so every mark write in the store since happened on top of
// m's state; and no source routes or updates late rows (a replayed row of
// an acknowledged window would then be routed or emitted as a late update
// instead of dropped as it was when the window fired). Otherwise, and when
// the store has no mark newer than the snapshot's, the restore rolls the
// marks back with the rest of the state, and the windows acknowledged
// since m fire again (the L2 bound).
func (r *Runtime) carriedMarks(st statestore.Backend, m *ckptstore.Manifest) (*markCarry, error) {
	spec := r.g.Spec
	if m.Kind != ckptstore.KindCheckpoint || r.opts.FromSavepoint != "" || spec.Recovery == job.RecoverLatestSavepoint {
		return nil, nil
	}
	for _, s := range spec.Sources {
		if s.Time != nil && s.Time.LateEventPolicy != "" && s.Time.LateEventPolicy != job.LateDrop {
			return nil, nil
		}
	}
	ns := stateJob(spec)
	now := r.opts.Clock.Now().UnixMilli()
	matches := func(line string) bool {
		id, run, _ := strings.Cut(line, " ")
		return id == m.CheckpointID && run != "" && len(m.TaskAttempts) > 0 &&
			!slices.ContainsFunc(m.TaskAttempts, func(a ckptstore.TaskAttempt) bool { return !strings.HasSuffix(a.AttemptID, ":"+run) })
	}
	// A restore of m killed after it emptied the store left the marks
	// it carried beside the store.
	saved, err := r.loadCarry(matches)
	if err != nil {
		return nil, err
	}
	v, _, ok, err := st.Get(lineageKey(ns), now)
	if err != nil {
		return nil, fmt.Errorf("restore: reading the local store's last checkpoint: %w", err)
	}
	noted := false
	if ok {
		for _, line := range strings.Split(string(v), "\n") {
			noted = noted || matches(line)
		}
	}
	if !noted {
		if saved != nil {
			r.log.Info("restore: keeping the window floors a restore of this checkpoint carried before it was interrupted", "id", m.CheckpointID, "floors", len(saved.marks))
			return saved, nil
		}
		r.log.Info("restore: the local state store did not run on from this checkpoint; the windows acknowledged after it fire again", "id", m.CheckpointID)
		return nil, nil
	}
	c := &markCarry{id: m.CheckpointID, run: saved.runOr(m)}
	for _, t := range r.g.Plan.Tasks {
		carrier := r.carrier(t.OperatorID)
		if carrier == nil {
			continue
		}
		k := carrier.MarkKey(ns, t.OperatorID, t.KeyGroups().Start)
		v, _, ok, err := st.Get(k, now)
		if err != nil {
			return nil, fmt.Errorf("restore: reading the window floor of %s: %w", t.ID, err)
		}
		if !ok {
			continue
		}
		// The higher of the store's and an interrupted restore's.
		if prev := saved.mark(k); prev != nil {
			a, okA := carrier.DecodeMark(v)
			b, okB := carrier.DecodeMark(prev)
			if okB && (!okA || b > a) {
				v = prev
			}
		}
		c.marks = append(c.marks, statestore.Mutation{Key: k, Value: append([]byte(nil), v...)})
	}
	for _, f := range saved.marksOf() {
		if !slices.ContainsFunc(c.marks, func(g statestore.Mutation) bool { return sameKey(g.Key, f.Key) }) {
			c.marks = append(c.marks, f)
		}
	}
	return c, nil
}

func sameKey(a, b statestore.Key) bool {
	return a.Job == b.Job && a.Operator == b.Operator && a.Namespace == b.Namespace && a.KeyGroup == b.KeyGroup && string(a.User) == string(b.User)
}

// carryFile is the JSON of the carry file: the checkpoint ("id run")
// and the marks, by operator and key group (the names say floors: the
// window's floors were the first marks).
type carryFile struct {
	Checkpoint string      `json:"checkpoint"`
	Marks      []carryMark `json:"floors"`
}

type carryMark struct {
	Operator string `json:"operator"`
	KeyGroup int    `json:"key_group"`
	Mark     int64  `json:"floor_ms"`
}

// runOr returns the run token of c's checkpoint line, else that of m's
// attempts.
func (c *markCarry) runOr(m *ckptstore.Manifest) string {
	if c != nil && c.run != "" {
		return c.run
	}
	if len(m.TaskAttempts) > 0 {
		_, _, run := cutAttempt(m.TaskAttempts[0].AttemptID)
		return run
	}
	return ""
}

func (c *markCarry) mark(k statestore.Key) []byte {
	if c == nil {
		return nil
	}
	for _, f := range c.marks {
		if sameKey(f.Key, k) {
			return f.Value
		}
	}
	return nil
}

func (c *markCarry) marksOf() []statestore.Mutation {
	if c == nil {
		return nil
	}
	return c.marks
}

// saveCarry writes the carry file before the restore empties the store
// (nothing for a memory store, or nothing to carry).
func (r *Runtime) saveCarry(c *markCarry) error {
	if r.stateDir == "" || c == nil || len(c.marks) == 0 {
		return nil
	}
	f := carryFile{Checkpoint: c.id + " " + c.run}
	for _, m := range c.marks {
		wm, ok := r.decodeMark(m.Key, m.Value)
		if !ok {
			continue
		}
		f.Marks = append(f.Marks, carryMark{Operator: m.Key.Operator, KeyGroup: m.Key.KeyGroup, Mark: wm})
	}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if err := statestore.WriteCarry(r.stateDir, data); err != nil {
		return fmt.Errorf("restore: saving the window floors beside the store: %w", err)
	}
	return nil
}

// loadCarry reads the carry file when its checkpoint line matches; a
// missing, unreadable or other checkpoint's file is nil. Marks of
// operators that carry none (any more) are left out.
func (r *Runtime) loadCarry(matches func(string) bool) (*markCarry, error) {
	if r.stateDir == "" {
		return nil, nil
	}
	data, err := os.ReadFile(filepath.Join(r.stateDir, statestore.CarryFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("restore: reading %s: %w", statestore.CarryFileName, err)
	}
	var f carryFile
	if json.Unmarshal(data, &f) != nil || !matches(f.Checkpoint) {
		r.log.Warn("restore: ignoring a carry file of another checkpoint, or unreadable", "file", filepath.Join(r.stateDir, statestore.CarryFileName))
		return nil, nil
	}
	id, run, _ := strings.Cut(f.Checkpoint, " ")
	c := &markCarry{id: id, run: run}
	ns := stateJob(r.g.Spec)
	for _, fl := range f.Marks {
		carrier := r.carrier(fl.Operator)
		if carrier == nil {
			continue
		}
		c.marks = append(c.marks, statestore.Mutation{Key: carrier.MarkKey(ns, fl.Operator, fl.KeyGroup), Value: carrier.EncodeMark(fl.Mark)})
	}
	return c, nil
}

// dropCarry removes the carry file after a restore kept its marks (or
// found none to keep).
func (r *Runtime) dropCarry() {
	if r.stateDir == "" {
		return
	}
	if err := os.Remove(filepath.Join(r.stateDir, statestore.CarryFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log.Warn("restore: could not remove the carry file", "error", err)
	}
}

// keepMarks writes back each carried mark that is ahead of the restored
// one.
func (r *Runtime) keepMarks(st statestore.Backend, c *markCarry) error {
	now := r.opts.Clock.Now().UnixMilli()
	var keep []statestore.Mutation
	for _, f := range c.marks {
		local, ok := r.decodeMark(f.Key, f.Value)
		if !ok {
			continue
		}
		v, _, found, err := st.Get(f.Key, now)
		if err != nil {
			return fmt.Errorf("restore: reading the restored window floor of %s: %w", f.Key.Operator, err)
		}
		if restored, ok := r.decodeMark(f.Key, v); found && ok && restored >= local {
			continue
		}
		keep = append(keep, f)
		r.log.Info("restore: keeping the window floor the local store acknowledged after the checkpoint", "operator", f.Key.Operator, "key_group", f.Key.KeyGroup, "floor_ms", local, "checkpoint", c.id)
	}
	if len(keep) == 0 {
		return nil
	}
	if err := st.Apply(keep); err != nil {
		return fmt.Errorf("restore: keeping the window floors: %w", err)
	}
	return nil
}

// noteCut records in the local store that checkpoint id was cut from its
// state (see carriedMarks); restored says the store was just filled from
// that checkpoint, which starts the list again. A failed write only costs
// a later restore the floors it could have kept.
func (r *Runtime) noteCut(st statestore.Backend, id, run string, restored bool) {
	k := lineageKey(stateJob(r.g.Spec))
	ids := []string{id + " " + run}
	if !restored {
		v, _, ok, err := st.Get(k, r.opts.Clock.Now().UnixMilli())
		if err == nil && ok && len(v) > 0 {
			ids = append(strings.Split(string(v), "\n"), ids[0])
		}
		if len(ids) > lineageLen {
			ids = ids[len(ids)-lineageLen:]
		}
	}
	if err := st.Apply([]statestore.Mutation{{Key: k, Value: []byte(strings.Join(ids, "\n"))}}); err != nil {
		r.log.Warn("could not note the checkpoint in the state store; a restore from it will fire again the windows acknowledged after it", "id", id, "error", err)
	}
}

// cutAttempt splits an attempt id "task:node:run".
func cutAttempt(a string) (task, node, run string) {
	i := strings.LastIndexByte(a, ':')
	if i < 0 {
		return a, "", ""
	}
	task, run = a[:i], a[i+1:]
	if j := strings.LastIndexByte(task, ':'); j >= 0 {
		task, node = task[:j], task[j+1:]
	}
	return task, node, run
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

// splitTask splits "op-3" into ("op", 3).
func splitTask(id string) (string, int, bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return id[:i], n, true
}

// checkpointWatermark is ops.Task.CheckpointWatermark: the lowest
// watermark the last completed (or restored) checkpoint recorded for any
// task, a bound below every watermark a restore from it or a later one
// starts a task at.
func (r *Runtime) checkpointWatermark(string) (int64, bool) {
	r.ckpt.mu.Lock()
	defer r.ckpt.mu.Unlock()
	low, ok := int64(0), false
	for _, wm := range r.ckpt.watermarks {
		if !ok || wm < low {
			low, ok = wm, true
		}
	}
	return low, ok
}

// ckptState is the runtime's checkpoint bookkeeping.
type ckptState struct {
	// watermarks are those the last completed checkpoint recorded, by
	// task (see ops.Task.CheckpointWatermark).
	watermarks map[string]int64

	mu      sync.Mutex
	status  CheckpointStatus
	catalog *ckptstore.Catalog
	round   sync.Mutex // one round at a time
}

// CheckpointStatus returns the checkpoint health and recovery progress.
func (r *Runtime) CheckpointStatus() CheckpointStatus {
	r.ckpt.mu.Lock()
	defer r.ckpt.mu.Unlock()
	return r.ckpt.status
}

// Checkpoint takes a checkpoint now and returns its id.
func (r *Runtime) Checkpoint(ctx context.Context) (string, error) {
	m, err := r.takeCheckpoint(ctx, ckptstore.KindCheckpoint, "")
	if err != nil {
		return "", err
	}
	return m.CheckpointID, nil
}

// Savepoint takes a named savepoint: a checkpoint that retention never
// deletes, to upgrade or roll back from (R-CKPT-7).
func (r *Runtime) Savepoint(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("a savepoint needs a name")
	}
	if err := ckptstore.ValidKey(name); err != nil || strings.Contains(name, "/") {
		return fmt.Errorf("savepoint name %q: use letters, digits, '-', '_' and '.'", name)
	}
	_, err := r.takeCheckpoint(ctx, ckptstore.KindSavepoint, name)
	return err
}

// takeCheckpoint runs one round: the cut (synchronous, sources paused),
// then the snapshots stream from the frozen state to the store while the
// pipeline runs, then the manifest commits. A failed round leaves the
// previous checkpoint in place and marks the health degraded.
func (r *Runtime) takeCheckpoint(ctx context.Context, kind ckptstore.Kind, name string) (m *ckptstore.Manifest, err error) {
	r.ckpt.mu.Lock()
	cat := r.ckpt.catalog
	r.ckpt.mu.Unlock()
	if cat == nil {
		if r.g.Spec.Checkpoint == nil {
			return nil, ErrNoCheckpoints
		}
		return nil, errNoCut
	}
	r.ckpt.round.Lock()
	defer r.ckpt.round.Unlock()
	start := time.Now()
	var pause time.Duration
	var bytes int64
	defer func() {
		r.ckpt.mu.Lock()
		defer r.ckpt.mu.Unlock()
		s := &r.ckpt.status
		if err != nil {
			if errors.Is(err, errNoCut) {
				return
			}
			s.Healthy = false
			s.Failures++
			s.LastError = err.Error()
			r.log.Warn("checkpoint failed; the previous one stays in use", "kind", kind, "error", err)
			return
		}
		s.Healthy = true
		s.LastError = ""
		s.Completed++
		s.LastID, s.LastDuration, s.LastPause, s.LastBytes = m.CheckpointID, time.Since(start), pause, bytes
		r.log.Info("checkpoint completed", "kind", kind, "id", m.CheckpointID, "duration", s.LastDuration, "pause", pause, "bytes", bytes)
	}()
	id := name
	if kind == ckptstore.KindCheckpoint {
		next, err := cat.NextID(ctx)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		id = next.String()
	}
	c, err := r.cut(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Frozen.Close()
	if kind == ckptstore.KindCheckpoint {
		// Before the commit: a kill between the two must not cost the
		// restore of this checkpoint its floors.
		r.mu.Lock()
		st := r.store
		r.mu.Unlock()
		r.noteCut(st, id, r.run, false)
	}
	pause = c.Pause

	spec, plan := r.g.Spec, r.g.Plan
	ns := stateJob(spec)
	now := r.opts.Clock.Now().UnixMilli()
	type result struct {
		snap ckptstore.StateSnapshot
		err  error
	}
	var tasks []job.Task
	for _, t := range plan.Tasks {
		if op, _ := spec.Operator(t.OperatorID); op != nil && r.statefulOp(op) {
			tasks = append(tasks, t)
		}
	}
	results := make([]result, len(tasks))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, t := range tasks {
		wg.Add(1)
		go func(i int, t job.Task) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pr, pw := io.Pipe()
			produced := make(chan statestore.SnapshotInfo, 1)
			go func() {
				info, err := c.Frozen.Snapshot(pw, statestore.Scope{Job: ns, Operator: t.OperatorID, Groups: job.RangeFor(spec.MaxParallelism, t.Parallelism, t.Subtask)}, now)
				produced <- info
				pw.CloseWithError(err)
			}()
			// The snapshot hashes the object as it writes it; the
			// catalog records that hash instead of hashing it again.
			snap, err := cat.PutStateSum(ctx, kind, id, t.ID, pr, func() (string, int64, error) {
				info := <-produced
				return info.ObjectCRC64, info.Bytes, nil
			})
			pr.CloseWithError(errors.New("upload ended"))
			results[i] = result{snap, err}
		}(i, t)
	}
	wg.Wait()
	m = &ckptstore.Manifest{
		CheckpointID: id, JobID: spec.ID, JobVersion: spec.Version,
		FormatVersion: r.formatVersion(), Kind: kind, Name: name,
		CreatedMS: time.Now().UnixMilli(), PlannedTasks: r.plannedTasks(), PlanDigest: plan.Digest,
		MaxParallelism: spec.MaxParallelism, WatermarksMS: c.Watermarks,
	}
	for _, t := range m.PlannedTasks {
		m.TaskAttempts = append(m.TaskAttempts, ckptstore.TaskAttempt{TaskID: t, AttemptID: t + ":" + r.nodeID() + ":" + r.run, NodeID: r.nodeID()})
	}
	for _, res := range results {
		if res.err != nil {
			return nil, fmt.Errorf("%s %s: uploading state: %w", kind, id, res.err)
		}
		m.StateSnapshots = append(m.StateSnapshots, res.snap)
		bytes += res.snap.Bytes
	}
	var srcTasks []string
	for t := range c.Positions {
		srcTasks = append(srcTasks, t)
	}
	sort.Strings(srcTasks)
	for _, t := range srcTasks {
		for _, p := range c.Positions[t] {
			m.SourcePositions = append(m.SourcePositions, ckptstore.SourcePosition{TaskID: t, Topic: p.Topic, Partition: p.Partition, Offset: p.Offset})
		}
	}
	if err := cat.Commit(ctx, m); err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, id, err)
	}
	r.ckpt.mu.Lock()
	r.ckpt.watermarks = m.WatermarksMS
	r.ckpt.mu.Unlock()
	if kind == r.restartKind() {
		r.checkpointCompleted(c.Positions)
	}
	return m, nil
}

// restartKind is the kind of artifact a restart restores: savepoints with
// recovery latest_savepoint, else checkpoints.
func (r *Runtime) restartKind() ckptstore.Kind {
	if r.g.Spec.Recovery == job.RecoverLatestSavepoint {
		return ckptstore.KindSavepoint
	}
	return ckptstore.KindCheckpoint
}

// checkpointCompleted tells every source behind a WAL that an artifact a
// restart would restore is committed, with the positions its cut recorded
// for the source's task: a WAL that holds its entries for checkpoints (a
// source that cannot read its input again, connectors.Unrewindable) lets
// go of the entries the artifact holds (R-WAL-3, issue 17).
func (r *Runtime) checkpointCompleted(positions map[string][]connectors.Position) {
	r.mu.Lock()
	sources := r.sources
	r.mu.Unlock()
	for _, s := range sources {
		if s.wal != nil {
			s.wal.CheckpointCompleted(positions[s.task])
		}
	}
}

func (r *Runtime) nodeID() string {
	if r.opts.NodeID != "" {
		return r.opts.NodeID
	}
	return "local"
}

// checkpointLoop takes periodic checkpoints until ctx ends.
func (r *Runtime) checkpointLoop(ctx context.Context) {
	cp := r.g.Spec.Checkpoint
	every := time.Duration(cp.IntervalMS) * time.Millisecond
	if every <= 0 {
		every = time.Duration(job.DefaultCheckpointIntervalMS) * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := r.takeCheckpoint(ctx, ckptstore.KindCheckpoint, ""); err != nil && ctx.Err() != nil {
				return
			}
		}
	}
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
				if wm, ok := out[job.TaskID(op, sub)]; ok && (!found || wm < low) {
					low, found = wm, true
				}
			}
			if found {
				out[job.TaskID(c.Head, sub)] = low
			}
		}
	}
	return out
}
