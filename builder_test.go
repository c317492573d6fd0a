package arkflow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/drop"
	"github.com/arkflow-rs/arkflow-go/connectors/file"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// tsConfig is a bounded source with an event-time column.
func tsConfig() generate.Config {
	return generate.Config{Seed: 1, Count: 100, BatchSize: 10, Fields: []generate.Field{
		{Name: "user", Type: "string", Cardinality: 5},
		{Name: "ts", Type: "int64"},
	}}
}

// Checkpoint without State uses the default backend, Badger (in the data
// directory), instead of failing Build with "checkpoints need a state
// block".
func TestBuilderCheckpointDefaultsToBadger(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := arkflow.NewJob("ckpt").
		Source("in", clickConfig()).
		KeyBy("user").
		Aggregate("n", job.Running(job.Count("n"))).
		Sink("out", mem.NewSink()).
		Checkpoint(job.Checkpoint{ObjectStoreURI: "file://" + filepath.Join(dir, "store")})
	if st := b.Spec().State; st == nil || st.Backend != job.BackendBadger {
		t.Fatalf("Spec().State = %+v, want the badger backend", st)
	}
	j, err := b.Build(arkflow.WithDataDir(filepath.Join(dir, "data")))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "ckpt", "state", "FORMAT")); err != nil {
		t.Fatalf("the job did not keep its state in Badger under the data directory: %v", err)
	}
}

// State with an empty Backend is Badger, as its doc says.
func TestBuilderStateDefaultsToBadger(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := arkflow.NewJob("st").
		Source("in", clickConfig()).
		KeyBy("user").
		Aggregate("n", job.Running(job.Count("n"))).
		Sink("out", mem.NewSink()).
		State(job.State{Path: dir}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Spec().State; got.Backend != job.BackendBadger || got.FormatVersion != 1 {
		t.Fatalf("state %+v, want badger, format 1", got)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "FORMAT")); err != nil {
		t.Fatalf("no Badger store in State's Path: %v", err)
	}
}

