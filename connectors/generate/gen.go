package generate

import (
	"math"
	"math/bits"
	"strconv"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// gen generates one column.
type gen struct {
	field    int
	typ      string
	dt       arrow.DataType
	nullable bool

	allNull   bool
	nullBelow uint64 // a value is null when its null hash is below this

	// int64
	sequence bool
	imin     int64
	ispan    uint64 // max-min+1; 0 is the whole range
	// floats
	fmin, fmax, fwidth float64
	// string
	values     []string
	prefix     string
	card       uint64
	tableOnce  sync.Once
	tblOffs    []int32 // the strings to pick from: values, or prefix+i for
	tblData    []byte  // every i below a small cardinality
	tblLongest int
	// timestamp (milliseconds)
	start, step, jitter int64
}

const gamma = 0x9e3779b97f4a7c15

// mix is the splitmix64 finalizer.
func mix(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// streamKey derives the key of one (seed, partition, field, stream): the
// hash of offset o in it is mix(key + o*gamma), a splitmix64 sequence.
// Stream 0 draws values, stream 1 null decisions.
func streamKey(seed int64, part int32, field int, stream uint64) uint64 {
	h := mix(uint64(seed) + 0x243f6a8885a308d3)
	h = mix(h ^ (uint64(uint32(part))+1)*gamma)
	return mix(h ^ (uint64(field)<<1|stream+1)*0xd1b54a32d192ed03)
}

// below returns a uniform number in [0, n) from the hash h.
func below(h, n uint64) uint64 {
	hi, _ := bits.Mul64(h, n)
	return hi
}

// unit01 returns a uniform float64 in [0, 1) from the hash h.
func unit01(h uint64) float64 { return float64(h>>11) * (1.0 / (1 << 53)) }

func castBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// validity computes the null bitmap of n rows from offset o0, or nil when
// the column has no nulls.
func (g *gen) validity(seed int64, part int32, o0 int64, n int) ([]byte, int) {
	if !g.nullable {
		return nil, 0
	}
	bm := make([]byte, (n+7)/8)
	if g.allNull {
		return bm, n
	}
	key := streamKey(seed, part, g.field, 1) + uint64(o0)*gamma
	nulls := 0
	for i := 0; i < n; i++ {
		if mix(key+uint64(i)*gamma) >= g.nullBelow {
			bm[i>>3] |= 1 << (i & 7)
		} else {
			nulls++
		}
	}
	return bm, nulls
}

func isValid(bm []byte, i int) bool { return bm == nil || bm[i>>3]&(1<<(i&7)) != 0 }

// column generates rows [o0, o0+n) of partition part. Every value is a
// function of (seed, part, field, offset), so a partition reads the same
// rows again from any offset. A null row's value is zero (empty, false).
func (g *gen) column(seed int64, part int32, o0 int64, n int) arrow.Array {
	bm, nulls := g.validity(seed, part, o0, n)
	var vb *memory.Buffer
	if bm != nil {
		vb = memory.NewBufferBytes(bm)
	}
	key := streamKey(seed, part, g.field, 0) + uint64(o0)*gamma
	var bufs []*memory.Buffer
	switch g.typ {
	case "int64":
		vals := g.int64s(key, o0, n)
		zeroNulls(vals, bm, nulls)
		bufs = []*memory.Buffer{vb, memory.NewBufferBytes(castBytes(vals))}
	case "float64":
		vals := g.float64s(key, n)
		zeroNulls(vals, bm, nulls)
		bufs = []*memory.Buffer{vb, memory.NewBufferBytes(castBytes(vals))}
	case "float32":
		vals := g.float32s(key, n)
		zeroNulls(vals, bm, nulls)
		bufs = []*memory.Buffer{vb, memory.NewBufferBytes(castBytes(vals))}
	case "bool":
		vals := make([]byte, (n+7)/8)
		for i := 0; i < n; i++ {
			if mix(key+uint64(i)*gamma)>>63 != 0 && isValid(bm, i) {
				vals[i>>3] |= 1 << (i & 7)
			}
		}
		bufs = []*memory.Buffer{vb, memory.NewBufferBytes(vals)}
	case "timestamp":
		vals := g.timestamps(key, o0, n)
		zeroNulls(vals, bm, nulls)
		bufs = []*memory.Buffer{vb, memory.NewBufferBytes(castBytes(vals))}
	case "string":
		offsets, data := g.strings(key, bm, n)
		bufs = []*memory.Buffer{vb, memory.NewBufferBytes(castBytes(offsets)), memory.NewBufferBytes(data)}
	}
	return makeArray(g.dt, n, bufs, nulls)
}

// int64s generates n int64 values: the offsets with sequence, else
// uniform in [imin, imin+ispan), or over all of int64 when ispan is 0.
func (g *gen) int64s(key uint64, o0 int64, n int) []int64 {
	vals := make([]int64, n)
	switch {
	case g.sequence:
		for i := range vals {
			vals[i] = o0 + int64(i)
		}
	case g.ispan == 0:
		for i := range vals {
			vals[i] = int64(mix(key + uint64(i)*gamma))
		}
	default:
		for i := range vals {
			vals[i] = g.imin + int64(below(mix(key+uint64(i)*gamma), g.ispan))
		}
	}
	return vals
}

// float64s generates n values uniform in [fmin, fmax).
func (g *gen) float64s(key uint64, n int) []float64 {
	vals := make([]float64, n)
	for i := range vals {
		v := g.fmin + unit01(mix(key+uint64(i)*gamma))*g.fwidth
		if v >= g.fmax && g.fwidth > 0 {
			v = math.Nextafter(g.fmax, math.Inf(-1))
		}
		vals[i] = v
	}
	return vals
}

// float32s generates n values uniform in [fmin, fmax), rounded to float32
// and kept below fmax.
func (g *gen) float32s(key uint64, n int) []float32 {
	vals := make([]float32, n)
	max32 := float32(g.fmax)
	for i := range vals {
		v := float32(g.fmin + unit01(mix(key+uint64(i)*gamma))*g.fwidth)
		if v >= max32 && g.fwidth > 0 {
			v = math.Nextafter32(max32, float32(math.Inf(-1)))
		}
		vals[i] = v
	}
	return vals
}

// timestamps generates n timestamps in the column's unit: start + offset ×
// step milliseconds, moved by up to ±jitter.
func (g *gen) timestamps(key uint64, o0 int64, n int) []int64 {
	vals := make([]int64, n)
	unit := g.dt.(*arrow.TimestampType).Unit
	span := uint64(2*g.jitter + 1)
	for i := range vals {
		ms := g.start + (o0+int64(i))*g.step
		if g.jitter > 0 {
			ms += int64(below(mix(key+uint64(i)*gamma), span)) - g.jitter
		}
		switch unit {
		case arrow.Second:
			q := ms / 1000
			if ms%1000 < 0 {
				q--
			}
			ms = q
		case arrow.Microsecond:
			ms *= 1000
		case arrow.Nanosecond:
			ms *= 1_000_000
		}
		vals[i] = ms
	}
	return vals
}

// strings generates n strings (empty where bm says null) as offsets and
// data: picked from the string table when there is one, else formatted as
// prefix + a number below card.
func (g *gen) strings(key uint64, bm []byte, n int) ([]int32, []byte) {
	offsets := make([]int32, n+1)
	var data []byte
	if tOffs, tData := g.strTable(); tOffs != nil {
		k := uint64(len(tOffs) - 1)
		data = make([]byte, 0, n*g.tblLongest)
		for i := 0; i < n; i++ {
			if isValid(bm, i) {
				j := below(mix(key+uint64(i)*gamma), k)
				data = append(data, tData[tOffs[j]:tOffs[j+1]]...)
			}
			offsets[i+1] = int32(len(data))
		}
		return offsets, data
	}
	data = make([]byte, 0, n*(len(g.prefix)+len(strconv.FormatUint(g.card-1, 10))))
	for i := 0; i < n; i++ {
		if isValid(bm, i) {
			data = append(data, g.prefix...)
			data = strconv.AppendUint(data, below(mix(key+uint64(i)*gamma), g.card), 10)
		}
		offsets[i+1] = int32(len(data))
	}
	return offsets, data
}

// maxTable is the largest cardinality whose strings are formatted once
// and copied, rather than formatted for every row.
const maxTable = 1 << 16

// strTable returns the table of strings a string column picks from, or nil
// offsets when the strings are formatted per row. It is built on first use
// and shared by the sources of the input.
func (g *gen) strTable() ([]int32, []byte) {
	g.tableOnce.Do(func() {
		switch {
		case g.values != nil:
			g.tblOffs = make([]int32, 1, len(g.values)+1)
			for _, v := range g.values {
				g.tblData = append(g.tblData, v...)
				g.tblOffs = append(g.tblOffs, int32(len(g.tblData)))
			}
		case g.card <= maxTable:
			g.tblOffs = make([]int32, 1, g.card+1)
			for i := uint64(0); i < g.card; i++ {
				g.tblData = append(g.tblData, g.prefix...)
				g.tblData = strconv.AppendUint(g.tblData, i, 10)
				g.tblOffs = append(g.tblOffs, int32(len(g.tblData)))
			}
		}
		for j := 1; j < len(g.tblOffs); j++ {
			g.tblLongest = max(g.tblLongest, int(g.tblOffs[j]-g.tblOffs[j-1]))
		}
	})
	return g.tblOffs, g.tblData
}

// zeroNulls clears the values under nulls, so they do not depend on the
// generator.
func zeroNulls[T int64 | float64 | float32](vals []T, bm []byte, nulls int) {
	if nulls == 0 {
		return
	}
	for i := range vals {
		if !isValid(bm, i) {
			vals[i] = 0
		}
	}
}

func makeArray(dt arrow.DataType, n int, bufs []*memory.Buffer, nulls int) arrow.Array {
	data := array.NewData(dt, n, bufs, nil, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}
