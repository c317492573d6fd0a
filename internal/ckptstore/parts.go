package ckptstore

// This file holds the fleet side of the catalog: a job whose placement units
// run on several nodes cuts one checkpoint in parts, and commits it only with
// the complete set of planned tasks. Each node uploads the state objects of
// its own tasks under the artifact's directory, as a single process would,
// and writes a sealed part manifest listing only its tasks at
//
//	{job}/{checkpoints|savepoints}/{id or name}/manifests/{node}.json
//
// (the node id with '/' replaced by '_'). A part is an ordinary Manifest
// (DecodeManifest reads it, so the one decoder stays fuzzed) whose
// PlannedTasks are the node's tasks. CommitParts then merges the parts of
// the nodes the Hub names into one manifest whose PlannedTasks are the
// whole plan's, so Commit's CheckTasks refuses a checkpoint with a unit
// missing, and commits it (LATEST moves for a checkpoint). Parts are not
// artifacts: Select never reads them, and retention deletes them with
// their directory.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// ParseHubID parses a checkpoint id the Hub chose: 1 to 20 decimal
// digits (ParseID's 20-digit form, or the same number without its
// leading zeros, e.g. "1733011200000"), not 0.
func ParseHubID(s string) (ID, error) {
	if len(s) == 20 {
		return ParseID(s)
	}
	if s == "" || len(s) > 20 {
		return 0, fmt.Errorf("checkpoint: id %q is not 1-20 decimal digits", s)
	}
	return parseDigits(s, "1-20 decimal digits")
}

// PartName is the file name of a node's part manifest: the node id with
// '/' replaced by '_', and ".json".
func PartName(node string) string { return strings.ReplaceAll(node, "/", "_") + ".json" }

// PartKey returns the key of node's part manifest of an artifact:
// Dir(kind, id)+"manifests/"+PartName(node).
func (c *Catalog) PartKey(kind Kind, id, node string) string {
	return c.Dir(kind, id) + "manifests/" + PartName(node)
}

// PutPart seals m, a node's part of the artifact m names (its
// PlannedTasks are the node's tasks), checks it as Commit checks a
// manifest (well-formed fields, CheckTasks over the node's tasks, state
// objects where StateKey puts them), and writes it to PartKey. A part
// may be written again (a retried round); an artifact that already has
// its manifest refuses new parts (ErrExists). It returns the part's key.
func (c *Catalog) PutPart(ctx context.Context, m *Manifest, node string) (string, error) {
	if node == "" {
		return "", errors.New("checkpoint: a part manifest needs a node id")
	}
	if m.JobID == "" {
		m.JobID = c.job
	}
	if m.JobID != c.job {
		return "", fmt.Errorf("checkpoint: part: manifest job_id %q is not this catalog's job %q", m.JobID, c.job)
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
		return "", fmt.Errorf("checkpoint: part of %s %q: %w", m.Kind, m.CheckpointID, err)
	}
	if err := m.CheckTasks(); err != nil {
		return "", fmt.Errorf("checkpoint: part of %s %q: %w", m.Kind, m.CheckpointID, err)
	}
	dirID := m.dirID()
	if err := c.checkStateKeys(m, dirID); err != nil {
		return "", fmt.Errorf("checkpoint: part: %w", err)
	}
	if err := c.checkOpen(ctx, m.Kind, dirID); err != nil {
		return "", err
	}
	if err := m.Seal(); err != nil {
		return "", err
	}
	body, err := m.Encode()
	if err != nil {
		return "", err
	}
	key := c.PartKey(m.Kind, dirID, node)
	if err := ValidKey(key); err != nil {
		return "", fmt.Errorf("checkpoint: part of node %q: %w", node, err)
	}
	if err := c.store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return "", fmt.Errorf("checkpoint: writing the part of node %q of %s %s: %w", node, m.Kind, dirID, err)
	}
	return key, nil
}

// readDoc reads and decodes the manifest document at key: ErrNotFound
// (wrapped) when it is absent, a *CorruptError when it does not decode,
// or does not belong to kind and id of this catalog's job.
func (c *Catalog) readDoc(ctx context.Context, key string, kind Kind, id string) (*Manifest, error) {
	rc, err := c.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: reading %s: %w", key, err)
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: reading %s: %w", key, err)
	}
	if len(b) > maxManifestBytes {
		return nil, &CorruptError{Key: key, Reason: fmt.Sprintf("larger than %d bytes", maxManifestBytes)}
	}
	m, err := DecodeManifest(b)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) && ce.Key == "" {
			ce.Key = key
		}
		return nil, err
	}
	switch {
	case m.JobID != c.job:
		return nil, &CorruptError{Key: key, Reason: fmt.Sprintf("the manifest belongs to job %q", m.JobID)}
	case m.Kind != kind:
		return nil, &CorruptError{Key: key, Reason: fmt.Sprintf("the manifest is a %s, found among %ss", m.Kind, kind)}
	case m.dirID() != id:
		return nil, &CorruptError{Key: key, Reason: fmt.Sprintf("the manifest is for %s %q", kind, m.dirID())}
	}
	return m, nil
}