// Errors from a Builder-made job name the Builder call that made the
// mistake, and the rest of the path; the same spec loaded as a spec keeps
// the spec's paths.
func TestBuilderErrorsNameTheCall(t *testing.T) {
	t.Parallel()
	src := func(opts ...arkflow.SourceOption) *arkflow.Builder {
		return arkflow.NewJob("j").Source("in", tsConfig(), opts...).KeyBy("user").
			Aggregate("n", job.Running(job.Count("n")))
	}
	job1 := func(b *arkflow.Builder) *arkflow.Builder { return b.Sink("out", mem.NewSink()) }
	uri := "file://" + t.TempDir()
	for _, tc := range []struct {
		name      string
		b         *arkflow.Builder
		field     string // the error's Field
		reason    string // a prefix of its Reason
		specField string // Field when the builder's spec is validated as a spec; "" when the builder refused the value itself
	}{
		{"NewJob", arkflow.NewJob("bad id!").Source("in", clickConfig()).Sink("out", mem.NewSink()),
			"NewJob(id)", "must be 1-128", "id"},
		{"Version(0)", job1(src()).Version(0), ".Version(v)", "must be >= 1 (got 0)", ""},
		{"Parallelism(0)", job1(src()).Parallelism(0), ".Parallelism(n)", "must be >= 1 (got 0)", ""},
		{"Parallelism too large", job1(src()).Parallelism(200), ".Parallelism(n)", "must be in [1, max_parallelism=128] (got 200)", "parallelism"},
		{"MaxParallelism(-1)", job1(src()).MaxParallelism(-1), ".MaxParallelism(n)", "must be in [1, 32768] (got -1)", ""},
		{"MaxParallelism too large", job1(src()).MaxParallelism(40000), ".MaxParallelism(n)", "must be in [1, 32768] (got 40000)", "max_parallelism"},
		{"State backend", job1(src()).State(job.State{Backend: "rocks"}), ".State(job.State{...}): backend", `unknown state backend "rocks"`, "state.backend"},
		{"State ttl", job1(src()).State(job.State{TTLMS: new(int64)}), ".State(job.State{...}): ttl_ms", "must be > 0 (got 0)", "state.ttl_ms"},
		{"Checkpoint interval", job1(src()).Checkpoint(job.Checkpoint{IntervalMS: -1, ObjectStoreURI: uri}), ".Checkpoint(job.Checkpoint{...}): interval_ms", "must be > 0 (got -1)", "checkpoint.interval_ms"},
		{"Checkpoint URI", job1(src()).Checkpoint(job.Checkpoint{}), ".Checkpoint(job.Checkpoint{...}): object_store_uri", "is required", "checkpoint.object_store_uri"},
		{"Durability", job1(src()).Durability(job.Durability{Sync: "sometimes", Path: t.TempDir()}), ".Durability(job.Durability{...}): sync", "", "durability.sync"},
		{"Durable", job1(src(arkflow.Durable(job.Durability{Sync: "sometimes", Path: t.TempDir()}))), "Durable(job.Durability{...}): sync", "", "sources[0].durability.sync"},
		{"no source", arkflow.NewJob("j"), ".Source(...)", "a job needs at least one source", "sources"},
		{"no sink", arkflow.NewJob("j").Source("in", clickConfig()).Columns("m", job.Columns{Set: []job.Column{{Name: "x", Expr: "1"}}}), ".Sink(...)", "a job needs at least one sink", "sinks"},
		{"WithParallelism(0)", src().Sink("out", mem.NewSink(), arkflow.WithParallelism(0)), "WithParallelism(n)", "must be >= 1 (got 0)", ""},
		{"WithParallelism too large", src().Sink("out", mem.NewSink(), arkflow.WithParallelism(500)), "WithParallelism(n)", "must be in [1, max_parallelism=128] (got 500)", "operators[2].parallelism"},
		{"EventTime field", job1(src(arkflow.EventTime{Field: ""})), "EventTime{Field}", "an event_time source needs timestamp_field", "sources[0].time.timestamp_field"},
		{"OutOfOrderness", job1(src(arkflow.EventTime{Field: "ts", OutOfOrderness: -time.Second})), "EventTime{OutOfOrderness}", "must be >= 0 (got -1000)", "sources[0].time.watermark.out_of_orderness_ms"},
		{"IdleTimeout", job1(src(arkflow.EventTime{Field: "ts", IdleTimeout: -time.Second})), "EventTime{IdleTimeout}", "must be > 0 (got -1000)", "sources[0].time.watermark.idle_timeout_ms"},
		{"AllowedLateness", job1(src(arkflow.EventTime{Field: "ts", AllowedLateness: -time.Second})), "EventTime{AllowedLateness}", "must be >= 0 (got -1000)", "sources[0].time.allowed_lateness_ms"},
		{"RouteLate", job1(src(arkflow.EventTime{Field: "ts", RouteLate: "ghost"})), "EventTime{RouteLate}", `unknown operator "ghost"`, "sources[0].time.late_event_route"},
		{"WithSchema on a filter", job1(src().Where("w", "n > 1", arkflow.WithSchema(arrow.NewSchema(nil, nil)))), "WithSchema(schema)", "only a Map or Process function declares its output schema", ""},
		{"WithSchema on Columns", job1(src().Columns("c", job.Columns{Drop: []string{"n"}}, arkflow.WithSchema(arrow.NewSchema(nil, nil)))), "WithSchema(schema)", "a Columns map computes its output schema", ""},
		{"EventTime below 1ms", job1(src(arkflow.EventTime{Field: "ts", OutOfOrderness: time.Microsecond})), "EventTime{OutOfOrderness}", "must be 0 or at least 1ms (got 1µs)", ""},
		{"Monotonous with OutOfOrderness", job1(src(arkflow.EventTime{Field: "ts", Monotonous: true, OutOfOrderness: time.Second})), "EventTime{Monotonous}", "monotonous event times have no out-of-orderness", ""},
		{"LateUpdate and RouteLate", job1(src(arkflow.EventTime{Field: "ts", LateUpdate: true, RouteLate: "out"})), "EventTime{LateUpdate, RouteLate}", "late rows either update their window or go to a sink", ""},
		{"AdvanceWhenIdle < 0", job1(src(arkflow.EventTime{Field: "ts", IdleTimeout: time.Second, AdvanceWhenIdle: -time.Second})), "EventTime{AdvanceWhenIdle}", `must be > 0 with all_idle "advance"`, "sources[0].time.watermark.all_idle_delay_ms"},
		{"AdvanceWhenIdle without IdleTimeout", job1(src(arkflow.EventTime{Field: "ts", AdvanceWhenIdle: time.Second})), "EventTime{AdvanceWhenIdle}", `"advance" needs watermark.idle_timeout_ms`, "sources[0].time.watermark.all_idle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.b.Build()
			var found *job.ValidationError
			for _, e := range job.AsValidationErrors(err) {
				if e.Field == tc.field && strings.HasPrefix(e.Reason, tc.reason) {
					found = e
				}
			}
			if found == nil {
				t.Fatalf("no error with field %q and reason %q in:\n%v", tc.field, tc.reason, err)
			}
			if !strings.Contains(found.Error(), tc.field+": "+tc.reason) {
				t.Errorf("Error() = %q", found.Error())
			}
			if tc.specField == "" {
				return
			}
			var fromSpec bool
			for _, e := range job.AsValidationErrors(arkflow.Validate(tc.b.Spec())) {
				fromSpec = fromSpec || e.Field == tc.specField && strings.HasPrefix(e.Reason, tc.reason)
			}
			if !fromSpec {
				t.Errorf("the builder's spec, validated as a spec, has no error at %q:\n%v", tc.specField, arkflow.Validate(tc.b.Spec()))
			}
		})
	}
}

