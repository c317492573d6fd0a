package keys

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// keyTypes are every supported key type.
var keyTypes = []arrow.DataType{
	arrow.BinaryTypes.String,
	arrow.BinaryTypes.LargeString,
	arrow.BinaryTypes.Binary,
	arrow.BinaryTypes.LargeBinary,
	arrow.PrimitiveTypes.Int8,
	arrow.PrimitiveTypes.Int16,
	arrow.PrimitiveTypes.Int32,
	arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Uint8,
	arrow.PrimitiveTypes.Uint16,
	arrow.PrimitiveTypes.Uint32,
	arrow.PrimitiveTypes.Uint64,
	arrow.FixedWidthTypes.Boolean,
	&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"},
	arrow.FixedWidthTypes.Date32,
	arrow.FixedWidthTypes.Date64,
	arrow.FixedWidthTypes.Duration_ms,
	arrow.PrimitiveTypes.Float32,
	arrow.PrimitiveTypes.Float64,
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// keyBytes is the documented key encoding of row i, written independently
// of the package.
func keyBytes(t testing.TB, a arrow.Array, i int) []byte {
	t.Helper()
	if a.IsNull(i) {
		return nil
	}
	switch x := a.(type) {
	case *array.String:
		return []byte(x.Value(i))
	case *array.LargeString:
		return []byte(x.Value(i))
	case *array.Binary:
		return append([]byte(nil), x.Value(i)...)
	case *array.LargeBinary:
		return append([]byte(nil), x.Value(i)...)
	case *array.Int8:
		return be64(uint64(int64(x.Value(i))))
	case *array.Int16:
		return be64(uint64(int64(x.Value(i))))
	case *array.Int32:
		return be64(uint64(int64(x.Value(i))))
	case *array.Int64:
		return be64(uint64(x.Value(i)))
	case *array.Uint8:
		return be64(uint64(x.Value(i)))
	case *array.Uint16:
		return be64(uint64(x.Value(i)))
	case *array.Uint32:
		return be64(uint64(x.Value(i)))
	case *array.Uint64:
		return be64(x.Value(i))
	case *array.Boolean:
		if x.Value(i) {
			return []byte{1}
		}
		return []byte{0}
	case *array.Timestamp:
		return be64(uint64(int64(x.Value(i))))
	case *array.Date32:
		return be64(uint64(int64(x.Value(i))))
	case *array.Date64:
		return be64(uint64(int64(x.Value(i))))
	case *array.Duration:
		return be64(uint64(int64(x.Value(i))))
	case *array.Float32:
		return be64(math.Float64bits(float64(x.Value(i))))
	case *array.Float64:
		return be64(math.Float64bits(x.Value(i)))
	}
	t.Fatalf("no key bytes for %s", a.DataType())
	return nil
}

// keyArray builds n values of dt drawn from a small domain (so that values
// repeat) plus edge values, with nulls when asked.
func keyArray(t testing.TB, rng *rand.Rand, dt arrow.DataType, n int, nulls bool) arrow.Array {
	t.Helper()
	b := array.NewBuilder(memory.DefaultAllocator, dt)
	defer b.Release()
	for i := 0; i < n; i++ {
		if nulls && rng.IntN(5) == 0 {
			b.AppendNull()
			continue
		}
		k := rng.IntN(12) // 0..11: small domain; 10 and 11 pick edge values
		signed := int64(k - 5)
		switch bb := b.(type) {
		case *array.StringBuilder:
			if k == 0 {
				bb.Append("") // same hash as null, but a different table key
			} else {
				bb.Append(strings.Repeat("k", k%4) + fmt.Sprint(k%3))
			}
		case *array.LargeStringBuilder:
			bb.Append(fmt.Sprint("large", k))
		case *array.BinaryBuilder:
			if k == 0 {
				bb.Append([]byte{}) // empty binary, distinct from null
			} else {
				bb.Append([]byte{byte(k), 0, 0xff})
			}
		case *array.Int8Builder:
			if k >= 10 {
				bb.Append([]int8{math.MinInt8, math.MaxInt8}[k-10])
			} else {
				bb.Append(int8(signed))
			}
		case *array.Int16Builder:
			bb.Append(int16(signed) * 1000)
		case *array.Int32Builder:
			if k >= 10 {
				bb.Append([]int32{math.MinInt32, math.MaxInt32}[k-10])
			} else {
				bb.Append(int32(signed))
			}
		case *array.Int64Builder:
			if k >= 10 {
				bb.Append([]int64{math.MinInt64, math.MaxInt64}[k-10])
			} else {
				bb.Append(signed)
			}
		case *array.Uint8Builder:
			bb.Append(uint8(k * 23))
		case *array.Uint16Builder:
			bb.Append(uint16(k * 6000))
		case *array.Uint32Builder:
			bb.Append(uint32(k) * 400000000)
		case *array.Uint64Builder:
			if k >= 10 {
				bb.Append(math.MaxUint64 - uint64(k-10))
			} else {
				bb.Append(uint64(k))
			}
		case *array.BooleanBuilder:
			bb.Append(k%2 == 0)
		case *array.TimestampBuilder:
			bb.Append(arrow.Timestamp(signed * 1e15))
		case *array.Date32Builder:
			bb.Append(arrow.Date32(signed * 1000))
		case *array.Date64Builder:
			bb.Append(arrow.Date64(signed * 86400000))
		case *array.DurationBuilder:
			bb.Append(arrow.Duration(signed))
		case *array.Float32Builder:
			bb.Append([]float32{0, float32(math.Copysign(0, -1)), 1.5, -2.25, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, math.SmallestNonzeroFloat32, 3, 1e-3, -7}[k])
		case *array.Float64Builder:
			bb.Append([]float64{0, math.Copysign(0, -1), 1.5, -2.25, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64, 3, 1e-300, -7}[k])
		default:
			t.Fatalf("no generator for %s", dt)
		}
	}
	return b.NewArray()
}

func TestSupported(t *testing.T) {
	t.Parallel()
	for _, dt := range keyTypes {
		if !Supported(dt) {
			t.Errorf("Supported(%s) = false", dt)
		}
	}
	for _, dt := range []arrow.DataType{
		arrow.ListOf(arrow.PrimitiveTypes.Int64),
		arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64}),
		&arrow.Decimal128Type{Precision: 10, Scale: 2},
		arrow.FixedWidthTypes.Float16,
		arrow.Null,
		&arrow.FixedSizeBinaryType{ByteWidth: 4},
	} {
		if Supported(dt) {
			t.Errorf("Supported(%s) = true", dt)
		}
		if _, err := NewTable(dt); err == nil {
			t.Errorf("NewTable(%s) succeeded", dt)
		}
	}
}