// ReadManifest reads and verifies the committed manifest of an artifact
// (a checkpoint id or a savepoint name): ErrNotFound (wrapped) when it has
// none, a *CorruptError when it does not decode or is not that artifact's.
// For a checkpoint it does not say whether LATEST names it or an older
// one (see Latest).
func (c *Catalog) ReadManifest(ctx context.Context, kind Kind, id string) (*Manifest, error) {
	if err := checkRef(kind, id); err != nil {
		return nil, err
	}
	return c.readDoc(ctx, c.ManifestKey(kind, id), kind, id)
}

// ReadPart reads and verifies node's part manifest of an artifact.
func (c *Catalog) ReadPart(ctx context.Context, kind Kind, id, node string) (*Manifest, error) {
	if err := checkRef(kind, id); err != nil {
		return nil, err
	}
	return c.readDoc(ctx, c.PartKey(kind, id, node), kind, id)
}

// Latest returns the id LATEST names: 0 when there is none yet, and an
// error when the store fails or LATEST is unreadable.
func (c *Catalog) Latest(ctx context.Context) (ID, error) {
	id, corrupt, err := c.readLatest(ctx)
	if err != nil {
		return 0, err
	}
	if corrupt != nil {
		return 0, corrupt
	}
	return id, nil
}

// Parts names the part manifests CommitParts merges.
type Parts struct {
	Kind Kind
	// ID is the checkpoint id (ID.String()) or the savepoint's name.
	ID string
	// Nodes are the nodes whose parts make the artifact.
	Nodes []string
	// PlannedTasks is the whole plan's task set: the merged manifest must
	// name exactly these tasks.
	PlannedTasks []string
	// PlanDigest, if set, is the plan every part must have been cut with.
	PlanDigest string
}

// CommitParts merges the part manifests of p.Nodes into one manifest and
// commits it with Commit (which moves LATEST for a checkpoint). The parts
// must share job_id, job_version, generation, format_version,
// plan_digest, max_parallelism, kind and id; no task may appear in two
// parts (ErrDuplicateTask); the merged task set must be exactly
// p.PlannedTasks, so a unit whose part is missing leaves the artifact
// uncommitted (ErrMissingTask) and LATEST where it was. A missing or
// corrupt part fails the commit the same way.
//
// A commit that is delivered again after it succeeded finds the
// artifact's manifest with the same task attempts and returns it.
func CommitParts(ctx context.Context, c *Catalog, p Parts) (*Manifest, error) {
	if len(p.Nodes) == 0 {
		return nil, fmt.Errorf("checkpoint: commit %s %s: no part manifests named", p.Kind, p.ID)
	}
	if err := checkRef(p.Kind, p.ID); err != nil {
		return nil, err
	}
	nodes, parts, err := readParts(ctx, c, p)
	if err != nil {
		return nil, err
	}
	if err := partsAgree(p, nodes, parts); err != nil {
		return nil, fmt.Errorf("checkpoint: commit %s %s: the parts do not make one artifact: %w", p.Kind, p.ID, err)
	}
	merged, err := mergeParts(p, nodes, parts)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: commit %s %s: refusing parts that overlap: %w", p.Kind, p.ID, err)
	}
	// A redelivered commit: the artifact is there with these attempts.
	if have, err := c.ReadManifest(ctx, p.Kind, p.ID); err == nil {
		if slices.Equal(have.TaskAttempts, merged.TaskAttempts) && slices.Equal(have.PlannedTasks, merged.PlannedTasks) {
			return have, nil
		}
		return nil, fmt.Errorf("checkpoint: commit %s %s: it already has a manifest, of other task attempts: %w", p.Kind, p.ID, ErrExists)
	} else if !errors.Is(err, ErrNotFound) {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return nil, fmt.Errorf("checkpoint: commit %s %s: %w", p.Kind, p.ID, err)
		}
	}
	if err := c.Commit(ctx, merged); err != nil {
		return nil, err
	}
	return merged, nil
}

// readParts reads the part manifest of each of p's nodes, in node order,
// and checks its task set; a node named twice is refused.
func readParts(ctx context.Context, c *Catalog, p Parts) (nodes []string, parts []*Manifest, err error) {
	nodes = slices.Clone(p.Nodes)
	slices.Sort(nodes)
	for i, n := range nodes {
		if i > 0 && nodes[i-1] == n {
			return nil, nil, fmt.Errorf("checkpoint: commit %s %s: node %q is named twice", p.Kind, p.ID, n)
		}
		m, err := c.ReadPart(ctx, p.Kind, p.ID, n)
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: commit %s %s: the part of node %q: %w", p.Kind, p.ID, n, err)
		}
		if err := m.CheckTasks(); err != nil {
			return nil, nil, fmt.Errorf("checkpoint: commit %s %s: the part of node %q: %w", p.Kind, p.ID, n, err)
		}
		parts = append(parts, m)
	}
	return nodes, parts, nil
}

