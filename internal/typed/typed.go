// Package typed maps Go structs to Arrow schemas and converts between
// []T and record batches (R-EMBED-1). The public face is arkflow.Encode,
// arkflow.Decode and arkflow.SchemaOf; the rest of the module uses Codec.
package typed

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Codec converts between []T and Arrow record batches of one schema. It is
// built once per type (For caches it) and safe for concurrent use.
type Codec[T any] struct {
	schema *arrow.Schema
}

// For returns the codec of T, a struct type. Unsupported field types are
// refused with an error naming the field.
func For[T any]() (*Codec[T], error) { return nil, errors.New("typed: not implemented") }

// Schema is the Arrow schema of T's rows.
func (c *Codec[T]) Schema() *arrow.Schema { return c.schema }

// Encode builds a record batch of rows. mem nil means the default
// allocator. The caller releases the batch.
func (c *Codec[T]) Encode(mem memory.Allocator, rows []T) (arrow.RecordBatch, error) {
	return nil, errors.New("typed: not implemented")
}

// Decode appends the rows of rec to dst and returns it. Columns are matched
// to fields by name; columns T has no field for are ignored; a field
// without a column, or a column whose type cannot be stored in the field,
// is an error naming both.
func (c *Codec[T]) Decode(rec arrow.RecordBatch, dst []T) ([]T, error) {
	return dst, errors.New("typed: not implemented")
}
