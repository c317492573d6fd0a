package runtime

// This file holds one checkpoint round, takeCheckpoint: the cut through
// the running graph (barrier.go) freezes the state, each stateful task's
// key-group scope is snapshotted from the frozen view and uploaded to the
// catalog, and the manifest (planned tasks, attempts, positions,
// watermarks) is committed.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/jobdefaults"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

func (r *Runtime) formatVersion() int {
	if s := r.g.Spec.State; s != nil && s.FormatVersion > 0 {
		return s.FormatVersion
	}
	return jobdefaults.StateFormatVersion
}

func (r *Runtime) plannedTasks() []string {
	var ts []string
	for _, t := range r.g.Plan.Tasks {
		ts = append(ts, t.ID)
	}
	sort.Strings(ts)
	return ts
}

// takeCheckpoint runs one round: the cut (synchronous, sources paused),
// then the snapshots stream from the frozen state to the store while the
// pipeline runs, then the manifest commits. A failed round leaves the
// previous checkpoint in place and marks the health degraded.
func (r *Runtime) takeCheckpoint(ctx context.Context, kind ckptstore.Kind, name string) (m *ckptstore.Manifest, err error) {
	if r.local != nil {
		return nil, errPartial
	}
	m, _, err = r.round(ctx, kind, "", name, false)
	return m, err
}

