package windowop_test

// Data-driven golden tests (github.com/cockroachdb/datadriven) of window
// operators run end to end: a memory source → KeyBy → Window → memory sink,
// plus a late sink under the route policy.
//
// Every file internal/ops/windowop/testdata/*.txt holds several cases, each
// a short sequence of commands in the style of pebble's datadriven tests:
// a command line, its input, ---- and its output (up to the next blank
// line); the joins' cases (window, interval, temporal) are under
// testdata/join, in the commands of join_golden_test.go. Run
//
//	go test ./internal/ops/windowop -run TestGolden -rewrite
//
// to rewrite the outputs from the current behaviour (then review the
// diff: a golden file is only as good as its review). The other tests
// that walk these files skip under -rewrite.
//
// # Commands
//
// Lines between commands are blank lines or # comments. A case starts
// with job and ends with run; only run has an output.
//
//	job name=<case> window=tumbling size=<ms>
//	job name=<case> window=sliding size=<ms> slide=<ms>
//	job name=<case> window=session gap=<ms>
//	    ... [key=<field>] [field=<ts field>] [strategy=bounded|monotonous]
//	    [ooo=<ms>] [lateness=<ms>] [policy=drop|route|update]
//	    [partitions=<n>] [advance=batch|per_row]
//	----
//
//	schema <field>:<type> ...    types: string int64 float64 float32 bool
//	----                         timestamp_s timestamp_ms timestamp_us timestamp_ns
//	                             (every column nullable)
//
//	agg <fn>:<field>:<as> ...    fn: sum min max avg first last;
//	----                         <fn>:<field> is named <fn>_<field>;
//	                             count:<as> counts rows
//
//	batch <partition>            its input, JSON lines, is one batch of that
//	{"k":"a","ts":1,"v":2}       partition (of the schema given before it)
//	...
//	----
//
//	run                          runs the case
//	----
//	<expected output>
//
// Defaults: key k, field ts, bounded out-of-orderness 0, lateness 0,
// policy drop, one partition, advance batch.
//
// The source is one subtask that reads its partitions round robin (first
// batch of partition 0, first of partition 1, …, then the second batches);
// batches keep their exact boundaries, and the watermark advances before
// each batch is passed on (advance per_row: before each row behind it). The
// window runs with parallelism 1. The input is bounded: at its end the
// watermark jumps to the end of time, so every open window fires. The
// output of run is
//
//	out <row>        each main-output row (JSON, rowjson), in emission order
//	late <row>       each row of the late sink (route policy), in order
//	metrics a=1 ...  the window operator's gauges, sorted by name
//
// or, when the job does not build or fails, a single line
//
//	error <message>   (newlines of the message replaced by " | ")

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cockroachdb/datadriven"

	arkflow "github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

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
func outOfOrderness(ms int64) []timeOpt {
	return []timeOpt{ooo(time.Duration(ms) * time.Millisecond)}
}

