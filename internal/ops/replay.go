package ops

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// MetaColumns are the indices of a schema's __meta_source,
// __meta_partition and __meta_offset columns (-1 when absent). Stateful
// operators use them to know which input their state has applied.
//
// Key (the key column, -1 for none) and MaxParallelism tell Replayed the
// key group of a row, which it needs for rows of key groups taken over in
// a rescale (statestore.Journal.AppliedIn); operators set them.
type MetaColumns struct {
	Source, Partition, Offset int
	Key, MaxParallelism       int
}

// MetaColumnsOf finds the metadata columns of a schema.
func MetaColumnsOf(s *arrow.Schema) MetaColumns {
	find := func(name string) int {
		if idx := s.FieldIndices(name); len(idx) == 1 {
			return idx[0]
		}
		return -1
	}
	return MetaColumns{Source: find(connectors.MetaSource), Partition: find(connectors.MetaPartition), Offset: find(connectors.MetaOffset), Key: -1}
}

// Present reports whether rows carry their source positions.
func (m MetaColumns) Present() bool { return m.Source >= 0 && m.Partition >= 0 && m.Offset >= 0 }

// Replayed starts a journal epoch for a batch and drops the rows the
// operator's committed state already contains (offset below the applied
// frontier of their source partition: a replay after a restart). The epoch
// records the input the remaining rows cover.
//
// The returned batch carries a new acknowledgement for what the operator
// emits from it: when every output is acknowledged, the epoch is done; when
// the epoch commits (in order, after every earlier epoch), the input's own
// acknowledgement is released. So the source and the WAL commit only input
// whose state is committed. When every row was already applied,
// it releases the batch and returns a zero Batch. Rows without position
// columns are never dropped (and cover nothing).
func Replayed(j *statestore.Journal, m MetaColumns, b Batch) (Batch, *statestore.Epoch, error) {
	epoch := j.Begin()
	input := b.Ack
	epoch.OnSettled(func(err error) { input.Release(err) })
	b.Ack = ack.New(epoch.Done)
	if !m.Present() {
		return b, epoch, nil
	}
	if oneRunAhead(j, epoch, b.Rec) {
		return b, epoch, nil
	}
	src, ok1 := b.Rec.Column(m.Source).(*array.String)
	part, ok2 := b.Rec.Column(m.Partition).(*array.Int32)
	off, ok3 := b.Rec.Column(m.Offset).(*array.Int64)
	if !ok1 || !ok2 || !ok3 {
		return b, epoch, nil
	}
	n := int(b.Rec.NumRows())
	var keep []bool
	// A batch usually holds rows of one source partition: track the run of
	// equal (source, partition) and touch the journal once per run.
	runSrc, runPart, runEnd := "", int32(-1), int64(-1)
	applied, inherited, hasInherited := int64(0), int64(0), false
	var groups []int32 // key group of every row, computed when needed
	flush := func() {
		if runEnd >= 0 {
			epoch.Covers(runSrc, runPart, runEnd)
		}
	}
	offs := off.Int64Values()
	parts := part.Int32Values()
	for r := 0; r < n; r++ {
		p, o := parts[r], offs[r]
		if p != runPart || src.Value(r) != runSrc {
			flush()
			runSrc, runPart, runEnd = src.Value(r), p, -1
			applied = j.Applied(runSrc, p)
			inherited, hasInherited = j.Inherited(runSrc, p)
		}
		if hasInherited && o >= applied && o < inherited {
			// Key groups taken over in a rescale may have applied more
			// of this partition than the subtask itself.
			if groups == nil {
				var err error
				if groups, err = rowGroups(b.Rec, m); err != nil {
					b.Ack.Release(err)
					return Batch{}, nil, err
				}
			}
			if groups != nil && o < j.AppliedIn(runSrc, p, int(groups[r])) {
				if keep == nil {
					keep = make([]bool, n)
					for i := 0; i < r; i++ {
						keep[i] = true
					}
				}
				continue
			}
		}
		if o < applied {
			if keep == nil {
				keep = make([]bool, n)
				for i := 0; i < r; i++ {
					keep[i] = true
				}
			}
			continue
		}
		if keep != nil {
			keep[r] = true
		}
		if o+1 > runEnd {
			runEnd = o + 1
		}
	}
	flush()
	if keep == nil {
		return b, epoch, nil
	}
	rec, err := batch.Filter(b.Rec, keep)
	b.Rec.Release()
	if err != nil {
		b.Ack.Release(err)
		return Batch{}, nil, err
	}
	if rec == nil {
		// Everything was applied before: nothing to stage or emit.
		b.Ack.Release(nil)
		return Batch{}, epoch, nil
	}
	b.Rec = rec
	return b, epoch, nil
}

// oneRunAhead covers the batch's input in epoch and reports true when the
// batch says its rows are consecutive rows of one source partition
// (MetaRun, without making its metadata columns) and none of them was
// applied before: the steady state, where the per-row check below would
// keep every row.
func oneRunAhead(j *statestore.Journal, epoch *statestore.Epoch, rec arrow.RecordBatch) bool {
	r, ok := rec.(interface {
		MetaRun() (string, int32, int64, bool)
	})
	if !ok {
		return false
	}
	src, part, start, ok := r.MetaRun()
	if !ok || start < j.Applied(src, part) {
		return false
	}
	if inherited, has := j.Inherited(src, part); has && start < inherited {
		return false
	}
	if n := rec.NumRows(); n > 0 {
		epoch.Covers(src, part, start+n)
	}
	return true
}

// rowGroups returns the key group of every row, or nil when the operator
// has no key column (its rows are then replayed: applying a row again is
// better than skipping one that was not).
func rowGroups(rec arrow.RecordBatch, m MetaColumns) ([]int32, error) {
	if m.Key < 0 || m.MaxParallelism < 1 {
		return nil, nil
	}
	groups := make([]int32, rec.NumRows())
	if err := keys.Groups(rec.Column(m.Key), m.MaxParallelism, groups); err != nil {
		return nil, fmt.Errorf("key groups of replayed rows: %w", err)
	}
	return groups, nil
}
