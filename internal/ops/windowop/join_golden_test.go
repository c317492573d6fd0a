package windowop_test

// Data-driven golden tests (github.com/cockroachdb/datadriven) of the
// joins run end to end: two memory sources, left and right → a join
// (kind join: type window, interval or temporal) → a memory sink.
//
// Every file under internal/ops/windowop/testdata/join holds several
// cases, in the style of golden_test.go: window.txt, interval.txt and
// temporal.txt, one per type of join. Run
//
//	go test ./internal/ops/windowop -run TestJoinGolden -rewrite
//
// to rewrite the outputs from the current behaviour, then review the
// diff against the semantics in ARCHITECTURE.md ("Joins").
//
// # Commands
//
// Lines between commands are blank lines or # comments. A case starts
// with join and ends with run; only run has an output.
//
//	join name=<case> window=tumbling size=<ms>
//	join name=<case> window=sliding size=<ms> slide=<ms>
//	join name=<case> type=interval lower=<ms> upper=<ms>
//	join name=<case> type=temporal [deleted_field=<field>] [retention=<ms>]
//	    [left_time=processing]   the stream on processing time
//	    ... [how=inner|left] [ooo=<ms>]
//	    [left_partitions=<n>] [right_partitions=<n>]
//	    [left_key=<field>] [right_key=<field>]
//	    [left_prefix=<p>] [right_prefix=<p>]
//	----
//
//	schema left <field>:<type> ...     the rows of each side (types as in
//	schema right <field>:<type> ...    golden_test.go, every column nullable)
//	----
//
//	batch left <partition>             its input, JSON lines, is one batch
//	{"k":"a","ts":1,"v":2}             of that side's partition
//	...
//	----
//
//	run                                runs the case
//	----
//	<expected output>
//
// Defaults: type window, how inner, key k on both sides, bounded
// out-of-orderness 0, one partition per side, prefixes left_ and right_.
// The event time of both sides is the column ts (ms); late rows are
// dropped. A temporal join's right side is the table, its left the
// stream.
//
// The job runs with parallelism 1 over two open memory sources. run feeds
// the batches one at a time in the order of the file, each to its side's
// source, and waits after each until the join has finished with the
// batch and the sink holds every row the join emitted: the file's order
// is the order of arrival at the join, on both sides together, and each
// batch moves its side's watermark (its largest event time minus the
// out-of-orderness, the lowest over the side's partitions) before its
// rows are classified. Then both sources end: the watermark jumps to the
// end of time, every open window fires, the kept rows of an interval
// join end and the waiting rows of a temporal join's stream are joined.
// The output of run is
//
//	batch <side> <partition>: watermark left=<ms> right=<ms> join=<ms> [kept=<n>]
//	                 after each batch: the watermark of each side and of
//	                 the join (the lower of the two); none before the
//	                 first. kept (interval and temporal joins) is the
//	                 join's open_windows gauge: the rows of both sides an
//	                 interval join keeps for partners to come, the stream
//	                 rows a temporal join holds until the watermark
//	out <row>        each row the join emitted while it took that batch in
//	                 (JSON, rowjson), in emission order
//	end              the inputs ended
//	out <row>        each row emitted then
//	metrics a=1 ...  the join operator's counters and gauges, by name
//
// or, when the job does not build or fails, a single line
//
//	error <message>   (newlines of the message replaced by " | ")

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cockroachdb/datadriven"

	arkflow "github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/harness"
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// joinSides names the two inputs of a golden join; they are also the IDs
// of their source operators.
var joinSides = [2]string{"left", "right"}

// joinBatch is one batch of a join case, in the order of the file.
type joinBatch struct {
	side, part int
	rec        arrow.RecordBatch
}

// joinCase is one case of testdata/join, from its join command to its run.
type joinCase struct {
	name   string
	config map[string]any // the join operator's config
	ooo    int64
	parts  [2]int // partitions of each side
	// clockLeft runs the left side on processing time: its watermark is
	// the clock (printed as "clock").
	clockLeft bool
	schemas   [2]*arrow.Schema
	batches   []joinBatch
}

