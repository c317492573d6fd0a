package typed

import (
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The encoders write Arrow buffers directly, one column at a time: each
// column's buffers are allocated once at their final size and filled by a
// loop over the rows that reads the field at its offset. No builder
// growth, no per-value validity bookkeeping for fields that cannot be
// null, no reflection and no indirect call per value.

// encodeFn builds the column of field f from the n rows at base, stride
// bytes apart.
type encodeFn func(mem memory.Allocator, f *field, base unsafe.Pointer, n int, stride uintptr) (*array.Data, error)

type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

type number interface {
	integer | ~float32 | ~float64
}

func encoderFor(k kind) encodeFn {
	switch k {
	case kInt8:
		return encNum[int8, int8]
	case kInt16:
		return encNum[int16, int16]
	case kInt32:
		return encNum[int32, int32]
	case kInt64:
		return encNum[int64, int64]
	case kInt:
		return encNum[int, int64]
	case kUint8:
		return encNum[uint8, uint8]
	case kUint16:
		return encNum[uint16, uint16]
	case kUint32:
		return encNum[uint32, uint32]
	case kUint64:
		return encNum[uint64, uint64]
	case kUint:
		return encNum[uint, uint64]
	case kFloat32:
		return encNum[float32, float32]
	case kFloat64:
		return encNum[float64, float64]
	case kBool:
		return encBool
	case kString, kBytes:
		return encVarlen
	case kTime:
		return encTime
	case kDuration:
		return encDuration
	}
	panic("typed: unknown kind")
}

// value returns where the value of f sits in row, or nil when it is null.
func (f *field) value(row unsafe.Pointer) unsafe.Pointer {
	p := unsafe.Add(row, f.off)
	switch f.null {
	case nullPtr:
		return *(*unsafe.Pointer)(p)
	case nullFlag:
		if !*(*bool)(unsafe.Add(p, f.flagOff)) {
			return nil
		}
		return unsafe.Add(p, f.valOff)
	}
	return p
}

// newBuffer returns a buffer of size bytes from mem; its contents are
// unspecified.
func newBuffer(mem memory.Allocator, size int) *memory.Buffer {
	b := memory.NewResizableBuffer(mem)
	b.Resize(size)
	return b
}

// asSlice views the first n values of type V in b.
func asSlice[V any](b *memory.Buffer, n int) []V {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*V)(unsafe.Pointer(unsafe.SliceData(b.Bytes()))), n)
}

// newBitmap returns a cleared bitmap of n bits.
func newBitmap(mem memory.Allocator, n int) (*memory.Buffer, []byte) {
	b := newBuffer(mem, int(bitutil.BytesForBits(int64(n))))
	bits := b.Bytes()
	clear(bits)
	return b, bits
}

// newData assembles an array of n values from a validity bitmap (nil or
// with nulls unset bits) and its value buffers, and releases the
// buffers, which the array now holds. A bitmap without nulls is dropped.
func newData(dt arrow.DataType, n int, valid *memory.Buffer, nulls int, bufs ...*memory.Buffer) *array.Data {
	if valid != nil && nulls == 0 {
		valid.Release()
		valid = nil
	}
	all := append([]*memory.Buffer{valid}, bufs...)
	d := array.NewData(dt, n, all, nil, nulls, 0)
	for _, b := range all {
		if b != nil {
			b.Release()
		}
	}
	return d
}

// encNum encodes fixed-width numbers: fields of Go type F into a column of
// C (the same type, or int64/uint64 for Go's int and uint).
func encNum[F, C number](mem memory.Allocator, f *field, base unsafe.Pointer, n int, stride uintptr) (*array.Data, error) {
	data := newBuffer(mem, n*int(unsafe.Sizeof(C(0))))
	out := asSlice[C](data, n)
	if f.null == notNull {
		for i := range out {
			out[i] = C(*(*F)(unsafe.Add(base, uintptr(i)*stride+f.off)))
		}
		return newData(f.dtype, n, nil, 0, data), nil
	}
	valid, bits := newBitmap(mem, n)
	nulls := 0
	for i := range out {
		if p := f.value(unsafe.Add(base, uintptr(i)*stride)); p != nil {
			out[i] = C(*(*F)(p))
			bits[i>>3] |= 1 << (i & 7)
		} else {
			out[i] = 0
			nulls++
		}
	}
	return newData(f.dtype, n, valid, nulls, data), nil
}

