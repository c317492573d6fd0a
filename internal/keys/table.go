package keys

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/job"
)

// Table assigns dense IDs (0, 1, 2, …) to the distinct values of a key
// column and remembers the values, so that keyed operators can keep their
// accumulators in slices indexed by ID and rebuild the key column on output.
// Null is a key of its own.
//
// The IDs are found through an open-addressing index (linear probing, at
// most half full) of one word a slot: 32 bits of the key's hash beside its
// ID. A key is compared only with keys of the same hash bits, and without
// following a pointer when it is a number or a string of at most 16 bytes:
// those are kept by ID in a dense slice, as the two words they fill. A
// lookup at 1 k keys is thus two loads (the slot, the words), where a Go
// map of strings followed a key's header and then its bytes.
type Table struct {
	typ    arrow.DataType
	isStr  bool
	seed   maphash.Seed // long strings' hash seed
	k0, k1 uint64       // short strings' and numbers' hash seeds
	index  []uint64     // per slot: tag<<32 | ID+1; 0: empty
	strs   []string
	short  []shortKey // per string ID: its bytes as words, if short
	nums   []uint64   // integers, timestamps, bools, float bits
	nullID int32
	n      int32 // IDs given, null's among them
	used   int   // slots taken

	hs []uint64   // strIDs' hashes
	ks []shortKey // strIDs' short keys
}

// shortKey is a string key of at most 16 bytes as two words
// (shortWords) and its length; n is -1 for a longer key (compared in
// strs).
type shortKey struct {
	w0, w1 uint64
	n      int32
}

// NewTable returns a table for keys of type t.
func NewTable(t arrow.DataType) (*Table, error) {
	if !Supported(t) {
		return nil, fmt.Errorf("type %s cannot be a key", t)
	}
	seed := maphash.MakeSeed()
	tb := &Table{typ: t, isStr: isStringLike(t), seed: seed, nullID: -1,
		k0: maphash.Comparable(seed, 0), k1: maphash.Comparable(seed, 1)}
	tb.index = make([]uint64, 16)
	return tb, nil
}

func isStringLike(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}

// Len is the number of distinct keys seen.
func (t *Table) Len() int { return int(t.n) }

// Type is the key type.
func (t *Table) Type() arrow.DataType { return t.typ }

func (t *Table) newID() int32 {
	id := t.n
	t.n++
	if t.isStr {
		t.strs = append(t.strs, "")
		t.short = append(t.short, shortKey{n: -1})
	} else {
		t.nums = append(t.nums, 0)
	}
	return id
}

func (t *Table) nullKey() int32 {
	if t.nullID < 0 {
		t.nullID = t.newID()
	}
	return t.nullID
}

// mum is the folded 128-bit product of a and b: wyhash's mixing step.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// shortWords returns s, at most 16 bytes, as two words that, with its
// length, identify it (wyhash's reads: the first and last 8 bytes of a
// key of 8 or more, overlapping; the first and last 4 of a key of 4 to 7;
// the first, middle and last byte of a shorter one).
func shortWords(s string) (w0, w1 uint64) {
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	switch n := len(b); {
	case n >= 8:
		return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<32, 0
	case n > 0:
		return uint64(b[0]) | uint64(b[n/2])<<8 | uint64(b[n-1])<<16, 0
	}
	return 0, 0
}

// strKey is a string key's hash and, when it is at most 16 bytes long,
// its words (shortWords).
func (t *Table) strKey(s string) (h uint64, k shortKey) {
	if len(s) > 16 {
		return maphash.String(t.seed, s), shortKey{n: -1}
	}
	k.w0, k.w1 = shortWords(s)
	k.n = int32(len(s))
	return mum(k.w0^t.k0, k.w1^t.k1^uint64(len(s))), k
}

func (t *Table) numHash(v uint64) uint64 {
	return mum(v^t.k0, t.k1)
}

// findStr returns the ID of s (of hash h and words k, as strKey gives
// them), or the slot where it would go.
func (t *Table) findStr(s string, h uint64, k shortKey) (id int32, slot int, ok bool) {
	tag := h >> 32
	mask := len(t.index) - 1
	for i := int(tag) & mask; ; i = (i + 1) & mask {
		e := t.index[i]
		if e == 0 {
			return 0, i, false
		}
		if e>>32 != tag {
			continue
		}
		id := int32(uint32(e)) - 1
		if c := &t.short[id]; c.n == k.n && c.w0 == k.w0 && c.w1 == k.w1 && (k.n >= 0 || t.strs[id] == s) {
			return id, i, true
		}
	}
}

