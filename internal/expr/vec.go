package expr

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// vec is an intermediate result: one column of values of a single kind.
//
// Exactly one of the value slices is used, chosen by k (kTime uses i; kNull
// uses none). A scalar vec holds one value that stands for every row; its
// slices have length 1. Otherwise the slices have one entry per row.
//
// valid is nil when no row is null, and otherwise tells which rows are
// non-null (for a scalar, valid[0] tells whether the scalar is null). The
// value of a null row is unspecified and must be ignored.
//
// Vecs are immutable once built: kernels allocate new slices for results and
// may share input slices (for example a validity slice) with their output.
// Slices may alias the buffers of input Arrow arrays (borrowed is then set),
// so they must never be written to.
type vec struct {
	k      kind
	scalar bool
	i      []int64
	f      []float64
	s      []string
	b      []bool
	valid  []bool

	// sa is the source column of a string vec read from an *array.String;
	// s is then filled from it on first use by strs. Kernels with a fast
	// path read sa directly (String.Value is zero-copy).
	sa *array.String
	// borrowed marks i or f as aliasing an Arrow buffer that the result of
	// Eval does not own; such slices are copied when building the result.
	borrowed bool
}

var validFalse = []bool{false}

// nullScalars holds the typed null scalars, shared and never modified.
var nullScalars = func() [kTime + 1]*vec {
	var out [kTime + 1]*vec
	for k := range out {
		out[k] = &vec{
			k: kind(k), scalar: true, valid: validFalse,
			i: []int64{0}, f: []float64{0}, s: []string{""}, b: []bool{false},
		}
	}
	return out
}()

func nullScalar(k kind) *vec { return nullScalars[k] }

func intScalar(x int64) *vec      { return &vec{k: kInt, scalar: true, i: []int64{x}} }
func timeScalar(x int64) *vec     { return &vec{k: kTime, scalar: true, i: []int64{x}} }
func floatScalar(x float64) *vec  { return &vec{k: kFloat, scalar: true, f: []float64{x}} }
func stringScalar(x string) *vec  { return &vec{k: kString, scalar: true, s: []string{x}} }
func boolScalar(x bool) *vec      { return &vec{k: kBool, scalar: true, b: []bool{x}} }
func (v *vec) isNullScalar() bool { return v.scalar && v.valid != nil && !v.valid[0] }

// validAt reports whether row i (or the scalar) is non-null.
func (v *vec) validAt(i int) bool {
	if v.valid == nil {
		return true
	}
	if v.scalar {
		return v.valid[0]
	}
	return v.valid[i]
}

// idx maps row i to the index of its value in the slices.
func (v *vec) idx(i int) int {
	if v.scalar {
		return 0
	}
	return i
}

// strs returns the string values, materializing them from the source
// column on first use. The strings alias the column's data buffer.
func (v *vec) strs() []string {
	if v.s == nil && v.sa != nil {
		col := newStrCol(v.sa)
		s := make([]string, v.sa.Len())
		for i := range s {
			s[i] = col.at(i)
		}
		v.s = s
	}
	return v.s
}

// strCol reads the values of an *array.String without the per-call checks
// of String.Value: string i is data[offs[i]-base : offs[i+1]-base].
type strCol struct {
	offs []int32
	data string
	base int32
}

func newStrCol(a *array.String) strCol {
	if a.Len() == 0 {
		return strCol{} // the offsets buffer may be absent
	}
	c := strCol{offs: a.ValueOffsets()}
	c.base = c.offs[0]
	if b := a.ValueBytes(); len(b) > 0 {
		// A zero-copy view of the value bytes, which are immutable and
		// outlive the evaluation (the record holds them).
		c.data = unsafe.String(unsafe.SliceData(b), len(b))
	}
	return c
}

func (c strCol) at(i int) string { return c.data[c.offs[i]-c.base : c.offs[i+1]-c.base] }

