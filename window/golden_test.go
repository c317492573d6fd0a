package window_test

// Golden-file (datadriven) tests of window operators run end to end: a
// memory source → KeyBy → Window → memory sink, plus a late sink under the
// route policy.
//
// Every file window/testdata/*.txt holds several cases. Run
//
//	go test ./window -run TestGolden -update
//
// to rewrite the expected sections from the current behaviour (then review
// the diff: a golden file is only as good as its review).
//
// # Case format
//
// Lines outside a case are blank lines or # comments; they are kept as they
// are by -update. A case is:
//
//	case <name>
//	schema <field>:<type> ...    types: string int64 float64 float32 bool
//	                             timestamp_s timestamp_ms timestamp_us timestamp_ns
//	                             (every column nullable)
//	window tumbling <size_ms> | sliding <size_ms> <slide_ms> | session <gap_ms>
//	agg <fn>:<field>:<as> ...   fn: sum min max avg first last;
//	                             <fn>:<field> is named <fn>_<field>;
//	                             count:<as> counts rows
//	time [field=ts] [strategy=bounded|monotonous] [ooo=<ms>] [lateness=<ms>]
//	     [policy=drop|route|update] [partitions=<n>] [advance=batch|per_row]
//	key <field>                  (optional, default k)
//	batch <partition>            the JSON lines after it, up to the next
//	{"k":"a","ts":1,"v":2}       directive, are one batch of that partition
//	...
//	----
//	<expected output, up to the next blank line or the end of the file>
//
// Defaults: field ts, bounded out-of-orderness 0, lateness 0, policy drop,
// one partition, key k, advance batch. Comments (#) may appear among the directives.
//
// The source is one subtask that reads its partitions round robin (first
// batch of partition 0, first of partition 1, …, then the second batches);
// batches keep their exact boundaries, and the watermark advances before
// each batch is passed on (advance per_row: before each row behind it). The window runs with parallelism 1. The input is
// bounded: at its end the watermark jumps to the end of time, so every open
// window fires. The output is
//
//	out <row>        each main-output row (JSON, rowjson), in emission order
//	late <row>       each row of the late sink (route policy), in order
//	metrics a=1 ...  the window operator's gauges, sorted by name
//
// or, when the job does not build or fails, a single line
//
//	error <message>   (newlines of the message replaced by " | ")

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	arkflow "github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

var update = flag.Bool("update", false, "rewrite the expected sections of window/testdata/*.txt")

// ---- shared helpers (also used by rules_test.go and time_test.go) ----

// typeOf maps a golden type name to its Arrow type.
func typeOf(name string) (arrow.DataType, error) {
	switch name {
	case "string":
		return arrow.BinaryTypes.String, nil
	case "int64":
		return arrow.PrimitiveTypes.Int64, nil
	case "float64":
		return arrow.PrimitiveTypes.Float64, nil
	case "float32":
		return arrow.PrimitiveTypes.Float32, nil
	case "bool":
		return arrow.FixedWidthTypes.Boolean, nil
	case "timestamp_s":
		return &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}, nil
	case "timestamp_ms":
		return &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, nil
	case "timestamp_us":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil
	case "timestamp_ns":
		return &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, nil
	}
	return nil, fmt.Errorf("unknown type %q", name)
}

// parseSchema reads "name:type name:type ..." (every column nullable).
func parseSchema(spec string) (*arrow.Schema, error) {
	var fields []arrow.Field
	for _, f := range strings.Fields(spec) {
		name, typ, ok := strings.Cut(f, ":")
		if !ok {
			return nil, fmt.Errorf("schema field %q: want name:type", f)
		}
		t, err := typeOf(typ)
		if err != nil {
			return nil, err
		}
		fields = append(fields, arrow.Field{Name: name, Type: t, Nullable: true})
	}
	return arrow.NewSchema(fields, nil), nil
}

