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
// reads its partition, and never by another.
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
//
// ctx bounds the redistribution: cancelled, Reshard touches nothing (or
// stops between two entries) and returns ctx's error. New logs it leaves
// half written are not marked whole, so the next start discards them and
// the old ones are still in place.
func Reshard(ctx context.Context, cfg *job.Durability, dataDir, jobID, source string, par int, lg *slog.Logger) error {
	if ObjectStore(cfg) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("source %s: redistributing its WAL: %w", source, err)
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
	stats, err := reshard(ctx, cfg, dir, old, par, lg)
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
// subtasks, then swaps the directories. Every entry after an old log's
// cursor (from its first entry when it holds entries for checkpoints) is
// split by the subtask that now reads each row's partition and appended
// to that subtask's new log; the cursor positions go to the new logs of
// their partitions' subtasks; a Keeper's file is copied over. The new logs
// are written unsynced and synced once, before PARALLELISM marks them
// whole.
func reshard(ctx context.Context, cfg *job.Durability, dir string, oldPar, par int, lg *slog.Logger) (reshardStats, error) {
	rs := &resharder{cfg: cfg, par: par, lg: lg, staging: dir + "~rescale", parts: map[posKey]bool{}}
	if err := os.RemoveAll(rs.staging); err != nil {
		return rs.stats, err
	}
	defer rs.closeLogs()
	if err := rs.openLogs(dir, oldPar); err != nil {
		return rs.stats, err
	}
	for _, l := range rs.olds {
		if err := rs.moveLog(ctx, l); err != nil {
			return rs.stats, err
		}
	}
	rs.stats.partitions = len(rs.parts)
	// The keys a Keeper keeps of the entries the old logs deleted.
	if err := carryKeys(dir, rs.staging); err != nil {
		return rs.stats, err
	}
	if err := rs.sealNew(); err != nil {
		return rs.stats, err
	}
	for _, l := range rs.olds {
		if err := l.Close(); err != nil && !errors.Is(err, walog.ErrClosed) {
			return rs.stats, err
		}
	}
	rs.olds = nil
	if reshardHook != nil {
		reshardHook("whole")
	}
	return rs.stats, finishSwap(dir)
}

// resharder is one redistribution in progress: the old subtask logs it
// reads, the new ones it writes in the staging directory, and what the
// new logs' cursor metadata will record.
type resharder struct {
	cfg     *job.Durability
	par     int
	lg      *slog.Logger
	staging string
	olds    []*walog.Log // the old subtasks' logs that exist
	news    []*walog.Log // by new subtask; nil once sealed
	// metas and released hold, by new subtask, the cursor positions and
	// the released positions of the partitions it now reads.
	metas, released []posMap
	held            bool // an old log held entries for checkpoints
	parts           map[posKey]bool
	buf             []byte
	stats           reshardStats
}

// openLogs opens the old subtask logs that exist under dir and creates
// the new ones in the staging directory. The new logs are written
// unsynced and synced once at the end.
func (rs *resharder) openLogs(dir string, oldPar int) error {
	lopts := func(o walog.Options) walog.LocalOptions {
		o.Logger = rs.lg
		return walog.LocalOptions{Options: o, SegmentBytes: rs.cfg.SegmentBytes, Retain: rs.cfg.Retain, NoRecycle: rs.cfg.NoRecycle}
	}
	for k := range oldPar {
		d := filepath.Join(dir, strconv.Itoa(k))
		if !exists(d) {
			continue
		}
		l, err := walog.OpenDir(d, lopts(Options(rs.cfg)))
		if err != nil {
			return err
		}
		rs.olds = append(rs.olds, l)
	}
	// The new logs are written unsynced and synced once at the end.
	nopts := Options(rs.cfg)
	nopts.Sync = walog.SyncNone
	rs.news = make([]*walog.Log, rs.par)
	for k := range rs.par {
		l, err := walog.OpenDir(filepath.Join(rs.staging, strconv.Itoa(k)), lopts(nopts))
		if err != nil {
			return err
		}
		rs.news[k] = l
	}
	rs.metas = make([]posMap, rs.par)
	rs.released = make([]posMap, rs.par)
	for k := range rs.metas {
		rs.metas[k], rs.released[k] = posMap{}, posMap{}
	}
	return nil
}

// closeLogs closes the logs still open: the new ones, then the old ones.
func (rs *resharder) closeLogs() {
	for _, l := range rs.news {
		if l != nil {
			l.Close()
		}
	}
	for _, l := range rs.olds {
		l.Close()
	}
}

// moveLog gives the new subtasks what an old log holds: the positions
// stored with its cursor, by partition, and its entries to replay.
func (rs *resharder) moveLog(ctx context.Context, l *walog.Log) error {
	var r *walog.Replayer
	var err error
	if meta := l.CursorMeta(); len(meta) > 0 {
		m, merr := decodeMeta(meta)
		if merr != nil {
			return fmt.Errorf("the positions stored with a cursor are unreadable: %w", merr)
		}
		for _, p := range m.Positions {
			rs.metas[owner(p.Partition, rs.par)].merge(posMap{{p.Topic, p.Partition}: p.Offset})
			rs.parts[posKey{p.Topic, p.Partition}] = true
		}
		for _, p := range m.Released {
			rs.released[owner(p.Partition, rs.par)].merge(posMap{{p.Topic, p.Partition}: p.Offset})
		}
		if m.Held {
			// Entries kept for checkpoints (below the cursor too) move
			// with the others: in the new logs they come after the
			// cursor, and a restore replays those it does not hold.
			rs.held = true
			r, err = l.ReplayFrom(1)
		}
	}
	if r == nil && err == nil {
		r, err = l.Replay()
	}
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		e, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := rs.moveEntry(ctx, e); err != nil {
			return err
		}
	}
}

