package file

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/arrowjson"
)

// Kinds of a csv value, as a bit set over the rows of a column.
const (
	kindInt = 1 << iota
	kindFloat
	kindBool
	kindText
)

// csvKind classifies a non-empty csv value as arrow-csv's inference does.
func csvKind(v string) int {
	if strings.EqualFold(v, "true") || strings.EqualFold(v, "false") {
		return kindBool
	}
	digits, dot, exp := 0, false, false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '-' && i == 0:
		case c == '.' && !dot && !exp:
			dot = true
		case (c == 'e' || c == 'E') && !exp && digits > 0 && i+1 < len(v):
			exp = true
			if v[i+1] == '+' || v[i+1] == '-' {
				i++
			}
			if i+1 >= len(v) {
				return kindText
			}
		default:
			return kindText
		}
	}
	switch {
	case digits == 0:
		return kindText
	case !dot && !exp:
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			return kindInt
		}
		return kindFloat
	}
	return kindFloat
}

// csvType is the type of a column whose values had the given kinds.
func csvType(kinds int) arrow.DataType {
	switch kinds {
	case kindBool:
		return arrow.FixedWidthTypes.Boolean
	case kindInt:
		return arrow.PrimitiveTypes.Int64
	case kindFloat, kindInt | kindFloat:
		return arrow.PrimitiveTypes.Float64
	}
	return arrow.BinaryTypes.String
}

// newCSV opens a csv file and reads its header.
func newCSV(path string) (*os.File, *csv.Reader, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("file %q: %w", path, err)
	}
	r := csv.NewReader(bufio.NewReaderSize(f, 256<<10))
	r.ReuseRecord = true
	header, err := r.Read()
	if err != nil {
		f.Close()
		if err == io.EOF {
			return nil, nil, nil, fmt.Errorf("file %q: empty: a csv file starts with a header row", path)
		}
		return nil, nil, nil, fmt.Errorf("file %q: %w", path, err)
	}
	header = append([]string(nil), header...)
	header[0] = strings.TrimPrefix(header[0], "\ufeff")
	seen := map[string]bool{}
	for i, h := range header {
		if h == "" || seen[h] {
			f.Close()
			return nil, nil, nil, fmt.Errorf("file %q: header column %d is empty or repeated (%q)", path, i+1, h)
		}
		seen[h] = true
	}
	return f, r, header, nil
}

// csvSchema reads a csv header and infers the column types over the first
// InferRows rows.
func csvSchema(path string) (*arrow.Schema, error) {
	f, r, header, err := newCSV(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kinds := make([]int, len(header))
	for range InferRows {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("file %q: %w", path, err)
		}
		for i, v := range rec {
			if v != "" {
				kinds[i] |= csvKind(v)
			}
		}
	}
	fields := make([]arrow.Field, len(header))
	for i, h := range header {
		fields[i] = arrow.Field{Name: h, Type: csvType(kinds[i]), Nullable: true}
	}
	return arrow.NewSchema(fields, nil), nil
}

type csvRows struct {
	f      *os.File
	r      *csv.Reader
	path   string
	chunk  int
	bld    *array.RecordBuilder
	cur    arrow.RecordBatch
	schema *arrow.Schema
}

func openCSV(path string, schema *arrow.Schema, chunk int, skip int64) (rowReader, int64, error) {
	f, r, header, err := newCSV(path)
	if err != nil {
		return nil, 0, err
	}
	if len(header) != schema.NumFields() || !equalNames(header, schema) {
		f.Close()
		return nil, 0, fmt.Errorf("file %q: its header changed since it was read: %q", path, header)
	}
	for i := int64(0); i < skip; i++ {
		if _, err := r.Read(); err != nil {
			if err == io.EOF {
				return &csvRows{f: f, path: path}, i, nil
			}
			f.Close()
			return nil, 0, fmt.Errorf("file %q: %w", path, err)
		}
	}
	c := &csvRows{f: f, r: r, path: path, chunk: chunk, schema: schema}
	c.bld = array.NewRecordBuilder(memory.DefaultAllocator, schema)
	return c, skip, nil
}

