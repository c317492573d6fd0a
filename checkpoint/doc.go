// Package checkpoint holds what a program writes against to configure
// and inspect a job's checkpoints: StoreOptions, which reach an s3://
// checkpoint store (arkflow.WithCheckpointStore), and the errors a
// checkpoint store returns.
//
// A job's spec names where its checkpoints live
// (checkpoint.object_store_uri): file:///abs/dir for a local directory,
// s3://bucket/prefix for an S3-compatible bucket (AWS, MinIO). For s3://,
// StoreOptions give the endpoint, credentials and tuning; fields left
// empty come from the environment, as with the AWS tools. TLS is on unless
// the endpoint says http:// or AllowHTTP is set.
//
// An error about checkpoint data that is not what was written (a manifest
// or state object whose size or checksum is wrong) matches ErrCorrupt
// under errors.Is, and its message names the object's key and what is
// wrong. A store that cannot be reached is never corruption.
//
// Writing, committing and selecting checkpoints is the runtime's; how it
// lays them out and picks the one to restore is described in
// ARCHITECTURE.md ("Checkpoints").
package checkpoint
