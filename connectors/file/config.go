// Package file provides the "file" input and output: JSON-lines files, one
// JSON object per line (see internal/rowjson for the value formats), and,
// as input, ArkFlow's input_type form over csv, json, parquet and arrow
// files.
//
// # Input
//
//	{"path": "in.jsonl", "format": "jsonl", "schema": [{"name": "id", "type": "int64"}],
//	 "partitions": 1, "batch_size": 1024, "rate_per_sec": 0}
//
// Line i of the file (0-based, counting every physical line; blank lines
// count but carry no row) belongs to partition i mod partitions, and its
// __meta_offset is i. Subtask s of P reads the partitions p with
// p % P == s. The rows of one partition are cut into consecutive batches of
// batch_size rows in file order (the count includes rows skipped by a Seek,
// so boundaries do not depend on where a run resumed); each partition's last
// batch is emitted at end of file. rate_per_sec (0: unlimited) is the rows
// per second each subtask emits, over all the partitions it reads. A batch
// holds at most the rows the rate allows in a linger of 100 ms: when
// rate_per_sec / 10 is below batch_size, batches are cut at that many rows
// instead (at least 1), the same way in every run. A line that does not
// match the schema stops the source with an error naming the file, line
// and field.
//
// # Input in ArkFlow's form
//
//	{"input_type": {"type": "csv", "path": "in.csv"}, "batch_size": 1024, "rate_per_sec": 0}
//
// Instead of path, format and schema, input_type names the file and its
// format (exactly one of the two forms): csv, json, parquet or arrow. The
// rows are read in file order, and the input ends at end of file. The
// columns are the file's (see InputTypeConfig for how each format gives
// them); a csv or json value after the first InferRows rows that does not
// fit the inferred type, or a json key they did not have, stops the source
// with an error naming the file, line and column.
//
// Row i of the file (0-based, data rows only) has __meta_offset i and
// belongs to partition i mod partitions (default 1, as ArkFlow reads a
// file); subtasks, batches and rate_per_sec work as above, so a restore
// resumes at a row: parquet seeks to the lowest sought row, the other
// formats read the rows before it without decoding them (csv, json) or
// skip them (arrow). Every subtask reads the whole file.
//
// The factory opens nothing. Input.Schema reads the file's columns on its
// first call (csv and json: the header and the first InferRows rows;
// parquet: the footer; arrow: the schema message), so validating a spec
// reads that much of the file and creates nothing. A missing, unreadable
// or corrupt file is then an error naming input_type.path, returned by
// Input.SchemaErr and NewSource (Schema then has only the __meta_*
// columns). A corrupt batch found while reading stops the source with an
// error naming the file. avro files, object stores (input_type.store) and
// query (SQL over the file) are refused with a hint.
//
// # Output
//
//	{"path": "out/part-{subtask}.jsonl", "format": "jsonl", "keep_meta": false, "fsync": true}
//
// Every Write appends the batch's rows as JSON lines with one write call
// and, unless fsync is false, fsyncs the file before returning. "{subtask}"
// in the path is replaced by the subtask index; without it, all subtasks in
// the process append to the same file, serialized by a process-wide lock
// per absolute path, so lines never interleave. __meta_* columns are dropped
// unless keep_meta is true.
package file

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Type is the input and output type name.
const Type = "file"

// FormatJSONL is the format of the path form (and its default).
const FormatJSONL = "jsonl"

// Formats of the input_type form (InputTypeConfig.Type).
const (
	FormatCSV     = "csv"
	FormatJSON    = "json"
	FormatParquet = "parquet"
	FormatArrow   = "arrow"
	FormatAvro    = "avro"
)

// InferRows is the number of rows the csv and json formats of the
// input_type form infer their column types from: the first InferRows data
// rows of the file, as ArkFlow (DataFusion) does. A later row whose value
// does not fit the inferred type stops the source with an error naming the
// line and column.
const InferRows = 1000

// Defaults of SourceConfig.
const (
	DefaultPartitions = 1
	DefaultBatchSize  = 1024
)

// SourceConfig is the config of the "file" input. A zero Partitions or
// BatchSize means the default (omitted from JSON); written explicitly as 0
// in a spec they are errors.
type SourceConfig struct {
	// Path of the JSON-lines file to read, relative to the working
	// directory. Leave it out when giving ArkFlow.
	Path string `json:"path,omitempty"`
	// Format is "jsonl" (the default).
	Format string `json:"format,omitempty"`
	// Schema declares the columns of every line (path form only).
	Schema connectors.Schema `json:"schema,omitempty"`
	// ArkFlow is ArkFlow's input_type: the file and its format, instead of
	// Path, Format and Schema.
	ArkFlow *InputTypeConfig `json:"input_type,omitempty"`
	// Query is ArkFlow's SQL over the file; it is refused (put a sql
	// processor after the input).
	Query json.RawMessage `json:"query,omitempty"`
	// Partitions is the number of partitions the lines (input_type: the
	// rows) are dealt into (default 1).
	Partitions int `json:"partitions,omitempty"`
	// BatchSize is the maximum number of rows per batch (default 1024),
	// fewer when RatePerSec allows fewer in 100 ms.
	BatchSize int `json:"batch_size,omitempty"`
	// RatePerSec is the rows per second each subtask emits, over all its
	// partitions (0: unlimited); see the package documentation.
	RatePerSec float64 `json:"rate_per_sec,omitempty"`
}

// InputType returns "file".
func (SourceConfig) InputType() string { return Type }