// moveEntry splits one old entry's batch by the new subtask that reads
// each row's partition and appends each part to that subtask's log.
func (rs *resharder) moveEntry(ctx context.Context, e walog.Entry) error {
	name, rec, err := walog.DecodeBatch(e.Payload, nil)
	if err != nil {
		return fmt.Errorf("entry %d: %w", e.Seq, err)
	}
	split, err := splitByOwner(rec, rs.par)
	rec.Release()
	if err != nil {
		return err
	}
	for k, part := range split {
		if part == nil {
			continue
		}
		rs.buf, err = walog.EncodeBatch(rs.buf[:0], name, part)
		rs.stats.rows += int(part.NumRows())
		pos, _ := positionsOf(part)
		for pk := range pos {
			rs.parts[pk] = true
		}
		part.Release()
		if err == nil {
			_, err = rs.news[k].Append(ctx, rs.buf)
		}
		if err != nil {
			for _, p := range split[k+1:] {
				if p != nil {
					p.Release()
				}
			}
			return err
		}
	}
	rs.stats.entries++
	return nil
}

// sealNew stores each new log's cursor metadata (its partitions'
// positions, and whether it holds entries for checkpoints), syncs and
// closes it, then marks the staging directory whole with PARALLELISM.
func (rs *resharder) sealNew() error {
	for k, l := range rs.news {
		m := walMeta{Parallelism: rs.par, Positions: rs.metas[k].list(), Held: rs.held}
		if rs.held {
			m.Released = rs.released[k].list()
		}
		meta := encodeMeta(m)
		if err := l.Flush(); err != nil {
			return err
		}
		if err := l.SaveCursorMeta(meta); err != nil {
			return err
		}
		if err := l.Close(); err != nil {
			return err
		}
		rs.news[k] = nil
		if err := fsutil.SyncDir(filepath.Join(rs.staging, strconv.Itoa(k))); err != nil {
			return err
		}
	}
	if err := fsutil.SyncDir(rs.staging); err != nil {
		return err
	}
	return writeParallelism(rs.staging, rs.par)
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
