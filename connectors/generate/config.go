// Package generate provides the "generate" input: deterministic synthetic
// rows for tests, demos and benchmarks.
//
//	{"seed": 7, "count": 1000000, "partitions": 4, "batch_size": 4096, "rate_per_sec": 0,
//	 "fields": [
//	   {"name": "id", "type": "int64", "sequence": true},
//	   {"name": "user", "type": "string", "prefix": "user-", "cardinality": 1000},
//	   {"name": "amount", "type": "float64", "min": 0, "max": 100, "null_rate": 0.01},
//	   {"name": "ts", "type": "timestamp", "unit": "ms", "step_ms": 10, "jitter_ms": 500}]}
//
// Every partition holds count rows (0: unbounded) at offsets 0, 1, 2, …;
// subtask s of P reads the partitions p with p % P == s, round-robin, in
// batches that are consecutive chunks of batch_size rows of a partition
// (aligned to multiples of batch_size, also after a Seek). Rows carry the
// __meta_source, __meta_partition and __meta_offset columns.
//
// rate_per_sec (0: unlimited) is the rows per second each subtask emits,
// over all the partitions it reads: a job of parallelism P with at least P
// partitions emits up to P × rate_per_sec rows per second (less only when
// the job cannot keep up). A batch holds at most the rows the rate allows
// in a linger of 100 ms: when rate_per_sec / 10 is below batch_size,
// batches shrink to that many rows (at least 1), so at 2 rows per second
// a batch holds one row and one comes every 0.5 s. The shrunk size takes
// batch_size's place in the alignment above; it depends on these two
// settings alone, so a restart cuts the same batches.
//
// The value of field f in the row at offset o of partition p is a function
// of (seed, p, o, f) alone — a splitmix64 hash, no shared random state — so
// a run restarted from any position regenerates the same rows.
//
// Generators by type:
//   - int64: uniform in [min, max] (default 0..1000), or the row's offset
//     when sequence is true;
//   - float32, float64: uniform in [min, max) (default 0..1);
//   - string: uniform among values, or prefix (default "key-") followed by
//     a decimal number uniform in [0, cardinality) (default 1000);
//   - bool: a fair coin;
//   - timestamp: start_ms + offset×step_ms (defaults 1 700 000 000 000 and 1)
//     plus a uniform jitter in [-jitter_ms, +jitter_ms], in the field's unit
//     (seconds round towards the past).
//
// null_rate (0..1) is the probability that a value is null; fields with a
// positive null_rate are nullable, others are not.
//
// ArkFlow's form is accepted too: {"context": "{\"temp\": 21}",
// "interval": "1s", "count": 10, "batch_size": 2} makes every row that
// text, in one string column "value" (ArkFlow's __value__ is binary), and
// paces batch_size rows a interval, spread evenly (ArkFlow pauses
// interval between batches). count is the rows in all (ArkFlow stops
// before a batch that would go past it: 9 rows for count 10 and
// batch_size 3; here 10). batch_size defaults to 1 in this form.
package generate

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/humantime"
)

// Type is the input type name.
const Type = "generate"

// RawValueColumn is the column of ArkFlow's form (Config.Context).
const RawValueColumn = "value"

// Defaults.
const (
	DefaultPartitions  = 1
	DefaultBatchSize   = 1024
	DefaultIntMax      = 1000
	DefaultPrefix      = "key-"
	DefaultCardinality = 1000
	DefaultStartMs     = 1_700_000_000_000
	DefaultStepMs      = 1
)

