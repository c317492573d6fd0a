package file

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// connectRows opens the file of the input_type form, skipping the rows
// below the sought offset.
func (s *Source) connectRows() error {
	s.connected = true
	if len(s.assigned) == 0 {
		return nil // Read returns end of input
	}
	it := s.in.cfg.ArkFlow
	r, first, err := openRows(it.Type, it.Path, s.in.declared, s.batchSize, s.parts[0].skip)
	if err != nil {
		return err
	}
	s.rows, s.row = r, first
	s.size.Store(r.total())
	return nil
}

// fillRows reads batches of the file until at least one batch of
// batchSize rows (the last one fewer) is ready, or the file ends. A panic
// over a corrupt batch (arrow and parquet data are checked only as far as
// their readers check it) is an error naming the file.
func (s *Source) fillRows(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("file %q: corrupt file: %v", s.in.cfg.ArkFlow.Path, r)
		}
		s.pos.Store(s.row)
	}()
	bs := int64(s.batchSize)
	skip := s.parts[0].skip
	for len(s.ready) == 0 {
		if ctx.Err() != nil {
			return nil // Read reports ctx.Err()
		}
		rec, err := s.rows.next()
		if err == io.EOF {
			s.eof = true
			return s.cut()
		}
		if err != nil {
			return err
		}
		if !sameColumns(rec.Schema(), s.in.declared) {
			return fmt.Errorf("file %q: a batch has columns %s, not the file's %s", s.in.cfg.ArkFlow.Path, rec.Schema(), s.in.declared)
		}
		start, n := s.row, rec.NumRows()
		s.row += n
		for lo := max(skip-start, 0); lo < n; {
			idx := start + lo
			hi := min(n, (idx/bs+1)*bs-start)
			if s.pendN == 0 {
				s.pendFirst = idx
			}
			s.pend = append(s.pend, rec.NewSlice(lo, hi))
			s.pendN += hi - lo
			lo = hi
			if (start+hi)%bs == 0 {
				if err := s.cut(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// cut queues the pending rows as one batch, with the __meta_* columns.
func (s *Source) cut() error {
	if s.pendN == 0 {
		return nil
	}
	pend, n, first := s.pend, s.pendN, s.pendFirst
	s.pend, s.pendN = nil, 0
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
	cols = append(cols, s.metaColumns(first, n)...)
	rec := array.NewRecordBatch(s.in.schema, cols, n)
	s.ready = append(s.ready, ready{rec: rec, part: 0, first: first, last: first + n - 1})
	return nil
}

// metaColumns returns the __meta_* columns of n rows from row first.
func (s *Source) metaColumns(first, n int64) []arrow.Array {
	src := array.NewStringBuilder(memory.DefaultAllocator)
	part := array.NewInt32Builder(memory.DefaultAllocator)
	off := array.NewInt64Builder(memory.DefaultAllocator)
	defer src.Release()
	defer part.Release()
	defer off.Release()
	for i := range n {
		src.Append(s.info.OperatorID)
		part.Append(0)
		off.Append(first + i)
	}
	return []arrow.Array{src.NewArray(), part.NewArray(), off.NewArray()}
}
