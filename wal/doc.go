// Package wal is about the write-ahead log that can sit in front of a
// source (job.Durability, arkflow.Durable): what each sync mode promises
// in a crash, and ErrCorrupt, which matches a damaged log's errors.
//
// A source with durability appends every batch it reads to its log, made
// durable as the sync mode promises, before the batch enters the
// pipeline; acknowledgements move the log's cursor over the contiguous
// acknowledged prefix, and a restart replays every entry after the
// cursor. A crash therefore causes duplicates, never loss, within what
// the sync mode promises:
//
//   - job.SyncAlways and job.SyncGroupCommit (the default) lose nothing
//     an append returned, even on a power loss;
//   - job.SyncPeriodic loses up to the sync interval of appends on a
//     power loss;
//   - job.SyncNone loses what the kernel had not written back.
//
// The object-store backend keeps unsynced entries in memory, so there a
// process crash loses what a power loss loses. The log itself, its record
// and cursor formats and its recovery rules are described in
// ARCHITECTURE.md ("Write-ahead log").
package wal