// findNum returns the ID of v (of hash h), or the slot where it would go.
func (t *Table) findNum(v, h uint64) (id int32, slot int, ok bool) {
	tag := h >> 32
	mask := len(t.index) - 1
	for i := int(tag) & mask; ; i = (i + 1) & mask {
		e := t.index[i]
		if e == 0 {
			return 0, i, false
		}
		if e>>32 == tag {
			if id := int32(uint32(e)) - 1; t.nums[id] == v {
				return id, i, true
			}
		}
	}
}

// put indexes a new key of hash h at slot (as find returned it) and
// returns its ID; the caller stores the key.
func (t *Table) put(h uint64, slot int) int32 {
	tag := h >> 32
	if 2*(t.used+1) > len(t.index) {
		t.grow()
		mask := len(t.index) - 1
		for slot = int(tag) & mask; t.index[slot] != 0; slot = (slot + 1) & mask {
		}
	}
	id := t.newID()
	t.index[slot] = tag<<32 | uint64(uint32(id+1))
	t.used++
	return id
}

// grow doubles the index. A slot's position comes from its tag, so no key
// is hashed again.
func (t *Table) grow() {
	index := make([]uint64, 2*len(t.index))
	mask := len(index) - 1
	for _, e := range t.index {
		if e == 0 {
			continue
		}
		j := int(e>>32) & mask
		for index[j] != 0 {
			j = (j + 1) & mask
		}
		index[j] = e
	}
	t.index = index
}

func (t *Table) strID(s string) int32 {
	h, k := t.strKey(s)
	id, slot, ok := t.findStr(s, h, k)
	if ok {
		return id
	}
	id = t.put(h, slot)
	t.strs[id] = strings.Clone(s) // s points into the batch's buffer
	t.short[id] = k
	return id
}

// strIDs writes the IDs of a string column without nulls into dst, in two
// passes: every row's hash first, then the lookups, a loop short enough
// for the processor to have several rows' index loads in flight (with
// 100 k keys they miss the cache).
func (t *Table) strIDs(a *array.String, dst []int32) {
	if cap(t.hs) < len(dst) {
		t.hs, t.ks = make([]uint64, len(dst)), make([]shortKey, len(dst))
	}
	hs, ks := t.hs[:len(dst)], t.ks[:len(dst)]
	for i := range hs {
		hs[i], ks[i] = t.strKey(a.Value(i))
	}
	for i := range dst {
		s := a.Value(i)
		id, slot, ok := t.findStr(s, hs[i], ks[i])
		if !ok {
			id = t.put(hs[i], slot)
			t.strs[id] = strings.Clone(s)
			t.short[id] = ks[i]
		}
		dst[i] = id
	}
}

// int64IDs writes the IDs of int64 keys without nulls into dst: numID's
// work without a function call a row to read the value.
func (t *Table) int64IDs(vals []int64, dst []int32) {
	for i, v := range vals {
		u := uint64(v)
		h := t.numHash(u)
		id, slot, ok := t.findNum(u, h)
		if !ok {
			id = t.put(h, slot)
			t.nums[id] = u
		}
		dst[i] = id
	}
}

func (t *Table) numID(v uint64) int32 {
	h := t.numHash(v)
	id, slot, ok := t.findNum(v, h)
	if ok {
		return id
	}
	id = t.put(h, slot)
	t.nums[id] = v
	return id
}