// newJoinCase reads a join command.
func newJoinCase(d *datadriven.TestData) (*joinCase, error) {
	c := &joinCase{parts: [2]int{1, 1}}
	cfg := map[string]any{"type": "window", "left": joinSides[0], "right": joinSides[1], "left_key": "k", "right_key": "k"}
	win := map[string]any{}
	for _, a := range d.CmdArgs {
		if len(a.Vals) != 1 {
			return c, fmt.Errorf("%s: want one value", a)
		}
		v := a.Vals[0]
		var n int64
		switch a.Key {
		case "size", "slide", "lower", "upper", "retention", "ooo", "left_partitions", "right_partitions":
			var err error
			if n, err = strconv.ParseInt(v, 10, 64); err != nil {
				return c, fmt.Errorf("%s: %v", a.Key, err)
			}
		}
		switch a.Key {
		case "name":
			c.name = v
		case "window":
			win["type"] = v
		case "size":
			win["size_ms"] = n
		case "slide":
			win["slide_ms"] = n
		case "lower":
			cfg["lower_ms"] = n
		case "upper":
			cfg["upper_ms"] = n
		case "retention":
			cfg["retention_ms"] = n
		case "type", "how", "left_key", "right_key", "left_prefix", "right_prefix", "deleted_field":
			cfg[a.Key] = v
		case "ooo":
			c.ooo = n
		case "left_partitions":
			c.parts[0] = int(n)
		case "right_partitions":
			c.parts[1] = int(n)
		case "left_time":
			if v != "processing" {
				return c, fmt.Errorf("left_time %q: want processing", v)
			}
			c.clockLeft = true
		default:
			return c, fmt.Errorf("unknown argument %q", a.Key)
		}
	}
	if c.name == "" {
		return c, fmt.Errorf("join: missing name=")
	}
	if len(win) > 0 {
		cfg["window"] = win
	}
	c.config = cfg
	return c, nil
}

// command applies one command between join and run to the case.
func (c *joinCase) command(d *datadriven.TestData) error {
	var words []string
	for _, a := range d.CmdArgs {
		words = append(words, a.String())
	}
	if len(words) == 0 {
		return fmt.Errorf("%s: want left or right", d.Cmd)
	}
	side := -1
	for i, s := range joinSides {
		if words[0] == s {
			side = i
		}
	}
	if side < 0 {
		return fmt.Errorf("%s %s: want left or right", d.Cmd, words[0])
	}
	switch d.Cmd {
	case "schema":
		s, err := parseSchema(strings.Join(words[1:], " "))
		if err != nil {
			return err
		}
		c.schemas[side] = s
	case "batch":
		if len(words) != 2 {
			return fmt.Errorf("batch: want a side and a partition")
		}
		part, err := strconv.Atoi(words[1])
		if err != nil {
			return fmt.Errorf("batch: %v", err)
		}
		if part < 0 || part >= c.parts[side] {
			return fmt.Errorf("batch partition %d outside [0, %d)", part, c.parts[side])
		}
		if c.schemas[side] == nil {
			return fmt.Errorf("batch %s before its schema", joinSides[side])
		}
		if d.Input == "" {
			return fmt.Errorf("batch: no rows (a source passes no empty batch on)")
		}
		rec, err := decodeBatch(c.schemas[side], strings.Split(d.Input, "\n"))
		if err != nil {
			return err
		}
		c.batches = append(c.batches, joinBatch{side: side, part: part, rec: rec})
	default:
		return fmt.Errorf("unknown command %q (want schema, batch or run)", d.Cmd)
	}
	return nil
}

func (c *joinCase) release() {
	for _, b := range c.batches {
		b.rec.Release()
	}
}