func equalNames(names []string, s *arrow.Schema) bool {
	for i, n := range names {
		if s.Field(i).Name != n {
			return false
		}
	}
	return true
}

func (c *csvRows) next() (arrow.RecordBatch, error) {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	if c.r == nil {
		return nil, io.EOF
	}
	n := 0
	for ; n < c.chunk; n++ {
		rec, err := c.r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("file %q: %w", c.path, err)
		}
		if err := c.append(rec); err != nil {
			return nil, err
		}
	}
	if n == 0 {
		return nil, io.EOF
	}
	c.cur = c.bld.NewRecordBatch()
	return c.cur, nil
}

// append appends one csv record to the builders.
func (c *csvRows) append(rec []string) error {
	for i, v := range rec {
		b := c.bld.Field(i)
		if v == "" {
			b.AppendNull()
			continue
		}
		var err error
		switch b := b.(type) {
		case *array.Int64Builder:
			var x int64
			if x, err = strconv.ParseInt(v, 10, 64); err == nil {
				b.Append(x)
			}
		case *array.Float64Builder:
			var x float64
			if x, err = strconv.ParseFloat(v, 64); err == nil || errors.Is(err, strconv.ErrRange) {
				b.Append(x)
				err = nil
			}
		case *array.BooleanBuilder:
			switch {
			case strings.EqualFold(v, "true"):
				b.Append(true)
			case strings.EqualFold(v, "false"):
				b.Append(false)
			default:
				err = errors.New("not true or false")
			}
		case *array.StringBuilder:
			b.Append(v)
		}
		if err != nil {
			line, _ := c.r.FieldPos(i)
			f := c.schema.Field(i)
			return fmt.Errorf("file %q line %d: column %q: %q does not fit type %s, inferred from the first %d rows", c.path, line, f.Name, v, f.Type, InferRows)
		}
	}
	return nil
}

func (c *csvRows) total() int64 { return 0 }

func (c *csvRows) close() error {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	if c.bld != nil {
		c.bld.Release()
		c.bld = nil
	}
	return c.f.Close()
}

// lines reads the non-blank lines of a file with their line numbers.
type lines struct {
	r    *bufio.Reader
	line int // number of the last line read (1-based)
	buf  []byte
}

// next returns the next non-blank line, valid until the following call, or
// io.EOF.
func (l *lines) next() ([]byte, error) {
	for {
		l.buf = l.buf[:0]
		for {
			b, err := l.r.ReadSlice('\n')
			l.buf = append(l.buf, b...)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF && len(l.buf) > 0 {
				break
			}
			if err != nil {
				return nil, err
			}
			break
		}
		l.line++
		if b := bytes.TrimSpace(l.buf); len(b) > 0 {
			return b, nil
		}
	}
}

// jsonSchema infers the columns of a JSON-lines file over its first
// InferRows lines.
func jsonSchema(path string) (*arrow.Schema, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("file %q: %w", path, err)
	}
	defer f.Close()
	l := &lines{r: bufio.NewReaderSize(f, 256<<10)}
	var vals [][]byte
	var nums []int
	for len(vals) < InferRows {
		b, err := l.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("file %q: %w", path, err)
		}
		vals, nums = append(vals, bytes.Clone(b)), append(nums, l.line)
	}
	rec, err := decodeJSON(path, vals, nums)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	return rec.Schema(), nil
}

// decodeJSON decodes JSON objects, naming the line of a failing one.
func decodeJSON(path string, vals [][]byte, nums []int) (arrow.RecordBatch, error) {
	rec, err := arrowjson.DecodeValues(vals, nil)
	if err == nil {
		return rec, nil
	}
	for i, v := range vals {
		r, err := arrowjson.DecodeValues([][]byte{v}, nil)
		if err != nil {
			return nil, fmt.Errorf("file %q line %d: %s", path, nums[i], strings.TrimPrefix(err.Error(), "row 0: "))
		}
		r.Release()
	}
	msg := err.Error()
	if k, rest, ok := strings.Cut(strings.TrimPrefix(msg, "row "), ": "); ok {
		if i, err := strconv.Atoi(k); err == nil && i >= 0 && i < len(nums) {
			return nil, fmt.Errorf("file %q line %d: %s", path, nums[i], rest)
		}
	}
	return nil, fmt.Errorf("file %q lines %d to %d: %s", path, nums[0], nums[len(nums)-1], msg)
}