// pipeline describes a source → KeyBy → Window → sink job.
type pipeline struct {
	schema *arrow.Schema
	parts  [][]arrow.RecordBatch // batches per partition, in order
	key    string                // default "k"
	field  string                // default "ts"
	def    window.Definition
	time   []timeOpt
	perRow bool // advance per_row (EventTime{PerRow} after time)
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
		Source("in", src, eventTime(field, p.timeOptions()...)).
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

// goldenCase is one case of internal/ops/windowop/testdata/*.txt, from its
// job command to its run.
type goldenCase struct {
	name   string
	policy string // drop, route or update
	p      pipeline
	// define makes the case's window with the aggregates given.
	define func(aggs ...job.Aggregate) window.Definition
}

// newCase reads a job command: the case's name, window and event time.
func newCase(d *datadriven.TestData) (*goldenCase, error) {
	c := &goldenCase{policy: "drop"}
	p := &c.p
	var kind string
	var size, slide, gap time.Duration
	var opts []timeOpt
	parts := 1
	for _, a := range d.CmdArgs {
		if len(a.Vals) != 1 {
			return c, fmt.Errorf("%s: want one value", a)
		}
		v := a.Vals[0]
		var n int64
		switch a.Key {
		case "size", "slide", "gap", "ooo", "lateness", "partitions":
			var err error
			if n, err = strconv.ParseInt(v, 10, 64); err != nil {
				return c, fmt.Errorf("%s: %v", a.Key, err)
			}
		}
		ms := time.Duration(n) * time.Millisecond
		switch a.Key {
		case "name":
			c.name = v
		case "window":
			kind = v
		case "size":
			size = ms
		case "slide":
			slide = ms
		case "gap":
			gap = ms
		case "key":
			p.key = v
		case "field":
			p.field = v
		case "ooo":
			opts = append(opts, ooo(ms))
		case "strategy":
			switch v {
			case "bounded":
			case "monotonous":
				opts = append(opts, monotonous())
			default:
				return c, fmt.Errorf("strategy %q", v)
			}
		case "lateness":
			opts = append(opts, lateness(ms))
		case "policy":
			c.policy = v
		case "partitions":
			parts = int(n)
		case "advance":
			switch v {
			case "batch":
			case "per_row":
				p.perRow = true
			default:
				return c, fmt.Errorf("advance %q", v)
			}
		default:
			return c, fmt.Errorf("unknown argument %q", a.Key)
		}
	}
	if c.name == "" {
		return c, fmt.Errorf("job: missing name=")
	}
	switch kind {
	case "tumbling":
		c.define = func(aggs ...job.Aggregate) window.Definition { return window.Tumbling(size, aggs...) }
	case "sliding":
		c.define = func(aggs ...job.Aggregate) window.Definition { return window.Sliding(size, slide, aggs...) }
	case "session":
		c.define = func(aggs ...job.Aggregate) window.Definition { return window.Session(gap, aggs...) }
	default:
		return c, fmt.Errorf("window kind %q", kind)
	}
	switch c.policy {
	case "drop":
	case "update":
		opts = append(opts, lateUpdate())
	case "route":
		opts = append(opts, routeLate("late"))
		p.route = true
	default:
		return c, fmt.Errorf("policy %q", c.policy)
	}
	p.time = opts
	p.parts = make([][]arrow.RecordBatch, parts)
	return c, nil
}

// command applies one command between job and run to the case.
func (c *goldenCase) command(d *datadriven.TestData) error {
	p := &c.p
	var words []string
	for _, a := range d.CmdArgs {
		words = append(words, a.String())
	}
	switch d.Cmd {
	case "schema":
		s, err := parseSchema(strings.Join(words, " "))
		if err != nil {
			return err
		}
		p.schema = s
	case "agg":
		return c.agg(words)
	case "batch":
		if len(words) != 1 {
			return fmt.Errorf("batch: want one partition")
		}
		part, err := strconv.Atoi(words[0])
		if err != nil {
			return fmt.Errorf("batch: %v", err)
		}
		if part < 0 || part >= len(p.parts) {
			return fmt.Errorf("batch partition %d outside [0, %d)", part, len(p.parts))
		}
		if p.schema == nil {
			return fmt.Errorf("batch before any schema")
		}
		var rows []string
		if d.Input != "" {
			rows = strings.Split(d.Input, "\n")
		}
		rec, err := decodeBatch(p.schema, rows)
		if err != nil {
			return err
		}
		p.parts[part] = append(p.parts[part], rec)
	default:
		return fmt.Errorf("unknown command %q (want schema, agg, batch or run)", d.Cmd)
	}
	return nil
}

// agg sets the window's aggregates from an agg command.
func (c *goldenCase) agg(aggs []string) error {
	p := &c.p
	var defAggs []job.Aggregate
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
			return fmt.Errorf("agg %q: want fn:field:as", a)
		}
		if as == "" {
			as = fn + "_" + field
		}
		switch fn {
		case "count":
			if field != "" {
				return fmt.Errorf("agg %q: count counts rows (count:<as>); the Go API has no count of a field", a)
			}
			defAggs = append(defAggs, job.Count(as))
		case "sum":
			defAggs = append(defAggs, job.Sum(field, as))
		case "min":
			defAggs = append(defAggs, job.Min(field, as))
		case "max":
			defAggs = append(defAggs, job.Max(field, as))
		case "avg":
			defAggs = append(defAggs, job.Avg(field, as))
		case "first":
			defAggs = append(defAggs, job.First(field, as))
		case "last":
			defAggs = append(defAggs, job.Last(field, as))
		default:
			return fmt.Errorf("agg function %q", fn)
		}
	}
	p.def = c.define(defAggs...)
	return nil
}

// release releases the case's input batches.
func (c goldenCase) release() {
	for _, bs := range c.p.parts {
		for _, b := range bs {
			b.Release()
		}
	}
}

// output runs the case, keeping state in Badger under stateDir when it is
// not empty, and renders what it produced.
func (c goldenCase) output(t *testing.T, stateDir string) string {
	t.Helper()
	p := c.p
	p.stateDir = stateDir
	res := p.run(t)
	if res.err != nil {
		return "error " + strings.ReplaceAll(res.err.Error(), "\n", " | ") + "\n"
	}
	var b strings.Builder
	for _, r := range rowsOf(t, res.out) {
		b.WriteString("out " + r + "\n")
	}
	for _, r := range rowsOf(t, res.late) {
		b.WriteString("late " + r + "\n")
	}
	b.WriteString("metrics " + gaugeLine(res.gauges) + "\n")
	return b.String()
}