// round runs one round of kind. A part round (part true) cuts
// this process's tasks under the id (or savepoint name) the Hub chose,
// and writes their part manifest instead of committing (see
// CheckpointPart); it returns the part's key. Otherwise id is empty, the
// catalog issues the next id and the manifest commits.
func (r *Runtime) round(ctx context.Context, kind ckptstore.Kind, id, name string, part bool) (m *ckptstore.Manifest, partKey string, err error) {
	r.ckpt.mu.Lock()
	cat := r.ckpt.catalog
	r.ckpt.mu.Unlock()
	if cat == nil {
		if r.g.Spec.Checkpoint == nil {
			return nil, "", ErrNoCheckpoints
		}
		return nil, "", errNoCut
	}
	r.ckpt.round.Lock()
	defer r.ckpt.round.Unlock()
	start := time.Now()
	var pause time.Duration
	var bytes int64
	defer func() { r.noteRound(ctx, kind, id, part, m, start, pause, bytes, err) }()
	if !part {
		id = name
	}
	if kind == ckptstore.KindCheckpoint && !part {
		next, err := cat.NextID(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("checkpoint: %w", err)
		}
		id = next.String()
	}
	c, err := r.cut(ctx)
	if err != nil {
		return nil, "", err
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

	results := r.uploadSnapshots(ctx, cat, c, kind, id, part)
	m, bytes, err = r.roundManifest(c, kind, id, name, part, results)
	if err != nil {
		return nil, "", err
	}
	if part {
		key, err := r.putPart(ctx, cat, m, kind, id)
		if err != nil {
			return nil, "", err
		}
		return m, key, nil
	}
	if err := r.commitRound(ctx, cat, m, c, kind, id); err != nil {
		return nil, "", err
	}
	return m, "", nil
}

// noteRound records how a round ended in the checkpoint status, its
// metrics and the log; it runs deferred, after the frozen view closed. A
// round without a cut (errNoCut) leaves no trace, a cancelled one only an
// INFO line. start is when the round took the round lock; pause and bytes
// are what its cut paused and uploaded.
func (r *Runtime) noteRound(ctx context.Context, kind ckptstore.Kind, id string, part bool, m *ckptstore.Manifest, start time.Time, pause time.Duration, bytes int64, err error) {
	r.ckpt.mu.Lock()
	defer r.ckpt.mu.Unlock()
	s := &r.ckpt.status
	if err != nil {
		if errors.Is(err, errNoCut) {
			return
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			// Cancelled, not failed: the job is ending (its input
			// ended, or it stops) or the caller gave up. The store
			// did nothing wrong, so health and failure counts stay.
			if id != "" {
				r.log.Info("checkpoint abandoned: cancelled before it committed; the previous one stays in use", "kind", kind, "checkpoint", id)
			} else {
				r.log.Info("checkpoint abandoned: cancelled before it committed; the previous one stays in use", "kind", kind)
			}
			return
		}
		s.Healthy = false
		s.Failures++
		s.ConsecutiveFailures++
		s.LastError = err.Error()
		if id != "" {
			r.log.Warn("checkpoint failed; the previous one stays in use", "kind", kind, "checkpoint", id, "error", err)
		} else {
			r.log.Warn("checkpoint failed; the previous one stays in use", "kind", kind, "error", err)
		}
		return
	}
	s.Healthy = true
	s.LastError = ""
	s.Completed++
	s.ConsecutiveFailures = 0
	s.LastID, s.LastDuration, s.LastPause, s.LastBytes = m.CheckpointID, time.Since(start), pause, bytes
	s.LastCompleted = time.Now()
	r.ckpt.duration.ObserveDuration(s.LastDuration)
	r.ckpt.pause.ObserveDuration(pause)
	r.ckpt.size.Observe(bytes)
	what := "checkpoint completed"
	if part {
		what = "checkpoint part written (the Hub commits it)"
	}
	r.log.Info(what, "kind", kind, "checkpoint", m.CheckpointID, "duration", s.LastDuration, "pause", pause, "bytes", bytes)
}

// snapResult is one task's uploaded state snapshot, or why it failed.
type snapResult struct {
	snap ckptstore.StateSnapshot
	err  error
}

// uploadSnapshots snapshots the key-group scope of every local stateful
// task from the cut's frozen view and streams it to the catalog, at most
// four at a time, while the pipeline runs. It returns one result per task
// in plan order, after every upload has ended.
func (r *Runtime) uploadSnapshots(ctx context.Context, cat *ckptstore.Catalog, c *cut, kind ckptstore.Kind, id string, part bool) []snapResult {
	spec, plan := r.g.Spec, r.g.Plan
	ns := stateJob(spec)
	now := r.opts.Clock.Now().UnixMilli()
	var tasks []job.Task
	for _, t := range plan.Tasks {
		if op, _ := spec.Operator(t.OperatorID); op != nil && r.statefulOp(op) && r.isLocal(t.ID) {
			tasks = append(tasks, t)
		}
	}
	results := make([]snapResult, len(tasks))
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
				info, err := c.Frozen.Snapshot(pw, statestore.Scope{Job: ns, Operator: t.OperatorID, Groups: keys.RangeFor(spec.MaxParallelism, t.Parallelism, t.Subtask)}, now)
				produced <- info
				pw.CloseWithError(err)
			}()
			// The snapshot hashes the object as it writes it; the
			// catalog records that hash instead of hashing it again.
			snap, err := cat.PutStateSum(ctx, kind, id, t.ID, pr, func() (string, int64, error) {
				info := <-produced
				return info.ObjectCRC64, info.Bytes, nil
			})
			if part {
				snap.NodeID = r.nodeID()
			}
			pr.CloseWithError(errors.New("upload ended"))
			results[i] = snapResult{snap, err}
		}(i, t)
	}
	wg.Wait()
	return results
}

