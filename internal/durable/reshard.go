package durable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/corruption"
	"github.com/arkflow-rs/arkflow-go/internal/fsutil"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
	"github.com/arkflow-rs/arkflow-go/job"
)

// A source's local logs live in {path}/{source}/{subtask}, one per
// subtask, and {path}/{source}/PARALLELISM records how many there are.
// Subtask s of P reads the partitions p with p % P == s, so when the
// source's parallelism changes, the entries a log holds after its cursor
// belong to other subtasks: Reshard redistributes them by partition before
// the logs open, so that every entry is replayed by the subtask that now
// reads its partition, and never by another (R-WAL-3, R-JOB-3).
//
// It writes the new logs beside the old ones, in {source}~rescale, then
// swaps the directories:
//
//  1. {source}~rescale/{0..P-1} are written and synced, then
//     {source}~rescale/PARALLELISM (the mark that the new logs are whole);
//  2. {source} is renamed to {source}~old;
//  3. {source}~rescale is renamed to {source};
//  4. {source}~old is removed.
//
// A kill anywhere leaves a state the next start completes (finishSwap):
// without the mark, the new logs are discarded and the old ones are still
// in place; with it, the swap is finished. ('~' cannot appear in an
// operator ID, so these names never meet another source's directory.)
const parallelismFile = "PARALLELISM"

// Reshard lays the local write-ahead logs of source out for par subtasks
// (see above). It does nothing when they are already laid out so, or do
// not exist yet, and for the object-store backend, which Open refuses to
// use at another parallelism instead. lg is the source operator's logger
// (the caller has added the job and operator keys); nil discards.
func Reshard(cfg *job.Durability, dataDir, jobID, source string, par int, lg *slog.Logger) error {
	if ObjectStore(cfg) {
		return nil
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	d0, err := Dir(cfg, dataDir, jobID, source, 0)
	if err != nil {
		return err
	}
	dir := filepath.Dir(d0)
	if err := finishSwap(dir); err != nil {
		return fmt.Errorf("source %s: finishing an interrupted redistribution of its WAL: %w", source, err)
	}
	old, recorded, err := logParallelism(dir)
	if err != nil {
		return fmt.Errorf("source %s: %w", source, err)
	}
	switch {
	case old == 0:
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("source %s: %w", source, err)
		}
		return writeParallelism(dir, par)
	case old == par:
		if !recorded {
			return writeParallelism(dir, par)
		}
		return nil
	}
	lg.Info("redistributing the write-ahead log by partition for a new parallelism: every entry not yet acknowledged is replayed by the subtask that now reads its partition",
		"from", old, "to", par, "dir", dir)
	stats, err := reshard(cfg, dir, old, par, lg)
	if err != nil {
		return fmt.Errorf("source %s: redistributing its WAL from %d to %d subtasks: %w", source, old, par, err)
	}
	lg.Info("write-ahead log redistributed", "entries", stats.entries, "rows", stats.rows, "partitions", stats.partitions)
	return nil
}

// logParallelism returns how many subtask logs dir holds (0 when it does
// not exist) and whether PARALLELISM recorded it; without the file (logs
// written before it existed) it is one more than the highest subtask
// directory.
func logParallelism(dir string) (int, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, parallelismFile))
	if err == nil {
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || n < 1 {
			return 0, false, corruption.Mark(fmt.Errorf("%s is unreadable (%q): it should hold the number of the WAL's subtask directories", filepath.Join(dir, parallelismFile), b))
		}
		return n, true, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return 0, false, err
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n := 0
	for _, e := range ents {
		if k, err := strconv.Atoi(e.Name()); err == nil && k >= 0 && e.IsDir() {
			n = max(n, k+1)
		}
	}
	return n, false, nil
}

// writeParallelism writes dir/PARALLELISM atomically: its presence in a
// staging directory is what marks the staging whole (finishSwap).
func writeParallelism(dir string, par int) error {
	return fsutil.WriteFile(dir, parallelismFile, []byte(strconv.Itoa(par)+"\n"))
}

