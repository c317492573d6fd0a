// Package file provides the "file" input and output: JSON-lines files, one
// JSON object per line (see internal/rowjson for the value formats).
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

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Type is the input and output type name.
const Type = "file"

// FormatJSONL is the only supported format (and the default).
const FormatJSONL = "jsonl"

// Defaults of SourceConfig.
const (
	DefaultPartitions = 1
	DefaultBatchSize  = 1024
)

// SourceConfig is the config of the "file" input. A zero Partitions or
// BatchSize means the default (omitted from JSON); written explicitly as 0
// in a spec they are errors.
type SourceConfig struct {
	// Path of the file to read, relative to the working directory.
	Path string `json:"path"`
	// Format is "jsonl" (the default).
	Format string `json:"format,omitempty"`
	// Schema declares the columns of every line.
	Schema connectors.Schema `json:"schema"`
	// Partitions is the number of partitions the lines are dealt into
	// (default 1).
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
	if c.Path == "" {
		f.Add("path", "is required")
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