// hasNulls reports whether some row may be null.
func (v *vec) hasNulls() bool {
	if v.valid == nil {
		return false
	}
	if v.scalar {
		return !v.valid[0]
	}
	return true
}

// mergeValid returns the validity of a row-wise combination of a and b that
// is null where either input is null. Scalar inputs must not be null.
func mergeValid(n int, a, b *vec) []bool {
	va, vb := a.valid, b.valid
	if a.scalar {
		va = nil
	}
	if b.scalar {
		vb = nil
	}
	switch {
	case va == nil:
		return vb
	case vb == nil:
		return va
	}
	out := make([]bool, n)
	for i := range out {
		out[i] = va[i] && vb[i]
	}
	return out
}

// newVec returns an empty vector (or scalar when n is 1 and scalar is set)
// of kind k with value slices of length m.
func newVec(k kind, m int, scalar bool) *vec {
	v := &vec{k: k, scalar: scalar}
	switch k {
	case kInt, kTime:
		v.i = make([]int64, m)
	case kFloat:
		v.f = make([]float64, m)
	case kString:
		v.s = make([]string, m)
	case kBool:
		v.b = make([]bool, m)
	}
	return v
}

// shape reports the length of a result computed from operands whose
// scalar flags are given, and whether that result is a scalar.
func shape(n int, scalars ...bool) (int, bool) {
	for _, s := range scalars {
		if !s {
			return n, false
		}
	}
	return 1, true
}

func isActive(act []bool, i int) bool { return act == nil || act[i] }

// badRow returns the first row for which bad(i) holds and that is active
// and valid in every vec of vs, or -1. For a scalar computation (all of vs
// scalars), bad(0) is checked and blamed on the first active row.
func (c *evalCtx) badRow(scalar bool, act []bool, bad func(i int) bool, vs ...*vec) int {
	if !scalar {
		return firstBad(c.n, act, bad, vs...)
	}
	for _, v := range vs {
		if !v.validAt(0) {
			return -1
		}
	}
	if !bad(0) {
		return -1
	}
	for i := 0; i < c.n; i++ {
		if isActive(act, i) {
			return i
		}
	}
	return -1
}

// firstBad returns the first row i < n for which bad(i) holds and that is
// active and valid in every vec of vs, or -1.
func firstBad(n int, act []bool, bad func(i int) bool, vs ...*vec) int {
rows:
	for i := 0; i < n; i++ {
		if !isActive(act, i) {
			continue
		}
		for _, v := range vs {
			if !v.validAt(i) {
				continue rows
			}
		}
		if bad(i) {
			return i
		}
	}
	return -1
}

// narrow returns the rows of act for which keep holds: act AND keep, with
// nil standing for all rows.
func narrow(n int, act []bool, keep func(i int) bool) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = isActive(act, i) && keep(i)
	}
	return out
}

// strArena hands out strings carved from large shared byte chunks, so that
// kernels producing new strings (concatenation, case mapping, formatting)
// make a few large allocations instead of one per row.
type strArena struct {
	buf []byte
}

const arenaChunk = 32 << 10

// begin returns an empty buffer to append one string to. Pass the result to
// end; appending more than want bytes is allowed but may allocate.
func (a *strArena) begin(want int) []byte {
	if cap(a.buf)-len(a.buf) < want {
		a.buf = make([]byte, 0, max(arenaChunk, want))
	}
	return a.buf[len(a.buf):len(a.buf):cap(a.buf)]
}

// end turns the buffer returned by begin, after appending to it, into a
// string without copying.
func (a *strArena) end(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(b) == cap(a.buf)-len(a.buf) {
		// b still lives in the current chunk: claim the bytes.
		a.buf = a.buf[:len(a.buf)+len(b)]
	}
	// The bytes are never written again: the chunk only grows past them,
	// and a reallocated b is owned by this string alone.
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// concat returns the concatenation of parts.
func (a *strArena) concat(parts ...string) string {
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	b := a.begin(size)
	for _, p := range parts {
		b = append(b, p...)
	}
	return a.end(b)
}
