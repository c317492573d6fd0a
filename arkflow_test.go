package arkflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/file"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
)

func clickConfig() generate.Config {
	return generate.Config{
		Seed: 7, Count: 1000, Partitions: 4, BatchSize: 100,
		Fields: []generate.Field{
			{Name: "user", Type: "string", Cardinality: 50},
			{Name: "amount", Type: "float64"},
		},
	}
}

func clickBuilder(out arkflow.SinkComponent) *arkflow.Builder {
	return arkflow.NewJob("clicks").
		Parallelism(2).
		Source("in", clickConfig()).
		Columns("cents", job.Columns{Set: []job.Column{{Name: "cents", Expr: "to_int(amount * 100)"}}}).
		Where("some", "cents > 10").
		KeyBy("user").
		Aggregate("per-user", job.Final(job.Count("n"), job.Sum("cents", "total"))).
		Sink("out", out, arkflow.WithParallelism(1))
}

// A builder job and its JSON compile to identical plans.
func TestBuilderAndJSONCompileToSamePlan(t *testing.T) {
	t.Parallel()
	built, err := clickBuilder(file.SinkConfig{Path: filepath.Join(t.TempDir(), "out.jsonl")}).Build()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := built.Spec().JSON()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := job.Parse(raw)
	if err != nil {
		t.Fatalf("the builder's spec does not parse: %v\n%s", err, raw)
	}
	plan, err := compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := built.Plan().JSON()
	b, _ := plan.JSON()
	if string(a) != string(b) {
		t.Fatalf("plans differ:\nbuilder: %s\nJSON:    %s", a, b)
	}
	// And the YAML form too.
	y, _ := built.Spec().YAML()
	ys, err := job.Parse(y)
	if err != nil {
		t.Fatal(err)
	}
	yp, err := compile(ys)
	if err != nil {
		t.Fatal(err)
	}
	if yp.Digest != built.Plan().Digest {
		t.Fatalf("YAML digest %s, builder %s", yp.Digest, built.Plan().Digest)
	}
}

