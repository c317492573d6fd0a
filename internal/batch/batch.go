// Package batch holds column-wise operations on Arrow record batches that
// the runtime needs on its hot path: selecting rows by index, splitting a
// batch by destination, filtering by a mask. They work a column at a time
// with typed fast paths for the common types and fall back to arrow's
// compute kernels for the rest.
package batch

import (
	"context"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// RowTaker is a record batch that takes its own rows (a typed batch,
// whose rows are Go values): Take calls TakeRows, with TakeArray for the
// columns it holds as arrays.
type RowTaker interface {
	TakeRows(idx []int32, take func(arrow.Array, []int32) (arrow.Array, error)) (arrow.RecordBatch, error)
}

// Take returns a record with the rows of rec at idx, in that order. The
// caller releases the result.
func Take(rec arrow.RecordBatch, idx []int32) (arrow.RecordBatch, error) {
	if t, ok := rec.(RowTaker); ok {
		return t.TakeRows(idx, TakeArray)
	}
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

// TakeArray returns the values of a at idx. Common types are copied
// straight into new buffers; others go through arrow's compute kernel.
func TakeArray(a arrow.Array, idx []int32) (arrow.Array, error) {
	if len(idx) == 0 {
		return array.MakeArrayOfNull(memory.DefaultAllocator, a.DataType(), 0), nil
	}
	switch arr := a.(type) {
	case *array.Int64:
		return takeFixed(arr, idx, arr.Int64Values(), arrow.Int64Traits.CastToBytes), nil
	case *array.Int32:
		return takeFixed(arr, idx, arr.Int32Values(), arrow.Int32Traits.CastToBytes), nil
	case *array.Float64:
		return takeFixed(arr, idx, arr.Float64Values(), arrow.Float64Traits.CastToBytes), nil
	case *array.Float32:
		return takeFixed(arr, idx, arr.Float32Values(), arrow.Float32Traits.CastToBytes), nil
	case *array.Timestamp:
		return takeFixed(arr, idx, arr.TimestampValues(), arrow.TimestampTraits.CastToBytes), nil
	case *array.String:
		inOffs, inData := arr.ValueOffsets(), arr.ValueBytes()
		base := inOffs[0]
		n := 0
		for _, i := range idx {
			n += int(inOffs[i+1] - inOffs[i])
		}
		if n > math.MaxInt32 {
			break // let the kernel report it
		}
		offs := make([]int32, len(idx)+1)
		data := make([]byte, 0, n)
		for j, i := range idx {
			data = append(data, inData[inOffs[i]-base:inOffs[i+1]-base]...)
			offs[j+1] = int32(len(data))
		}
		valid, nulls := validity(arr, idx)
		bufs := []*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs)), memory.NewBufferBytes(data)}
		d := array.NewData(arr.DataType(), len(idx), bufs, nil, nulls, 0)
		defer d.Release()
		return array.MakeFromData(d), nil
	case *array.Boolean:
		b := array.NewBooleanBuilder(memory.DefaultAllocator)
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
	ix := array.NewInt32Builder(memory.DefaultAllocator)
	defer ix.Release()
	ix.AppendValues(idx, nil)
	ia := ix.NewArray()
	defer ia.Release()
	return compute.TakeArray(context.Background(), a, ia)
}

// validity returns the validity bitmap of a's values at idx and their
// null count; the bitmap is nil when a has no nulls.
func validity(a arrow.Array, idx []int32) (*memory.Buffer, int) {
	if a.NullN() == 0 {
		return nil, 0
	}
	bits := make([]byte, bitutil.BytesForBits(int64(len(idx))))
	nulls := 0
	for j, i := range idx {
		if a.IsValid(int(i)) {
			bitutil.SetBit(bits, j)
		} else {
			nulls++
		}
	}
	return memory.NewBufferBytes(bits), nulls
}

func takeFixed[T any](a arrow.Array, idx []int32, vals []T, toBytes func([]T) []byte) arrow.Array {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = vals[i]
	}
	valid, nulls := validity(a, idx)
	d := array.NewData(a.DataType(), len(idx), []*memory.Buffer{valid, memory.NewBufferBytes(toBytes(out))}, nil, nulls, 0)
	defer d.Release()
	return array.MakeFromData(d)
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

