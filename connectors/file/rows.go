package file

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// connectRows opens the file of the input_type form, skipping the rows
// below the lowest sought offset of the partitions this subtask reads.
func (s *Source) connectRows() error {
	if len(s.assigned) == 0 {
		s.connected = true
		return nil // Read returns end of input
	}
	skip := s.parts[s.assigned[0]].skip
	for _, p := range s.assigned {
		skip = min(skip, s.parts[p].skip)
	}
	it := s.in.cfg.ArkFlow
	r, first, err := openRows(it.Type, it.Path, s.in.declared, s.batchSize, skip)
	if err != nil {
		return err
	}
	s.rows, s.row, s.connected = r, first, true
	s.size.Store(r.total())
	return nil
}

// fillRows reads batches of the file until at least one batch is ready,
// or the file ends. A panic over a corrupt batch (arrow and parquet data
// are checked only as far as their readers check it) is an error naming
// the file.
func (s *Source) fillRows(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("file %q: corrupt file: %v", s.in.cfg.ArkFlow.Path, r)
		}
		s.pos.Store(s.row)
	}()
	for len(s.ready) == 0 {
		if ctx.Err() != nil {
			return nil // Read reports ctx.Err()
		}
		rec, err := s.rows.next()
		if err == io.EOF {
			s.eof = true
			for _, p := range s.assigned {
				if err := s.cut(s.parts[p]); err != nil {
					return err
				}
			}
			return nil
		}
		if err != nil {
			return err
		}
		if !sameColumns(rec.Schema(), s.in.declared) {
			return fmt.Errorf("file %q: a batch has columns %s, not the file's %s", s.in.cfg.ArkFlow.Path, rec.Schema(), s.in.declared)
		}
		start := s.row
		s.row += rec.NumRows()
		if len(s.parts) == 1 {
			err = s.slice(rec, start)
		} else {
			err = s.deal(rec, start)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// slice cuts the rows of rec, the file's rows from start on, into the
// batches of the only partition.
func (s *Source) slice(rec arrow.RecordBatch, start int64) error {
	ps, bs, n := s.parts[0], int64(s.batchSize), rec.NumRows()
	for lo := max(ps.skip-start, 0); lo < n; {
		idx := start + lo
		hi := min(n, (idx/bs+1)*bs-start)
		if ps.pendN == 0 {
			ps.first = idx
		}
		ps.pend = append(ps.pend, rec.NewSlice(lo, hi))
		ps.pendN += hi - lo
		lo = hi
		if (start+hi)%bs == 0 {
			if err := s.cut(ps); err != nil {
				return err
			}
		}
	}
	return nil
}

// deal deals the rows of rec, the file's rows from start on, into the
// partitions: row i to partition i mod partitions, each partition's rows
// cut into batches of batchSize.
func (s *Source) deal(rec arrow.RecordBatch, start int64) error {
	np, bs := int64(len(s.parts)), int64(s.batchSize)
	for j := range rec.NumRows() {
		idx := start + j
		ps := s.parts[idx%np]
		if ps == nil || idx < ps.skip {
			continue
		}
		if ps.pendN == 0 && len(ps.take) == 0 {
			ps.first = idx
		}
		ps.take = append(ps.take, j)
		if (idx/np+1)%bs == 0 {
			if err := s.takeRows(ps, rec); err != nil {
				return err
			}
			if err := s.cut(ps); err != nil {
				return err
			}
		}
	}
	for _, p := range s.assigned {
		if err := s.takeRows(s.parts[p], rec); err != nil {
			return err
		}
	}
	return nil
}

// takeRows moves the rows of rec a partition has taken to its pending
// rows.
func (s *Source) takeRows(ps *partState, rec arrow.RecordBatch) error {
	if len(ps.take) == 0 {
		return nil
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues(ps.take, nil)
	idx := b.NewArray()
	b.Release()
	defer idx.Release()
	cols := make([]arrow.Array, 0, rec.NumCols())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, c := range rec.Columns() {
		t, err := compute.TakeArray(context.Background(), c, idx)
		if err != nil {
			return fmt.Errorf("file %q: %w", s.in.cfg.ArkFlow.Path, err)
		}
		cols = append(cols, t)
	}
	ps.pend = append(ps.pend, array.NewRecordBatch(s.in.declared, cols, int64(len(ps.take))))
	ps.pendN += int64(len(ps.take))
	ps.take = ps.take[:0]
	return nil
}

// cut queues the pending rows of a partition as one batch, with the
// __meta_* columns.
func (s *Source) cut(ps *partState) error {
	if ps.pendN == 0 {
		return nil
	}
	pend, n, first := ps.pend, ps.pendN, ps.first
	ps.pend, ps.pendN = nil, 0
	defer func() {
		for _, r := range pend {
			r.Release()
		}
	}()
	cols := make([]arrow.Array, 0, s.in.schema.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	parts := make([]arrow.Array, len(pend))
	for i := range s.in.declared.NumFields() {
		for j, r := range pend {
			parts[j] = r.Column(i)
		}
		if len(parts) == 1 {
			parts[0].Retain()
			cols = append(cols, parts[0])
			continue
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			return fmt.Errorf("file %q: %w", s.in.cfg.ArkFlow.Path, err)
		}
		cols = append(cols, c)
	}
	step := int64(len(s.parts))
	cols = append(cols, s.metaColumns(ps.id, first, step, n)...)
	rec := array.NewRecordBatch(s.in.schema, cols, n)
	last := first + (n-1)*step
	s.ready = append(s.ready, ready{rec: rec, part: ps.id, first: first, last: last})
	return nil
}

// metaColumns returns the __meta_* columns of n rows of partition part,
// the first at row first and each next one step rows further.
func (s *Source) metaColumns(part int32, first, step, n int64) []arrow.Array {
	src := array.NewStringBuilder(memory.DefaultAllocator)
	pb := array.NewInt32Builder(memory.DefaultAllocator)
	off := array.NewInt64Builder(memory.DefaultAllocator)
	defer src.Release()
	defer pb.Release()
	defer off.Release()
	for i := range n {
		src.Append(s.info.OperatorID)
		pb.Append(part)
		off.Append(first + i*step)
	}
	return []arrow.Array{src.NewArray(), pb.NewArray(), off.NewArray()}
}
