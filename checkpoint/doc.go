// Package checkpoint holds what a program writes against to configure
// and read a job's checkpoints and savepoints: StoreOptions, which reach
// an s3:// checkpoint store (arkflow.WithCheckpointStore); Open, List,
// Inspect and Verify, which read a store; Check, which says whether a
// spec may start from a savepoint; and the errors a store returns.
//
// A job's spec names where its checkpoints live
// (checkpoint.object_store_uri): file:///abs/dir for a local directory,
// s3://bucket/prefix for an S3-compatible bucket (AWS, MinIO). For s3://,
// StoreOptions give the endpoint, credentials and tuning; fields left
// empty come from the environment, as with the AWS tools. TLS is on unless
// the endpoint says http:// or AllowHTTP is set.
//
// # Reading a store
//
// A Store opened with Open only reads, so it can be used beside the jobs
// that write to it. Jobs lists the jobs with artifacts there; List
// describes a job's checkpoints and savepoints (Info: id, kind, job
// version, state format, max_parallelism, when, size, tasks with their
// state, watermarks and source positions, and whether it is Completed,
// which a restore requires); Inspect describes one; Verify reads its state
// objects and checks them against the manifest. `arkflow checkpoint list`
// and `arkflow checkpoint inspect` print the same.
//
//	store, err := checkpoint.Open(ctx, "s3://arkflow/ckpt", checkpoint.StoreOptions{})
//	infos, err := store.List(ctx, "orders")
//
// # Before an upgrade
//
// Check answers what a start of a spec from a savepoint (arkflow run
// --from-savepoint, arkflow.WithSavepoint) would do, with the start's own
// code and without touching any state: nil, or a *RefusedError whose
// Reason is what the start would fail with (a downgrade, a state format
// change, another max_parallelism, other operators at the same job
// version). `arkflow checkpoint check` prints it and exits 0 or 1.
//
// Check builds the spec as a start does (without connecting or writing
// anything) and runs the choice the start makes before it opens its
// state, the same code: the state format must be the spec's, the job
// version the spec's or older (an upgrade), max_parallelism the same, the
// operators the same at the same version, and an operator keyed by its
// source's partitioning at the same parallelism. The state objects are
// not read: a start checks them as it restores them, and Store.Verify
// reads them now. The store given stands for the spec's own
// checkpoint.object_store_uri, since a start reads the store its spec
// names.
//
//	err := checkpoint.Check(ctx, store, checkpoint.KindSavepoint, "before-v2", specV2, checkpoint.CheckOptions{})
//
// # Errors
//
// An error about checkpoint data that is not what was written (a manifest
// or state object whose size or checksum is wrong) matches ErrCorrupt
// under errors.Is, and its message names the object's key and what is
// wrong. A store that cannot be reached is never corruption. Reading an
// artifact the store does not hold matches ErrNotFound.
//
// Writing, committing and selecting checkpoints is the runtime's; how it
// lays them out and picks the one to restore is described in
// ARCHITECTURE.md ("Checkpoints").
package checkpoint
