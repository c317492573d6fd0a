// Package walog is the write-ahead log that gives a source at-least-once
// delivery: every batch is appended (durably, per the sync mode) before it
// enters the pipeline, acknowledged once every sink has it, and replayed
// after a restart if it was not.
//
// A log lives in a local directory (OpenDir, the default) or in an object
// store (OpenObjectStore). Entries get sequence numbers from 1 in append
// order and are acknowledged in any order. The cursor, the highest
// contiguous acknowledged sequence, is what survives a restart: every entry
// after it is replayed, so a crash causes duplicates, never loss.
//
// # Usage
//
//	l, err := walog.OpenDir("/var/lib/arkflow/wal/clicks-0", walog.LocalOptions{
//		Options: walog.Options{Sync: walog.SyncGroupCommit},
//	})
//	if err != nil {
//		return err // a *CorruptError names the segment and offset
//	}
//	defer l.Close()
//
//	// After a restart, deliver what was not acknowledged, in order.
//	r, err := l.Replay()
//	for e, err := r.Next(); err == nil; e, err = r.Next() {
//		deliver(e.Seq, e.Payload)
//	}
//	r.Close()
//
//	seq, err := l.Append(ctx, payload) // durable as the sync mode promises
//	deliver(seq, payload)
//
//	l.Ack(seq)              // a sink has it (any order, never blocks)
//	err = l.Await(ctx, seq) // nil once the cursor has reached seq: commit the source's position
//
// # Guarantees
//
// In a local directory a process crash loses nothing Append returned, in
// any sync mode. The modes differ on a power loss: always and
// group_commit (the default) lose nothing Append returned; periodic loses
// up to Options.SyncInterval of appends; none loses what the kernel had not
// written back. The object-store backend keeps unsynced entries in memory,
// so there a process crash loses what a power loss loses.
//
// Await parks while an earlier entry is unacknowledged and returns a
// *ParkedError (retryable) after Options.ParkLease. Close gives parked
// calls Options.DrainTimeout, then returns ErrClosedPending. Opening cuts a
// torn tail off the newest segment; any other damage is a *CorruptError,
// and the files are left as they were. With Options.Hold the log also
// keeps entries the cursor has passed, from a floor the caller moves
// (SetFloor), so ReplayFrom can deliver them again.
//
// All methods of a Log are safe for concurrent use. OpenDir takes an
// exclusive lock on the directory and starts one goroutine, which Close
// stops. Replay's entries alias a buffer valid until the next call to Next.
//
// It is the engine behind internal/durable; the public package wal holds
// only the sync modes and the corruption marker users write against. The
// record and cursor formats, the directory layout, group commit and the
// recovery rules are described in ARCHITECTURE.md ("Write-ahead log").
package walog
