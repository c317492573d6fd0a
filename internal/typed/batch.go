package typed

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Batch is a record batch of rows of T that encodes a column only when
// something reads it. A typed stage hands the next one its []T through it
// (Codec.Rows), so a chain of typed stages (a push source, MapRows,
// FilterRows, a funcsink) passes Go values along without Arrow in
// between; anything else reads it as any record batch, and pays for the
// columns it reads: a key column for a shuffle, the event-time column
// for the watermark, every column for the WAL.
//
// Only codecs for which encoding and decoding give back the same values
// make batches (Codec.Exact): a reader of Rows and a reader of the
// columns see the same rows. The rows are never written after NewBatch;
// extra columns (a source's __meta_* columns) follow T's. When the last
// batch holding them is released, and no one took them (Own), the rows
// go back to the codec for MakeRows.
type Batch[T any] struct {
	codec  *Codec[T]
	schema *arrow.Schema
	rows   []T
	refs   atomic.Int64
	own    *holders[T]
	mu     sync.Mutex    // guards cols and extra's making
	cols   []arrow.Array // encoded columns by index, nil until read
	// extra makes the columns after T's, once, when one is read (nil: none).
	extra     func() []arrow.Array
	extraCols []arrow.Array
	nextra    int
	run       *metaRun // nil: not known to be one run of a source partition
}

// holders counts the batches holding one slice of rows (those made from
// one another by WithMeta, NewSlice and Project share them), so that Own
// knows when a batch is the last, and the last release gives the slice
// back to the codec unless Own handed it over.
type holders[T any] struct {
	n     atomic.Int64
	rows  []T // as NewBatch was given them
	taken atomic.Bool
}

// NewBatch returns a batch of rows, which it takes: the caller must
// neither write nor read them afterwards (once released they may be
// handed out again by MakeRows). The codec must be exact (see
// Codec.Exact).
func NewBatch[T any](c *Codec[T], rows []T) *Batch[T] {
	if !c.exact {
		panic("typed: NewBatch of a codec that is not exact")
	}
	b := &Batch[T]{codec: c, schema: c.schema, rows: rows, cols: make([]arrow.Array, len(c.fields)), own: &holders[T]{rows: rows}}
	b.refs.Store(1)
	b.own.n.Store(1)
	return b
}

// maxKeptRows bounds the slices MakeRows hands out again: a larger one
// is left to the garbage collector.
const maxKeptRows = 1 << 16

// MakeRows returns a slice of n rows, whose values are undefined: one
// that a released batch gave back when there is one large enough (the
// garbage a batch of Go values would otherwise leave, once per batch,
// is what a job's collector would spend its time on), else a new one.
func (c *Codec[T]) MakeRows(n int) []T {
	if p, ok := c.rows.Get().(*[]T); ok {
		if cap(*p) >= n {
			return (*p)[:n]
		}
	}
	return make([]T, n, max(n, 64))
}

// keep gives rows back for MakeRows.
func (c *Codec[T]) keep(rows []T) {
	if cap(rows) > 0 && cap(rows) <= maxKeptRows {
		c.rows.Put(&rows)
	}
}

// share returns a batch of b's rows (or a slice of them) that counts as
// one more holder of them.
func (b *Batch[T]) share(schema *arrow.Schema, rows []T, cols []arrow.Array) *Batch[T] {
	b.own.n.Add(1)
	nb := &Batch[T]{codec: b.codec, schema: schema, rows: rows, cols: cols, own: b.own}
	nb.refs.Store(1)
	return nb
}

// Exact reports whether T's rows, once Normalize ran on them, come back
// unchanged from Encode then Decode: every field a number, bool, string,
// time.Time or time.Duration (no pointer, sql.Null or []byte), and no
// field left out. Only then may NewBatch hand the rows themselves to a
// reader of Rows.
func (c *Codec[T]) Exact() bool { return c.exact }

// Normalize rounds the time.Time and time.Duration fields of rows to
// their columns' units, as Encode then Decode would (a time in UTC,
// without its monotonic reading), so that a reader of the rows sees what
// a reader of the columns sees. It returns Encode's error for a time a
// column cannot hold (the zero time, or one past its unit's range), and
// leaves the rows before it rounded.
func (c *Codec[T]) Normalize(rows []T) error {
	if !c.timed || len(rows) == 0 {
		return nil
	}
	base := unsafe.Pointer(unsafe.SliceData(rows))
	for _, f := range c.fields {
		if f.null != notNull || (f.kind != kTime && f.kind != kDuration) {
			continue
		}
		for i := range rows {
			p := unsafe.Add(base, uintptr(i)*c.stride+f.off)
			if f.kind == kDuration {
				d := (*time.Duration)(p)
				*d = time.Duration(durUnits(*d, f.unit) * int64(f.unit.Multiplier()))
				continue
			}
			t := (*time.Time)(p)
			v, ok := toUnits(*t, f.unit)
			if !ok {
				return timeError(f, i, *t)
			}
			*t = fromUnits(v, f.unit)
		}
	}
	return nil
}