// Config is the config of the "generate" input. Zero values mean the
// defaults (and are omitted from JSON); written explicitly as 0 in a spec,
// partitions, batch_size and cardinality are errors.
type Config struct {
	Seed int64 `json:"seed,omitempty"`
	// Count is the number of rows per partition; 0 means unbounded.
	Count      int64 `json:"count,omitempty"`
	Partitions int   `json:"partitions,omitempty"`
	// BatchSize is the number of rows per batch (default 1024), fewer
	// when RatePerSec allows fewer in 100 ms.
	BatchSize int `json:"batch_size,omitempty"`
	// RatePerSec is the rows per second each subtask emits, over all its
	// partitions (0: unlimited); see the package documentation.
	RatePerSec float64 `json:"rate_per_sec,omitempty"`
	Fields     []Field `json:"fields,omitempty"`
	// Context is ArkFlow's form: every row is this text, in one string
	// column "value" (fields must be absent); batch_size then defaults to
	// 1, as in ArkFlow. The effective config holds the fields it makes.
	Context string `json:"context,omitempty"`
	// Interval (with Context, ArkFlow's form) paces the batches: one
	// batch_size a interval, a duration such as "1s" or "500ms" (instead
	// of rate_per_sec). ArkFlow pauses interval between batches; here the
	// rows are spread evenly over it.
	Interval string `json:"interval,omitempty"`
}

// InputType returns "generate".
func (Config) InputType() string { return Type }

// Field declares one generated column. Pointer fields are optional
// settings whose zero value differs from their default; Ptr makes them.
type Field struct {
	Name string `json:"name"`
	// Type is one of int64, float32, float64, string, bool, timestamp.
	Type string `json:"type"`
	// Unit is the timestamp unit: s, ms (default), us or ns.
	Unit string `json:"unit,omitempty"`
	// Min and Max bound int64 (inclusive, integers, exact up to 2^53) and
	// float (max exclusive) values.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// Values are the strings to pick from.
	Values []string `json:"values,omitempty"`
	// Cardinality is the number of distinct generated strings.
	Cardinality int64 `json:"cardinality,omitempty"`
	// Prefix of generated strings.
	Prefix *string `json:"prefix,omitempty"`
	// StartMs, StepMs and JitterMs shape timestamps, in milliseconds.
	StartMs  *int64 `json:"start_ms,omitempty"`
	StepMs   *int64 `json:"step_ms,omitempty"`
	JitterMs int64  `json:"jitter_ms,omitempty"`
	// NullRate is the probability of a null value, in [0, 1].
	NullRate float64 `json:"null_rate,omitempty"`
	// Sequence makes an int64 field the row's offset.
	Sequence bool `json:"sequence,omitempty"`
}

// Ptr returns a pointer to v, for the optional fields of Field.
func Ptr[T any](v T) *T { return &v }

// probe finds values written explicitly as 0 in a spec.
type probe struct {
	Partitions *float64 `json:"partitions"`
	BatchSize  *float64 `json:"batch_size"`
	Fields     []struct {
		Cardinality *float64 `json:"cardinality"`
	} `json:"fields"`
}

func isZero(p *float64) bool { return p != nil && *p == 0 }

func explicitZeros(raw json.RawMessage) map[string]bool {
	var p probe
	_ = json.Unmarshal(raw, &p) // the strict decode already checked types
	z := map[string]bool{"partitions": isZero(p.Partitions), "batch_size": isZero(p.BatchSize)}
	for i, f := range p.Fields {
		z[fmt.Sprintf("fields[%d].cardinality", i)] = isZero(f.Cardinality)
	}
	return z
}

// check validates c, applies defaults and compiles the field generators.
func check(c *Config, zero map[string]bool) ([]*gen, error) {
	var errs connectors.Fields
	checkSource(c, zero, &errs)
	gens := make([]*gen, 0, len(c.Fields))
	seen := map[string]int{}
	for i, fd := range c.Fields {
		if g := checkField(i, fd, zero, seen, &errs); g != nil {
			gens = append(gens, g)
		}
	}
	return gens, errs.Err()
}

