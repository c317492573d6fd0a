// Package batch holds column-wise operations on Arrow record batches that
// the runtime needs on its hot path: selecting rows by index, splitting a
// batch by destination, filtering by a mask. They work a column at a time
// with typed fast paths for the common types and fall back to arrow's
// compute kernels for the rest.
package batch

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Take returns a record with the rows of rec at idx, in that order. The
// caller releases the result.
func Take(rec arrow.RecordBatch, idx []int32) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		c, err := TakeArray(rec.Column(i), idx)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(idx))), nil
}

// TakeArray returns the values of a at idx.
func TakeArray(a arrow.Array, idx []int32) (arrow.Array, error) {
	mem := memory.DefaultAllocator
	switch arr := a.(type) {
	case *array.Int64:
		return takeFixed(arr, idx, arr.Int64Values(), array.NewInt64Builder(mem)), nil
	case *array.Int32:
		return takeFixed(arr, idx, arr.Int32Values(), array.NewInt32Builder(mem)), nil
	case *array.Float64:
		return takeFixed(arr, idx, arr.Float64Values(), array.NewFloat64Builder(mem)), nil
	case *array.Float32:
		return takeFixed(arr, idx, arr.Float32Values(), array.NewFloat32Builder(mem)), nil
	case *array.Timestamp:
		b := array.NewTimestampBuilder(mem, arr.DataType().(*arrow.TimestampType))
		return takeFixed(arr, idx, arr.TimestampValues(), b), nil
	case *array.String:
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.Reserve(len(idx))
		n := 0
		for _, i := range idx {
			n += arr.ValueLen(int(i))
		}
		b.ReserveData(n)
		for _, i := range idx {
			if arr.IsNull(int(i)) {
				b.AppendNull()
			} else {
				b.Append(arr.Value(int(i)))
			}
		}
		return b.NewArray(), nil
	case *array.Boolean:
		b := array.NewBooleanBuilder(mem)
		defer b.Release()
		b.Reserve(len(idx))
		for _, i := range idx {
			if arr.IsNull(int(i)) {
				b.AppendNull()
			} else {
				b.UnsafeAppend(arr.Value(int(i)))
			}
		}
		return b.NewArray(), nil
	}
	ix := array.NewInt32Builder(mem)
	defer ix.Release()
	ix.AppendValues(idx, nil)
	ia := ix.NewArray()
	defer ia.Release()
	return compute.TakeArray(context.Background(), a, ia)
}

type fixedBuilder[T any] interface {
	array.Builder
	AppendValues([]T, []bool)
}

func takeFixed[T any](a arrow.Array, idx []int32, vals []T, b fixedBuilder[T]) arrow.Array {
	defer b.Release()
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = vals[i]
	}
	var valid []bool
	if a.NullN() > 0 {
		valid = make([]bool, len(idx))
		for j, i := range idx {
			valid[j] = a.IsValid(int(i))
		}
	}
	b.AppendValues(out, valid)
	return b.NewArray()
}

// Split distributes the rows of rec to n destinations: row r goes to
// dest[r]. It returns one record per destination (nil where no row goes),
// each keeping the relative order of its rows. When every row goes to one
// destination, that destination gets rec itself, retained.
func Split(rec arrow.RecordBatch, dest []int32, n int) ([]arrow.RecordBatch, error) {
	out := make([]arrow.RecordBatch, n)
	rows := int(rec.NumRows())
	if rows == 0 {
		return out, nil
	}
	counts := make([]int32, n)
	for _, d := range dest[:rows] {
		counts[d]++
	}
	for d, c := range counts {
		if int(c) == rows {
			rec.Retain()
			out[d] = rec
			return out, nil
		}
	}
	// Counting sort of row indices by destination.
	starts := make([]int32, n+1)
	for d := 0; d < n; d++ {
		starts[d+1] = starts[d] + counts[d]
	}
	idx := make([]int32, rows)
	fill := append([]int32(nil), starts[:n]...)
	for r, d := range dest[:rows] {
		idx[fill[d]] = int32(r)
		fill[d]++
	}
	for d := 0; d < n; d++ {
		if counts[d] == 0 {
			continue
		}
		part, err := Take(rec, idx[starts[d]:starts[d+1]])
		if err != nil {
			for _, p := range out {
				if p != nil {
					p.Release()
				}
			}
			return nil, err
		}
		out[d] = part
	}
	return out, nil
}

// Filter returns the rows of rec where keep is true. When every row is kept
// it returns rec itself, retained; when none is, it returns nil.
func Filter(rec arrow.RecordBatch, keep []bool) (arrow.RecordBatch, error) {
	rows := int(rec.NumRows())
	idx := make([]int32, 0, rows)
	for r := 0; r < rows; r++ {
		if keep[r] {
			idx = append(idx, int32(r))
		}
	}
	switch len(idx) {
	case 0:
		return nil, nil
	case rows:
		rec.Retain()
		return rec, nil
	}
	return Take(rec, idx)
}

// SameSchema reports whether two schemas have the same field names and
// types, in order (nullability and metadata are ignored).
func SameSchema(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := 0; i < a.NumFields(); i++ {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}
