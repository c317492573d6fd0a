package arkflow

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/typed"
)

// SchemaOf returns the Arrow schema of rows of type T, a struct: a
// column per exported field, in declaration order, named after the field
// or its tag (`arkflow:"user_id"`; `arkflow:"-"` skips it). The mapping is
// worked out once per type and cached; Encode, Decode and DecodeInto use
// the same one. The package documentation ("Typed rows") gives the Arrow
// type of each Go type, which fields are nullable, and what is refused.
// A refusal names the Go field path and its type, and says what to do:
//
//	typed: Click.Geo (main.Geo): nested structs are not supported; flatten it or tag it arkflow:"-"
func SchemaOf[T any]() (*arrow.Schema, error) {
	c, err := typed.For[T]()
	if err != nil {
		return nil, err
	}
	return c.Schema(), nil
}

// Encode builds a record batch holding rows, with the schema SchemaOf[T]
// returns, from memory.DefaultAllocator, writing each column's Arrow
// buffers directly (no reflection per value). The caller releases the
// batch. The fields map to columns as SchemaOf describes (names and tags,
// types, units, nulls), and a type SchemaOf refuses is refused here with
// the same error.
//
// Values are stored as they are, with these exceptions: a time.Time or
// time.Duration finer than its column's unit is truncated to the unit
// (times toward the past, durations toward zero); a time outside what the
// unit can hold in 64 bits (before 1677 or after 2262 in nanoseconds) is
// an error naming the field and the row; a nil []byte is an empty value,
// not a null (use *[]byte for nulls); strings are not checked for valid
// UTF-8; and a column's strings or bytes may not pass 2 GiB in one batch.
func Encode[T any](rows []T) (arrow.RecordBatch, error) {
	c, err := typed.For[T]()
	if err != nil {
		return nil, err
	}
	return c.Encode(memory.DefaultAllocator, rows)
}

// Decode returns the rows of rec as a new []T. It is DecodeInto with a nil
// dst; see DecodeInto for how columns are matched and converted.
func Decode[T any](rec arrow.RecordBatch) ([]T, error) {
	return DecodeInto[T](rec, nil)
}

// DecodeInto appends the rows of rec to dst and returns the extended
// slice, as append does: pass dst[:0] to reuse its memory across batches.
// On an error it returns dst with its length unchanged. T maps to columns
// as SchemaOf describes, and a type SchemaOf refuses is refused here.
//
// Each field takes the column of its name (exactly, else the one column
// equal to it ignoring case); columns no field asks for are ignored. A
// column decodes into a field when every value it can hold fits, and a
// null only into a pointer or a database/sql Null field; anything else is
// an error naming the field, never a silent zero. The rows never point
// into rec, which the caller may release at once. The package
// documentation ("Typed rows") lists the conversions and how the rows
// share memory.
func DecodeInto[T any](rec arrow.RecordBatch, dst []T) ([]T, error) {
	c, err := typed.For[T]()
	if err != nil {
		return dst, err
	}
	buf := dst
	if buf == nil && rec != nil {
		buf = make([]T, 0, rec.NumRows())
	}
	out, err := c.Decode(rec, buf)
	if err != nil {
		return dst, err
	}
	return out, nil
}