// Rows returns the rows of rec when it is a Batch of T: the batch's own
// slice, which the caller must neither write nor keep past rec's release.
func (c *Codec[T]) Rows(rec arrow.RecordBatch) ([]T, bool) {
	if b, ok := rec.(*Batch[T]); ok && b.codec == c {
		return b.rows, true
	}
	return nil, false
}

// Own returns the rows of rec when it is a Batch of T that nothing else
// holds: one reference, and no other batch sharing its rows. The caller
// may then keep and write them, and must not read rec again but to
// release it.
func (c *Codec[T]) Own(rec arrow.RecordBatch) ([]T, bool) {
	if b, ok := rec.(*Batch[T]); ok && b.codec == c && b.refs.Load() == 1 && b.own.n.Load() == 1 {
		b.own.taken.Store(true)
		return b.rows, true
	}
	return nil, false
}

// WithMeta returns a batch of the same rows with a source's metadata
// columns after T's (schema is T's fields, then connectors.MetaFields),
// which build makes (once, when one of them is read): rows of source's
// partition at offsets start, start+1, …. The batches share the rows and
// the columns encoded so far. A batch that has extra columns already
// refuses (false).
func (b *Batch[T]) WithMeta(schema *arrow.Schema, source string, partition int32, start int64, build func() []arrow.Array) (arrow.RecordBatch, bool) {
	if b.nextra > 0 || schema.NumFields() < len(b.cols) {
		return nil, false
	}
	nb := b.share(schema, b.rows, b.encoded())
	nb.extra, nb.nextra = build, schema.NumFields()-len(b.cols)
	nb.run = &metaRun{source: source, partition: partition, start: start}
	return nb, true
}

// metaRun is where a batch's rows come from: one partition of a source,
// at consecutive offsets from start.
type metaRun struct {
	source    string
	partition int32
	start     int64
}

// MetaRun returns the source, partition and first offset of the batch's
// rows when they are consecutive rows of one source partition (a batch
// as the source made it, or a slice of one), without making the metadata
// columns; ok is false otherwise.
func (b *Batch[T]) MetaRun() (source string, partition int32, start int64, ok bool) {
	if b.run == nil {
		return "", 0, 0, false
	}
	return b.run.source, b.run.partition, b.run.start, true
}

// ArrowBytes is the bytes the batch references: its rows in memory (the
// rows times the size of T, not what their strings point to), and the
// columns encoded or made from them so far.
func (b *Batch[T]) ArrowBytes() int64 {
	size := int64(len(b.rows)) * int64(b.codec.stride)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.cols {
		if c != nil {
			size += int64(c.Data().SizeInBytes())
		}
	}
	for _, c := range b.extraCols {
		size += int64(c.Data().SizeInBytes())
	}
	return size
}

// encoded returns the columns encoded so far, retained.
func (b *Batch[T]) encoded() []arrow.Array {
	b.mu.Lock()
	defer b.mu.Unlock()
	cols := make([]arrow.Array, len(b.cols))
	for i, c := range b.cols {
		if c != nil {
			c.Retain()
			cols[i] = c
		}
	}
	return cols
}

