// Package typed maps Go structs to Arrow schemas and converts between
// []T and record batches. The public face is arkflow.Encode,
// arkflow.Decode and arkflow.SchemaOf, whose doc comments give the mapping
// rules in full; the rest of the module uses Codec.
//
// For builds a codec once per type: it walks T with reflection, resolves
// each column's name, type and nullability, and picks a per-column encoder.
// Encode and Decode then run one loop per column over the rows at their
// field offsets (unsafe pointer arithmetic), writing or reading the Arrow
// buffers directly, with no reflection and no indirect call per value.
package typed

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Codec converts between []T and Arrow record batches of one schema. It is
// built once per type (For caches it) and safe for concurrent use.
type Codec[T any] struct {
	schema *arrow.Schema
	fields []*field
	stride uintptr // size of T
	// partial: T has bytes no column writes (skipped, unexported or hidden
	// fields), so Decode zeroes new rows first.
	partial bool
	// exact: Decode gives back what Encode was given, once Normalize
	// ran (see Exact); timed: T has time or duration fields, which
	// Normalize rounds to their columns' units.
	exact, timed bool
	// bound is the binding of the last schema Decode saw: batches of one
	// stream share their schema, so binding is done once, not per batch.
	bound atomic.Pointer[binding]
	// rows keeps slices of T that batches held and gave back (*[]T), for
	// MakeRows.
	rows sync.Pool
}

// codecs caches For's result (a *Codec[T] or the error) per type.
var codecs sync.Map // reflect.Type -> built

type built struct {
	codec any
	err   error
}

// For returns the codec of T, a struct type. Unsupported field types are
// refused with an error naming the field.
func For[T any]() (*Codec[T], error) {
	t := reflect.TypeFor[T]()
	v, ok := codecs.Load(t)
	if !ok {
		c, err := newCodec[T](t)
		v, _ = codecs.LoadOrStore(t, built{codec: c, err: err})
	}
	b := v.(built)
	if b.err != nil {
		return nil, b.err
	}
	return b.codec.(*Codec[T]), nil
}

func newCodec[T any](t reflect.Type) (*Codec[T], error) {
	fields, skipped, err := plan(t)
	if err != nil {
		return nil, err
	}
	afs := make([]arrow.Field, len(fields))
	exact, timed := !skipped, false
	for i, f := range fields {
		afs[i] = arrow.Field{Name: f.name, Type: f.dtype, Nullable: f.null != notNull}
		exact = exact && f.null == notNull && f.kind != kBytes
		timed = timed || f.kind == kTime || f.kind == kDuration
	}
	return &Codec[T]{
		schema:  arrow.NewSchema(afs, nil),
		fields:  fields,
		stride:  t.Size(),
		partial: skipped,
		exact:   exact,
		timed:   timed,
	}, nil
}

// Schema is the Arrow schema of T's rows.
func (c *Codec[T]) Schema() *arrow.Schema { return c.schema }

// FieldPath names the Go field of column i of Schema, for messages, as
// in "Click.Base.ID".
func (c *Codec[T]) FieldPath(i int) string { return c.fields[i].path }

// Missing finds the rows whose column col has no value: null (a nil
// pointer, a database/sql Null type not Valid) or, for a time.Time, Go's
// zero time, which would otherwise be written as 0001-01-01T00:00:00Z.
// It returns the first such row (-1 when there is none), how many there
// are, and whether the first one is null (not zero).
func (c *Codec[T]) Missing(rows []T, col int) (first, count int, null bool) {
	f := c.fields[col]
	base := unsafe.Pointer(unsafe.SliceData(rows))
	first = -1
	for i := range rows {
		p := f.value(unsafe.Add(base, uintptr(i)*c.stride))
		if p != nil && (f.kind != kTime || !(*time.Time)(p).IsZero()) {
			continue
		}
		if first < 0 {
			first, null = i, p == nil
		}
		count++
	}
	return first, count, null
}

// Encode builds a record batch of rows. mem nil means the default
// allocator. The caller releases the batch.
func (c *Codec[T]) Encode(mem memory.Allocator, rows []T) (arrow.RecordBatch, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	n := len(rows)
	base := unsafe.Pointer(unsafe.SliceData(rows))
	cols := make([]arrow.Array, 0, len(c.fields))
	defer func() {
		for _, a := range cols {
			a.Release()
		}
	}()
	for _, f := range c.fields {
		d, err := f.enc(mem, f, base, n, c.stride)
		if err != nil {
			return nil, err
		}
		cols = append(cols, array.MakeFromData(d))
		d.Release()
	}
	return array.NewRecordBatch(c.schema, cols, int64(n)), nil
}

// Decode appends the rows of rec to dst and returns it. Columns are matched
// to fields by name; columns T has no field for are ignored; a field
// without a column, or a column whose type cannot be stored in the field,
// is an error naming both. On an error dst is returned with its length
// unchanged.
func (c *Codec[T]) Decode(rec arrow.RecordBatch, dst []T) ([]T, error) {
	if rec == nil {
		return dst, errors.New("typed: Decode of a nil record batch")
	}
	if rows, ok := c.Rows(rec); ok {
		return append(dst, rows...), nil
	}
	b, err := c.bind(rec.Schema())
	if err != nil {
		return dst, err
	}
	n := int(rec.NumRows())
	if n == 0 {
		return dst, nil
	}
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	out := dst[start:]
	if c.partial {
		clear(out)
	}
	base := unsafe.Pointer(unsafe.SliceData(out))
	for i, f := range c.fields {
		col := rec.Column(b.cols[i])
		if col.Len() != n {
			return dst[:start], fmt.Errorf("typed: %s: column %q has %d rows, the batch %d", f.where(), rec.ColumnName(b.cols[i]), col.Len(), n)
		}
		if err := b.decs[i](f, col, base, n, c.stride); err != nil {
			return dst[:start], err
		}
	}
	return dst, nil
}

// Check reports whether batches of schema decode into T: the error
// Decode would return for any batch of schema before reading a value (a
// field without a column, a column whose type cannot be stored in its
// field), or nil. A null in a column is still found only by Decode.
func (c *Codec[T]) Check(schema *arrow.Schema) error {
	if schema == nil {
		return errors.New("typed: Check of a nil schema")
	}
	_, err := c.bind(schema)
	return err
}

func (c *Codec[T]) bind(s *arrow.Schema) (*binding, error) {
	if b := c.bound.Load(); b != nil && (b.schema == s || b.schema.Equal(s)) {
		return b, nil
	}
	b, err := bind(c.fields, s)
	if err != nil {
		return nil, err
	}
	c.bound.Store(b)
	return b, nil
}
