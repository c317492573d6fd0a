// Package ckptstore stores checkpoints and savepoints of a job in shared
// object storage — a local directory (file://) or an S3-compatible bucket
// (s3://) — under checksummed manifests, and picks the one to restore.
//
// It is the storage half of checkpointing: a Store (OpenStore), the
// Manifest document, and a Catalog that lays artifacts out, commits them,
// selects one with fallback, and applies retention. Barriers, alignment and
// snapshotting operator state are the runtime's; it calls this package to
// write what a snapshot produced and to find what to restore.
//
// # Usage
//
//	store, err := ckptstore.OpenStore(ctx, "file:///var/lib/arkflow/ckpt", ckptstore.StoreOptions{})
//	cat, err := ckptstore.NewCatalog(store, jobID, ckptstore.Options{Retention: 3})
//
//	// Writing: one state object per stateful task, then the manifest.
//	id, err := cat.NextID(ctx)
//	entry, err := cat.PutState(ctx, ckptstore.KindCheckpoint, id.String(), taskID, snapshot)
//	m := &ckptstore.Manifest{CheckpointID: id.String(), Kind: ckptstore.KindCheckpoint, ...}
//	m.StateSnapshots = append(m.StateSnapshots, entry)
//	err = cat.Commit(ctx, m) // nil: committed; else the previous checkpoint stays selected
//
//	// Restoring:
//	m, skipped, err := cat.Select(ctx, ckptstore.Want{Target: ckptstore.LatestCheckpoint, ...})
//	// err: *IncompatibleError (refuse to start), or a store failure (retry).
//	// m == nil: nothing to restore (skipped says why candidates were unusable).
//	r, err := cat.OpenState(ctx, m.StateSnapshots[0]) // verifies size and checksum as it streams
//
// # Guarantees
//
// Commit refuses a manifest that does not carry exactly the planned task
// set, writes it create-if-absent, and then moves LATEST to it; moving
// LATEST is the commit point, so a failed commit leaves the previous
// checkpoint selected. Committed state objects and manifests never change.
//
// Select tries candidates newest first and falls back past one whose
// manifest or state is missing or corrupt. It does not fall back past an
// incompatible one (another state format, a newer job version, another
// task set at the same version): it returns an *IncompatibleError, because
// restoring an older checkpoint would silently roll the job back. Select
// never writes, and a store failure is an error, never a reason to fall
// back.
//
// Retention (Options.Retention, default 3) deletes older checkpoints after
// each commit, manifest first; savepoints are never deleted automatically
// (Catalog.Delete removes one). A file:// store writes each object
// atomically (temporary file, fsync, rename, directory fsync); an s3://
// store relies on S3's atomic PUT and multipart completion.
// ckpttest.FaultStore wraps a store to fail chosen operations in
// tests. A job's catalog must have one writer at a time: the store has no
// lock.
//
// The key layout, the manifest's fields and checksum, and the selection and
// retention rules in full are described in ARCHITECTURE.md ("Checkpoints").
package ckptstore
