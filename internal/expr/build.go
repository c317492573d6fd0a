package expr

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// buildArray turns v into an Arrow array of n rows of type t. Buffers are
// Go memory: either taken over from v, when v owns its slices, or copied.
func buildArray(v *vec, t vtype, n int) (arrow.Array, error) {
	if t.k == kNull {
		return array.NewNull(n), nil
	}
	nullBitmap, nulls := packValidity(v, n)
	var buffers []*memory.Buffer
	switch t.k {
	case kInt, kTime:
		vals := v.i
		if v.scalar || v.borrowed {
			vals = make([]int64, n)
			if v.scalar {
				fill(vals, v.i[0])
			} else {
				copy(vals, v.i)
			}
		}
		buffers = []*memory.Buffer{nullBitmap, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(vals[:n]))}
	case kFloat:
		vals := v.f
		if v.scalar || v.borrowed {
			vals = make([]float64, n)
			if v.scalar {
				fill(vals, v.f[0])
			} else {
				copy(vals, v.f)
			}
		}
		buffers = []*memory.Buffer{nullBitmap, memory.NewBufferBytes(arrow.Float64Traits.CastToBytes(vals[:n]))}
	case kBool:
		bits := make([]byte, bitutil.BytesForBits(int64(n)))
		for i := 0; i < n; i++ {
			if v.b[v.idx(i)] {
				bitutil.SetBit(bits, i)
			}
		}
		buffers = []*memory.Buffer{nullBitmap, memory.NewBufferBytes(bits)}
	case kString:
		offsets, data, err := packStrings(v, n)
		if err != nil {
			return nil, err
		}
		buffers = []*memory.Buffer{nullBitmap, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets)), memory.NewBufferBytes(data)}
	}
	data := array.NewData(t.arrowType(), n, buffers, nil, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

func fill[T any](s []T, x T) {
	for i := range s {
		s[i] = x
	}
}

// packValidity returns the validity bitmap of v over n rows and the null
// count; the bitmap is nil when there are no nulls.
func packValidity(v *vec, n int) (*memory.Buffer, int) {
	if !v.hasNulls() || n == 0 {
		return nil, 0
	}
	bits := make([]byte, bitutil.BytesForBits(int64(n)))
	nulls := 0
	for i := 0; i < n; i++ {
		if v.validAt(i) {
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

// packStrings lays out the strings of v in Arrow's offsets/data form; null
// rows are empty.
func packStrings(v *vec, n int) ([]int32, []byte, error) {
	strs := v.strs()
	size := 0
	for i := 0; i < n; i++ {
		if v.validAt(i) {
			size += len(strs[v.idx(i)])
			if size > math.MaxInt32 {
				return nil, nil, errorf("string result exceeds 2 GiB, the limit of an Arrow string array")
			}
		}
	}
	offsets := make([]int32, n+1)
	data := make([]byte, 0, size)
	for i := 0; i < n; i++ {
		if v.validAt(i) {
			data = append(data, strs[v.idx(i)]...)
		}
		offsets[i+1] = int32(len(data))
	}
	return offsets, data, nil
}