// IDs writes the ID of every row's key into dst, adding new keys.
func (t *Table) IDs(col arrow.Array, dst []int32) error {
	if !arrow.TypeEqual(col.DataType(), t.typ) {
		return fmt.Errorf("key column has type %s, expected %s", col.DataType(), t.typ)
	}
	n := col.Len()
	nulls := col.NullN() > 0
	switch a := col.(type) {
	case *array.String:
		if !nulls {
			t.strIDs(a, dst[:n])
			return nil
		}
		for i := 0; i < n; i++ {
			if a.IsNull(i) {
				dst[i] = t.nullKey()
			} else {
				dst[i] = t.strID(a.Value(i))
			}
		}
		return nil
	case *array.LargeString:
		for i := 0; i < n; i++ {
			if nulls && a.IsNull(i) {
				dst[i] = t.nullKey()
			} else {
				dst[i] = t.strID(a.Value(i))
			}
		}
		return nil
	case *array.Binary:
		for i := 0; i < n; i++ {
			if nulls && a.IsNull(i) {
				dst[i] = t.nullKey()
			} else {
				dst[i] = t.strID(string(a.Value(i)))
			}
		}
		return nil
	case *array.LargeBinary:
		for i := 0; i < n; i++ {
			if nulls && a.IsNull(i) {
				dst[i] = t.nullKey()
			} else {
				dst[i] = t.strID(string(a.Value(i)))
			}
		}
		return nil
	}
	if a, ok := col.(*array.Int64); ok && !nulls {
		t.int64IDs(a.Int64Values(), dst[:n])
		return nil
	}
	vals, err := numbers(col)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if nulls && col.IsNull(i) {
			dst[i] = t.nullKey()
		} else {
			dst[i] = t.numID(vals(i))
		}
	}
	return nil
}

func numbers(col arrow.Array) (func(int) uint64, error) {
	switch a := col.(type) {
	case *array.Int64:
		v := a.Int64Values()
		return func(i int) uint64 { return uint64(v[i]) }, nil
	case *array.Int32:
		v := a.Int32Values()
		return func(i int) uint64 { return uint64(int64(v[i])) }, nil
	case *array.Int16:
		v := a.Int16Values()
		return func(i int) uint64 { return uint64(int64(v[i])) }, nil
	case *array.Int8:
		v := a.Int8Values()
		return func(i int) uint64 { return uint64(int64(v[i])) }, nil
	case *array.Uint64:
		v := a.Uint64Values()
		return func(i int) uint64 { return v[i] }, nil
	case *array.Uint32:
		v := a.Uint32Values()
		return func(i int) uint64 { return uint64(v[i]) }, nil
	case *array.Uint16:
		v := a.Uint16Values()
		return func(i int) uint64 { return uint64(v[i]) }, nil
	case *array.Uint8:
		v := a.Uint8Values()
		return func(i int) uint64 { return uint64(v[i]) }, nil
	case *array.Timestamp:
		v := a.TimestampValues()
		return func(i int) uint64 { return uint64(v[i]) }, nil
	case *array.Date32:
		v := a.Date32Values()
		return func(i int) uint64 { return uint64(int64(v[i])) }, nil
	case *array.Date64:
		v := a.Date64Values()
		return func(i int) uint64 { return uint64(v[i]) }, nil
	case *array.Duration:
		v := a.DurationValues()
		return func(i int) uint64 { return uint64(v[i]) }, nil
	case *array.Boolean:
		return func(i int) uint64 {
			if a.Value(i) {
				return 1
			}
			return 0
		}, nil
	case *array.Float64:
		v := a.Float64Values()
		return func(i int) uint64 { return math.Float64bits(v[i]) }, nil
	case *array.Float32:
		v := a.Float32Values()
		return func(i int) uint64 { return math.Float64bits(float64(v[i])) }, nil
	}
	return nil, fmt.Errorf("type %s cannot be a key", col.DataType())
}

