package runtime

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// A rescale runs a job whose state was written at one
// parallelism at another, with the same max_parallelism. Keyed state is
// stored by key group, so every key group is restored as it is and read
// by the subtask that owns it now. What is stored per subtask — under its
// first key group — is redistributed by the restore: the positions a
// stateful operator has applied (statestore.Relayout) and the marks operators
// carry, such as the window floors (relayoutMarks). Sources get every
// position of their operator and keep the partitions they read
// (connectors: partition p belongs to subtask p % P), and write-ahead
// logs are redistributed by partition (internal/durable).
//
// Only a restore from a checkpoint or a savepoint rescales: it starts
// from a consistent cut. A restart from the local store alone at another
// parallelism is refused (checkLayout), as is any start with another
// max_parallelism.

// layout is how a state store's keyed state is laid out: the key groups
// and the parallelism of every stateful operator.
type layout struct {
	MaxParallelism int            `json:"max_parallelism"`
	Parallelism    map[string]int `json:"parallelism"`
}

// planLayout is the layout of the running plan.
func (r *Runtime) planLayout() layout {
	l := layout{MaxParallelism: r.g.Spec.MaxParallelism, Parallelism: map[string]int{}}
	for _, op := range r.g.Spec.Operators {
		if r.statefulOp(&op) {
			l.Parallelism[op.ID] = planner.OperatorParallelism(r.g.Spec, &op)
		}
	}
	return l
}

// manifestLayout is the layout of the state m holds: the parallelism of
// each of the plan's stateful operators when it was cut (operators the
// checkpoint does not have are left out).
func (r *Runtime) manifestLayout(m *ckptstore.Manifest) layout {
	l := layout{MaxParallelism: m.MaxParallelism, Parallelism: map[string]int{}}
	if l.MaxParallelism == 0 {
		l.MaxParallelism = r.g.Spec.MaxParallelism // not recorded: Select took it as equal
	}
	for _, t := range m.PlannedTasks {
		if op, _, ok := splitTask(t); ok {
			if o, _ := r.g.Spec.Operator(op); o != nil && r.statefulOp(o) {
				l.Parallelism[op]++
			}
		}
	}
	return l
}

// rescaled returns the stateful operators whose parallelism differs
// between from and to (and that both have), sorted.
// coPartitionedRescaled names the operators keyed by co-partitioning
// (job.Source.KeyedBy) whose parallelism differs between from and to: their
// keys are kept in their subtask's own key groups, so no relayout can
// move them to another parallelism.
func (r *Runtime) coPartitionedRescaled(from, to layout) []string {
	spec := r.g.Spec
	cp := build.CoPartitioned(spec)
	var out []string
	for _, op := range rescaled(from, to) {
		if o, _ := spec.Operator(op); o != nil && build.CoPartitionedKeyed(spec, o, cp) {
			out = append(out, fmt.Sprintf("%s from %d to %d", op, from.Parallelism[op], to.Parallelism[op]))
		}
	}
	return out
}

func rescaled(from, to layout) []string {
	var ops []string
	for op, p := range to.Parallelism {
		if old, ok := from.Parallelism[op]; ok && old != p {
			ops = append(ops, op)
		}
	}
	slices.Sort(ops)
	return ops
}

// checkLayout refuses a start without a restore whose plan lays keyed
// state out differently from the Badger store it would open: the store
// holds per-subtask entries of another parallelism, or keys hashed into
// another number of key groups. It reads the store's layout file
// (statestore.LayoutFileName) before the store opens, so a refusal leaves the
// directory as it was. A store without one is taken as the plan's; a
// memory store starts empty every run.
func (r *Runtime) checkLayout() error {
	if s := r.g.Spec.State; s == nil || s.Backend == job.BackendMemory {
		return nil
	}
	dir, err := r.stateDirPath()
	if err != nil {
		return nil // opening the store reports it
	}
	b, err := statestore.ReadLayout(dir)
	if err != nil || b == nil {
		return err
	}
	var have layout
	if err := json.Unmarshal(b, &have); err != nil {
		return fmt.Errorf("opening state: %s is unreadable: %w", filepath.Join(dir, statestore.LayoutFileName), err)
	}
	want := r.planLayout()
	if have.MaxParallelism != 0 && have.MaxParallelism != want.MaxParallelism {
		return fmt.Errorf("max_parallelism: the state store in %s was written with max_parallelism %d, and this job has max_parallelism %d: "+
			"its keyed state is split into %d key groups, which cannot be redistributed into %d (set max_parallelism back to %d)",
			dir, have.MaxParallelism, want.MaxParallelism, have.MaxParallelism, want.MaxParallelism, have.MaxParallelism)
	}
	if ops := rescaled(have, want); len(ops) > 0 {
		var ds []string
		for _, op := range ops {
			ds = append(ds, fmt.Sprintf("%s from %d to %d", op, have.Parallelism[op], want.Parallelism[op]))
		}
		hint := "take a savepoint at the old parallelism (arkflow savepoint, Job.Savepoint) and start from it (--from-savepoint, arkflow.WithSavepoint)"
		if r.g.Spec.Checkpoint == nil {
			hint = "give the job a checkpoint block, run it at the old parallelism, take a savepoint and start from it"
		}
		return fmt.Errorf("parallelism: this start changes the parallelism of %s, and the state store in %s was written at the old one with no checkpoint or savepoint restored: "+
			"only a restore redistributes keyed state to another parallelism; %s, or start with the old parallelism",
			strings.Join(ds, ", "), dir, hint)
	}
	return nil
}