// roundManifest builds the round's manifest: the planned tasks (this
// process's only, for a part) with their attempts, the uploaded snapshots
// and their total bytes, the cut's watermarks and source positions (in
// task order). The first failed upload fails the round.
func (r *Runtime) roundManifest(c *cut, kind ckptstore.Kind, id, name string, part bool, results []snapResult) (*ckptstore.Manifest, int64, error) {
	spec, plan := r.g.Spec, r.g.Plan
	planned := r.plannedTasks()
	if part {
		planned = r.localTasks()
	}
	m := &ckptstore.Manifest{
		CheckpointID: id, JobID: spec.ID, JobVersion: spec.Version, Generation: r.generation.Load(),
		FormatVersion: r.formatVersion(), Kind: kind, Name: name,
		CreatedMS: time.Now().UnixMilli(), PlannedTasks: planned, PlanDigest: plan.Digest,
		MaxParallelism: spec.MaxParallelism, WatermarksMS: c.Watermarks,
	}
	for _, t := range m.PlannedTasks {
		m.TaskAttempts = append(m.TaskAttempts, ckptstore.TaskAttempt{TaskID: t, AttemptID: t + ":" + r.nodeID() + ":" + r.run, NodeID: r.nodeID()})
	}
	var bytes int64
	for _, res := range results {
		if res.err != nil {
			return nil, bytes, fmt.Errorf("%s %s: uploading state: %w", kind, id, res.err)
		}
		m.StateSnapshots = append(m.StateSnapshots, res.snap)
		bytes += res.snap.Bytes
	}
	var srcTasks []string
	for t := range c.Positions {
		srcTasks = append(srcTasks, t)
	}
	sort.Strings(srcTasks)
	r.notePartitions(c.Positions)
	for _, t := range srcTasks {
		for _, p := range c.Positions[t] {
			m.SourcePositions = append(m.SourcePositions, ckptstore.SourcePosition{TaskID: t, Topic: p.Topic, Partition: p.Partition, Offset: p.Offset})
		}
	}
	return m, bytes, nil
}

// putPart writes a part round's manifest for the Hub to commit and
// returns its key. A part of the kind restarts use is remembered (the
// last maxPendingParts) until the Hub says which one committed.
func (r *Runtime) putPart(ctx context.Context, cat *ckptstore.Catalog, m *ckptstore.Manifest, kind ckptstore.Kind, id string) (string, error) {
	key, err := cat.PutPart(ctx, m, r.nodeID())
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", kind, id, err)
	}
	if kind == r.restartKind() {
		r.ckpt.mu.Lock()
		r.parts = append(r.parts, id)
		if len(r.parts) > maxPendingParts {
			r.parts = r.parts[len(r.parts)-maxPendingParts:]
		}
		r.ckpt.mu.Unlock()
	}
	return key, nil
}

// commitRound commits a whole round's manifest; once it has, the round's
// watermarks are the checkpoint's, and a round of the kind restarts use
// lets the sources commit the cut's positions.
func (r *Runtime) commitRound(ctx context.Context, cat *ckptstore.Catalog, m *ckptstore.Manifest, c *cut, kind ckptstore.Kind, id string) error {
	if err := cat.Commit(ctx, m); err != nil {
		return fmt.Errorf("%s %s: %w", kind, id, err)
	}
	r.ckpt.mu.Lock()
	r.ckpt.watermarks = m.WatermarksMS
	r.ckpt.mu.Unlock()
	if kind == r.restartKind() {
		r.checkpointCompleted(c.Positions)
	}
	return nil
}

func (r *Runtime) nodeID() string {
	if r.opts.NodeID != "" {
		return r.opts.NodeID
	}
	return "local"
}

// notePartitions records the partitions each source task held positions
// for at a cut.
func (r *Runtime) notePartitions(pos map[string][]connectors.Position) {
	parts := make(map[string][]string, len(pos))
	for t, ps := range pos {
		names := make([]string, 0, len(ps))
		for _, p := range ps {
			names = append(names, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
		}
		sort.Strings(names)
		parts[t] = names
	}
	r.ckpt.mu.Lock()
	r.partitions = parts
	r.ckpt.mu.Unlock()
}

// SourcePartitions returns, by source task, the input partitions it held
// positions for at the last checkpoint this run cut ("topic/partition";
// the topic is empty for inputs without topics): which partitions a task
// reads, as the Hub's detail shows them. Nil before the first cut.
func (r *Runtime) SourcePartitions() map[string][]string {
	r.ckpt.mu.Lock()
	defer r.ckpt.mu.Unlock()
	return r.partitions
}
