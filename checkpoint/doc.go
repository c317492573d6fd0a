// Package checkpoint stores checkpoints and savepoints of a job in shared
// object storage — a local directory or an S3-compatible bucket — under
// checksummed manifests, and picks the one to restore (R-CKPT-1, -5..-8).
//
// It is the storage half of checkpointing: a Store (OpenStore), the
// Manifest document, and a Catalog that lays artifacts out, commits them,
// selects one with fallback, and applies retention. Barriers, alignment and
// snapshotting operator state are the runtime's; it calls this package to
// write what a snapshot produced and to find what to restore.
//
// # Usage
//
// Writing a checkpoint (the runtime's coordinator, once every task has
// acknowledged the barrier):
//
//	store, err := checkpoint.OpenStore(ctx, spec.Checkpoint.ObjectStoreURI, checkpoint.StoreOptions{})
//	cat, err := checkpoint.NewCatalog(store, jobID, checkpoint.Options{Retention: spec.Checkpoint.Retention})
//
//	id, err := cat.NextID(ctx)
//	m := &checkpoint.Manifest{
//		CheckpointID: id.String(), Kind: checkpoint.KindCheckpoint,
//		JobVersion: plan.Version, Generation: gen, FormatVersion: formatVersion,
//		PlannedTasks: taskIDs, PlanDigest: plan.Digest,
//	}
//	for _, task := range tasks {
//		pr, pw := io.Pipe()
//		go func() { _, err := backend.Snapshot(pw, task.Scope, now); pw.CloseWithError(err) }()
//		entry, err := cat.PutState(ctx, checkpoint.KindCheckpoint, id.String(), task.ID, pr)
//		// (PutStateSum instead records the checksum the producer computed,
//		// state.SnapshotInfo.ObjectCRC64, rather than hashing again.)
//		m.StateSnapshots = append(m.StateSnapshots, entry)
//		m.TaskAttempts = append(m.TaskAttempts, checkpoint.TaskAttempt{TaskID: task.ID, ...})
//	}
//	m.SourcePositions, m.WatermarksMS = positions, watermarks
//	err = cat.Commit(ctx, m) // nil: committed; else the previous checkpoint stays selected
//
// Restoring:
//
//	m, skipped, err := cat.Select(ctx, checkpoint.Want{
//		Target: checkpoint.LatestCheckpoint, JobVersion: plan.Version,
//		FormatVersion: formatVersion, PlannedTasks: taskIDs,
//	})
//	// err: *IncompatibleError (refuse to start), or a store failure (retry).
//	// m == nil: nothing to restore (skipped says why candidates were unusable).
//	for _, e := range m.StateSnapshots {
//		r, err := cat.OpenState(ctx, e) // verifies size and SHA-256 as it streams
//		_, err = backend.Restore(r, scopeOf(e.TaskID), now)
//		r.Close()
//	}
//
// # Layout
//
// Keys are relative to the store's root (the directory of a file:// URI,
// the prefix of an s3:// URI):
//
//	{job_id}/checkpoints/LATEST                               id of the newest committed checkpoint, "%020d\n"
//	{job_id}/checkpoints/{id}/manifest.json                   the manifest (written once, last)
//	{job_id}/checkpoints/{id}/state/{task_id}.snap            a task's state object (state.Backend.Snapshot's stream)
//	{job_id}/savepoints/{name}/manifest.json
//	{job_id}/savepoints/{name}/state/{task_id}.snap
//
// A checkpoint id is a sequence number rendered as 20 digits (ID.String),
// so that keys sort in id order. NextID returns one more than the highest
// id in the store (any object, or LATEST) or issued by the catalog, so ids
// are never reused, across restarts and retention. Unlike ArkFlow v1,
// which keeps a savepoint's state under checkpoints/ and writes one
// manifest per node before merging them, every artifact here is
// self-contained in its directory (Commit and Select require each state
// entry to be its own task's object there), so deleting one can never
// break another, and there is one manifest, written by the coordinator.
//
// A state entry's uri is the object's key, relative to the store's root,
// not a full URI: a store can be moved or mirrored without rewriting
// manifests. Its checksum is "crc64nvme:" and the hex CRC-64/NVME of the
// object's bytes (the checksum Amazon S3 itself defaults to; PutState and
// the runtime record it), or "sha256:" and their hex SHA-256 (what
// checkpoints recorded before; still verified); bytes is its size.
//
// # Manifest
//
// The manifest is ArkFlow v1's CheckpointManifest, with the same JSON field
// names: checkpoint_id, job_id, job_version, generation, task_attempts
// [{task_id, attempt_id, node_id}], source_positions [{topic, partition,
// offset}], watermarks_ms {task_id: ms}, in_flight_barrier {checkpoint_id,
// generation}, state_snapshots [{task_id, node_id, uri, checksum, bytes}],
// format_version and checksum. Our extensions: a task_id on each source
// position (positions are per source subtask); kind ("checkpoint" or
// "savepoint"), name (the savepoint's), created_ms, planned_tasks (the task
// set of the plan that wrote it, sorted), plan_digest and max_parallelism
// (the number of key groups the state is split into; absent in manifests
// written before it was recorded).
//
// The checksum is ArkFlow's algorithm, extended: FNV-1 64 (start at
// 0xcbf29ce484222325; for each byte, h = h*0x100000001b3 XOR byte) over the
// compact JSON (encoding/json with HTML escaping off; struct fields in
// declaration order, map keys sorted, absent options omitted, absent lists
// and maps as [] and {}) of the array
//
//	[checkpoint_id, job_id, job_version, generation, task_attempts,
//	 source_positions, watermarks_ms, in_flight_barrier, state_snapshots,
//	 format_version, {kind, name, created_ms, planned_tasks, plan_digest,
//	 max_parallelism}]
//
// (max_parallelism left out when 0)
//
// written as 16 lowercase hex digits. ArkFlow's array stops at
// format_version: the 11th element covers our extensions, so our checksums
// and ArkFlow's are not interchangeable. (The first ten elements encode as
// serde_json would, byte for byte, when no source position has a task_id
// and no string holds U+2028 or U+2029, which encoding/json escapes.) Unknown fields are
// accepted when decoding, for forward compatibility, and are not covered.
//
// # Commit
//
// Commit refuses a manifest that does not carry exactly the planned task
// set (R-CKPT-5, Manifest.CheckTasks): a planned task without an entry in
// task_attempts, a task listed twice, or an entry for a task outside the
// plan are each rejected, with an error naming the task; state snapshots,
// watermarks and source positions may name planned tasks only, once. It
// then writes manifest.json with a create-if-absent (a link(2) of a
// temporary file; an S3 PUT with If-None-Match: *), so a manifest is never
// overwritten, and, for a checkpoint, moves LATEST to it. Moving LATEST is
// the commit point: if either write fails, LATEST still names the previous
// checkpoint, which stays selected. Commit also refuses an id not above
// LATEST's (ErrSuperseded). PutState refuses to write into an artifact
// that has a manifest, so committed state objects never change.
//
// # Selection
//
// Select tries candidates newest first: for the latest checkpoint, the one
// LATEST names, then older ones by id (newer ones were never committed);
// for the latest savepoint, by created_ms (the committing process's
// clock), then name. A candidate is skipped, with a reason, if its
// manifest is missing, corrupt or fails its checksum, if its task set is
// incomplete, or if a state object is missing or differs in size or
// checksum from its entry (every state object is streamed through its
// checksum, so Select reads all of the candidate's state once). Select falls back
// to the previous candidate then. A caller that restores the state anyway
// can avoid reading it twice: with Want.DeferStateChecks Select checks
// manifests only; the caller reads each object with OpenStateSized,
// checks its checksum in the same pass (state.RestoreSource.Checksum), and
// if one is missing or corrupt discards what it restored and selects
// again with the artifact in Want.Exclude (the runtime does this).
//
// Compatibility (R-CKPT-6): the state format must be the restoring job's,
// and the job version no newer (an older one is an upgrade; a newer one a
// downgrade); at the same job version, the task set must be the plan's.
// The first candidate with an intact manifest decides: if it is
// incompatible, Select returns an *IncompatibleError and does not fall
// back to an older compatible candidate, which would silently roll the job
// back (R-CKPT-7 makes rollback an explicit operator action: restore a
// named savepoint). This check precedes reading any state. Select never
// writes, and a store failure is an error, never a reason to fall back.
//
// # Retention
//
// After each committed checkpoint, Commit keeps the newest Options.Retention
// (default 3) checkpoints that have a manifest, up to the committed one,
// and deletes the rest at or below it, including ones that never got a
// manifest; checkpoints above it (in flight) are left alone. A checkpoint
// is deleted manifest first, so a half-deleted one is never selectable.
// Savepoints are never deleted automatically: Catalog.Delete removes one.
//
// # Stores
//
// A file:// store writes each object to a temporary file in the target's
// directory, fsyncs it, renames it into place and fsyncs the directory
// (creating and fsyncing missing parents first): after a crash, a key
// holds its old or its new object, never a part. An s3:// store relies on
// S3's atomic PUT and multipart completion; it streams objects of unknown
// size one part (16 MiB by default) at a time. checkpointtest.FaultStore
// wraps a store to fail chosen operations in tests.
//
// A job's catalog must have one writer at a time: the store has no lock.
package checkpoint
