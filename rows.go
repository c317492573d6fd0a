package arkflow

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/typed"
)

// SchemaOf returns the Arrow schema of rows of type T, a struct.
// The mapping is worked out once per type and cached; Encode, Decode and
// DecodeInto use the same one.
//
// Columns. Every exported field is a column, in declaration order, named
// after the field ("UserID"), or after its tag: `arkflow:"user_id"`.
// `arkflow:"-"` skips a field (`arkflow:"-,"` names a column "-").
// Unexported fields are skipped. Embedded structs are flattened as
// encoding/json does: their fields become columns of T (an embedded
// struct with a tag name is a nested struct instead, see below), a
// shallower field hides a deeper one of the same name, and two columns of
// the same name at the same depth are refused, naming both fields.
// Embedded time.Time and database/sql Null values are columns named after
// their type ("Time").
//
// Types. Go's int8, int16, int32, int64, uint8, uint16, uint32 and uint64
// map to the Arrow integer of the same width; int and uint to int64 and
// uint64 on every platform; float32 and float64 to float32 and float64;
// bool to bool; string to utf8; []byte to binary. time.Time is a
// timestamp in milliseconds with time zone UTC, and time.Duration a
// duration in milliseconds; the tag option unit= changes the unit to s,
// ms, us or ns: `arkflow:"at,unit=us"` (or `arkflow:",unit=ns"` to keep
// the field's name). Named types take their underlying type's mapping
// (type UserID string is utf8) except time.Duration, which is a duration.
//
// Nulls. A field is nullable, and its column too, when it is a pointer to
// one of those types (*int64, *string, *time.Time, *[]byte, ...; nil is
// null) or a database/sql Null type: NullString, NullInt64, NullInt32,
// NullInt16, NullByte (uint8), NullFloat64, NullBool, NullTime, and the
// generic Null[V] of any supported V (Valid false is null). Every other
// field's column is not nullable.
//
// Refusals. SchemaOf returns an error, and Encode and Decode return the
// same error, when T is not a struct, when it has no column, or when a
// field cannot be mapped: a named nested struct or a pointer to one, a
// slice other than []byte, an array, a map, a channel, a func, an
// interface, a complex number, a uintptr, an unsafe.Pointer, a pointer to
// a pointer or to a database/sql Null type, or an embedded pointer to a
// struct. So do an unknown tag option, a unit that is not s, ms, us or ns,
// and unit= on a field that is not a time.Time or time.Duration. The error
// names the Go field path and its type, and says what to do:
//
//	typed: Click.Geo (main.Geo): nested structs are not supported; flatten it or tag it arkflow:"-"
//
// Tag such fields `arkflow:"-"` to keep them in T.
func SchemaOf[T any]() (*arrow.Schema, error) {
	c, err := typed.For[T]()
	if err != nil {
		return nil, err
	}
	return c.Schema(), nil
}

// Encode builds a record batch holding rows, with the schema SchemaOf[T]
// returns, from memory.DefaultAllocator. The caller releases the batch.
// The fields map to columns as SchemaOf describes (names and tags,
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
//
// Encode reads each field at its offset in the rows and writes the Arrow
// buffers directly, one column at a time: no reflection per value.
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
// Matching. Each field takes the column of its name (its tag's name, or
// the field's): an exact match first, else the one column whose name
// equals it ignoring case (so field User reads column "user"). Columns no
// field asks for are ignored, such as a source's __meta_* columns or a
// window's __arkflow_window_update. A field without a column is an error
// naming the field and listing the batch's columns; so is a name that
// several columns match.
//
// Types. A column decodes into a field when every value it can hold
// fits; otherwise it is an error naming the column's Arrow type and the
// field's Go type. Besides the column type SchemaOf gives the field:
//   - integer fields take narrower integer columns of the same signedness
//     (int32 into int64) and narrower unsigned ones (uint32 into int64);
//     int and uint take int64 and uint64 columns on every platform
//     (range-checked where they are 32 bits);
//   - int64 and int fields take timestamp and duration columns as their
//     raw value in the column's unit;
//   - float64 fields take float32 columns;
//   - time.Time fields take timestamp columns of any unit and time zone;
//     the time decoded is the same instant, in UTC;
//   - time.Duration fields take duration columns of any unit (a value
//     past ±292 years is an error naming the row);
//   - string fields take utf8, large_utf8 and utf8_view columns and
//     dictionaries of them; []byte fields take those and binary,
//     large_binary and binary_view.
//
// Other conversions, such as int64 into int32, float64 into float32,
// signed into unsigned, or integers into floats or times, are refused.
//
// Nulls. A null decodes into a pointer field as nil and into a database/sql
// Null field as Valid false. A null in a column whose field cannot hold
// one is an error naming the field and the row, never a silent zero.
//
// Memory. The rows never point into rec, which the caller may release at
// once: the strings (or []byte values) of one column are copied into one
// allocation that they share, and the values of a pointer field point
// into one array per column. Keeping one value keeps that allocation
// alive. Fields with no column (skipped or unexported) are zero in the
// rows appended.
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