// Errors about what a Builder call wrote inside an operator, source, sink
// or edge name that call (".KeyBy(\"usr\")", ".Window(\"w\", ...)"), with
// the path inside the value it was given; never a spec path such as
// operators[1].key_field, which the Go code never wrote. Unknown columns
// say which one they probably misspell.
func TestBuilderComponentErrorsNameTheCall(t *testing.T) {
	t.Parallel()
	cfg := generate.Config{Seed: 1, Count: 10, Fields: []generate.Field{
		{Name: "user", Type: "string"}, {Name: "TS", Type: "int64"}, {Name: "amount", Type: "float64"}}}
	// in -> w (keyed) -> out, in -> f -> out2 and in -> c -> out3.
	b := func(src arkflow.SourceComponent, key string, opts ...arkflow.SourceOption) *arkflow.Builder {
		return arkflow.NewJob("j").Source("in", src, opts...).KeyBy(key).
			Window("w", window.Tumbling(time.Second, job.Sum("amout", "total"))).
			Sink("out", mem.NewSink()).
			From("in").Where("f", "usr == 'a'").Sink("out2", mem.NewSink()).
			From("in").Columns("c", job.Columns{Drop: []string{"Amount"}}).Sink("out3", mem.NewSink())
	}
	const cols = "(columns: user, TS, amount, __meta_source, __meta_partition, __meta_offset)"
	for _, tc := range []struct {
		name string
		b    *arkflow.Builder
		want []string // every error, as Error() renders it
	}{
		{"columns", b(cfg, "usr", arkflow.EventTime{Field: "ts"}, arkflow.KeyedBy("uesr")), []string{
			`job "j": operator "w": .KeyBy("usr"): unknown column "usr" ` + cols + `; did you mean "user"?`,
			`job "j": operator "w": .Window("w", ...): aggregates[0].field: unknown column "amout" ` + cols + `; did you mean "amount"?`,
			`job "j": operator "w": .Window("w", ...): the event-time field of its source is not in the rows it receives: unknown column "ts" ` + cols + `; did you mean "TS"? Column names are case-sensitive`,
			`job "j": operator "f": .Where("f", ...): expr: column 1: unknown column "usr" ` + cols + `; did you mean "user"?`,
			`job "j": operator "c": .Columns("c", ...): drop[0]: unknown column "Amount" ` + cols + `; did you mean "amount"? Column names are case-sensitive`,
			`job "j": operator "in": EventTime{Field}: unknown column "ts" ` + cols + `; did you mean "TS"? Column names are case-sensitive`,
			`job "j": operator "in": KeyedBy(field): unknown column "uesr" ` + cols + `; did you mean "user"?`,
		}},
		{"source config", arkflow.NewJob("j").Source("in", generate.Config{Count: -1, Fields: cfg.Fields}).Sink("out", mem.NewSink()), []string{
			`job "j": operator "in": .Source("in", ...): count: must be >= 0 (got -1)`,
		}},
		{"sink config", arkflow.NewJob("j").Source("in", cfg).Sink("out", file.SinkConfig{}), []string{
			`job "j": operator "out": .Sink("out", ...): path: is required`,
		}},
		{"edges", arkflow.NewJob("j").Source("in", cfg).Sink("out", mem.NewSink()).From("in", "out").Sink("out2", mem.NewSink()), []string{
			`job "j": operator "out": .Sink("out2", ...): from: operator "out" is a sink; sinks have no outputs`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.b.Build()
			var got []string
			for _, e := range job.AsValidationErrors(err) {
				got = append(got, e.Error())
				for _, p := range []string{"operators[", "sources[", "sinks[", "edges["} {
					if strings.HasPrefix(e.Field, p) || strings.Contains(e.Field, " "+p) {
						t.Errorf("field %q is a spec path", e.Field)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Build:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// WithChannelCapacity(n < 1) used to become 16 without a word; now every
// entry that takes options reports it, naming the option.
func TestChannelCapacityBelowOneIsAnError(t *testing.T) {
	t.Parallel()
	b := func() *arkflow.Builder {
		return arkflow.NewJob("cap").Source("in", clickConfig()).Sink("out", mem.NewSink())
	}
	for _, n := range []int{0, -1} {
		opt := arkflow.WithChannelCapacity(n)
		for name, err := range map[string]error{
			"Build":    func() error { _, err := b().Build(opt); return err }(),
			"Validate": arkflow.Validate(b().Spec(), opt),
			"FromSpec": func() error { _, err := arkflow.FromSpec(b().Spec(), opt); return err }(),
		} {
			errs := job.AsValidationErrors(err)
			if len(errs) != 1 || errs[0].Field != "WithChannelCapacity(n)" || !strings.HasPrefix(errs[0].Reason, "must be >= 1") {
				t.Errorf("%s with WithChannelCapacity(%d): %v", name, n, err)
			}
		}
	}
	// With the spec's own mistakes, both are reported.
	_, err := arkflow.NewJob("cap").Source("in", clickConfig()).Build(arkflow.WithChannelCapacity(0))
	if errs := job.AsValidationErrors(err); len(errs) < 2 || errs[0].Field != "WithChannelCapacity(n)" || !strings.Contains(err.Error(), "a job needs at least one sink") {
		t.Errorf("want the option's and the spec's problems, got:\n%v", err)
	}
	j, err := b().Build(arkflow.WithChannelCapacity(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// WithSavepoint on a job without a checkpoint block used to be ignored
// (the job started from scratch); now it is reported, naming the option.
func TestSavepointNeedsACheckpointBlock(t *testing.T) {
	t.Parallel()
	b := func() *arkflow.Builder {
		return arkflow.NewJob("sp").Source("in", clickConfig()).Sink("out", mem.NewSink())
	}
	opt := arkflow.WithSavepoint("v1")
	for name, err := range map[string]error{
		"Build":    func() error { _, err := b().Build(opt); return err }(),
		"Validate": arkflow.Validate(b().Spec(), opt),
		"FromSpec": func() error { _, err := arkflow.FromSpec(b().Spec(), opt); return err }(),
	} {
		errs := job.AsValidationErrors(err)
		if len(errs) != 1 || errs[0].Field != "WithSavepoint(name)" || !strings.Contains(errs[0].Reason, `no checkpoint block, so it has no savepoint "v1"`) {
			t.Errorf("%s: %v", name, err)
		}
	}
	withCheckpoints := b().Checkpoint(job.Checkpoint{ObjectStoreURI: "file://" + t.TempDir()})
	if _, err := withCheckpoints.Build(opt, arkflow.WithDataDir(t.TempDir())); err != nil {
		t.Errorf("with a checkpoint block: %v", err)
	}
}

// Aggregate and Window take the same aggregate values, and each compiles
// to the plan of the spec that says the same thing: job.Running is an
// aggregate config without "emit", job.Final one with "emit": "final".
func TestAggregatesCompileToTheSpecsPlan(t *testing.T) {
	t.Parallel()
	const spec = `
id: same
operators:
  - {id: in, kind: source}
  - {id: sum, kind: aggregate, stateful: true, key_field: user, config: {%s aggregates: [{function: count, as: n}, {function: sum, field: ts, as: total}]}}
  - {id: w, kind: window, stateful: true, key_field: user, config: {window: {type: session, gap_ms: 1000}, aggregates: [{function: count, as: n}, {function: sum, field: ts, as: total}]}}
  - {id: out, kind: sink}
  - {id: out2, kind: sink}
edges:
  - {id: in-sum, from: in, to: sum, partitioned: true}
  - {id: sum-out, from: sum, to: out}
  - {id: in-w, from: in, to: w, partitioned: true}
  - {id: w-out2, from: w, to: out2}
sources:
  - operator_id: in
    input_type: generate
    config: {seed: 1, count: 100, batch_size: 10, fields: [{name: user, type: string, cardinality: 5}, {name: ts, type: int64}]}
    time: {mode: event_time, timestamp_field: ts, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 0}, late_event_policy: drop}
sinks: [{operator_id: out, output_type: drop}, {operator_id: out2, output_type: drop}]
`
	aggs := []job.Aggregate{job.Count("n"), job.Sum("ts", "total")}
	for _, tc := range []struct {
		name string
		agg  job.Aggregation
		emit string
	}{
		{"Running", job.Running(aggs...), ""},
		{"Final", job.Final(aggs...), "emit: final,"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			built, err := arkflow.NewJob("same").
				Source("in", tsConfig(), arkflow.EventTime{Field: "ts"}).
				KeyBy("user").Aggregate("sum", tc.agg).Sink("out", drop.Config{}).
				From("in").KeyBy("user").Window("w", window.Session(time.Second, aggs...)).Sink("out2", drop.Config{}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			s, err := job.Parse([]byte(fmt.Sprintf(spec, tc.emit)))
			if err != nil {
				t.Fatal(err)
			}
			fromSpec, err := arkflow.FromSpec(s)
			if err != nil {
				t.Fatal(err)
			}
			if b, f := built.Plan(), fromSpec.Plan(); b.Digest != f.Digest {
				t.Errorf("the builder's plan differs from the spec's:\nbuilder %s\nspec    %s", b, f)
			}
		})
	}
}

// From with several operators connects the next operator from each;
// unknown and repeated names are mistakes Build reports, naming the call.
func TestFromSeveralOperators(t *testing.T) {
	t.Parallel()
	src := func() *arkflow.Builder {
		return arkflow.NewJob("merge").Source("a", tsConfig()).Source("b", tsConfig())
	}
	j, err := src().From("a", "b").Where("f", "ts >= 0").Sink("out", drop.Config{}).Build()
	if err != nil {
		t.Fatal(err)
	}
	var edges []string
	for _, e := range j.Spec().Edges {
		edges = append(edges, fmt.Sprintf("%s %s->%s %v", e.ID, e.From, e.To, e.Partitioned))
	}
	if want := []string{"a-f a->f false", "b-f b->f false", "f-out f->out false"}; !slices.Equal(edges, want) {
		t.Errorf("edges %q, want %q", edges, want)
	}
	for _, tc := range []struct {
		b    *arkflow.Builder
		want string
	}{
		{src().From("a", "ghost").Sink("out", drop.Config{}), `job "merge": operator "ghost": builder: From("a", "ghost"): no such operator "ghost" (add it first)`},
		{src().From("a", "b", "a").Sink("out", drop.Config{}), `job "merge": operator "a": builder: From("a", "b", "a") names "a" twice: every row would be delivered twice`},
	} {
		_, err := tc.b.Build()
		if errs := job.AsValidationErrors(err); len(errs) == 0 || errs[0].Error() != tc.want {
			t.Errorf("Build: %v\nwant first: %s", err, tc.want)
		}
	}
}
