// Package wal is about the write-ahead log that can sit in front of a
// source (job.Durability, arkflow.Durable): what each sync mode promises
// in a crash, Inspect, which describes a log as a restart would find it,
// and ErrCorrupt, which matches a damaged log's errors.
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
// process crash loses what a power loss loses.
//
// # Inspecting a log
//
// Inspect reads the logs in a directory (one source subtask's, a
// source's, or a whole job's: arkflow run keeps them in
// ./arkflow-data/<job id>/wal) or under an s3:// prefix, and reports for
// each its cursor, the source positions stored with it, its segments,
// the entries a restart would replay (Pending) and, with
// InspectOptions.Entries, every stored entry. It applies the rules a
// restart applies, without changing anything and without taking the
// log's lock, so it can look at the logs of a running job and fails
// exactly where a restart would, with the same error. `arkflow wal
// inspect` prints the same for people, or as JSON.
//
//	logs, err := wal.Inspect(ctx, "./arkflow-data/clicks/wal", wal.InspectOptions{})
//	for _, l := range logs {
//		fmt.Println(l.Source, l.Subtask, "cursor", l.Cursor, "pending", l.Pending)
//	}
//
// The location Inspect takes is
//
//   - a directory (or file:///abs/dir): one log, or every log below it —
//     a source's ({path}/{source}, its subtasks' logs) or a job's
//     ({path}, e.g. arkflow run's ./arkflow-data/<job id>/wal);
//   - s3://bucket/prefix: every object-store log whose namespace
//     ({prefix}/{node_id}/{stream}/) lies under prefix, e.g.
//     s3://bucket/arkflow/wal for every node's.
//
// The log itself, its record
// and cursor formats and its recovery rules are described in
// ARCHITECTURE.md ("Write-ahead log").
package wal