// mustSchema is parseSchema for tests.
func mustSchema(t testing.TB, spec string) *arrow.Schema {
	t.Helper()
	s, err := parseSchema(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// decodeBatch decodes JSON lines into one batch of schema.
func decodeBatch(schema *arrow.Schema, lines []string) (arrow.RecordBatch, error) {
	dec, err := rowjson.NewDecoder(schema)
	if err != nil {
		return nil, err
	}
	bs := make([]array.Builder, schema.NumFields())
	for i, f := range schema.Fields() {
		bs[i] = array.NewBuilder(memory.DefaultAllocator, f.Type)
		defer bs[i].Release()
	}
	for _, l := range lines {
		if err := dec.DecodeLine([]byte(l), bs); err != nil {
			return nil, fmt.Errorf("row %s: %w", l, err)
		}
	}
	cols := make([]arrow.Array, len(bs))
	for i, b := range bs {
		cols[i] = b.NewArray()
		defer cols[i].Release()
	}
	return array.NewRecordBatch(schema, cols, int64(len(lines))), nil
}

// batchOf is decodeBatch for tests.
func batchOf(t testing.TB, schema *arrow.Schema, lines ...string) arrow.RecordBatch {
	t.Helper()
	r, err := decodeBatch(schema, lines)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rowsOf renders batches as JSON lines, one string per row.
func rowsOf(t testing.TB, recs []arrow.RecordBatch) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		buf, err := rowjson.AppendRecord(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(buf), "\n"), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// outOfOrderness is the time options of a bounded out-of-orderness source.
func outOfOrderness(ms int64) []arkflow.TimeOption {
	return []arkflow.TimeOption{arkflow.OutOfOrderness(time.Duration(ms) * time.Millisecond)}
}

// pipeline describes a source → KeyBy → Window → sink job.
type pipeline struct {
	schema *arrow.Schema
	parts  [][]arrow.RecordBatch // batches per partition, in order
	key    string                // default "k"
	field  string                // default "ts"
	def    window.Definition
	time   []arkflow.TimeOption
	perRow bool // advance per_row (PerRowWatermark after time)
	route  bool // add the LateSink "late" (use with RouteLate("late"))
	// stateDir, when set, keeps the job's state in Badger there instead
	// of in memory.
	stateDir string
}

// result is what a pipeline run produced.
type result struct {
	out, late []arrow.RecordBatch
	metrics   arkflow.Metrics
	gauges    map[string]int64
	err       error // build or run error
	built     bool
}

func (p pipeline) builder(src *mem.Source, out, late *mem.Sink) *arkflow.Builder {
	key, field := p.key, p.field
	if key == "" {
		key = "k"
	}
	if field == "" {
		field = "ts"
	}
	b := arkflow.NewJob("golden").
		Source("in", src, arkflow.EventTime(field, p.timeOptions()...)).
		KeyBy(key).
		Window("w", p.def).
		Sink("out", out)
	if p.route {
		b.LateSink("late", late)
	}
	if p.stateDir != "" {
		b.State(job.State{Backend: job.BackendBadger, Path: p.stateDir})
	}
	return b
}

// run builds the job over a closed memory source holding p.parts and runs
// it to its end.
func (p pipeline) run(t testing.TB) result {
	t.Helper()
	src := mem.NewSource(p.schema, max(len(p.parts), 1))
	for i, bs := range p.parts {
		for _, b := range bs {
			if err := src.Append(i, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	src.Close()
	out, late := mem.NewSink(), mem.NewSink()
	j, err := p.builder(src, out, late).Build()
	if err != nil {
		return result{err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = j.Run(ctx)
	m := j.Metrics()
	return result{out: out.Records(), late: late.Records(), metrics: m, gauges: allMetrics(m.Operator("w")), err: err, built: true}
}

// ---- golden files ----

type goldenCase struct {
	name   string
	file   string
	line   int      // line of "case"
	input  []string // directive lines (without comments)
	expect []string
	// lines[outStart:outEnd] of the file hold the expected output.
	outStart, outEnd int
}

func parseGolden(t *testing.T, path string) ([]string, []*goldenCase) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var cases []*goldenCase
	names := map[string]bool{}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, ok := strings.CutPrefix(l, "case ")
		if !ok {
			t.Fatalf("%s:%d: expected a case, a comment or a blank line, got %q", path, i+1, l)
		}
		name = strings.TrimSpace(name)
		if names[name] {
			t.Fatalf("%s:%d: duplicate case %q", path, i+1, name)
		}
		names[name] = true
		c := &goldenCase{name: name, file: path, line: i + 1}
		i++
		for ; i < len(lines) && lines[i] != "----"; i++ {
			if s := strings.TrimSpace(lines[i]); s == "" || strings.HasPrefix(s, "#") {
				continue
			}
			c.input = append(c.input, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: case %q has no ---- line", path, c.line, name)
		}
		c.outStart = i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			c.expect = append(c.expect, lines[i])
		}
		c.outEnd = c.outStart + len(c.expect)
		cases = append(cases, c)
	}
	return lines, cases
}

// pipelineOf turns a case's directives into a pipeline.
func (c *goldenCase) pipeline() (pipeline, error) {
	var p pipeline
	var aggs []string
	var kind string
	var nums []int64
	parts := 1
	type pending struct {
		part int
		rows []string
	}
	var batches []*pending
	var cur *pending
	var opts []arkflow.TimeOption
	policy := "drop"
	for _, l := range c.input {
		if strings.HasPrefix(l, "{") {
			if cur == nil {
				return p, fmt.Errorf("row %q before any batch directive", l)
			}
			cur.rows = append(cur.rows, l)
			continue
		}
		cur = nil
		word, rest, _ := strings.Cut(l, " ")
		switch word {
		case "schema":
			s, err := parseSchema(rest)
			if err != nil {
				return p, err
			}
			p.schema = s
		case "window":
			f := strings.Fields(rest)
			if len(f) == 0 {
				return p, fmt.Errorf("window: missing kind")
			}
			kind = f[0]
			for _, x := range f[1:] {
				n, err := strconv.ParseInt(x, 10, 64)
				if err != nil {
					return p, fmt.Errorf("window: %v", err)
				}
				nums = append(nums, n)
			}
		case "agg":
			aggs = strings.Fields(rest)
		case "key":
			p.key = strings.TrimSpace(rest)
		case "time":
			for _, kv := range strings.Fields(rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return p, fmt.Errorf("time: %q is not key=value", kv)
				}
				var n int64
				switch k {
				case "ooo", "lateness", "partitions":
					var err error
					if n, err = strconv.ParseInt(v, 10, 64); err != nil {
						return p, fmt.Errorf("time %s: %v", k, err)
					}
				}
				switch k {
				case "field":
					p.field = v
				case "ooo":
					opts = append(opts, arkflow.OutOfOrderness(time.Duration(n)*time.Millisecond))
				case "strategy":
					switch v {
					case "bounded":
					case "monotonous":
						opts = append(opts, arkflow.Monotonous())
					default:
						return p, fmt.Errorf("time strategy %q", v)
					}
				case "lateness":
					opts = append(opts, arkflow.AllowedLateness(time.Duration(n)*time.Millisecond))
				case "policy":
					policy = v
				case "partitions":
					parts = int(n)
				case "advance":
					switch v {
					case "batch":
					case "per_row":
						p.perRow = true
					default:
						return p, fmt.Errorf("time advance %q", v)
					}
				default:
					return p, fmt.Errorf("time: unknown key %q", k)
				}
			}
		case "batch":
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				return p, fmt.Errorf("batch: %v", err)
			}
			cur = &pending{part: n}
			batches = append(batches, cur)
		default:
			return p, fmt.Errorf("unknown directive %q", l)
		}
	}
	if p.schema == nil {
		return p, fmt.Errorf("no schema")
	}
	ms := func(i int) time.Duration {
		if i < len(nums) {
			return time.Duration(nums[i]) * time.Millisecond
		}
		return 0
	}
	switch kind {
	case "tumbling":
		p.def = window.Tumbling(ms(0))
	case "sliding":
		p.def = window.Sliding(ms(0), ms(1))
	case "session":
		p.def = window.Session(ms(0))
	default:
		return p, fmt.Errorf("window kind %q", kind)
	}
	for _, a := range aggs {
		f := strings.Split(a, ":")
		fn, field, as := f[0], "", ""
		switch {
		case fn == "count" && len(f) == 2:
			as = f[1]
		case len(f) == 2:
			field = f[1]
		case len(f) == 3:
			field, as = f[1], f[2]
		default:
			return p, fmt.Errorf("agg %q: want fn:field:as", a)
		}
		if as == "" {
			as = fn + "_" + field
		}
		switch fn {
		case "count":
			if field != "" {
				return p, fmt.Errorf("agg %q: count counts rows (count:<as>); the Go API has no count of a field", a)
			}
			p.def = p.def.Count(as)
		case "sum":
			p.def = p.def.Sum(field, as)
		case "min":
			p.def = p.def.Min(field, as)
		case "max":
			p.def = p.def.Max(field, as)
		case "avg":
			p.def = p.def.Avg(field, as)
		case "first":
			p.def = p.def.First(field, as)
		case "last":
			p.def = p.def.Last(field, as)
		default:
			return p, fmt.Errorf("agg function %q", fn)
		}
	}
	switch policy {
	case "drop":
	case "update":
		opts = append(opts, arkflow.LateUpdate())
	case "route":
		opts = append(opts, arkflow.RouteLate("late"))
		p.route = true
	default:
		return p, fmt.Errorf("policy %q", policy)
	}
	p.time = opts
	p.parts = make([][]arrow.RecordBatch, parts)
	for _, b := range batches {
		if b.part < 0 || b.part >= parts {
			return p, fmt.Errorf("batch partition %d outside [0, %d)", b.part, parts)
		}
		rec, err := decodeBatch(p.schema, b.rows)
		if err != nil {
			return p, err
		}
		p.parts[b.part] = append(p.parts[b.part], rec)
	}
	return p, nil
}

// run runs the case and renders its output lines.
func (c *goldenCase) run(t *testing.T) []string { return c.runWith(t, "") }

// runWith runs the case, keeping state in Badger under stateDir when it
// is not empty.
func (c *goldenCase) runWith(t *testing.T, stateDir string) []string {
	t.Helper()
	p, err := c.pipeline()
	if err != nil {
		t.Fatalf("%s:%d: case %q: %v", c.file, c.line, c.name, err)
	}
	p.stateDir = stateDir
	defer func() {
		for _, bs := range p.parts {
			for _, b := range bs {
				b.Release()
			}
		}
	}()
	res := p.run(t)
	if res.err != nil {
		return []string{"error " + strings.ReplaceAll(res.err.Error(), "\n", " | ")}
	}
	var out []string
	for _, r := range rowsOf(t, res.out) {
		out = append(out, "out "+r)
	}
	for _, r := range rowsOf(t, res.late) {
		out = append(out, "late "+r)
	}
	return append(out, "metrics "+gaugeLine(res.gauges))
}

// allMetrics is an operator's counters and gauges in one map.
func allMetrics(tm arkflow.TaskMetrics) map[string]int64 {
	out := maps.Clone(tm.Counters)
	if out == nil {
		out = map[string]int64{}
	}
	maps.Copy(out, tm.Gauges)
	return out
}

// gaugeLine renders gauges sorted by name.
func gaugeLine(g map[string]int64) string {
	names := make([]string, 0, len(g))
	for k := range g {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s=%d", k, g[k])
	}
	return strings.Join(parts, " ")
}

func goldenFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files in testdata")
	}
	return files
}

// TestGolden runs every case of window/testdata/*.txt and compares its
// output with the expected section (-update rewrites them).
func TestGolden(t *testing.T) {
	for _, file := range goldenFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			lines, cases := parseGolden(t, file)
			if len(cases) == 0 {
				t.Fatalf("%s has no cases", file)
			}
			got := make([][]string, len(cases))
			for i, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					got[i] = c.run(t)
					if !*update && strings.Join(got[i], "\n") != strings.Join(c.expect, "\n") {
						t.Errorf("%s:%d: case %q:\n--- got\n%s\n--- want\n%s\n(run with -update to rewrite)", file, c.line, c.name,
							strings.Join(got[i], "\n"), strings.Join(c.expect, "\n"))
					}
				})
			}
			if !*update {
				return
			}
			var buf bytes.Buffer
			prev := 0
			for i, c := range cases {
				if got[i] == nil {
					t.Fatalf("case %q did not run; not rewriting %s", c.name, file)
				}
				for _, l := range lines[prev:c.outStart] {
					buf.WriteString(l + "\n")
				}
				for _, l := range got[i] {
					buf.WriteString(l + "\n")
				}
				prev = c.outEnd
			}
			for _, l := range lines[prev:] {
				buf.WriteString(l + "\n")
			}
			if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGoldenDeterministic runs every golden case twice more and requires