func TestHashesMatchJobHashKey(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dt := range keyTypes {
		for _, nulls := range []bool{false, true} {
			for _, sliced := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/nulls=%v/sliced=%v", dt, nulls, sliced), func(t *testing.T) {
					a := keyArray(t, rng, dt, 200, nulls)
					defer a.Release()
					if sliced {
						s := array.NewSlice(a, 17, 150)
						defer s.Release()
						a = s
					}
					got := make([]uint64, a.Len())
					if err := Hashes(a, got); err != nil {
						t.Fatal(err)
					}
					for i := range got {
						if want := HashKey(keyBytes(t, a, i)); got[i] != want {
							t.Fatalf("row %d (%s): hash %#x, want %#x", i, a.ValueStr(i), got[i], want)
						}
					}
				})
			}
		}
	}
}

func TestHashesKnownValues(t *testing.T) {
	t.Parallel()
	// FNV-1a-64 test vectors, independent of HashKey.
	if got := HashKey(nil); got != 0xcbf29ce484222325 {
		t.Fatalf("HashKey(empty) = %#x", got)
	}
	if got := HashKey([]byte("a")); got != 0xaf63dc4c8601ec8c {
		t.Fatalf("HashKey(a) = %#x", got)
	}
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.AppendValues([]string{"a", ""}, nil)
	b.AppendNull()
	a := b.NewArray()
	b.Release()
	defer a.Release()
	h := make([]uint64, 3)
	if err := Hashes(a, h); err != nil {
		t.Fatal(err)
	}
	if h[0] != 0xaf63dc4c8601ec8c || h[1] != 0xcbf29ce484222325 || h[2] != h[1] {
		t.Fatalf("hashes = %#x", h)
	}
}

