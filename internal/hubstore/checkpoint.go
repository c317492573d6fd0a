package hubstore

import (
	"context"
	"time"
)

// checkpointInterval is how often the checkpointer copies committed WAL
// frames into the database file.
const checkpointInterval = time.Second

// restartFrames is the WAL length (in frames, 4 KiB pages) past which the
// checkpointer starts the WAL over (TRUNCATE): about 8 MiB.
const restartFrames = 2000

// checkpointer runs checkpoints on its own connection until ctx ends.
// SQLite's automatic checkpoint is off on the writer (store.go): it ran
// inside whichever commit crossed 1,000 WAL pages, so that write, and
// every write queued behind the single writer, waited while the WAL was
// copied into the database and the database synced (commits of 0.2-0.3 s
// on this disk under the Hub's load test).
//
// Every second a PASSIVE checkpoint copies what no reader still needs and
// syncs the database file; it takes no lock a writer or reader waits on,
// so writes go on meanwhile. But the WAL only starts over from the
// beginning when everything in it is copied and no reader still uses it,
// which under a steady stream of writes and reads never happens by
// itself; so once the WAL is past restartFrames, the checkpointer holds
// the store's writer mutex and runs a TRUNCATE checkpoint, which copies
// the frames written since the last PASSIVE one (a second's worth at
// most), syncs, waits for the readers of the WAL to finish and lets the
// next write start the WAL over in an emptied file. That short pause,
// every 2,000 pages, replaces the longer one every 1,000 pages.
//
// Durability does not change: a commit is synced in the WAL
// (synchronous=FULL) before it is acknowledged, checkpointed or not; a
// checkpoint syncs the database before the WAL is reused; closing the
// store checkpoints the rest.
func (s *Store) checkpointer(ctx context.Context) {
	defer close(s.ckDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var busy, frames, copied int
		// An error (busy, I/O) is retried at the next tick; until then
		// the WAL only grows.
		if err := s.ckpt.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied); err != nil || frames < restartFrames {
			continue
		}
		s.wmu.Lock()
		_ = s.ckpt.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &copied)
		s.wmu.Unlock()
	}
}