// byte-identical output: the same input in the same order gives the same
// output.
// The same golden files hold with state in Badger (R-STATE-1): the window
// operator's output does not depend on the backend.
func TestGoldenBadger(t *testing.T) {
	for _, file := range goldenFiles(t) {
		_, cases := parseGolden(t, file)
		for _, c := range cases {
			t.Run(filepath.Base(file)+"/"+c.name, func(t *testing.T) {
				got := c.runWith(t, t.TempDir())
				if strings.Join(got, "\n") != strings.Join(c.expect, "\n") {
					t.Errorf("%s:%d: case %q on badger:\n--- got\n%s\n--- want\n%s", c.file, c.line, c.name,
						strings.Join(got, "\n"), strings.Join(c.expect, "\n"))
				}
			})
		}
	}
}

func TestGoldenDeterministic(t *testing.T) {
	for _, file := range goldenFiles(t) {
		_, cases := parseGolden(t, file)
		for _, c := range cases {
			t.Run(filepath.Base(file)+"/"+c.name, func(t *testing.T) {
				a := strings.Join(c.run(t), "\n")
				b := strings.Join(c.run(t), "\n")
				if a != b {
					t.Fatalf("two runs differ:\n--- first\n%s\n--- second\n%s", a, b)
				}
			})
		}
	}
}

// timeOptions are the pipeline's event-time options, with its advance.
func (p pipeline) timeOptions() []arkflow.TimeOption {
	opts := append([]arkflow.TimeOption(nil), p.time...)
	if p.perRow {
		opts = append(opts, arkflow.PerRowWatermark())
	}
	return opts
}