// partsAgree checks that every part shares the first's job_id,
// job_version, generation, format_version, plan_digest, max_parallelism
// and id, and that they were cut with p's plan when it names one. It
// reports every difference at once.
func partsAgree(p Parts, nodes []string, parts []*Manifest) error {
	first := parts[0]
	var errs []error
	for i, m := range parts[1:] {
		var diff []string
		if m.JobID != first.JobID {
			diff = append(diff, fmt.Sprintf("job_id %q vs %q", m.JobID, first.JobID))
		}
		if m.JobVersion != first.JobVersion {
			diff = append(diff, fmt.Sprintf("job_version %d vs %d", m.JobVersion, first.JobVersion))
		}
		if m.Generation != first.Generation {
			diff = append(diff, fmt.Sprintf("generation %d vs %d", m.Generation, first.Generation))
		}
		if m.FormatVersion != first.FormatVersion {
			diff = append(diff, fmt.Sprintf("format_version %d vs %d", m.FormatVersion, first.FormatVersion))
		}
		if m.PlanDigest != first.PlanDigest {
			diff = append(diff, fmt.Sprintf("plan_digest %q vs %q", m.PlanDigest, first.PlanDigest))
		}
		if m.MaxParallelism != first.MaxParallelism {
			diff = append(diff, fmt.Sprintf("max_parallelism %d vs %d", m.MaxParallelism, first.MaxParallelism))
		}
		if m.CheckpointID != first.CheckpointID || m.Name != first.Name {
			diff = append(diff, fmt.Sprintf("id %q/%q vs %q/%q", m.CheckpointID, m.Name, first.CheckpointID, first.Name))
		}
		if len(diff) > 0 {
			errs = append(errs, fmt.Errorf("the part of node %q differs from that of node %q: %s", nodes[i+1], nodes[0], strings.Join(diff, ", ")))
		}
	}
	if p.PlanDigest != "" && first.PlanDigest != p.PlanDigest {
		errs = append(errs, fmt.Errorf("the parts were cut with plan %q, this job's plan is %q", first.PlanDigest, p.PlanDigest))
	}
	return errors.Join(errs...)
}

// mergeParts merges the agreeing parts into one manifest of p's planned
// tasks: their attempts, positions, snapshots and watermarks, sorted by
// task, and the first in-flight barrier. A task in two parts is an
// ErrDuplicateTask, all of them reported at once.
func mergeParts(p Parts, nodes []string, parts []*Manifest) (*Manifest, error) {
	first := parts[0]
	merged := &Manifest{CheckpointID: first.CheckpointID, JobID: first.JobID, JobVersion: first.JobVersion,
		Generation: first.Generation, FormatVersion: first.FormatVersion, Kind: first.Kind, Name: first.Name,
		PlannedTasks: slices.Sorted(slices.Values(p.PlannedTasks)), PlanDigest: first.PlanDigest,
		MaxParallelism: first.MaxParallelism, WatermarksMS: map[string]int64{}}
	owner := map[string]string{} // task → node whose part has it
	var dups []error
	for i, m := range parts {
		for _, t := range m.PlannedTasks {
			if prev, ok := owner[t]; ok {
				dups = append(dups, &TaskSetError{CheckpointID: p.ID, Field: "task_attempts", TaskID: t, Err: ErrDuplicateTask,
					Detail: fmt.Sprintf("in the parts of nodes %q and %q", prev, nodes[i])})
				continue
			}
			owner[t] = nodes[i]
		}
		merged.TaskAttempts = append(merged.TaskAttempts, m.TaskAttempts...)
		merged.SourcePositions = append(merged.SourcePositions, m.SourcePositions...)
		merged.StateSnapshots = append(merged.StateSnapshots, m.StateSnapshots...)
		for t, wm := range m.WatermarksMS {
			merged.WatermarksMS[t] = wm
		}
		if m.InFlightBarrier != nil && merged.InFlightBarrier == nil {
			b := *m.InFlightBarrier
			merged.InFlightBarrier = &b
		}
	}
	if err := errors.Join(dups...); err != nil {
		return nil, err
	}
	sort.Slice(merged.TaskAttempts, func(i, j int) bool { return merged.TaskAttempts[i].TaskID < merged.TaskAttempts[j].TaskID })
	sort.Slice(merged.StateSnapshots, func(i, j int) bool { return merged.StateSnapshots[i].TaskID < merged.StateSnapshots[j].TaskID })
	sort.SliceStable(merged.SourcePositions, func(i, j int) bool { return merged.SourcePositions[i].TaskID < merged.SourcePositions[j].TaskID })
	return merged, nil
}
