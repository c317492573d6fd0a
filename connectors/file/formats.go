package file

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pqfile "github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// rowReader reads the rows of a file in order, as batches of the file's
// schema. A batch next returns is valid until the following call.
type rowReader interface {
	// next returns the next batch, or io.EOF after the last.
	next() (arrow.RecordBatch, error)
	// total is the number of rows of the file, or 0 when not known.
	total() int64
	close() error
}

// readSchema reads the columns of a file of the given format: a csv
// header and the first InferRows rows, the first InferRows json lines, a
// parquet footer or an arrow schema message.
func readSchema(format, path string) (schema *arrow.Schema, err error) {
	defer recoverInto(&err, path)
	switch format {
	case FormatCSV:
		schema, err = csvSchema(path)
	case FormatJSON:
		schema, err = jsonSchema(path)
	case FormatParquet, FormatArrow:
		var r rowReader
		r, schema, _, err = openBinary(format, path, 1, 0)
		if err == nil {
			err = r.close()
		}
	default:
		err = fmt.Errorf("format %q is not readable", format)
	}
	if err != nil {
		return nil, err
	}
	for _, f := range schema.Fields() {
		if connectors.IsMeta(f.Name) {
			return nil, fmt.Errorf("file %q: column %q: names starting with __meta_ are reserved for the metadata columns", path, f.Name)
		}
	}
	return schema, nil
}

// openRows opens a file whose columns are schema, skipping its first skip
// rows where the format can do so without decoding them. It returns the
// index of the first row the reader returns.
func openRows(format, path string, schema *arrow.Schema, chunk int, skip int64) (rr rowReader, first int64, err error) {
	defer recoverInto(&err, path)
	switch format {
	case FormatCSV:
		return openCSV(path, schema, chunk, skip)
	case FormatJSON:
		return openJSON(path, schema, chunk, skip)
	case FormatParquet, FormatArrow:
		r, got, first, err := openBinary(format, path, chunk, skip)
		if err != nil {
			return nil, 0, err
		}
		if !sameColumns(got, schema) {
			r.close()
			return nil, 0, fmt.Errorf("file %q: its columns changed since they were read: %s, now %s", path, schema, got)
		}
		return r, first, nil
	}
	return nil, 0, fmt.Errorf("format %q is not readable", format)
}

// recoverInto turns a panic of a reader over a corrupt file into an error.
func recoverInto(err *error, path string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("file %q: corrupt file: %v", path, r)
	}
}

// sameColumns reports whether a and b have the same column names and types.
func sameColumns(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

// plainSchema is s without metadata, its fields nullable as given.
func plainSchema(s *arrow.Schema) *arrow.Schema {
	return arrow.NewSchema(s.Fields(), nil)
}

// openBinary opens a parquet or arrow file.
func openBinary(format, path string, chunk int, skip int64) (rowReader, *arrow.Schema, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("file %q: %w", path, err)
	}
	var (
		r      rowReader
		schema *arrow.Schema
		first  int64
	)
	if format == FormatParquet {
		r, schema, first, err = openParquet(f, chunk, skip)
	} else {
		r, schema, err = openArrow(f)
	}
	if err != nil {
		f.Close()
		return nil, nil, 0, fmt.Errorf("file %q: not a readable %s file: %w", path, format, err)
	}
	return &pathErrors{rowReader: r, path: path}, plainSchema(schema), first, nil
}

// pathErrors names the file in the errors of a reader and turns its
// panics into errors.
type pathErrors struct {
	rowReader
	path string
}

func (p *pathErrors) next() (rec arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			rec, err = nil, fmt.Errorf("file %q: corrupt file: %v", p.path, r)
		}
	}()
	rec, err = p.rowReader.next()
	if err != nil && err != io.EOF {
		err = fmt.Errorf("file %q: %w", p.path, err)
	}
	return rec, err
}

type parquetRows struct {
	f   *os.File
	pr  *pqfile.Reader
	rr  pqarrow.RecordReader
	n   int64
	eof bool
}

func openParquet(f *os.File, chunk int, skip int64) (rowReader, *arrow.Schema, int64, error) {
	pr, err := pqfile.NewParquetReader(f)
	if err != nil {
		return nil, nil, 0, err
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: int64(chunk)}, memory.DefaultAllocator)
	if err != nil {
		pr.Close()
		return nil, nil, 0, err
	}
	schema, err := fr.Schema()
	if err != nil {
		pr.Close()
		return nil, nil, 0, err
	}
	p := &parquetRows{f: f, pr: pr, n: pr.NumRows()}
	if skip >= p.n {
		p.eof = true
		return p, schema, p.n, nil
	}
	p.rr, err = fr.GetRecordReader(context.Background(), nil, nil)
	if err == nil && skip > 0 {
		err = p.rr.SeekToRow(skip)
	}
	if err != nil {
		p.close()
		return nil, nil, 0, err
	}
	return p, schema, skip, nil
}

func (p *parquetRows) next() (arrow.RecordBatch, error) {
	if p.eof {
		return nil, io.EOF
	}
	rec, err := p.rr.Read()
	if err == nil && rec == nil {
		err = io.EOF
	}
	return rec, err
}

func (p *parquetRows) total() int64 { return p.n }

func (p *parquetRows) close() error {
	if p.rr != nil {
		p.rr.Release()
		p.rr = nil
	}
	return p.pr.Close() // closes f
}

// arrowRows reads the IPC file format (random access) or the stream
// format.
type arrowRows struct {
	f    *os.File
	file *ipc.FileReader
	rd   *ipc.Reader
}

func openArrow(f *os.File) (rowReader, *arrow.Schema, error) {
	magic := make([]byte, 6)
	n, err := io.ReadFull(f, magic)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && err != io.EOF {
		return nil, nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	if bytes.Equal(magic[:n], []byte("ARROW1")) {
		fr, err := ipc.NewFileReader(f)
		if err != nil {
			return nil, nil, err
		}
		return &arrowRows{f: f, file: fr}, fr.Schema(), nil
	}
	rd, err := ipc.NewReader(bufio.NewReaderSize(f, 256<<10))
	if err != nil {
		return nil, nil, err
	}
	return &arrowRows{f: f, rd: rd}, rd.Schema(), nil
}

func (a *arrowRows) next() (arrow.RecordBatch, error) {
	if a.file != nil {
		return a.file.Read()
	}
	return a.rd.Read()
}

func (a *arrowRows) total() int64 { return 0 }

func (a *arrowRows) close() error {
	if a.file != nil {
		a.file.Close()
	} else {
		a.rd.Release()
	}
	return a.f.Close()
}
