package durable

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
)

// A source that cannot read its input again (connectors.Unrewindable)
// loses, on the restore of a checkpoint older than the WAL cursor, the
// rows acknowledged after the checkpoint: the restore replaced the state
// they went into, the WAL has let go of them behind its cursor, and the
// source cannot read them again. In a job that takes
// checkpoints its log is therefore held (walog.Options.Hold):
//
//   - Every entry stays in the WAL, also once the cursor has passed it,
//     until a completed checkpoint holds all of its rows: when the runtime
//     reports one (CheckpointCompleted, with the positions the checkpoint
//     recorded for this task), the WAL's retention floor moves to the first
//     entry it does not hold. The floor is not persisted: after a restart
//     it starts at the oldest entry kept, and the first checkpoint moves it.
//   - A restore replays every entry kept whose rows the restored
//     checkpoint does not hold, below the cursor too, in sequence order and
//     once each, instead of seeking the source back (scanHeld). Rows of a
//     replayed entry that the restored state has applied already are
//     dropped by the stateful operators (ops.Replayed).
//   - If the entries kept do not reach back to the restored positions (the
//     restore of an old savepoint after later checkpoints let the WAL go of
//     them), the rows in between cannot be replayed: a warning names them
//     and the source starts without them.

// CheckpointCompleted tells the source that a checkpoint which a restart
// would restore has completed (its manifest is committed and the latest
// checkpoint moved to it), ps being the positions it recorded for this
// task. A held log lets go of the entries whose rows the checkpoint holds,
// up to the first one it does not hold: the WAL's floor moves there, and
// the segments before it are deleted at the next cursor save. Without a
// held log it does nothing. It may run concurrently with Read.
func (s *Source) CheckpointCompleted(ps []connectors.Position) {
	if !s.hold {
		return
	}
	p := toMap(ps)
	s.mu.Lock()
	n := 0
	for n < len(s.held) && s.held[n].rows.coveredBy(p) {
		n++
	}
	if n == 0 {
		s.mu.Unlock()
		return
	}
	floor := s.held[n-1].seq + 1
	if n < len(s.held) {
		floor = s.held[n].seq
	}
	s.held = s.held[n:]
	// Recorded (and stored with the next cursor) before the floor moves:
	// every row the WAL may delete from here on lies before them.
	s.released.merge(p)
	s.mu.Unlock()
	s.log.SetFloor(floor)
}

// scanHeld is scan for a held log. It reads every entry the WAL keeps,
// from its floor on:
//
//   - After the restore of a checkpoint, every entry whose rows the
//     checkpoint does not hold is replayed, in sequence order, whether the
//     cursor has passed it or not (the restore replaced the state it went
//     into), and the entries after the cursor that it does hold are
//     acknowledged. The positions restart from the checkpoint's
//     and pass the replayed entries below the cursor as they are
//     acknowledged, in order (fold).
//   - Without a restore, the local state store holds what the cursor
//     covers: the entries after it are replayed, as scan does, and those
//     below it that the positions stored with the cursor do not cover
//     (a previous run's replay of them, cut short).
//
// Either way the wrapped source resumes after everything the WAL holds,
// and every entry kept stays held until a checkpoint holds its rows.
func (s *Source) scanHeld() (scanPlan, error) {
	cursor := s.log.Cursor()
	r, err := s.log.ReplayFrom(s.log.Floor())
	if err != nil {
		return scanPlan{}, fmt.Errorf("source %s: reading the WAL: %w", s.task, err)
	}
	defer r.Close()
	hs := &heldScan{cursor: cursor, restored: toMap(s.restored), seek: posMap{}, begin: posMap{}}
	hs.seek.merge(s.base)
	s.replaySet = map[uint64]bool{}
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return scanPlan{}, fmt.Errorf("source %s: reading the WAL: %w", s.task, err)
		}
		if err := s.scanHeldEntry(hs, e); err != nil {
			return scanPlan{}, err
		}
	}
	restored := hs.restored
	if restored != nil {
		s.restartAt(restored, hs.begin)
		hs.seek.merge(restored)
	}
	s.mu.Lock()
	s.queue, s.redo, s.held = hs.queue, hs.redo, hs.held
	s.mu.Unlock()
	s.redoUpTo, s.replayFrom = cursor, hs.first
	for _, seq := range hs.covered {
		if err := s.log.Ack(seq); err != nil {
			return scanPlan{}, err
		}
	}
	if len(hs.redo) > 0 {
		s.lg.Info("the restored checkpoint is older than what the WAL acknowledged, and the source cannot read its input again: "+
			"the WAL replays the entries whose rows the checkpoint does not hold before reading new input (nothing acknowledged is lost; output written after the checkpoint may be written again)",
			"entries", len(s.replaySet), "from_entry", hs.first, "resume_at", describePositions(restored.list()), "wal_cursor", cursor)
	}
	return scanPlan{seek: hs.seek}, nil
}

// heldScan is what scanHeld gathers from the entries a held log keeps.
type heldScan struct {
	cursor   uint64
	restored posMap // the restored checkpoint's positions, nil without a restore
	seek     posMap // where the wrapped source resumes
	begin    posMap // per partition, the lowest offset the kept entries hold
	held     []heldEntry
	redo     []posAt  // entries at or below the cursor to replay
	queue    []posAt  // entries after the cursor
	covered  []uint64 // entries after the cursor the checkpoint holds: acknowledged
	first    uint64   // the first entry to replay
}