// Gather returns, for each i, the value of arrays[src[i]] at row[i], or a
// null where src[i] is negative: rows taken from many arrays of one type
// at once, in the order given. Common types are copied straight into new
// buffers; others are taken from each array, concatenated and put in
// order.
func Gather(typ arrow.DataType, arrays []arrow.Array, src, row []int32) (arrow.Array, error) {
	n := len(src)
	switch typ.ID() {
	case arrow.INT64:
		return gatherFixed(typ, arrays, src, row, func(a arrow.Array) []int64 { return a.(*array.Int64).Int64Values() }, arrow.Int64Traits.CastToBytes), nil
	case arrow.INT32:
		return gatherFixed(typ, arrays, src, row, func(a arrow.Array) []int32 { return a.(*array.Int32).Int32Values() }, arrow.Int32Traits.CastToBytes), nil
	case arrow.FLOAT64:
		return gatherFixed(typ, arrays, src, row, func(a arrow.Array) []float64 { return a.(*array.Float64).Float64Values() }, arrow.Float64Traits.CastToBytes), nil
	case arrow.FLOAT32:
		return gatherFixed(typ, arrays, src, row, func(a arrow.Array) []float32 { return a.(*array.Float32).Float32Values() }, arrow.Float32Traits.CastToBytes), nil
	case arrow.TIMESTAMP:
		return gatherFixed(typ, arrays, src, row, func(a arrow.Array) []arrow.Timestamp { return a.(*array.Timestamp).TimestampValues() }, arrow.TimestampTraits.CastToBytes), nil
	case arrow.STRING:
		size := 0
		for i, s := range src {
			if s >= 0 {
				a := arrays[s].(*array.String)
				size += a.ValueLen(int(row[i]))
			}
		}
		if size > math.MaxInt32 {
			break
		}
		offs := make([]int32, n+1)
		data := make([]byte, 0, size)
		for i, s := range src {
			if s >= 0 {
				if a := arrays[s].(*array.String); a.IsValid(int(row[i])) {
					data = append(data, a.Value(int(row[i]))...)
				}
			}
			offs[i+1] = int32(len(data))
		}
		valid, nulls := gatherValidity(arrays, src, row)
		bufs := []*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs)), memory.NewBufferBytes(data)}
		d := array.NewData(typ, n, bufs, nil, nulls, 0)
		defer d.Release()
		return array.MakeFromData(d), nil
	case arrow.BOOL:
		b := array.NewBooleanBuilder(memory.DefaultAllocator)
		defer b.Release()
		b.Reserve(n)
		for i, s := range src {
			if s < 0 || arrays[s].IsNull(int(row[i])) {
				b.AppendNull()
			} else {
				b.UnsafeAppend(arrays[s].(*array.Boolean).Value(int(row[i])))
			}
		}
		return b.NewArray(), nil
	}
	return gatherByTake(typ, arrays, src, row)
}

// gatherByTake is Gather for any type: a take per array, a
// concatenation with one null at the end, and a take into order.
func gatherByTake(typ arrow.DataType, arrays []arrow.Array, src, row []int32) (arrow.Array, error) {
	idx := make([][]int32, len(arrays))
	pos := make([]int32, len(src))
	for i, s := range src {
		if s >= 0 {
			pos[i] = int32(len(idx[s]))
			idx[s] = append(idx[s], row[i])
		}
	}
	parts := make([]arrow.Array, 0, len(arrays)+1)
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	offset := make([]int32, len(arrays))
	total := int32(0)
	for s, a := range arrays {
		offset[s] = total
		if len(idx[s]) == 0 {
			continue
		}
		p, err := TakeArray(a, idx[s])
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
		total += int32(len(idx[s]))
	}
	parts = append(parts, array.MakeArrayOfNull(memory.DefaultAllocator, typ, 1))
	all, err := array.Concatenate(parts, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer all.Release()
	order := make([]int32, len(src))
	for i, s := range src {
		if s < 0 {
			order[i] = total // the null after the pieces
		} else {
			order[i] = offset[s] + pos[i]
		}
	}
	return TakeArray(all, order)
}

// gatherValidity is validity for Gather: a null where src is negative or
// the value is null.
func gatherValidity(arrays []arrow.Array, src, row []int32) (*memory.Buffer, int) {
	bits := make([]byte, bitutil.BytesForBits(int64(len(src))))
	nulls := 0
	for i, s := range src {
		if s >= 0 && arrays[s].IsValid(int(row[i])) {
			bitutil.SetBit(bits, i)
		} else {
			nulls++
		}
	}
	if nulls == 0 {
		return nil, 0
	}
	return memory.NewBufferBytes(bits), nulls
}

func gatherFixed[T any](typ arrow.DataType, arrays []arrow.Array, src, row []int32, values func(arrow.Array) []T, toBytes func([]T) []byte) arrow.Array {
	vals := make([][]T, len(arrays))
	for s, a := range arrays {
		vals[s] = values(a)
	}
	out := make([]T, len(src))
	for i, s := range src {
		if s >= 0 {
			out[i] = vals[s][row[i]]
		}
	}
	valid, nulls := gatherValidity(arrays, src, row)
	d := array.NewData(typ, len(src), []*memory.Buffer{valid, memory.NewBufferBytes(toBytes(out))}, nil, nulls, 0)
	defer d.Release()
	return array.MakeFromData(d)
}