// spec is the case's job: the two sources and the sink are of the type
// "golden", which the environment of run binds to its Go values. Its
// checkpoint block (in a fresh directory, with no periodic checkpoints)
// is there for the runtime's Sync, which output waits on; state is in
// memory unless stateDir names a Badger directory.
func (c *joinCase) spec(t *testing.T, stateDir string) *job.Spec {
	t.Helper()
	source := func(id string) map[string]any {
		if id == joinSides[0] && c.clockLeft {
			return map[string]any{"operator_id": id, "input_type": "golden", "time": map[string]any{"mode": "processing_time"}}
		}
		return map[string]any{
			"operator_id": id, "input_type": "golden",
			"time": map[string]any{"mode": "event_time", "timestamp_field": "ts",
				"watermark": map[string]any{"strategy": "bounded_out_of_orderness", "out_of_orderness_ms": c.ooo}},
		}
	}
	spec := map[string]any{
		"id": "golden-join", "parallelism": 1,
		"operators": []map[string]any{
			{"id": joinSides[0], "kind": "source"}, {"id": joinSides[1], "kind": "source"},
			{"id": "j", "kind": "join", "config": c.config},
			{"id": "out", "kind": "sink"},
		},
		"edges": []map[string]any{
			{"id": "l", "from": joinSides[0], "to": "j", "partitioned": true},
			{"id": "r", "from": joinSides[1], "to": "j", "partitioned": true},
			{"id": "o", "from": "j", "to": "out"},
		},
		"sources": []map[string]any{source(joinSides[0]), source(joinSides[1])},
		"sinks":   []map[string]any{{"operator_id": "out", "output_type": "golden"}},
	}
	spec["state"] = map[string]any{"backend": "memory"}
	if stateDir != "" {
		spec["state"] = map[string]any{"backend": "badger", "path": stateDir}
	}
	spec["checkpoint"] = map[string]any{"interval_ms": int64(365 * 24 * time.Hour / time.Millisecond), "retention": 1,
		"object_store_uri": (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "checkpoints")}).String()}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	s, err := job.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// environment makes the input and output type "golden" the memory