// scanHeldEntry takes one kept entry into hs: it stays held; after the
// cursor it is queued, and acknowledged instead of replayed when the
// restored checkpoint holds its rows; at or below the cursor it is
// replayed again unless the restored checkpoint, or without a restore the
// positions stored with the cursor, cover its rows.
func (s *Source) scanHeldEntry(hs *heldScan, e walog.Entry) error {
	_, rec, err := walog.DecodeBatch(e.Payload, nil)
	if err != nil {
		return fmt.Errorf("source %s: WAL entry %d: %w", s.task, e.Seq, err)
	}
	if s.keeper != nil {
		s.keeper.Logged(rec)
	}
	pos, rows := positionsOf(rec)
	rec.Release()
	if len(rows) == 0 {
		s.warnNoOffsets(e.Seq)
	}
	hs.seek.merge(pos)
	for k, mm := range rows {
		if b, ok := hs.begin[k]; !ok || mm[0] < b {
			hs.begin[k] = mm[0]
		}
	}
	hs.held = append(hs.held, heldEntry{seq: e.Seq, rows: rows})
	at := posAt{seq: e.Seq, pos: pos, first: rows.first()}
	inCkpt := hs.restored != nil && rows.coveredBy(hs.restored)
	switch {
	case e.Seq > hs.cursor:
		hs.queue = append(hs.queue, at)
		if inCkpt {
			hs.covered = append(hs.covered, e.Seq)
			return nil
		}
	case inCkpt:
		return nil // the restored state holds it
	case hs.restored == nil && (len(rows) == 0 || rows.coveredBy(s.base)):
		// The local state holds what the positions stored with the
		// cursor cover. They lag the cursor when the previous run
		// replayed entries below it and did not see them all
		// acknowledged: those are replayed again.
		return nil
	default:
		hs.redo = append(hs.redo, at)
	}
	s.replaySet[e.Seq] = true
	if hs.first == 0 {
		hs.first = e.Seq
	}
	return nil
}

// restartAt makes the positions restart from the restored checkpoint's,
// past the rows the WAL no longer holds (begin: the lowest offset it
// holds per partition): they are given up, and a checkpoint that kept
// recording the positions before them would never hold the entries after
// them.
func (s *Source) restartAt(restored, begin posMap) {
	base := posMap{}
	base.merge(restored)
	gaps := s.gaps(restored, begin)
	for _, g := range gaps {
		base.merge(posMap{g.key: g.to})
	}
	if len(gaps) > 0 {
		s.lg.Warn("the WAL no longer holds rows the restored checkpoint does not contain: they cannot be replayed, and the source starts without them "+
			"(the checkpoint restored is older than the ones the WAL kept its entries for, e.g. an old savepoint)",
			"lost", describeGaps(gaps), "resume_at", describePositions(restored.list()))
	}
	s.mu.Lock()
	s.base = base
	s.mu.Unlock()
}

// isRedo reports whether a replayed entry lies at or below the cursor the
// scan found (a held log's replay after a restore).
func (s *Source) isRedo(seq uint64) bool { return s.hold && seq <= s.redoUpTo }

// redoAck acknowledges a replayed entry at or below the cursor: the WAL
// has nothing to do (its cursor has passed it), but the positions pass it
// only once it is acknowledged, in order (fold). A failed delivery leaves
// it unacknowledged: the positions stay before it, and a restore replays
// it again.
func (s *Source) redoAck(seq uint64) func(error) {
	return func(err error) {
		if err != nil {
			return
		}
		s.mu.Lock()
		s.redoAcked[seq] = true
		s.mu.Unlock()
	}
}

// warnNoOffsets says, once, that a held entry's rows carry no offsets.
func (s *Source) warnNoOffsets(seq uint64) {
	if s.warnedNoOffsets {
		return
	}
	s.warnedNoOffsets = true
	s.lg.Warn("the source cannot read its input again (connectors.Unrewindable) but its rows carry no __meta_offset: no checkpoint can be known to hold them, "+
		"so the WAL keeps this entry and every later one; give the rows offsets", "entry", seq)
}

// gap is rows of one partition a restore needs and the WAL no longer
// holds: from offset from (or the partition's start, when the checkpoint
// has no position for it) up to offset to.
type gap struct {
	key       posKey
	from, to  int64
	fromStart bool
}

// gaps compares the restored positions with what the WAL may have deleted:
// rows before the positions it released (a log that did not hold: before
// its cursor's positions) and before the first row it still keeps of the
// partition (begin).
func (s *Source) gaps(restored, begin posMap) []gap {
	released := s.released
	if !s.metaHeld {
		released = s.base
	}
	var out []gap
	for k, to := range released {
		if b, ok := begin[k]; ok && b < to {
			to = b
		}
		from, ok := restored[k]
		if ok && from >= to {
			continue
		}
		out = append(out, gap{key: k, from: from, to: to, fromStart: !ok})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key.topic != out[j].key.topic {
			return out[i].key.topic < out[j].key.topic
		}
		return out[i].key.part < out[j].key.part
	})
	return out
}

// describeGaps renders gaps for a log line: "partition 0 offsets 10 to
// 19, partition 1 before offset 7".
func describeGaps(gs []gap) string {
	parts := make([]string, 0, len(gs))
	for _, g := range gs {
		d := fmt.Sprintf("partition %d offsets %d to %d", g.key.part, g.from, g.to-1)
		if g.fromStart {
			d = fmt.Sprintf("partition %d before offset %d", g.key.part, g.to)
		}
		if g.key.topic != "" {
			d = g.key.topic + " " + d
		}
		parts = append(parts, d)
	}
	return strings.Join(parts, ", ")
}