// Build returns the key column for the given IDs. The caller releases it.
func (t *Table) Build(ids []int32) arrow.Array {
	if t.typ.ID() == arrow.STRING {
		if a := t.buildStrings(ids); a != nil {
			return a
		}
	}
	b := array.NewBuilder(memory.DefaultAllocator, t.typ)
	defer b.Release()
	b.Reserve(len(ids))
	if sb, ok := b.(*array.StringBuilder); ok {
		n := 0
		for _, id := range ids {
			if id != t.nullID {
				n += len(t.strs[id])
			}
		}
		sb.ReserveData(n)
	}
	for _, id := range ids {
		if id == t.nullID {
			b.AppendNull()
			continue
		}
		if t.isStr {
			switch bb := b.(type) {
			case *array.StringBuilder:
				bb.Append(t.strs[id])
			case *array.LargeStringBuilder:
				bb.Append(t.strs[id])
			case *array.BinaryBuilder:
				bb.Append([]byte(t.strs[id]))
			}
			continue
		}
		v := t.nums[id]
		switch bb := b.(type) {
		case *array.Int64Builder:
			bb.Append(int64(v))
		case *array.Int32Builder:
			bb.Append(int32(int64(v)))
		case *array.Int16Builder:
			bb.Append(int16(int64(v)))
		case *array.Int8Builder:
			bb.Append(int8(int64(v)))
		case *array.Uint64Builder:
			bb.Append(v)
		case *array.Uint32Builder:
			bb.Append(uint32(v))
		case *array.Uint16Builder:
			bb.Append(uint16(v))
		case *array.Uint8Builder:
			bb.Append(uint8(v))
		case *array.TimestampBuilder:
			bb.Append(arrow.Timestamp(int64(v)))
		case *array.Date32Builder:
			bb.Append(arrow.Date32(int64(v)))
		case *array.Date64Builder:
			bb.Append(arrow.Date64(int64(v)))
		case *array.DurationBuilder:
			bb.Append(arrow.Duration(int64(v)))
		case *array.BooleanBuilder:
			bb.Append(v == 1)
		case *array.Float64Builder:
			bb.Append(math.Float64frombits(v))
		case *array.Float32Builder:
			bb.Append(float32(math.Float64frombits(v)))
		}
	}
	return b.NewArray()
}

// buildStrings is Build for a string key: the offsets and the bytes are
// written straight into their buffers, a short key as its words (two
// overlapping stores put shortWords' reads back), rather than appended a
// row at a time through a builder. It returns nil when the bytes exceed
// what 32-bit offsets address.
func (t *Table) buildStrings(ids []int32) arrow.Array {
	total, nulls := 0, 0
	for _, id := range ids {
		switch n := int(t.short[id].n); {
		case id == t.nullID:
			nulls++
		case n >= 0:
			total += n
		default:
			total += len(t.strs[id])
		}
	}
	if total > math.MaxInt32 {
		return nil
	}
	mem := memory.DefaultAllocator
	offsets, data := memory.NewResizableBuffer(mem), memory.NewResizableBuffer(mem)
	offsets.Resize((len(ids) + 1) * 4)
	data.Resize(total)
	var valid *memory.Buffer
	if nulls > 0 {
		valid = memory.NewResizableBuffer(mem)
		valid.Resize(int(bitutil.BytesForBits(int64(len(ids)))))
		memory.Set(valid.Bytes(), 0xff)
	}
	off := arrow.Int32Traits.CastFromBytes(offsets.Bytes())
	d := data.Bytes()
	pos := 0
	for i, id := range ids {
		off[i] = int32(pos)
		if id == t.nullID {
			bitutil.ClearBit(valid.Bytes(), i)
			continue
		}
		k := &t.short[id]
		n := int(k.n)
		switch {
		case n >= 8:
			binary.LittleEndian.PutUint64(d[pos:], k.w0)
			binary.LittleEndian.PutUint64(d[pos+n-8:], k.w1)
		case n >= 4:
			binary.LittleEndian.PutUint32(d[pos:], uint32(k.w0))
			binary.LittleEndian.PutUint32(d[pos+n-4:], uint32(k.w0>>32))
		case n > 0:
			d[pos], d[pos+n/2], d[pos+n-1] = byte(k.w0), byte(k.w0>>8), byte(k.w0>>16)
		case n < 0:
			n = copy(d[pos:], t.strs[id])
		}
		pos += n
	}
	off[len(ids)] = int32(pos)
	arr := array.NewData(t.typ, len(ids), []*memory.Buffer{valid, offsets, data}, nil, nulls, 0)
	defer arr.Release()
	offsets.Release()
	data.Release()
	if valid != nil {
		valid.Release()
	}
	return array.NewStringData(arr)
}

// Bytes returns the key bytes of a key ID: the bytes hashed for its key
// group (see the package documentation), which also identify it in the
// state store. Null gives nil.
func (t *Table) Bytes(id int32) []byte {
	if id == t.nullID {
		return nil
	}
	return t.AppendBytes(nil, id)
}