// connector bound to the case's sources (by operator ID) and sink, as
// the Builder binds Go values.
func joinEnvironment(t *testing.T, srcs map[string]*mem.Source, sink *mem.Sink) *connectors.Environment {
	t.Helper()
	in, okIn := connectors.LookupInput("memory")
	out, okOut := connectors.LookupOutput("memory")
	if !okIn || !okOut {
		t.Fatal("the memory connector is not registered")
	}
	env := connectors.NewEnvironment()
	err := env.RegisterInput("golden", func(bc connectors.BuildContext) (connectors.Input, error) {
		bc.Bound = srcs[bc.OperatorID]
		return in(bc)
	})
	if err == nil {
		err = env.RegisterOutput("golden", func(bc connectors.BuildContext, s *arrow.Schema) (connectors.Output, error) {
			bc.Bound = sink
			return out(bc, s)
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// output runs the case, with state in Badger under stateDir when it is
// not empty, and renders what it produced.
func (c *joinCase) output(t *testing.T, stateDir string) string {
	t.Helper()
	srcs := map[string]*mem.Source{}
	for i, s := range joinSides {
		srcs[s] = mem.NewSource(c.schemas[i], c.parts[i])
	}
	closeAll := func() {
		for _, s := range srcs {
			s.Close()
		}
	}
	defer closeAll()
	sink := mem.NewSink()
	j, err := arkflow.FromSpec(c.spec(t, stateDir), arkflow.WithEnvironment(joinEnvironment(t, srcs, sink)))
	if err != nil {
		return "error " + strings.ReplaceAll(err.Error(), "\n", " | ") + "\n"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()

	var b strings.Builder
	printed := 0
	// emitted writes the rows the sink got since the last call.
	emitted := func() {
		rows := rowsOf(t, sink.Records())
		for _, r := range rows[printed:] {
			b.WriteString("out " + r + "\n")
		}
		printed = len(rows)
	}
	var fed int64
	for _, x := range c.batches {
		if err := srcs[joinSides[x.side]].Append(x.part, x.rec); err != nil {
			t.Fatal(err)
		}
		fed += x.rec.NumRows()
		// The join counts a batch as it begins to take it in, after the
		// watermark that came before it (which fired what it fired), so
		// the source has passed the batch on. A Sync then sends a
		// barrier from both sources behind it: once the sink has the
		// barrier, the join has finished with the batch (an interval
		// join emits while it takes one in) and the sink holds every row
		// it emitted.
		waitJoin(t, done, "the join to take in the batch", func() bool {
			return j.Metrics().Operator("j").RowsIn >= fed
		})
		if err := harness.RuntimeOf(j).Sync(ctx); err != nil {
			t.Fatalf("waiting for the join to finish with the batch: %v", err)
		}
		m := j.Metrics()
		left := wmString(m.Operator(joinSides[0]).Watermark)
		if c.clockLeft {
			left = "clock"
		}
		fmt.Fprintf(&b, "batch %s %d: watermark left=%s right=%s join=%s", joinSides[x.side], x.part,
			left, wmString(m.Operator(joinSides[1]).Watermark), wmString(m.Operator("j").Watermark))
		if c.config["type"] != "window" {
			fmt.Fprintf(&b, " kept=%d", m.Operator("j").Gauges[windowop.MetricOpenWindows])
		}
		b.WriteString("\n")
		emitted()
	}
	closeAll()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the job did not end after its inputs did")
	}
	if runErr != nil {
		return "error " + strings.ReplaceAll(runErr.Error(), "\n", " | ") + "\n"
	}
	b.WriteString("end\n")
	emitted()
	b.WriteString("metrics " + gaugeLine(allMetrics(j.Metrics().Operator("j"))) + "\n")
	return b.String()
}

// waitJoin polls until ready, failing the test when the job ends first
// or ready stays false for polltest's deadline.
func waitJoin(t *testing.T, done <-chan error, what string, ready func() bool) {
	t.Helper()
	polltest.Eventually(t, what, func() bool {
		select {
		case err := <-done:
			t.Fatalf("the job ended while waiting for %s: %v", what, err)
		default:
		}
		return ready()
	})
}

// wmString renders a watermark in ms: none before the first.
func wmString(wm int64) string {
	switch wm {
	case math.MinInt64:
		return "none"
	case math.MaxInt64:
		return "end"
	}
	return strconv.FormatInt(wm, 10)
}

// runJoinGolden calls f at the run command of every case under
// testdata/join, each in the subtest <file>/<case>, and compares what f
// returns with the case's expected output.
func runJoinGolden(t *testing.T, f func(t *testing.T, c *joinCase) string) {
	t.Helper()
	cases := 0
	datadriven.Walk(t, filepath.Join("testdata", "join"), func(t *testing.T, path string) {
		names := map[string]bool{}
		var cur *joinCase // the case between its join and its run
		defer func() {
			if cur != nil {
				cur.release()
			}
		}()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch {
			case d.Cmd == "join":
				if cur != nil {
					d.Fatalf(t, "join %q: case %q has no run", d.CmdArgs, cur.name)
				}
				c, err := newJoinCase(d)
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
				d.Fatalf(t, "%s before any join", d.Cmd)
			case d.Cmd != "run":
				if err := cur.command(d); err != nil {
					d.Fatalf(t, "%v", err)
				}
				return ""
			}
			c := cur
			cur = nil
			defer c.release()
			if c.schemas[0] == nil || c.schemas[1] == nil {
				d.Fatalf(t, "a schema of each side is needed")
			}
			cases++
			var out string
			t.Run(c.name, func(t *testing.T) { out = f(t, c) })
			return out
		})
		if cur != nil {
			t.Fatalf("%s: case %q has no run", path, cur.name)
		}
	})
	if cases == 0 {
		t.Fatal("no golden cases in testdata/join")
	}
}

// TestJoinGolden runs every case under testdata/join and compares its
// output with the expected one (-rewrite rewrites them).
func TestJoinGolden(t *testing.T) {
	t.Parallel()
	runJoinGolden(t, func(t *testing.T, c *joinCase) string { return c.output(t, "") })
}

// TestJoinGoldenBadger: the same cases hold with state in Badger, which
// keeps the join's watermark floor and input positions.
func TestJoinGoldenBadger(t *testing.T) {
	t.Parallel()
	skipIfRewriting(t)
	runJoinGolden(t, func(t *testing.T, c *joinCase) string { return c.output(t, t.TempDir()) })
}