// finishSwap completes or undoes a redistribution a kill interrupted.
func finishSwap(dir string) error {
	staging, old := dir+"~rescale", dir+"~old"
	whole := fileExists(filepath.Join(staging, parallelismFile))
	if !whole {
		if err := os.RemoveAll(staging); err != nil {
			return err
		}
		if exists(old) && !exists(dir) {
			// Cannot happen (the old logs move only once the new ones
			// are whole), but never lose them: put them back.
			return os.Rename(old, dir)
		}
		return os.RemoveAll(old)
	}
	if exists(dir) && !exists(old) {
		if err := os.Rename(dir, old); err != nil {
			return err
		}
		if reshardHook != nil {
			reshardHook("renamed")
		}
	}
	if err := os.Rename(staging, dir); err != nil {
		return err
	}
	if err := fsutil.SyncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func fileExists(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}

type reshardStats struct{ entries, rows, partitions int }

// reshard writes the logs of dir's old subtasks into dir~rescale for par
// subtasks, then swaps the directories.
func reshard(cfg *job.Durability, dir string, oldPar, par int, lg *slog.Logger) (reshardStats, error) {
	var stats reshardStats
	staging := dir + "~rescale"
	if err := os.RemoveAll(staging); err != nil {
		return stats, err
	}
	lopts := func(o walog.Options) walog.LocalOptions {
		o.Logger = lg
		return walog.LocalOptions{Options: o, SegmentBytes: cfg.SegmentBytes, Retain: cfg.Retain, NoRecycle: cfg.NoRecycle}
	}
	var olds []*walog.Log
	defer func() {
		for _, l := range olds {
			l.Close()
		}
	}()
	for k := range oldPar {
		d := filepath.Join(dir, strconv.Itoa(k))
		if !exists(d) {
			continue
		}
		l, err := walog.OpenDir(d, lopts(Options(cfg)))
		if err != nil {
			return stats, err
		}
		olds = append(olds, l)
	}
	// The new logs are written unsynced and synced once at the end.
	nopts := Options(cfg)
	nopts.Sync = walog.SyncNone
	news := make([]*walog.Log, par)
	defer func() {
		for _, l := range news {
			if l != nil {
				l.Close()
			}
		}
	}()
	for k := range par {
		l, err := walog.OpenDir(filepath.Join(staging, strconv.Itoa(k)), lopts(nopts))
		if err != nil {
			return stats, err
		}
		news[k] = l
	}
	metas := make([]posMap, par)
	released := make([]posMap, par)
	for k := range metas {
		metas[k], released[k] = posMap{}, posMap{}
	}
	held := false
	parts := map[posKey]bool{}
	ctx := context.Background()
	var buf []byte
	for _, l := range olds {
		var r *walog.Replayer
		var err error
		if meta := l.CursorMeta(); len(meta) > 0 {
			m, merr := decodeMeta(meta)
			if merr != nil {
				return stats, fmt.Errorf("the positions stored with a cursor are unreadable: %w", merr)
			}
			for _, p := range m.Positions {
				metas[owner(p.Partition, par)].merge(posMap{{p.Topic, p.Partition}: p.Offset})
				parts[posKey{p.Topic, p.Partition}] = true
			}
			for _, p := range m.Released {
				released[owner(p.Partition, par)].merge(posMap{{p.Topic, p.Partition}: p.Offset})
			}
			if m.Held {
				// Entries kept for checkpoints (below the cursor too) move
				// with the others: in the new logs they come after the
				// cursor, and a restore replays those it does not hold.
				held = true
				r, err = l.ReplayFrom(1)
			}
		}
		if r == nil && err == nil {
			r, err = l.Replay()
		}
		if err != nil {
			return stats, err
		}
		for {
			e, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				r.Close()
				return stats, err
			}
			name, rec, err := walog.DecodeBatch(e.Payload, nil)
			if err != nil {
				r.Close()
				return stats, fmt.Errorf("entry %d: %w", e.Seq, err)
			}
			split, err := splitByOwner(rec, par)
			rec.Release()
			if err != nil {
				r.Close()
				return stats, err
			}
			for k, part := range split {
				if part == nil {
					continue
				}
				buf, err = walog.EncodeBatch(buf[:0], name, part)
				stats.rows += int(part.NumRows())
				pos, _ := positionsOf(part)
				for pk := range pos {
					parts[pk] = true
				}
				part.Release()
				if err == nil {
					_, err = news[k].Append(ctx, buf)
				}
				if err != nil {
					r.Close()
					for _, p := range split[k+1:] {
						if p != nil {
							p.Release()
						}
					}
					return stats, err
				}
			}
			stats.entries++
		}
		r.Close()
	}
	stats.partitions = len(parts)
	for k, l := range news {
		m := walMeta{Parallelism: par, Positions: metas[k].list(), Held: held}
		if held {
			m.Released = released[k].list()
		}
		meta := encodeMeta(m)
		if err := l.Flush(); err != nil {
			return stats, err
		}
		if err := l.SaveCursorMeta(meta); err != nil {
			return stats, err
		}
		if err := l.Close(); err != nil {
			return stats, err
		}
		news[k] = nil
		if err := fsutil.SyncDir(filepath.Join(staging, strconv.Itoa(k))); err != nil {
			return stats, err
		}
	}
	if err := fsutil.SyncDir(staging); err != nil {
		return stats, err
	}
	if err := writeParallelism(staging, par); err != nil {
		return stats, err
	}
	for _, l := range olds {
		if err := l.Close(); err != nil && !errors.Is(err, walog.ErrClosed) {
			return stats, err
		}
	}
	olds = nil
	if reshardHook != nil {
		reshardHook("whole")
	}
	return stats, finishSwap(dir)
}

// reshardHook, when set (tests), runs once the new logs are whole
// ("whole") and between the swap's two renames ("renamed").
var reshardHook func(step string)

// owner is the subtask of par that reads partition p.
func owner(p int32, par int) int {
	if p < 0 {
		p = -p
	}
	return int(p) % par
}

// splitByOwner splits a batch by the subtask of par that reads each row's
// partition (__meta_partition; rows without one belong to partition 0).
func splitByOwner(rec arrow.RecordBatch, par int) ([]arrow.RecordBatch, error) {
	dest := make([]int32, rec.NumRows())
	if parts := column[*array.Int32](rec, connectors.MetaPartition); parts != nil {
		for i := range dest {
			if parts.IsValid(i) {
				dest[i] = int32(owner(parts.Value(i), par))
			}
		}
	}
	return batch.Split(rec, dest, par)
}
