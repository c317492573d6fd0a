package runtime

// This file holds the marks (ops.Carrier, e.g. a window's floor) a restore
// may carry over from the local store: the lineage of checkpoints cut from
// this store's state (noteCut), the marks read before the store is
// emptied, the carry file that keeps them across a kill during the
// restore, and writing back those ahead of the restored ones.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

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
	// Only this process's tasks count: in a job whose units run on
	// several nodes, the other tasks' attempts are other runs'.
	// A line matches when run cut m's attempt of a local task; the marks
	// kept are then those of the local tasks whose attempts run cut
	// (ownTask). A local task whose attempt another run cut (a unit a
	// failover moved here, beside the ones this node kept running) keeps
	// none: whatever mark of it the store holds is not on top of m.
	ownAttempt := func(a ckptstore.TaskAttempt, run string) bool {
		return r.isLocal(a.TaskID) && strings.HasSuffix(a.AttemptID, ":"+run)
	}
	matches := func(line string) bool {
		id, run, _ := strings.Cut(line, " ")
		return id == m.CheckpointID && run != "" &&
			slices.ContainsFunc(m.TaskAttempts, func(a ckptstore.TaskAttempt) bool { return ownAttempt(a, run) })
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
	noted, run := false, ""
	if ok {
		for _, line := range strings.Split(string(v), "\n") {
			if !noted && matches(line) {
				noted = true
				_, run, _ = strings.Cut(line, " ")
			}
		}
	}
	if !noted {
		if saved != nil {
			r.log.Info("restore: keeping the window floors a restore of this checkpoint carried before it was interrupted", "checkpoint", m.CheckpointID, "floors", len(saved.marks))
			return saved, nil
		}
		r.log.Info("restore: the local state store did not run on from this checkpoint; the windows acknowledged after it fire again", "checkpoint", m.CheckpointID)
		return nil, nil
	}
	c := &markCarry{id: m.CheckpointID, run: run}
	if saved != nil && saved.run != "" {
		c.run = saved.run
	}
	for _, t := range r.g.Plan.Tasks {
		carrier := r.carrier(t.OperatorID)
		if carrier == nil || !r.isLocal(t.ID) ||
			!slices.ContainsFunc(m.TaskAttempts, func(a ckptstore.TaskAttempt) bool { return a.TaskID == t.ID && ownAttempt(a, c.run) }) {
			continue
		}
		k := carrier.MarkKey(ns, t.OperatorID, t.Partitions[0].KeyGroup.Start)
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

// localAttempt returns m's first attempt of a task this process runs.
func (r *Runtime) localAttempt(m *ckptstore.Manifest) (ckptstore.TaskAttempt, bool) {
	for _, a := range m.TaskAttempts {
		if r.isLocal(a.TaskID) {
			return a, true
		}
	}
	return ckptstore.TaskAttempt{}, false
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
		r.log.Warn("could not note the checkpoint in the state store; a restore from it will fire again the windows acknowledged after it", "checkpoint", id, "error", err)
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