// runGolden calls f at the run command of every case of
// internal/ops/windowop/testdata/*.txt, each in the subtest <file>/<case>,
// and compares what f returns with the case's expected output
// (datadriven's -rewrite flag rewrites it).
func runGolden(t *testing.T, f func(t *testing.T, d *datadriven.TestData, c goldenCase) string) {
	t.Helper()
	cases := 0
	// Only the files directly in testdata: testdata/join holds the joins'
	// cases, in the commands of join_golden_test.go.
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) { runGoldenFile(t, path, &cases, f) })
	}
	if cases == 0 {
		t.Fatal("no golden cases in testdata")
	}
}

// runGoldenFile runs the cases of one golden file, counting them in cases.
func runGoldenFile(t *testing.T, path string, cases *int, f func(t *testing.T, d *datadriven.TestData, c goldenCase) string) {
	names := map[string]bool{}
	var cur *goldenCase // the case between its job and its run
	defer func() {
		if cur != nil {
			cur.release()
		}
	}()
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		switch {
		case d.Cmd == "job":
			if cur != nil {
				d.Fatalf(t, "job %q: case %q has no run", d.CmdArgs, cur.name)
			}
			c, err := newCase(d)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			if names[c.name] {
				d.Fatalf(t, "duplicate case %q", c.name)
			}
			names[c.name] = true
			cur = c
			return ""
		case cur == nil:
			d.Fatalf(t, "%s before any job", d.Cmd)
		case d.Cmd != "run":
			if err := cur.command(d); err != nil {
				d.Fatalf(t, "%v", err)
			}
			return ""
		}
		c := *cur
		cur = nil
		defer c.release()
		if c.p.schema == nil {
			d.Fatalf(t, "no schema")
		}
		*cases++
		var out string
		t.Run(c.name, func(t *testing.T) { out = f(t, d, c) })
		return out
	})
	if cur != nil {
		t.Fatalf("%s: case %q has no run", path, cur.name)
	}
}

// skipIfRewriting skips a test that only checks the golden files under
// -rewrite, which TestGolden alone rewrites.
func skipIfRewriting(t *testing.T) {
	if f := flag.Lookup("rewrite"); f != nil && f.Value.String() == "true" {
		t.Skip("-rewrite: only TestGolden rewrites the golden files")
	}
}

// TestGolden runs every case of internal/ops/windowop/testdata/*.txt and compares its
// output with the expected one (-rewrite rewrites them).
func TestGolden(t *testing.T) {
	t.Parallel()
	runGolden(t, func(t *testing.T, _ *datadriven.TestData, c goldenCase) string {
		return c.output(t, "")
	})
}

// TestGoldenBadger: the same golden files hold with state in Badger:
// the window operator's output does not depend on the backend.
func TestGoldenBadger(t *testing.T) {
	t.Parallel()
	skipIfRewriting(t)
	runGolden(t, func(t *testing.T, _ *datadriven.TestData, c goldenCase) string {
		return c.output(t, t.TempDir())
	})
}

// TestGoldenDeterministic runs every golden case twice and requires
// byte-identical output: the same input in the same order gives the same
// output.
func TestGoldenDeterministic(t *testing.T) {
	t.Parallel()
	skipIfRewriting(t)
	runGolden(t, func(t *testing.T, _ *datadriven.TestData, c goldenCase) string {
		a, b := c.output(t, ""), c.output(t, "")
		if a != b {
			t.Fatalf("two runs differ:\n--- first\n%s--- second\n%s", a, b)
		}
		return a
	})
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

// timeOptions are the pipeline's event-time options, with its advance.
func (p pipeline) timeOptions() []timeOpt {
	opts := append([]timeOpt(nil), p.time...)
	if p.perRow {
		opts = append(opts, perRow())
	}
	return opts
}

// timeOpt sets one field of an arkflow.EventTime, so that tests can list
// the event-time settings they vary.
type timeOpt func(*arkflow.EventTime)

func ooo(d time.Duration) timeOpt { return func(e *arkflow.EventTime) { e.OutOfOrderness = d } }
func monotonous() timeOpt {
	return func(e *arkflow.EventTime) { e.Monotonous, e.OutOfOrderness = true, 0 }
}
func idle(d time.Duration) timeOpt { return func(e *arkflow.EventTime) { e.IdleTimeout = d } }
func advanceIdle(d time.Duration) timeOpt {
	return func(e *arkflow.EventTime) { e.AdvanceWhenIdle = d }
}
func perRow() timeOpt                  { return func(e *arkflow.EventTime) { e.PerRow = true } }
func lateness(d time.Duration) timeOpt { return func(e *arkflow.EventTime) { e.AllowedLateness = d } }
func lateUpdate() timeOpt {
	return func(e *arkflow.EventTime) { e.LateUpdate, e.RouteLate = true, "" }
}
func routeLate(sink string) timeOpt {
	return func(e *arkflow.EventTime) { e.RouteLate, e.LateUpdate = sink, false }
}

// eventTime is the EventTime of field with opts applied in order.
func eventTime(field string, opts ...timeOpt) arkflow.EventTime {
	e := arkflow.EventTime{Field: field}
	for _, o := range opts {
		o(&e)
	}
	return e
}