// saveLayout records the plan's layout beside a Badger store (nothing for
// a memory store), if it is not recorded already.
func (r *Runtime) saveLayout() error {
	if r.stateDir == "" {
		return nil
	}
	v, err := json.Marshal(r.planLayout())
	if err != nil {
		return err
	}
	if cur, err := statestore.ReadLayout(r.stateDir); err == nil && string(cur) == string(v) {
		return nil
	}
	if err := statestore.WriteLayout(r.stateDir, v); err != nil {
		return fmt.Errorf("recording the state's layout: %w", err)
	}
	return nil
}

// relayout redistributes what the restored state of m stores per subtask
// to the plan's parallelism, for every stateful operator whose
// parallelism changed.
func (r *Runtime) relayout(st statestore.Backend, m *ckptstore.Manifest) error {
	from, to := r.manifestLayout(m), r.planLayout()
	ns := stateJob(r.g.Spec)
	for _, op := range rescaled(from, to) {
		oldPar, newPar := from.Parallelism[op], to.Parallelism[op]
		r.log.Info("restore: rescaling operator state", "operator", op, "from", oldPar, "to", newPar, "key_groups", to.MaxParallelism)
		if err := statestore.Relayout(st, ns, op, to.MaxParallelism, oldPar, newPar); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		if c := r.carrier(op); c != nil {
			if err := r.relayoutMarks(st, c, op, to.MaxParallelism, oldPar, newPar); err != nil {
				return err
			}
		}
	}
	return nil
}

// relayoutMarks moves the marks of op (ops.Carrier: one per subtask,
// under its first key group; a window's floors) to the subtasks of
// newPar: each gets the lowest mark of the old subtasks whose key groups
// it takes. A restore starts a window operator at the checkpoint's
// watermark, which is at or above every floor the checkpoint holds, so the
// floors decide nothing until the operator has fired again; the lowest
// cannot make a row late that was not.
func (r *Runtime) relayoutMarks(st statestore.Backend, c ops.Carrier, op string, maxPar, oldPar, newPar int) error {
	ns := stateJob(r.g.Spec)
	now := r.opts.Clock.Now().UnixMilli()
	floorNS := c.MarkKey(ns, op, 0).Namespace
	old := map[int]int64{} // old subtask → floor
	var muts []statestore.Mutation
	all := statestore.Scope{Job: ns, Operator: op, Groups: job.KeyGroupRange{Start: 0, End: maxPar - 1}}
	err := statestore.ScanNamespace(st, all, floorNS, nil, now, func(e statestore.Entry) error {
		k := e.Key
		k.User = append([]byte(nil), k.User...)
		muts = append(muts, statestore.Mutation{Key: k, Delete: true})
		wm, ok := c.DecodeMark(e.Value)
		s := keys.OwnerOf(maxPar, oldPar, e.Key.KeyGroup)
		if ok && keys.RangeFor(maxPar, oldPar, s).Start == e.Key.KeyGroup {
			old[s] = wm
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("restore: reading the window floors of %s: %w", op, err)
	}
	for s := range newPar {
		rg := keys.RangeFor(maxPar, newPar, s)
		low, found := int64(0), false
		for o := keys.OwnerOf(maxPar, oldPar, rg.Start); o <= keys.OwnerOf(maxPar, oldPar, rg.End); o++ {
			wm, ok := old[o]
			if !ok {
				found = false // an old subtask without a floor: none
				break
			}
			if !found || wm < low {
				low, found = wm, true
			}
		}
		if found {
			muts = append(muts, statestore.Mutation{Key: c.MarkKey(ns, op, rg.Start), Value: c.EncodeMark(low)})
		}
	}
	if len(muts) == 0 {
		return nil
	}
	if err := st.Apply(muts); err != nil {
		return fmt.Errorf("restore: moving the window floors of %s: %w", op, err)
	}
	return nil
}