// checkSource checks the source-wide settings (count, partitions, batch
// size, rate, at least one field) and applies their defaults.
func checkSource(c *Config, zero map[string]bool, errs *connectors.Fields) {
	if c.Context != "" || c.Interval != "" {
		arkflowForm(c, zero, errs)
	}
	switch {
	case c.Count < 0:
		errs.Add("count", "must be >= 0 (got %d)", c.Count)
	}
	switch {
	case c.Partitions < 0 || zero["partitions"]:
		errs.Add("partitions", "must be >= 1 (got %d)", c.Partitions)
	case c.Partitions == 0:
		c.Partitions = DefaultPartitions
	case c.Partitions > math.MaxInt32:
		errs.Add("partitions", "must be <= %d (got %d)", math.MaxInt32, c.Partitions)
	}
	switch {
	case c.BatchSize < 0 || zero["batch_size"]:
		errs.Add("batch_size", "must be > 0 (got %d)", c.BatchSize)
	case c.BatchSize == 0:
		c.BatchSize = DefaultBatchSize
	}
	if c.RatePerSec < 0 || math.IsNaN(c.RatePerSec) || math.IsInf(c.RatePerSec, 0) {
		errs.Add("rate_per_sec", "must be a finite number >= 0 (got %v)", c.RatePerSec)
	}
	if len(c.Fields) == 0 {
		errs.Add("fields", "must declare at least one field")
	}
}

// arkflowForm turns ArkFlow's form (context, interval) into the fields
// and rate it means, and clears it: the effective config is the native
// form.
func arkflowForm(c *Config, zero map[string]bool, errs *connectors.Fields) {
	if c.Context == "" {
		errs.Add("interval", "is ArkFlow's form and goes with context; with fields, pace rows with rate_per_sec")
		return
	}
	if len(c.Fields) > 0 {
		errs.Add("context", "and fields exclude each other: context makes one string column %q holding it in every row", RawValueColumn)
	}
	if c.BatchSize == 0 && !zero["batch_size"] {
		c.BatchSize = 1
	}
	if c.Interval != "" {
		d, err := humantime.Parse(c.Interval)
		switch {
		case err != nil:
			errs.Add("interval", "%v", err)
		case d <= 0:
			errs.Add("interval", "must be > 0 (got %q)", c.Interval)
		case c.RatePerSec != 0:
			errs.Add("interval", "and rate_per_sec exclude each other")
		case c.BatchSize > 0:
			c.RatePerSec = float64(c.BatchSize) / d.Seconds()
		}
	}
	c.Fields = []Field{{Name: RawValueColumn, Type: "string", Values: []string{c.Context}}}
	c.Context, c.Interval = "", ""
}

// checkField checks field i (its name unique among those seen, its type,
// the settings its type has) and compiles its generator; nil when the
// type is unknown.
func checkField(i int, fd Field, zero map[string]bool, seen map[string]int, errs *connectors.Fields) *gen {
	at := fmt.Sprintf("fields[%d]", i)
	add := func(field, format string, args ...any) { errs.Add(at+"."+field, format, args...) }
	switch {
	case fd.Name == "":
		add("name", "is required")
	case strings.HasPrefix(fd.Name, connectors.MetaPrefix):
		add("name", "names starting with %q are reserved for source metadata (got %q)", connectors.MetaPrefix, fd.Name)
	default:
		if j, dup := seen[fd.Name]; dup {
			add("name", "duplicate field %q (also fields[%d])", fd.Name, j)
		} else {
			seen[fd.Name] = i
		}
	}
	dt, err := connectors.DataType(fd.Type, fd.Unit)
	if err != nil {
		errs.Merge(at, err)
		return nil
	}
	zeroCard := zero[at+".cardinality"]
	only := func(field string, set bool, types ...string) bool {
		if !set {
			return true
		}
		for _, t := range types {
			if fd.Type == t {
				return true
			}
		}
		add(field, "only %s fields have %s (type is %q)", strings.Join(types, " and "), field, fd.Type)
		return false
	}
	only("min", fd.Min != nil, "int64", "float32", "float64")
	only("max", fd.Max != nil, "int64", "float32", "float64")
	only("values", fd.Values != nil, "string")
	only("cardinality", fd.Cardinality != 0 || zeroCard, "string")
	only("prefix", fd.Prefix != nil, "string")
	only("start_ms", fd.StartMs != nil, "timestamp")
	only("step_ms", fd.StepMs != nil, "timestamp")
	only("jitter_ms", fd.JitterMs != 0, "timestamp")
	only("sequence", fd.Sequence, "int64")

	g := &gen{field: i, dt: dt, typ: fd.Type, nullable: fd.NullRate > 0}
	if !(fd.NullRate >= 0 && fd.NullRate <= 1) {
		add("null_rate", "must be between 0 and 1 (got %v)", fd.NullRate)
	} else if t := fd.NullRate * (1 << 64); t >= 1<<64 {
		g.allNull = true
	} else {
		g.nullBelow = uint64(t)
	}
	switch fd.Type {
	case "int64":
		checkInt(fd, g, add)
	case "float32", "float64":
		checkFloat(fd, g, add)
	case "string":
		checkString(fd, g, add, zeroCard)
	case "timestamp":
		checkTimestamp(fd, g, add)
	}
	return g
}

