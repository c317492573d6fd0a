// Package rowbin encodes single rows of Arrow record batches as bytes, for
// operators that keep rows in the state store (a join's table versions):
// per column a null flag, then the value, fixed-width little-endian for
// numbers and times, length-prefixed for strings and binary. A Codec is
// made for a list of columns of a schema and decodes what it encoded by
// appending to Arrow builders.
package rowbin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ErrCorrupt is returned for bytes that are not a row of the codec.
var ErrCorrupt = errors.New("rowbin: corrupt row")

// Codec encodes and decodes rows of some columns of one schema.
type Codec struct {
	types []arrow.DataType
	cols  []int
}

// New returns a codec for the columns cols of schema, or an error naming
// a column whose type it does not support.
func New(schema *arrow.Schema, cols []int) (*Codec, error) {
	c := &Codec{cols: cols}
	for _, i := range cols {
		f := schema.Field(i)
		if !Supported(f.Type) {
			return nil, fmt.Errorf("column %q has type %s, which a row kept in state cannot hold", f.Name, f.Type)
		}
		c.types = append(c.types, f.Type)
	}
	return c, nil
}

// Supported reports whether rows with a column of type t can be encoded.
func Supported(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.BOOL, arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY,
		arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64, arrow.DURATION:
		return true
	}
	return false
}

// Append appends the encoding of row of rec (whose schema is the codec's)
// to dst.
func (c *Codec) Append(dst []byte, rec arrow.RecordBatch, row int) []byte {
	for _, i := range c.cols {
		a := rec.Column(i)
		if a.IsNull(row) {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, 1)
		switch a := a.(type) {
		case *array.Int8:
			dst = append(dst, byte(a.Value(row)))
		case *array.Int16:
			dst = binary.LittleEndian.AppendUint16(dst, uint16(a.Value(row)))
		case *array.Int32:
			dst = binary.LittleEndian.AppendUint32(dst, uint32(a.Value(row)))
		case *array.Int64:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(a.Value(row)))
		case *array.Uint8:
			dst = append(dst, a.Value(row))
		case *array.Uint16:
			dst = binary.LittleEndian.AppendUint16(dst, a.Value(row))
		case *array.Uint32:
			dst = binary.LittleEndian.AppendUint32(dst, a.Value(row))
		case *array.Uint64:
			dst = binary.LittleEndian.AppendUint64(dst, a.Value(row))
		case *array.Float32:
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(a.Value(row)))
		case *array.Float64:
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(a.Value(row)))
		case *array.Boolean:
			if a.Value(row) {
				dst = append(dst, 1)
			} else {
				dst = append(dst, 0)
			}
		case *array.String:
			dst = appendBytes(dst, []byte(a.Value(row)))
		case *array.LargeString:
			dst = appendBytes(dst, []byte(a.Value(row)))
		case *array.Binary:
			dst = appendBytes(dst, a.Value(row))
		case *array.LargeBinary:
			dst = appendBytes(dst, a.Value(row))
		case *array.Timestamp:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(a.Value(row)))
		case *array.Date32:
			dst = binary.LittleEndian.AppendUint32(dst, uint32(a.Value(row)))
		case *array.Date64:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(a.Value(row)))
		case *array.Duration:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(a.Value(row)))
		}
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Decode appends the row encoded in src to bs, one builder per column of
// the codec, of the columns' types. On error nothing is appended.
func (c *Codec) Decode(src []byte, bs []array.Builder) error {
	if err := c.check(src); err != nil {
		return err
	}
	for k, b := range bs {
		null := src[0] == 0
		src = src[1:]
		if null {
			b.AppendNull()
			continue
		}
		var n int
		switch b := b.(type) {
		case *array.Int8Builder:
			b.Append(int8(src[0]))
			n = 1
		case *array.Int16Builder:
			b.Append(int16(binary.LittleEndian.Uint16(src)))
			n = 2
		case *array.Int32Builder:
			b.Append(int32(binary.LittleEndian.Uint32(src)))
			n = 4
		case *array.Int64Builder:
			b.Append(int64(binary.LittleEndian.Uint64(src)))
			n = 8
		case *array.Uint8Builder:
			b.Append(src[0])
			n = 1
		case *array.Uint16Builder:
			b.Append(binary.LittleEndian.Uint16(src))
			n = 2
		case *array.Uint32Builder:
			b.Append(binary.LittleEndian.Uint32(src))
			n = 4
		case *array.Uint64Builder:
			b.Append(binary.LittleEndian.Uint64(src))
			n = 8
		case *array.Float32Builder:
			b.Append(math.Float32frombits(binary.LittleEndian.Uint32(src)))
			n = 4
		case *array.Float64Builder:
			b.Append(math.Float64frombits(binary.LittleEndian.Uint64(src)))
			n = 8
		case *array.BooleanBuilder:
			b.Append(src[0] != 0)
			n = 1
		case *array.StringBuilder:
			v, m := readBytes(src)
			b.Append(string(v))
			n = m
		case *array.LargeStringBuilder:
			v, m := readBytes(src)
			b.Append(string(v))
			n = m
		case *array.BinaryBuilder:
			v, m := readBytes(src)
			b.Append(v)
			n = m
		case *array.TimestampBuilder:
			b.Append(arrow.Timestamp(binary.LittleEndian.Uint64(src)))
			n = 8
		case *array.Date32Builder:
			b.Append(arrow.Date32(binary.LittleEndian.Uint32(src)))
			n = 4
		case *array.Date64Builder:
			b.Append(arrow.Date64(binary.LittleEndian.Uint64(src)))
			n = 8
		case *array.DurationBuilder:
			b.Append(arrow.Duration(binary.LittleEndian.Uint64(src)))
			n = 8
		default:
			return fmt.Errorf("rowbin: column %d: builder %T for type %s", k, b, c.types[k])
		}
		src = src[n:]
	}
	return nil
}

func readBytes(src []byte) ([]byte, int) {
	l, m := binary.Uvarint(src)
	return src[m : m+int(l)], m + int(l)
}

// check walks src as a row of the codec without decoding it, so that
// Decode appends nothing to a row that is not whole.
func (c *Codec) check(src []byte) error {
	for _, t := range c.types {
		if len(src) == 0 {
			return ErrCorrupt
		}
		flag := src[0]
		src = src[1:]
		if flag > 1 {
			return ErrCorrupt
		}
		if flag == 0 {
			continue
		}
		var n int
		switch t.ID() {
		case arrow.INT8, arrow.UINT8, arrow.BOOL:
			n = 1
		case arrow.INT16, arrow.UINT16:
			n = 2
		case arrow.INT32, arrow.UINT32, arrow.FLOAT32, arrow.DATE32:
			n = 4
		case arrow.INT64, arrow.UINT64, arrow.FLOAT64, arrow.TIMESTAMP, arrow.DATE64, arrow.DURATION:
			n = 8
		default: // length-prefixed
			l, m := binary.Uvarint(src)
			if m <= 0 || l > uint64(len(src)-m) {
				return ErrCorrupt
			}
			n = m + int(l)
		}
		if len(src) < n {
			return ErrCorrupt
		}
		src = src[n:]
	}
	if len(src) != 0 {
		return ErrCorrupt
	}
	return nil
}
