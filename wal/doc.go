// Package wal is the write-ahead log that gives a source at-least-once
// delivery: every batch is appended (durably, per the sync mode) before it
// enters the pipeline, acknowledged once every sink has it, and replayed
// after a restart if it was not.
//
// Entries get sequence numbers from 1 in append order. They are
// acknowledged in any order; the cursor, the highest contiguous
// acknowledged sequence, is what survives a restart, and every entry after
// it is replayed (R-WAL-1..3). A log lives in a local directory (OpenDir,
// the default) or in an object store (OpenObjectStore, R-WAL-7).
//
// # Usage
//
//	l, err := wal.OpenDir("/var/lib/arkflow/wal/clicks-0", wal.LocalOptions{
//		Options: wal.Options{Sync: wal.SyncGroupCommit},
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
//	// When a sink has written it (any order, never blocks):
//	l.Ack(seq)
//	// Before committing the source's own position for seq:
//	err = l.Await(ctx, seq) // nil once the cursor has reached seq
//
// # Records
//
// A record is ArkFlow's object-store segment record, so both backends and
// ArkFlow read the same bytes:
//
//	seq u64 BE | len u32 BE | payload (len bytes) | crc32-IEEE(payload) u32 BE
//
// The checksum covers the payload only (the header is checked by the
// sequence rule: records in a segment follow one by one). A payload is 1 to
// MaxPayload bytes: Append refuses an empty one (ErrEmptyEntry), because a
// header torn after its sequence field reads as length 0 with checksum 0,
// the checksum of nothing, so a record of length 0 is always damage.
// AppendRecord encodes a record and DecodeSegment decodes a segment's
// bytes.
//
// # Directory layout
//
// A local log owns one directory:
//
//	LOCK                        empty; flock(2)ed by the one process that has the log open
//	CURSOR.0, CURSOR.1          cursor slots: magic "AFWALCS1" | generation u64 BE | cursor u64 BE | meta length u32 BE | meta | crc32-IEEE u32 BE
//	00000000000000000001.wal    a segment: records from sequence 1 on
//	00000000000000004097.wal    the next segment, named after its first sequence (%020d)
//	recycle-00000000000000000001 a passed segment kept for reuse (at most 2)
//
// Generation g of the cursor goes to slot g%2. A slot file is created
// atomically (temp file, fsync, rename, directory fsync) and from then on
// overwritten in place with one fdatasync (bytes after the record, left by
// a longer earlier one, are ignored); recovery takes the valid slot with
// the highest generation, so a crash in the middle of an overwrite falls
// back to the previous cursor, which was durable before the overwrite
// began. DecodeCursor reads a slot. Segments the cursor has passed are
// renamed to recycle-N (two at most; the others removed) without a
// directory fsync: one that comes back after a crash is below the durable
// cursor, is skipped, and is passed again. A segment is closed when the
// next record would take it past LocalOptions.SegmentBytes (default 32
// MiB): the full segment is fdatasync'ed, then the next one is started —
// a recycle-N file renamed to its name and written over from offset 0, or
// a new file when there is none — and the directory fsync'ed, in every
// sync mode. Only the newest segment is ever written. Writing over blocks
// a file already has lets each fdatasync flush data without the journal
// commit an append needs (new blocks, a new size): with group commit that
// is most of the synced bandwidth (BENCHMARKS.md). A recycled file keeps
// the old segment's records past the new ones; they all have lower
// sequences, and DecodeRecycledSegment ends the log at the first record
// that does not continue it. LocalOptions.NoRecycle removes passed
// segments instead.
//
// # Sync modes and what a crash loses
//
// A process crash (SIGKILL, a panic, the OOM killer) loses nothing Append
// returned, in any mode, in a local directory: Append returns only after
// write(2) has copied the record into the kernel's page cache, which
// outlives the process. TestCrashLoop checks this by killing a writer at
// random moments. What the modes differ in is a power loss or an operating
// system crash:
//
//   - always: every Append fdatasyncs its own entry before it returns, one
//     entry at a time. Nothing Append returned is lost.
//   - group_commit (the default): Append returns only once its own entry is
//     durable, but concurrent appenders share one write(2) and one
//     fdatasync. Nothing Append returned is lost; with many concurrent
//     appenders it costs a fraction of always. See Group commit below.
//   - periodic: Append returns after the write; a background fdatasync runs
//     every Options.SyncInterval (default 100ms). A power loss loses up to
//     SyncInterval (plus one fdatasync) of returned appends.
//   - none: only segment rotation, Sync, Flush and Close fdatasync. A power
//     loss loses whatever the operating system had not written back yet
//     (on Linux, dirty pages older than vm.dirty_expire_centisecs, 30 s by
//     default, are written back).
//
// Losses are always at the end of the newest segment, because a segment is
// synced before the next one starts. The object-store backend keeps
// unsynced entries in process memory, so there a process crash loses what a
// power loss loses; see OpenObjectStore.
//
// # Group commit
//
// In group_commit mode appenders form a writer queue (the LevelDB and
// RocksDB pattern). Append encodes its record into the queue and waits.
// One appender at a time is the leader: it takes every record queued, gives
// them their sequences in queue order (so sequence order is file order),
// writes them with one write(2) (two when the group crosses into a new
// segment), makes them durable with one fdatasync, and then wakes each
// member with its sequence. Appenders that arrive meanwhile queue up, and
// the first of them leads the next group. A failed write or sync fails
// every member of the group and stops the log, like a failed fsync in any
// mode: the groups queued behind it fail without being written.
//
// Before it takes the queue, a leader may wait a little for the appenders
// that were active during the previous commit (the previous group and
// those that queued while it ran) to queue again. Without this, a steady
// set of appenders splits into two halves that take turns, one queueing
// while the other's commit runs, and every fdatasync covers half of them.
// The wait ends when they are all queued, when none has arrived for 50µs,
// or after a quarter of the previous commit's duration (at most 1ms),
// whichever comes first; a lone appender never waits.
//
// # The cursor
//
// Ack never blocks. The cursor moves to the highest contiguous acknowledged
// sequence: an acknowledgement after a gap is kept until the gap closes,
// so the cursor never passes an entry that was not acknowledged (R-WAL-2).
// ArkFlow's cursor, by contrast, is a high-water mark (the highest
// acknowledged sequence): an entry whose delivery failed, or that is still
// in flight, is skipped by a later acknowledgement and never replayed. Here
// it is replayed.
//
// The cursor is persisted every Options.CursorInterval (default 100ms) and
// by Flush and Close, together with the bytes Options.CursorMeta returns
// for it (a source's resume positions; CursorMeta returns them after a
// restart). An acknowledgement not yet persisted is lost in a crash of any
// kind, which only means its entry is replayed again: duplicates, never
// loss. The persisted cursor may be ahead of the entries that survived a
// power loss (periodic or none: acknowledged entries that were never
// synced); the log then continues after the cursor, and the sequences of
// lost unacknowledged entries are used again.
//
// Abandon marks an entry whose delivery failed: it stays unacknowledged
// until a restart replays it (or until it is acknowledged after all), and
// an Await behind it fails at once with an *AbandonedError instead of
// waiting out its lease.
//
// # Parked acknowledgements and drain
//
// Await(ctx, seq) returns once the cursor has reached seq; that is when the
// source may commit its own position for seq. While an earlier sequence N
// is unacknowledged the call is parked, for at most Options.ParkLease
// (default 60s). Then it returns a *ParkedError (errors.Is(err, ErrParked),
// Temporary() true) that reads exactly
//
//	WAL acknowledgement parked for >60s waiting for sequence N; the gap owner appears stalled
//
// (R-WAL-4). The lease fences nothing: the owner of N can still acknowledge
// it, and a retry then succeeds at once; while N stays unacknowledged each
// retry fails the same way after its own lease. Time comes from
// Options.Clock, which tests replace.
//
// Close stops appends (they return ErrClosed), then gives parked Await
// calls the drain window, Options.DrainTimeout (default 30s), to see their
// gaps close (R-WAL-5). Those still parked when it ends return
// ErrClosedPending, and so does Close (errors.Is; the text is exactly "WAL
// closed while acknowledgement was pending"). Their entries are replayed
// after a restart. Close then syncs, persists the cursor and releases the
// directory; Flush and Sync on a closed log return ErrClosed.
//
// # Recovery: torn tails and corruption
//
// Opening reads the cursor and every segment not wholly covered by it. A
// torn tail, what a crash in the middle of a write leaves at the end of the
// newest segment, is cut off and the intact prefix kept: a record whose
// header or body runs past the end of the file, a last record (or one
// followed only by zero bytes) that fails its checksum or has length 0, or
// zero bytes to the end (space the file system allocated but never wrote).
// A crash leaves no valid record after a torn one, so a bad record that a
// valid one follows (its header and checksum check out, and its sequence
// is the one the bad record should have had or a later one that fits in
// between) is corruption however it looks, such as a length with a flipped
// bit that runs past the end of the file. Anything else is corruption too:
// a bad record (a failed checksum, or length 0) with other data after it,
// a sequence out of order, an older segment whose entries end before the
// next segment starts (in a recycled file an older segment's entries end
// where its old records begin; the next segment must start right after
// them), a missing segment, or an oldest segment that starts after the
// cursor's successor. In a recycled file, a valid record with a lower
// sequence than expected (the previous use's) ends the log like a torn
// tail, unless a valid entry with the expected sequence or a later one
// follows it.
// Corruption is a *CorruptError naming the segment and the byte offset of
// the bad record, and a refused open changes nothing on disk, so the files
// can be inspected (DecodeSegment and DecodeCursor read them).
//
// # Segment deletion
//
// When a persisted cursor covers every entry of a segment (and a newer
// segment exists), the segment is kept for reuse (two at most) or
// deleted. LocalOptions.Retain keeps them all instead, for debugging; the
// directory then grows without bound, and a later open without Retain
// deletes them. Old entries stay on disk in recycled files until they are
// written over.
//
// # Holding entries past the cursor
//
// A log opened with Options.Hold also keeps the entries the cursor has
// passed, from its retention floor on: a segment goes only once both the
// persisted cursor and the floor have passed all of its entries, in both
// backends. SetFloor moves the floor forward (the segments it releases go
// at the next cursor save), and ReplayFrom reads every entry still kept
// from a sequence on, below the cursor too:
//
//	l, err := wal.OpenDir(dir, wal.LocalOptions{Options: wal.Options{Hold: true}})
//	// After a restart: what a restored checkpoint does not hold.
//	r, err := l.ReplayFrom(l.Floor())
//	…
//	// A checkpoint holding everything before entry seq has completed:
//	l.SetFloor(seq)
//
// This is for a source whose input cannot be read again (a push source):
// ArkFlow's source wrapper holds each entry until a completed checkpoint
// covers its rows, so that the restore of a checkpoint older than the
// cursor replays them from the log (R-WAL-3). The floor is not persisted:
// a reopened log starts it at its oldest stored entry (Floor), and the
// holder moves it on again. Nothing else changes: the cursor, Replay and
// what a restart replays after the cursor are the same with or without
// Hold.
//
// # Concurrency and ownership
//
// All methods of a Log are safe for concurrent use. OpenDir takes an
// exclusive flock on LOCK: a second opener, in this process or another,
// gets an error naming the lock. The kernel drops it when the process dies,
// and Close releases it, so a dry run's open can be followed at once by the
// real one (R-VAL-2). Opening starts one goroutine, which persists the
// cursor (and, in periodic mode, syncs); Close stops it. Replay's entries
// alias a buffer valid until the next call to Next.
package wal