// AppendBytes appends the key bytes of a key ID (Bytes) to dst; null
// appends nothing.
func (t *Table) AppendBytes(dst []byte, id int32) []byte {
	if id == t.nullID {
		return dst
	}
	if t.isStr {
		return append(dst, t.strs[id]...)
	}
	v := t.nums[id]
	if t.typ.ID() == arrow.BOOL {
		return append(dst, byte(v))
	}
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

// Group returns the key group of a key ID for max parallelism m: the same
// group keyed edges route its rows by.
func (t *Table) Group(id int32, m int) int {
	return KeyGroup(t.Bytes(id), m)
}

// IDOfBytes returns the ID of the key whose Bytes are b, adding it: the
// inverse of Bytes, used to restore state. nil is the null key.
func (t *Table) IDOfBytes(b []byte) (int32, error) {
	if b == nil {
		return t.nullKey(), nil
	}
	if t.isStr {
		return t.strID(string(b)), nil
	}
	switch {
	case t.typ.ID() == arrow.BOOL && len(b) == 1:
		return t.numID(uint64(b[0])), nil
	case len(b) == 8:
		var v uint64
		for _, c := range b {
			v = v<<8 | uint64(c)
		}
		return t.numID(v), nil
	}
	return 0, fmt.Errorf("keys: %d key bytes do not encode a %s key", len(b), t.typ)
}

// RowBytes returns the key bytes of row i of a key column (see the package
// documentation), the same bytes its key group is hashed from.
func RowBytes(col arrow.Array, i int) ([]byte, error) {
	if col.IsNull(i) {
		return nil, nil
	}
	var v uint64
	switch a := col.(type) {
	case *array.String:
		return []byte(a.Value(i)), nil
	case *array.LargeString:
		return []byte(a.Value(i)), nil
	case *array.Binary:
		return append([]byte(nil), a.Value(i)...), nil
	case *array.LargeBinary:
		return append([]byte(nil), a.Value(i)...), nil
	case *array.Boolean:
		if a.Value(i) {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	default:
		vals, err := numbers(col)
		if err != nil {
			return nil, err
		}
		v = vals(i)
	}
	var b [8]byte
	for k := 0; k < 8; k++ {
		b[k] = byte(v >> (56 - 8*uint(k)))
	}
	return b[:], nil
}

// GroupOfBytes is the key group of key bytes for max parallelism m.
func GroupOfBytes(b []byte, m int) int { return KeyGroup(b, m) }

// Grouper maps a key to the key group its state is kept in: Base plus its
// hash modulo Width. Keyed edges route by HashGrouper(max parallelism);
// an operator keyed by co-partitioning (job.Source.KeyedBy) keeps its keys
// in its own subtask's range instead (RangeGrouper), since its rows were
// not routed by key group.
type Grouper struct{ Base, Width int }

// HashGrouper is the grouping of keyed edges: KeyGroup.
func HashGrouper(maxParallelism int) Grouper { return Grouper{Width: maxParallelism} }

// RangeGrouper keeps every key in r.
func RangeGrouper(r job.KeyGroupRange) Grouper {
	return Grouper{Base: r.Start, Width: r.End - r.Start + 1}
}

// Of is the key group of key bytes b.
func (g Grouper) Of(b []byte) int { return g.Base + int(HashKey(b)%uint64(max(g.Width, 1))) }

// GroupWith is the key group of key ID id under g.
func (t *Table) GroupWith(id int32, g Grouper) int {
	var buf [32]byte
	return g.Of(t.AppendBytes(buf[:0], id))
}

// AppendValueBytes appends the key bytes (Bytes) of row's value in col, a
// column of a type Table supports, to dst; null appends nothing. It reads
// no table, so any goroutine may encode a key from a batch it holds.
func AppendValueBytes(dst []byte, col arrow.Array, row int) []byte {
	if col.IsNull(row) {
		return dst
	}
	switch a := col.(type) {
	case *array.String:
		return append(dst, a.Value(row)...)
	case *array.LargeString:
		return append(dst, a.Value(row)...)
	case *array.Binary:
		return append(dst, a.Value(row)...)
	case *array.LargeBinary:
		return append(dst, a.Value(row)...)
	case *array.Boolean:
		if a.Value(row) {
			return append(dst, 1)
		}
		return append(dst, 0)
	}
	vals, err := numbers(col)
	if err != nil {
		return dst
	}
	return binary.BigEndian.AppendUint64(dst, vals(row))
}