func encBool(mem memory.Allocator, f *field, base unsafe.Pointer, n int, stride uintptr) (*array.Data, error) {
	data, vbits := newBitmap(mem, n)
	if f.null == notNull {
		for i := 0; i < n; i++ {
			if *(*bool)(unsafe.Add(base, uintptr(i)*stride+f.off)) {
				vbits[i>>3] |= 1 << (i & 7)
			}
		}
		return newData(f.dtype, n, nil, 0, data), nil
	}
	valid, bits := newBitmap(mem, n)
	nulls := 0
	for i := 0; i < n; i++ {
		if p := f.value(unsafe.Add(base, uintptr(i)*stride)); p != nil {
			bits[i>>3] |= 1 << (i & 7)
			if *(*bool)(p) {
				vbits[i>>3] |= 1 << (i & 7)
			}
		} else {
			nulls++
		}
	}
	return newData(f.dtype, n, valid, nulls, data), nil
}

// encVarlen encodes strings and []byte (a slice's header starts like a
// string's, so both are read as strings) into utf8 or binary columns with
// int32 offsets.
func encVarlen(mem memory.Allocator, f *field, base unsafe.Pointer, n int, stride uintptr) (*array.Data, error) {
	total := 0
	for i := 0; i < n; i++ {
		if p := f.value(unsafe.Add(base, uintptr(i)*stride)); p != nil {
			total += len(*(*string)(p))
		}
	}
	if total > math.MaxInt32 {
		return nil, fmt.Errorf("typed: %s: the column would hold %d bytes, more than an Arrow %s column's 2 GiB; encode fewer rows at a time",
			f.where(), total, f.dtype)
	}
	offsets := newBuffer(mem, (n+1)*4)
	offs := asSlice[int32](offsets, n+1)
	data := newBuffer(mem, total)
	buf := data.Bytes()
	pos := 0
	if f.null == notNull {
		for i := 0; i < n; i++ {
			s := *(*string)(unsafe.Add(base, uintptr(i)*stride+f.off))
			offs[i] = int32(pos)
			pos += copy(buf[pos:], s)
		}
		offs[n] = int32(pos)
		return newData(f.dtype, n, nil, 0, offsets, data), nil
	}
	valid, bits := newBitmap(mem, n)
	nulls := 0
	for i := 0; i < n; i++ {
		offs[i] = int32(pos)
		if p := f.value(unsafe.Add(base, uintptr(i)*stride)); p != nil {
			bits[i>>3] |= 1 << (i & 7)
			pos += copy(buf[pos:], *(*string)(p))
		} else {
			nulls++
		}
	}
	offs[n] = int32(pos)
	return newData(f.dtype, n, valid, nulls, offsets, data), nil
}

func encTime(mem memory.Allocator, f *field, base unsafe.Pointer, n int, stride uintptr) (*array.Data, error) {
	data := newBuffer(mem, n*8)
	out := asSlice[int64](data, n)
	var valid *memory.Buffer
	var bits []byte
	if f.null != notNull {
		valid, bits = newBitmap(mem, n)
	}
	nulls := 0
	for i := range out {
		p := f.value(unsafe.Add(base, uintptr(i)*stride))
		if p == nil {
			out[i] = 0
			nulls++
			continue
		}
		v, ok := toUnits(*(*time.Time)(p), f.unit)
		if !ok {
			data.Release()
			if valid != nil {
				valid.Release()
			}
			return nil, timeError(f, i, *(*time.Time)(p))
		}
		out[i] = v
		if bits != nil {
			bits[i>>3] |= 1 << (i & 7)
		}
	}
	return newData(f.dtype, n, valid, nulls, data), nil
}

