// Package blob is the one object-store layer under the WAL's object
// backend (internal/walog.OpenObjectStore) and the s3:// checkpoint store
// (checkpoint.OpenStore): one S3 options type, one client constructor,
// one error classifier and one set of hints (issue 18).
//
// Before it, each user built its own minio-go client with its own
// defaults: the checkpoint store used TLS unless told otherwise, the WAL
// used plain HTTP unless told otherwise, and their hints named keys
// ("object_store.access_key") that no configuration has. Here TLS is on
// unless Options.AllowHTTP is set or the endpoint says "http://", and the
// hints name the keys of the configuration the caller was built from
// (see Keys).
//
// Storage is the object interface over it (read with ETag, conditional
// put, list, delete, not-exist), with S3Storage and, for tests,
// MemStorage. The WAL's object backend goes through it; the checkpoint
// store still calls minio-go directly (it needs ranged reads and
// streaming, multipart PUTs, which Storage does not have yet).
package blob
