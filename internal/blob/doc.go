// Package blob is the one object-store layer under the WAL's object
// backend (internal/walog.OpenObjectStore) and the s3:// checkpoint store
// (internal/ckptstore): one S3 options type, one client constructor, one
// error classifier and one set of hints.
//
// Before it, each user built its own minio-go client with its own
// defaults: the checkpoint store used TLS unless told otherwise, the WAL
// used plain HTTP unless told otherwise, and their hints named keys
// ("object_store.access_key") that no configuration has. Here TLS is on
// unless Options.AllowHTTP is set or the endpoint says "http://", and the
// hints name the keys of the configuration the caller was built from
// (see Keys).
//
// Storage is the object interface over it, in the shape of pebble's
// objstorage/remote.Storage: whole reads with ETag, conditional puts,
// ranged streaming reads (ReadRange), streaming creates of unknown size
// (CreateObject: one PUT, or a multipart upload from pooled part
// buffers), list, delete, not-exist. S3Storage implements it over
// minio-go and MemStorage in memory, for tests; one contract test
// (storage_test.go) runs over both. The WAL's object backend and the
// checkpoint store go through it, and nothing else in the module calls
// minio-go for objects.
package blob