func encDuration(mem memory.Allocator, f *field, base unsafe.Pointer, n int, stride uintptr) (*array.Data, error) {
	data := newBuffer(mem, n*8)
	out := asSlice[int64](data, n)
	if f.null == notNull {
		for i := range out {
			out[i] = durUnits(*(*time.Duration)(unsafe.Add(base, uintptr(i)*stride+f.off)), f.unit)
		}
		return newData(f.dtype, n, nil, 0, data), nil
	}
	valid, bits := newBitmap(mem, n)
	nulls := 0
	for i := range out {
		if p := f.value(unsafe.Add(base, uintptr(i)*stride)); p != nil {
			out[i] = durUnits(*(*time.Duration)(p), f.unit)
			bits[i>>3] |= 1 << (i & 7)
		} else {
			out[i] = 0
			nulls++
		}
	}
	return newData(f.dtype, n, valid, nulls, data), nil
}

// timeError is the error of a time t of row i that field f's column
// cannot hold.
func timeError(f *field, i int, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("typed: %s: row %d is the zero time.Time, which %s cannot hold: set it, or make the field a *time.Time and leave it nil for no time",
			f.where(), i, f.dtype)
	}
	return fmt.Errorf("typed: %s: row %d: %s is outside what %s can hold; tag the field with a coarser unit (arkflow:\",unit=ms\")",
		f.where(), i, t.Format(time.RFC3339Nano), f.dtype)
}

// durUnits converts d to unit, truncating toward zero.
func durUnits(d time.Duration, unit arrow.TimeUnit) int64 {
	switch unit {
	case arrow.Second:
		return int64(d) / 1e9
	case arrow.Millisecond:
		return int64(d) / 1e6
	case arrow.Microsecond:
		return int64(d) / 1e3
	}
	return int64(d)
}

// toUnits converts t to units of unit since the Unix epoch, rounding down
// (toward the past); ok is false when that does not fit in an int64. The
// switch and the constant divisors keep the common case to a few
// instructions; only the second at either end of the range takes the slow
// path.
func toUnits(t time.Time, unit arrow.TimeUnit) (v int64, ok bool) {
	sec, ns := t.Unix(), int64(t.Nanosecond())
	switch unit {
	case arrow.Second:
		return sec, true
	case arrow.Millisecond:
		if sec > math.MinInt64/1_000 && sec < math.MaxInt64/1_000 {
			return sec*1e3 + ns/1e6, true
		}
		return edgeUnits(sec, ns/1e6, 1e3)
	case arrow.Microsecond:
		if sec > math.MinInt64/1_000_000 && sec < math.MaxInt64/1_000_000 {
			return sec*1e6 + ns/1e3, true
		}
		return edgeUnits(sec, ns/1e3, 1e6)
	}
	if sec > math.MinInt64/1_000_000_000 && sec < math.MaxInt64/1_000_000_000 {
		return sec*1e9 + ns, true
	}
	return edgeUnits(sec, ns, 1e9)
}

// edgeUnits computes sec*per + sub (0 <= sub < per) when that might
// overflow.
func edgeUnits(sec, sub, per int64) (int64, bool) {
	if sec >= 0 {
		if sec > (math.MaxInt64-sub)/per {
			return 0, false
		}
		return sec*per + sub, true
	}
	// sec*per + sub = (sec+1)*per + (sub-per), where sub-per is in [-per, 0).
	s1 := sec + 1
	if s1 < math.MinInt64/per {
		return 0, false
	}
	v, rest := s1*per, sub-per
	if v < math.MinInt64-rest {
		return 0, false
	}
	return v + rest, true
}
