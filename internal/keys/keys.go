// Package keys turns key columns into key groups.
//
// A row's key group is FNV-1a-64 of its key bytes modulo max_parallelism
// (ArkFlow v1's formula, KeyGroup). The key bytes of a value are:
//
//   - strings and binary: their bytes;
//   - signed integers (8 to 64 bits), timestamps, date32/64 and durations:
//     the value as a big-endian int64 (8 bytes), so an int32 5 and an int64 5
//     land in the same group;
//   - unsigned integers: the value as a big-endian uint64;
//   - booleans: one byte, 0 or 1;
//   - floats: the IEEE-754 bits of the float64 value, big-endian;
//   - null: no bytes (the group of the empty string).
package keys

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// The hash is HashKey, the one FNV-1a-64 of the module (ArkFlow v1's
// key-group function is part of the wire contract). The helpers below only
// lay a value out as its key bytes first; HashKey inlines, so the hot
// loops in Hashes pay no call.

// hashU64 is HashKey of v as 8 big-endian bytes.
func hashU64(v uint64) uint64 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return HashKey(b[:])
}

// nullHash and boolHash are the hashes of the key bytes of null (none)
// and of false and true (one byte, 0 or 1).
var (
	nullHash = HashKey(nil)
	boolHash = [2]uint64{HashKey([]byte{0}), HashKey([]byte{1})}
)

// Supported reports whether a column type can be a key.
func Supported(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY,
		arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.BOOL, arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64, arrow.DURATION,
		arrow.FLOAT32, arrow.FLOAT64:
		return true
	}
	return false
}

// Hashes writes the FNV-1a-64 hash of every row's key bytes into dst (which
// must have col.Len() entries).
func Hashes(col arrow.Array, dst []uint64) error {
	n := col.Len()
	null := nullHash
	switch a := col.(type) {
	case *array.String:
		// Walk the offsets and bytes directly: Value(i) per row costs more
		// than the hash of a short key.
		offs, data := a.ValueOffsets(), a.ValueBytes()
		base := offs[0]
		for i := 0; i < n; i++ {
			dst[i] = HashKey(data[offs[i]-base : offs[i+1]-base])
		}
	case *array.LargeString:
		offs, data := a.ValueOffsets(), a.ValueBytes()
		base := offs[0]
		for i := 0; i < n; i++ {
			dst[i] = HashKey(data[offs[i]-base : offs[i+1]-base])
		}
	case *array.Binary:
		for i := 0; i < n; i++ {
			dst[i] = HashKey(a.Value(i))
		}
	case *array.LargeBinary:
		for i := 0; i < n; i++ {
			dst[i] = HashKey(a.Value(i))
		}
	default:
		if !hashFixed(col, dst) {
			return fmt.Errorf("type %s cannot be a key", col.DataType())
		}
	}
	if col.NullN() > 0 {
		for i := 0; i < n; i++ {
			if col.IsNull(i) {
				dst[i] = null
			}
		}
	}
	return nil
}

// hashFixed is Hashes for the fixed-width key types (integers, times,
// booleans, floats); it reports false for any other type. Nulls are left
// to Hashes.
func hashFixed(col arrow.Array, dst []uint64) bool {
	n := col.Len()
	switch a := col.(type) {
	case *array.Int64:
		for i, v := range a.Int64Values() {
			dst[i] = hashU64(uint64(v))
		}
	case *array.Int32:
		for i, v := range a.Int32Values() {
			dst[i] = hashU64(uint64(int64(v)))
		}
	case *array.Int16:
		for i, v := range a.Int16Values() {
			dst[i] = hashU64(uint64(int64(v)))
		}
	case *array.Int8:
		for i, v := range a.Int8Values() {
			dst[i] = hashU64(uint64(int64(v)))
		}
	case *array.Uint64:
		for i, v := range a.Uint64Values() {
			dst[i] = hashU64(v)
		}
	case *array.Uint32:
		for i, v := range a.Uint32Values() {
			dst[i] = hashU64(uint64(v))
		}
	case *array.Uint16:
		for i, v := range a.Uint16Values() {
			dst[i] = hashU64(uint64(v))
		}
	case *array.Uint8:
		for i, v := range a.Uint8Values() {
			dst[i] = hashU64(uint64(v))
		}
	case *array.Timestamp:
		for i, v := range a.TimestampValues() {
			dst[i] = hashU64(uint64(v))
		}
	case *array.Date32:
		for i, v := range a.Date32Values() {
			dst[i] = hashU64(uint64(int64(v)))
		}
	case *array.Date64:
		for i, v := range a.Date64Values() {
			dst[i] = hashU64(uint64(v))
		}
	case *array.Duration:
		for i, v := range a.DurationValues() {
			dst[i] = hashU64(uint64(v))
		}
	case *array.Boolean:
		for i := 0; i < n; i++ {
			b := 0
			if a.Value(i) {
				b = 1
			}
			dst[i] = boolHash[b]
		}
	case *array.Float64:
		for i, v := range a.Float64Values() {
			dst[i] = hashU64(math.Float64bits(v))
		}
	case *array.Float32:
		for i, v := range a.Float32Values() {
			dst[i] = hashU64(math.Float64bits(float64(v)))
		}
	default:
		return false
	}
	return true
}

// Router maps rows to the subtasks that own their key groups.
type Router struct {
	m      int
	owner  []int32 // key group -> subtask
	hashes []uint64
}

// NewRouter returns a router for max parallelism m and p subtasks, using
// the ranges of RangeFor.
func NewRouter(m, p int) *Router {
	r := &Router{m: m, owner: make([]int32, m)}
	for g := 0; g < m; g++ {
		r.owner[g] = int32(((g+1)*p - 1) / m)
	}
	return r
}

// Route writes the owning subtask of every row of col into dst.
func (r *Router) Route(col arrow.Array, dst []int32) error {
	n := col.Len()
	if cap(r.hashes) < n {
		r.hashes = make([]uint64, n)
	}
	h := r.hashes[:n]
	if err := Hashes(col, h); err != nil {
		return err
	}
	m := uint64(r.m)
	for i, x := range h {
		dst[i] = r.owner[x%m]
	}
	return nil
}

// Groups writes the key group of every row of col into dst.
func Groups(col arrow.Array, m int, dst []int32) error {
	h := make([]uint64, col.Len())
	if err := Hashes(col, h); err != nil {
		return err
	}
	for i, x := range h {
		dst[i] = int32(x % uint64(m))
	}
	return nil
}
