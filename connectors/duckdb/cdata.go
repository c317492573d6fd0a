//go:build cgo

package duckdb

/*
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;
  void (*release)(struct ArrowSchema*);
  void* private_data;
};

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};

struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
  const char* (*get_last_error)(struct ArrowArrayStream*);
  void (*release)(struct ArrowArrayStream*);
  void* private_data;
};

#endif

// The functions of DuckDB's C API that duckdb-go-bindings wraps only
// under its duckdb_arrow build tag, declared with their handles as void
// pointers. The bindings package links the library that defines them.
extern int duckdb_arrow_scan(void *conn, const char *name, void *stream);
extern void *duckdb_to_arrow_schema(void *opts, void **types, const char **names, uint64_t n, struct ArrowSchema *out);
extern void *duckdb_data_chunk_to_arrow(void *opts, void *chunk, struct ArrowArray *out);
extern bool duckdb_error_data_has_error(void *e);
extern const char *duckdb_error_data_message(void *e);
extern void duckdb_destroy_error_data(void **e);

static char *ak_take_error(void *e) {
	char *msg = NULL;
	if (e == NULL) return NULL;
	if (duckdb_error_data_has_error(e)) msg = strdup(duckdb_error_data_message(e));
	duckdb_destroy_error_data(&e);
	return msg;
}

static char *ak_chunk_to_arrow(void *opts, void *chunk, struct ArrowArray *out) {
	return ak_take_error(duckdb_data_chunk_to_arrow(opts, chunk, out));
}

static char *ak_to_arrow_schema(void *opts, void **types, const char **names, uint64_t n, struct ArrowSchema *out) {
	return ak_take_error(duckdb_to_arrow_schema(opts, types, names, n, out));
}
*/
import "C"

import (
	"errors"
	"sync/atomic"

	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/cdata"
	bindings "github.com/duckdb/duckdb-go-bindings"
)

// takeError turns a message the C helpers returned into an error.
func takeError(msg *C.char) error {
	if msg == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(msg))
	return errors.New(C.GoString(msg))
}

// registerView makes the rows of rec the temporary view name of conn,
// read in place through the Arrow C stream interface. release ends the
// stream; the view must not be read after it. DuckDB binds every
// reference to the view by asking the stream for its schema, which the
// view's stream can give once: the reader returned counts the asks.
func registerView(conn bindings.Connection, name string, rec arrow.RecordBatch) (rdr *countingReader, release func(), err error) {
	inner, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		return nil, nil, err
	}
	rdr = &countingReader{RecordReader: inner}
	defer rdr.Release()
	stream := (*C.struct_ArrowArrayStream)(C.calloc(1, C.sizeof_struct_ArrowArrayStream))
	cdata.ExportRecordReader(rdr, (*cdata.CArrowArrayStream)(unsafe.Pointer(stream)))
	release = func() {
		cdata.ReleaseCArrowArrayStream((*cdata.CArrowArrayStream)(unsafe.Pointer(stream)))
		C.free(unsafe.Pointer(stream))
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if C.duckdb_arrow_scan(conn.Ptr, cname, unsafe.Pointer(stream)) != 0 {
		release()
		return nil, nil, errors.New("duckdb could not register the batch as a view")
	}
	rdr.asks.Store(0)
	return rdr, release, nil
}

// arrowSchema converts DuckDB column types to the Arrow schema DuckDB
// produces for them under opts.
func arrowSchema(opts bindings.ArrowOptions, names []string, types []bindings.LogicalType) (*arrow.Schema, error) {
	n := len(names)
	size := C.size_t(max(n, 1)) * C.size_t(unsafe.Sizeof(uintptr(0)))
	ctypesBase := (*unsafe.Pointer)(C.malloc(size))
	cnamesBase := (**C.char)(C.malloc(size))
	defer C.free(unsafe.Pointer(ctypesBase))
	defer C.free(unsafe.Pointer(cnamesBase))
	ctypes, cnames := unsafe.Slice(ctypesBase, n), unsafe.Slice(cnamesBase, n)
	for i := range n {
		ctypes[i] = types[i].Ptr
		cnames[i] = C.CString(names[i])
		defer C.free(unsafe.Pointer(cnames[i]))
	}
	out := (*C.struct_ArrowSchema)(C.calloc(1, C.sizeof_struct_ArrowSchema))
	defer C.free(unsafe.Pointer(out))
	if err := takeError(C.ak_to_arrow_schema(opts.Ptr, ctypesBase, cnamesBase, C.uint64_t(n), out)); err != nil {
		return nil, err
	}
	return cdata.ImportCArrowSchema((*cdata.CArrowSchema)(unsafe.Pointer(out)))
}

// chunkToArrow converts a result chunk to a record of schema, which must
// be the one arrowSchema gave for the result's columns.
func chunkToArrow(opts bindings.ArrowOptions, chunk bindings.DataChunk, schema *arrow.Schema) (arrow.RecordBatch, error) {
	out := (*C.struct_ArrowArray)(C.calloc(1, C.sizeof_struct_ArrowArray))
	defer C.free(unsafe.Pointer(out))
	if err := takeError(C.ak_chunk_to_arrow(opts.Ptr, chunk.Ptr, out)); err != nil {
		return nil, err
	}
	return cdata.ImportCRecordBatchWithSchema((*cdata.CArrowArray)(unsafe.Pointer(out)), schema)
}

// countingReader counts the calls of Schema: one per reference to the
// view in the statements run since registerView.
type countingReader struct {
	array.RecordReader
	asks atomic.Int64
}

func (r *countingReader) Schema() *arrow.Schema {
	r.asks.Add(1)
	return r.RecordReader.Schema()
}