func TestHashesCrossTypeAgree(t *testing.T) {
	t.Parallel()
	// Equal integer values hash alike whatever their width or signedness.
	vals := []int64{0, 1, 5, 127, 100}
	arrays := []arrow.Array{}
	mk := func(dt arrow.DataType, app func(array.Builder, int64)) {
		b := array.NewBuilder(memory.DefaultAllocator, dt)
		for _, v := range vals {
			app(b, v)
		}
		arrays = append(arrays, b.NewArray())
		b.Release()
	}
	mk(arrow.PrimitiveTypes.Int8, func(b array.Builder, v int64) { b.(*array.Int8Builder).Append(int8(v)) })
	mk(arrow.PrimitiveTypes.Int32, func(b array.Builder, v int64) { b.(*array.Int32Builder).Append(int32(v)) })
	mk(arrow.PrimitiveTypes.Int64, func(b array.Builder, v int64) { b.(*array.Int64Builder).Append(v) })
	mk(arrow.PrimitiveTypes.Uint16, func(b array.Builder, v int64) { b.(*array.Uint16Builder).Append(uint16(v)) })
	mk(arrow.PrimitiveTypes.Uint64, func(b array.Builder, v int64) { b.(*array.Uint64Builder).Append(uint64(v)) })
	mk(&arrow.TimestampType{Unit: arrow.Second}, func(b array.Builder, v int64) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(v)) })
	var first []uint64
	for _, a := range arrays {
		h := make([]uint64, a.Len())
		if err := Hashes(a, h); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = h
		} else {
			for i := range h {
				if h[i] != first[i] {
					t.Fatalf("%s value %d: hash %#x differs from int8's %#x", a.DataType(), vals[i], h[i], first[i])
				}
			}
		}
		a.Release()
	}
}

func TestHashesUnsupported(t *testing.T) {
	t.Parallel()
	b := array.NewFloat16Builder(memory.DefaultAllocator)
	b.AppendNull()
	a := b.NewArray()
	b.Release()
	defer a.Release()
	if err := Hashes(a, make([]uint64, 1)); err == nil {
		t.Fatal("Hashes of float16 succeeded")
	}
	if err := Groups(a, 8, make([]int32, 1)); err == nil {
		t.Fatal("Groups of float16 succeeded")
	}
	if err := NewRouter(8, 2).Route(a, make([]int32, 1)); err == nil {
		t.Fatal("Route of float16 succeeded")
	}
}

func TestRouteMatchesOwnerOf(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(13, 14))
	for _, mp := range [][2]int{{1, 1}, {7, 1}, {7, 7}, {128, 3}, {128, 128}, {100, 7}, {4096, 13}} {
		m, p := mp[0], mp[1]
		r := NewRouter(m, p)
		for _, dt := range keyTypes {
			// Large then small: the router reuses its hash buffer.
			for _, n := range []int{300, 5, 0, 64} {
				a := keyArray(t, rng, dt, n, true)
				dst := make([]int32, n)
				if err := r.Route(a, dst); err != nil {
					t.Fatal(err)
				}
				groups := make([]int32, n)
				if err := Groups(a, m, groups); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < n; i++ {
					g := KeyGroup(keyBytes(t, a, i), m)
					if int(groups[i]) != g {
						t.Fatalf("m=%d %s row %d: group %d, want %d", m, dt, i, groups[i], g)
					}
					want := OwnerOf(m, p, g)
					if int(dst[i]) != want {
						t.Fatalf("m=%d p=%d %s row %d: subtask %d, want %d", m, p, dt, i, dst[i], want)
					}
					rg := RangeFor(m, p, want)
					if !rg.Contains(g) {
						t.Fatalf("group %d routed to subtask %d whose range is %s", g, want, rg)
					}
				}
				a.Release()
			}
		}
	}
}