// checkString sets a string field's generator: picks from values, or
// cardinality distinct strings with a prefix (zeroCard: cardinality was
// written as 0).
func checkString(fd Field, g *gen, add func(string, string, ...any), zeroCard bool) {
	if fd.Values != nil {
		if len(fd.Values) == 0 {
			add("values", "must not be empty")
		}
		if fd.Cardinality != 0 || zeroCard {
			add("cardinality", "cannot be combined with values")
		}
		if fd.Prefix != nil {
			add("prefix", "cannot be combined with values")
		}
		g.values = fd.Values
		return
	}
	g.card = DefaultCardinality
	if fd.Cardinality < 0 || zeroCard {
		add("cardinality", "must be > 0 (got %d)", fd.Cardinality)
	} else if fd.Cardinality > 0 {
		g.card = uint64(fd.Cardinality)
	}
	g.prefix = DefaultPrefix
	if fd.Prefix != nil {
		g.prefix = *fd.Prefix
	}
}

// checkTimestamp sets a timestamp field's start, step and jitter.
func checkTimestamp(fd Field, g *gen, add func(string, string, ...any)) {
	g.start, g.step = DefaultStartMs, DefaultStepMs
	if fd.StartMs != nil {
		g.start = *fd.StartMs
	}
	if fd.StepMs != nil {
		g.step = *fd.StepMs
	}
	if fd.JitterMs < 0 || fd.JitterMs > 1<<62 {
		add("jitter_ms", "must be between 0 and %d (got %d)", int64(1<<62), fd.JitterMs)
	}
	g.jitter = fd.JitterMs
}

func checkInt(fd Field, g *gen, add func(string, string, ...any)) {
	if fd.Sequence {
		g.sequence = true
		if fd.Min != nil || fd.Max != nil {
			add("sequence", "cannot be combined with min or max")
		}
		return
	}
	lo, hi := int64(0), int64(DefaultIntMax)
	ok := true
	conv := func(field string, p *float64, dst *int64) {
		if p == nil {
			return
		}
		f := *p
		if f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
			add(field, "must be an integer in int64 range for int64 fields (got %v)", f)
			ok = false
			return
		}
		*dst = int64(f)
	}
	conv("min", fd.Min, &lo)
	conv("max", fd.Max, &hi)
	if ok && lo > hi {
		add("max", "must be >= min (got max %d < min %d)", hi, lo)
	}
	g.imin = lo
	g.ispan = uint64(hi) - uint64(lo) + 1 // 0 means the whole int64 range
}

func checkFloat(fd Field, g *gen, add func(string, string, ...any)) {
	lo, hi := 0.0, 1.0
	limit := math.MaxFloat64
	if fd.Type == "float32" {
		limit = math.MaxFloat32
	}
	ok := true
	for _, m := range []struct {
		name string
		p    *float64
		dst  *float64
	}{{"min", fd.Min, &lo}, {"max", fd.Max, &hi}} {
		if m.p == nil {
			continue
		}
		if math.IsNaN(*m.p) || math.Abs(*m.p) > limit {
			add(m.name, "must be a finite %s (got %v)", fd.Type, *m.p)
			ok = false
			continue
		}
		*m.dst = *m.p
	}
	if ok && lo > hi {
		add("max", "must be >= min (got max %v < min %v)", hi, lo)
	}
	if ok && math.IsInf(hi-lo, 0) {
		add("max", "max - min must be a finite number (got max %v, min %v)", hi, lo)
	}
	g.fmin, g.fmax, g.fwidth = lo, hi, hi-lo
}