type jsonRows struct {
	f      *os.File
	l      *lines
	path   string
	chunk  int
	schema *arrow.Schema
	cur    arrow.RecordBatch
	vals   [][]byte
	nums   []int
}

func openJSON(path string, schema *arrow.Schema, chunk int, skip int64) (rowReader, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("file %q: %w", path, err)
	}
	l := &lines{r: bufio.NewReaderSize(f, 256<<10)}
	for i := int64(0); i < skip; i++ {
		if _, err := l.next(); err != nil {
			if err == io.EOF {
				return &jsonRows{f: f, path: path}, i, nil
			}
			f.Close()
			return nil, 0, fmt.Errorf("file %q: %w", path, err)
		}
	}
	return &jsonRows{f: f, l: l, path: path, chunk: chunk, schema: schema}, skip, nil
}

func (j *jsonRows) next() (arrow.RecordBatch, error) {
	if j.cur != nil {
		j.cur.Release()
		j.cur = nil
	}
	if j.l == nil {
		return nil, io.EOF
	}
	j.vals, j.nums = j.vals[:0], j.nums[:0]
	for len(j.vals) < j.chunk {
		b, err := j.l.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("file %q: %w", j.path, err)
		}
		j.vals, j.nums = append(j.vals, bytes.Clone(b)), append(j.nums, j.l.line)
	}
	if len(j.vals) == 0 {
		return nil, io.EOF
	}
	rec, err := decodeJSON(j.path, j.vals, j.nums)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	j.cur, err = conform(rec, j.schema)
	if err == nil {
		return j.cur, nil
	}
	for i, v := range j.vals { // find the line
		r, err := arrowjson.DecodeValues([][]byte{v}, nil)
		if err == nil {
			var c arrow.RecordBatch
			c, err = conform(r, j.schema)
			r.Release()
			if err == nil {
				c.Release()
				continue
			}
		}
		return nil, fmt.Errorf("file %q line %d: %w", j.path, j.nums[i], err)
	}
	return nil, fmt.Errorf("file %q lines %d to %d: %w", j.path, j.nums[0], j.nums[len(j.nums)-1], err)
}

func (j *jsonRows) total() int64 { return 0 }

func (j *jsonRows) close() error {
	if j.cur != nil {
		j.cur.Release()
		j.cur = nil
	}
	return j.f.Close()
}

// conform returns rec with the columns of schema: a missing key or a
// column of nulls gives nulls, integers in a Float64 column are converted;
// a key not in schema, or any other type, is an error.
func conform(rec arrow.RecordBatch, schema *arrow.Schema) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	cols := make([]arrow.Array, 0, schema.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	got := rec.Schema()
	for _, f := range got.Fields() {
		if !schema.HasField(f.Name) && f.Type.ID() != arrow.NULL {
			return nil, fmt.Errorf("key %q is not a column of the first %d lines", f.Name, InferRows)
		}
	}
	for _, f := range schema.Fields() {
		idx := got.FieldIndices(f.Name)
		if len(idx) == 0 || got.Field(idx[0]).Type.ID() == arrow.NULL {
			cols = append(cols, array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, n))
			continue
		}
		c := rec.Column(idx[0])
		switch {
		case arrow.TypeEqual(c.DataType(), f.Type):
			c.Retain()
			cols = append(cols, c)
		case c.DataType().ID() == arrow.INT64 && f.Type.ID() == arrow.FLOAT64:
			cols = append(cols, intsToFloats(c.(*array.Int64)))
		default:
			return nil, fmt.Errorf("key %q: %s here, but %s in the first %d lines", f.Name, c.DataType(), f.Type, InferRows)
		}
	}
	return array.NewRecordBatch(schema, cols, int64(n)), nil
}

func intsToFloats(a *array.Int64) arrow.Array {
	b := array.NewFloat64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(a.Len())
	for i := range a.Len() {
		if a.IsNull(i) {
			b.AppendNull()
		} else {
			b.Append(float64(a.Value(i)))
		}
	}
	return b.NewArray()
}