// The same job gives the same results whether built in Go or loaded from
// its spec, and the keyed aggregate sees every row of a key in one
// subtask.
func TestBuilderAndSpecRunTheSame(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(j *arkflow.Job) map[string][2]int64 {
		t.Helper()
		if err := j.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return nil
	}
	sink1 := mem.NewSink()
	j1, err := clickBuilder(sink1).Build()
	if err != nil {
		t.Fatal(err)
	}
	run(j1)
	out2 := filepath.Join(dir, "out.jsonl")
	spec := j1.Spec()
	spec.Sinks[0].OutputType = "file"
	spec.Sinks[0].Config = json.RawMessage(`{"path":` + strconvQuote(out2) + `}`)
	j2, err := arkflow.FromSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	run(j2)
	got1 := map[string][2]int64{}
	for _, rec := range sink1.Records() {
		for i := 0; i < int(rec.NumRows()); i++ {
			u := rec.Column(0).(*array.String).Value(i)
			if _, dup := got1[u]; dup {
				t.Fatalf("user %s emitted twice: its rows were split across subtasks", u)
			}
			got1[u] = [2]int64{rec.Column(1).(*array.Int64).Value(i), rec.Column(2).(*array.Int64).Value(i)}
		}
	}
	data, err := os.ReadFile(out2)
	if err != nil {
		t.Fatal(err)
	}
	got2 := map[string][2]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var row struct {
			User  string `json:"user"`
			N     int64  `json:"n"`
			Total int64  `json:"total"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		got2[row.User] = [2]int64{row.N, row.Total}
	}
	if len(got1) != 50 || !reflect.DeepEqual(got1, got2) {
		t.Fatalf("builder and spec runs differ (%d vs %d users)", len(got1), len(got2))
	}
	var rows int64
	for _, v := range got1 {
		rows += v[0]
	}
	if m := j1.Metrics(); rows != m.Operator("some").RowsOut {
		t.Fatalf("aggregated %d rows, filter passed %d", rows, m.Operator("some").RowsOut)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// The deep build finds component problems, each naming operator
// and field path, all at once.
func TestValidateDeep(t *testing.T) {
	t.Parallel()
	base := `{"id":"deep","operators":[
	  {"id":"in","kind":"source"},
	  {"id":"m","kind":"map","config":{"set":[{"name":"x","expr":"amount * 2"}]}},
	  {"id":"agg","kind":"aggregate","key_field":"user","config":{"aggregates":[{"function":"sum","field":"x"}]}},
	  {"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"m"},{"id":"b","from":"m","to":"agg","partitioned":true},{"id":"c","from":"agg","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"generate","config":{"count":10,"fields":[{"name":"user","type":"string"},{"name":"amount","type":"float64"}]}}],
	  "sinks":[{"operator_id":"out","output_type":"drop"}]}`
	parse := func(s string) *job.Spec {
		t.Helper()
		spec, err := job.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return spec
	}
	if err := arkflow.Validate(parse(base)); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	cases := []struct{ name, from, to, op, field, reason string }{
		{"unknown input type", `"input_type":"generate"`, `"input_type":"kafkaa"`, "in", "sources[0].input_type", `unknown input type "kafkaa"`},
		{"unknown output type", `"output_type":"drop"`, `"output_type":"dropp"`, "out", "sinks[0].output_type", `unknown output type "dropp"`},
		{"key field missing from schema", `"key_field":"user"`, `"key_field":"usr"`, "agg", "operators[2].key_field", `unknown column "usr" (columns: user, amount, x, __meta_source`},
		{"bad expression", `amount * 2`, `amount * `, "m", "operators[1].config.set[0].expr", "column"},
		{"unknown column in expression", `amount * 2`, `amout * 2`, "m", "operators[1].config.set[0].expr", `unknown column "amout"`},
		{"aggregate on a string", `"field":"x"`, `"field":"user"`, "agg", "operators[2].config.aggregates[0].field", "sum cannot aggregate column \"user\" of type utf8"},
		{"source config", `"count":10`, `"count":-1`, "in", "sources[0].config.count", "must be >= 0"},
		{"unknown config field", `"count":10`, `"cnt":10`, "in", "sources[0].config.cnt", "unknown field"},
		{"not keyed", `"partitioned":true`, `"partitioned":false`, "agg", "operators[2].key_field", "must all reach the same subtask"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := strings.Replace(base, c.from, c.to, 1)
			if c.name == "not keyed" {
				s = strings.Replace(s, `{"id":"deep",`, `{"id":"deep","parallelism":2,`, 1)
			}
			err := arkflow.Validate(parse(s))
			for _, e := range job.AsValidationErrors(err) {
				if e.Job == "deep" && e.Operator == c.op && e.Field == c.field && strings.Contains(e.Reason, c.reason) {
					return
				}
			}
			t.Fatalf("want {%s %s ~%q}, got:\n%v", c.op, c.field, c.reason, err)
		})
	}
}

// A spec's decode problems (an unknown field, a value of the wrong type)
// do not hide its other mistakes, structural or found by the deep build:
// Load, and Validate of what Parse returned, report them all, each with
// its path; FromSpec never builds such a spec.
func TestValidateReportsDecodeProblemsWithTheRest(t *testing.T) {
	t.Parallel()
	const spec = `
id: typos
paralelism: 2
max_parallelism: many
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
  - {id: out2, kind: sink}
edges:
  - {id: a, from: in, to: outt}
  - {id: b, from: in, to: out2}
sources:
  - {operator_id: in, input_type: generate, config: {count: 10, fields: [{name: user, type: string}]}}
sinks:
  - {operator_id: out, output_type: drop}
  - {operator_id: out2, output_type: dropp}
`
	want := []string{
		`job "typos": max_parallelism: must be an integer (got string "many")`,
		`job "typos": paralelism: unknown field (known fields: id, version, max_parallelism, parallelism, operators, edges, sources, sinks, state, durability, checkpoint, recovery); did you mean "parallelism"?`,
		`job "typos": operator "in": edges[0].to: unknown operator "outt" (operators: "in", "out", "out2"); did you mean "out"?`,
		`job "typos": operator "out2": sinks[1].output_type: unknown output type "dropp" (known: …); did you mean "drop"?`,
	}
	// The output types known depend on the connectors linked in.
	known := regexp.MustCompile(`\(known: [^)]*\)`)
	check := func(name string, err error) {
		t.Helper()
		var got []string
		for _, e := range job.AsValidationErrors(err) {
			got = append(got, known.ReplaceAllString(e.Error(), "(known: …)"))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n%v\nwant:\n%s", name, err, strings.Join(want, "\n"))
		}
	}
	path := filepath.Join(t.TempDir(), "typos.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := arkflow.Load(path)
	check("Load", err)
	s, perr := job.Parse([]byte(spec))
	if perr == nil || s == nil {
		t.Fatalf("Parse = %v, %v; want the spec and its decode problems", s, perr)
	}
	check("Validate", arkflow.Validate(s))
	_, err = arkflow.FromSpec(s)
	check("FromSpec", err)
}

func TestBuilderMistakesNeverPanic(t *testing.T) {
	t.Parallel()
	sink := mem.NewSink()
	_, err := arkflow.NewJob("bad id!").
		Map("m", nil).
		KeyBy("").
		Where("f", "nope >").
		Source("s", nil).
		Sink("out", sink).
		Sink("out", sink).
		From("ghost").
		KeyBy("x").
		Build()
	errs := job.AsValidationErrors(err)
	if len(errs) < 5 {
		t.Fatalf("want every mistake reported, got %d:\n%v", len(errs), err)
	}
	for _, want := range []string{`Map("m") needs a MapFunc`, "KeyBy needs a field name", `operator "out" is added twice`, `From("ghost"): no such operator`, `KeyBy("x") is not followed by an operator`, "must be 1-128"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestLifecycleErrors(t *testing.T) {
	t.Parallel()
	j, err := arkflow.NewJob("once").Source("in", clickConfig()).Sink("out", mem.NewSink()).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(context.Background()); !errors.Is(err, arkflow.ErrNotRunning) {
		t.Fatalf("Stop before Run: %v", err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if j.Status() != arkflow.Stopped {
		t.Fatalf("state %v", j.Status())
	}
	if err := j.Run(context.Background()); !errors.Is(err, arkflow.ErrAlreadyRunning) {
		t.Fatalf("second Run: %v", err)
	}
}

// A Go map function with another output schema is checked downstream at
// Build, and its output is checked at run time.
func TestMapToSchemaIsChecked(t *testing.T) {
	t.Parallel()
	out := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	fn := func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		defer b.Release()
		b.Append(rec.NumRows())
		col := b.NewArray()
		defer col.Release()
		return array.NewRecordBatch(out, []arrow.Array{col}, 1), nil
	}
	sink := mem.NewSink()
	_, err := arkflow.NewJob("count-batches").
		Source("in", clickConfig()).
		Map("count", fn, arkflow.WithSchema(out)).
		KeyBy("user").
		Sink("out", sink).
		Build()
	if err == nil || !strings.Contains(err.Error(), `operator "out": .KeyBy("user"): unknown column "user" (columns: n)`) {
		t.Fatalf("want key_field error against the declared schema, got %v", err)
	}
	j, err := arkflow.NewJob("count-batches").Source("in", clickConfig()).Map("count", fn, arkflow.WithSchema(out)).Sink("out", sink).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.NumRows() != 40 { // 4 partitions x 1000 rows / 100 per batch
		t.Fatalf("got %d rows", sink.NumRows())
	}
	// A function returning a schema other than declared fails the job.
	liar := arkflow.MapFunc(func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) { return fn(ctx, rec) })
	j, err = arkflow.NewJob("liar").Source("in", clickConfig()).Map("count", liar).Sink("out", mem.NewSink()).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err == nil || !strings.Contains(err.Error(), `operator "count": function returned schema`) {
		t.Fatalf("want a schema mismatch error, got %v", err)
	}
	if j.Status() != arkflow.Failed {
		t.Fatalf("state %v", j.Status())
	}
}

var _ = connectors.MetaPartition

// compile validates spec as a job with opts and returns its plan.
func compile(spec *job.Spec, opts ...arkflow.Option) (*job.Plan, error) {
	j, err := arkflow.FromSpec(spec, opts...)
	if err != nil {
		return nil, err
	}
	return j.Plan(), nil
}