// InputTypeConfig is ArkFlow's input_type of the file input: which file to
// read, and its format. The columns come from the file: csv has a header
// row and its types are inferred over the first InferRows rows (integers
// Int64, other numbers Float64, true/false Boolean, anything else Utf8; an
// empty field is null, a column empty in all of them is Utf8); json is one
// object per line, inferred over the first InferRows lines as the json
// codec infers a batch (see internal/arrowjson); parquet and arrow (IPC
// file or stream format) carry their schema.
type InputTypeConfig struct {
	// Type is csv, json, parquet or arrow; avro is refused.
	Type string `json:"type"`
	// Path of the file, relative to the working directory.
	Path string `json:"path"`
	// Store is ArkFlow's object store; it is refused.
	Store json.RawMessage `json:"store,omitempty"`
}

// SinkConfig is the config of the "file" output.
type SinkConfig struct {
	// Path of the file to append to; "{subtask}" is replaced by the subtask
	// index. Parent directories are created.
	Path string `json:"path"`
	// Format is "jsonl" (the default).
	Format string `json:"format,omitempty"`
	// KeepMeta writes the __meta_* columns too.
	KeepMeta bool `json:"keep_meta,omitempty"`
	// Fsync makes every Write fsync the file before it returns, so an
	// acknowledged row is durable. Nil means true.
	Fsync *bool `json:"fsync,omitempty"`
}

// OutputType returns "file".
func (SinkConfig) OutputType() string { return Type }

// Ptr returns a pointer to v, for optional settings such as SinkConfig.Fsync.
func Ptr[T any](v T) *T { return &v }

// explicitZero returns the top-level keys of raw whose value is the number 0.
func explicitZero(raw json.RawMessage, keys ...string) map[string]bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	out := map[string]bool{}
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			continue
		}
		var f float64
		if json.Unmarshal(v, &f) == nil && f == 0 {
			out[k] = true
		}
	}
	return out
}

func checkSource(c *SourceConfig, zero map[string]bool) error {
	var f connectors.Fields
	if c.ArkFlow != nil {
		checkArkFlow(c, &f)
	} else {
		checkPathForm(c, &f)
	}
	if present(c.Query) {
		f.Add("query", "SQL over the file is not available here: put a sql processor after the input")
	}
	switch {
	case c.Partitions < 0 || zero["partitions"]:
		f.Add("partitions", "must be >= 1 (got %d)", c.Partitions)
	case c.Partitions == 0:
		c.Partitions = DefaultPartitions
	case c.Partitions > math.MaxInt32:
		f.Add("partitions", "must be <= %d (got %d)", math.MaxInt32, c.Partitions)
	}
	switch {
	case c.BatchSize < 0 || zero["batch_size"]:
		f.Add("batch_size", "must be > 0 (got %d)", c.BatchSize)
	case c.BatchSize == 0:
		c.BatchSize = DefaultBatchSize
	}
	if c.RatePerSec < 0 || math.IsNaN(c.RatePerSec) || math.IsInf(c.RatePerSec, 0) {
		f.Add("rate_per_sec", "must be a finite number >= 0 (got %v)", c.RatePerSec)
	}
	return f.Err()
}

// checkPathForm checks the JSON-lines form: path, format and schema.
func checkPathForm(c *SourceConfig, f *connectors.Fields) {
	if c.Path == "" {
		f.Add("path", "is required (or give input_type, ArkFlow's form)")
	}
	if c.Format == "" {
		c.Format = FormatJSONL
	} else if c.Format != FormatJSONL {
		f.Add("format", "must be %q (got %q)", FormatJSONL, c.Format)
	}
	if c.Schema == nil {
		f.Add("schema", "is required")
	} else if _, err := c.Schema.Arrow("schema"); err != nil {
		f.Merge("", err)
	}
}

var arkflowFormats = []string{FormatCSV, FormatJSON, FormatParquet, FormatArrow, FormatAvro}

// checkArkFlow checks ArkFlow's form: input_type, without path, format
// and schema.
func checkArkFlow(c *SourceConfig, f *connectors.Fields) {
	if c.Path != "" {
		f.Add("path", "give either path (JSON lines with a schema) or input_type (ArkFlow's form), not both")
	}
	if c.Format != "" {
		f.Add("format", "is for path; with input_type, give the format as input_type.type")
	}
	if c.Schema != nil {
		f.Add("schema", "is for path; with input_type the columns come from the file")
	}
	it := c.ArkFlow
	switch it.Type {
	case FormatCSV, FormatJSON, FormatParquet, FormatArrow:
	case FormatAvro:
		f.Add("input_type.type", "avro files are not readable here: convert the file to parquet or arrow")
	case "":
		f.Add("input_type.type", "is required: csv, json, parquet, arrow or avro")
	default:
		f.Add("input_type.type", "must be %s or avro (got %q)", strings.Join(arkflowFormats[:4], ", "), it.Type)
	}
	if it.Path == "" {
		f.Add("input_type.path", "is required")
	}
	if present(it.Store) {
		f.Add("input_type.store", "object stores are not available here: copy the file to a local path")
	}
}

// present reports whether an optional raw value was given (not null).
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

func checkSink(c *SinkConfig) error {
	var f connectors.Fields
	if c.Path == "" {
		f.Add("path", "is required")
	}
	if c.Format == "" {
		c.Format = FormatJSONL
	} else if c.Format != FormatJSONL {
		f.Add("format", "must be %q (got %q)", FormatJSONL, c.Format)
	}
	return f.Err()
}