// Release implements arrow.RecordBatch: the last release frees the
// columns encoded, and the rows when no other batch holds them.
func (b *Batch[T]) Release() {
	switch n := b.refs.Add(-1); {
	case n == 0:
		if b.own.n.Add(-1) == 0 && !b.own.taken.Load() {
			b.codec.keep(b.own.rows)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		for i, c := range b.cols {
			if c != nil {
				c.Release()
				b.cols[i] = nil
			}
		}
		for _, c := range b.extraCols {
			c.Release()
		}
		b.extraCols = nil
	case n < 0:
		panic("typed: Batch released more often than retained")
	}
}

// Retain implements arrow.RecordBatch.
func (b *Batch[T]) Retain() { b.refs.Add(1) }

// Schema implements arrow.RecordBatch.
func (b *Batch[T]) Schema() *arrow.Schema { return b.schema }

// NumRows implements arrow.RecordBatch.
func (b *Batch[T]) NumRows() int64 { return int64(len(b.rows)) }

// NumCols implements arrow.RecordBatch.
func (b *Batch[T]) NumCols() int64 { return int64(b.schema.NumFields()) }

// ColumnName implements arrow.RecordBatch.
func (b *Batch[T]) ColumnName(i int) string { return b.schema.Field(i).Name }

// Column implements arrow.RecordBatch: column i, encoded on the first
// read. The batch owns it (Retain it to keep it).
func (b *Batch[T]) Column(i int) arrow.Array {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.column(i)
}

func (b *Batch[T]) column(i int) arrow.Array {
	if i >= len(b.cols) {
		if i >= len(b.cols)+b.nextra {
			panic(fmt.Sprintf("typed: column %d of a batch of %d", i, len(b.cols)+b.nextra))
		}
		if b.extraCols == nil {
			b.extraCols = b.extra()
		}
		return b.extraCols[i-len(b.cols)]
	}
	if b.cols[i] == nil {
		f := b.codec.fields[i]
		d, err := f.enc(memory.DefaultAllocator, f, unsafe.Pointer(unsafe.SliceData(b.rows)), len(b.rows), b.codec.stride)
		if err != nil {
			// An exact codec's encoders cannot fail: only times and
			// columns over 2 GiB do, and a batch's rows are a push's or
			// an operator's output, far below that.
			panic(fmt.Sprintf("typed: encoding %s: %v", f.where(), err))
		}
		b.cols[i] = array.MakeFromData(d)
		d.Release()
	}
	return b.cols[i]
}

// Columns implements arrow.RecordBatch: every column, encoded.
func (b *Batch[T]) Columns() []arrow.Array {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]arrow.Array, b.schema.NumFields())
	for i := range out {
		out[i] = b.column(i)
	}
	return out
}

// record returns the batch as a plain record of its columns.
func (b *Batch[T]) record() arrow.RecordBatch {
	return array.NewRecordBatch(b.schema, b.Columns(), int64(len(b.rows)))
}

// SetColumn implements arrow.RecordBatch, on the batch's columns.
func (b *Batch[T]) SetColumn(i int, col arrow.Array) (arrow.RecordBatch, error) {
	rec := b.record()
	defer rec.Release()
	return rec.SetColumn(i, col)
}

// MarshalJSON implements arrow.RecordBatch.
func (b *Batch[T]) MarshalJSON() ([]byte, error) {
	rec := b.record()
	defer rec.Release()
	return json.Marshal(rec)
}

// NewSlice implements arrow.RecordBatch: rows i to j, the extra columns
// sliced with them.
func (b *Batch[T]) NewSlice(i, j int64) arrow.RecordBatch {
	if i < 0 || j < i || j > int64(len(b.rows)) {
		panic(fmt.Sprintf("typed: slice [%d:%d] of a batch of %d rows", i, j, len(b.rows)))
	}
	nb := b.share(b.schema, b.rows[i:j:j], make([]arrow.Array, len(b.cols)))
	nb.nextra = b.nextra
	if b.nextra > 0 {
		extra := b.extraSlices(i, j)
		nb.extra = func() []arrow.Array { return extra }
	}
	if b.run != nil {
		nb.run = &metaRun{source: b.run.source, partition: b.run.partition, start: b.run.start + i}
	}
	return nb
}

// extraSlices returns the extra columns' rows i to j.
func (b *Batch[T]) extraSlices(i, j int64) []arrow.Array {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]arrow.Array, b.nextra)
	for k := range out {
		out[k] = array.NewSlice(b.column(len(b.cols)+k), i, j)
	}
	return out
}

// TakeRows returns the rows at idx, in that order, as a Batch; take
// takes the extra columns' (batch.TakeArray). The batch package calls
// it for Take, Filter and Split.
func (b *Batch[T]) TakeRows(idx []int32, take func(arrow.Array, []int32) (arrow.Array, error)) (arrow.RecordBatch, error) {
	rows := b.codec.MakeRows(len(idx))
	for k, i := range idx {
		rows[k] = b.rows[i]
	}
	nb := NewBatch(b.codec, rows)
	nb.schema, nb.nextra = b.schema, b.nextra
	if b.nextra > 0 {
		b.mu.Lock()
		defer b.mu.Unlock()
		extra := make([]arrow.Array, b.nextra)
		for k := range extra {
			a, err := take(b.column(len(b.cols)+k), idx)
			if err != nil {
				for _, e := range extra[:k] {
					e.Release()
				}
				return nil, err
			}
			extra[k] = a
		}
		nb.extra = func() []arrow.Array { return extra }
	}
	return nb, nil
}

// Project returns the batch's first n columns (T's, without the extra
// ones) when cols is 0, 1, …, n-1 and n is the number of T's fields.
func (b *Batch[T]) Project(cols []int) (arrow.RecordBatch, bool) {
	if len(cols) != len(b.cols) {
		return nil, false
	}
	for i, c := range cols {
		if c != i {
			return nil, false
		}
	}
	return b.share(b.codec.schema, b.rows, b.encoded()), true
}
