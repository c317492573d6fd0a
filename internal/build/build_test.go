package build_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	_ "github.com/arkflow-rs/arkflow-go/connectors/drop"
	_ "github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/blob"
	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/jobdefaults"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// These tests use only the built-in connectors (memory, generate, drop)
// and Go values bound through Env.Bindings: registering probe connectors
// in the global registry from tests would make them share state, and
// Build only reads the registries, so the tests run in parallel.

// cols renders a schema as "name:type" pairs.
func cols(s *arrow.Schema) string {
	if s == nil {
		return "<nil>"
	}
	parts := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		parts[i] = f.Name + ":" + f.Type.String()
	}
	return strings.Join(parts, " ")
}

func parse(t *testing.T, spec string) *job.Spec {
	t.Helper()
	s, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return s
}

// problems renders Build's error as one "operator | field | reason" line
// per problem, or fails when it is not ValidationErrors.
func problems(t *testing.T, err error) []string {
	t.Helper()
	ves := job.AsValidationErrors(err)
	if err != nil && ves == nil {
		t.Fatalf("error is not ValidationErrors: %v", err)
	}
	var out []string
	for _, e := range ves {
		if e.Job != "j" {
			t.Errorf("problem names job %q, want \"j\": %v", e.Job, e)
		}
		out = append(out, e.Operator+" | "+e.Field+" | "+e.Reason)
	}
	return out
}

const meta = "__meta_source:utf8 __meta_partition:int32 __meta_offset:int64"

const clicksSource = `{"operator_id":"in","input_type":"memory","config":{"schema":[{"name":"user","type":"string"},{"name":"amount","type":"int64"}]}}`

// A source, a map that adds a column, then two branches: a filter and a
// running aggregate (parallelism 2), and a tumbling window.
func TestBuildDerivesSchemasAndPlan(t *testing.T) {
	t.Parallel()
	s := parse(t, `{"id":"j","operators":[{"id":"in","kind":"source"},
	  {"id":"m","kind":"map","config":{"set":[{"name":"double","expr":"amount * 2"}]}},
	  {"id":"f","kind":"filter","config":{"expr":"amount > 1"}},
	  {"id":"a","kind":"aggregate","key_field":"user","stateful":true,"parallelism":2,"config":{"aggregates":[{"function":"count","as":"n"},{"function":"sum","field":"amount"}]}},
	  {"id":"w","kind":"window","key_field":"user","stateful":true,"config":{"window":{"type":"tumbling","size_ms":1000},"aggregates":[{"function":"max","field":"amount","as":"top"}]}},
	  {"id":"out","kind":"sink"},{"id":"out2","kind":"sink"}],
	 "edges":[{"id":"e1","from":"in","to":"m"},{"id":"e2","from":"m","to":"f"},{"id":"e3","from":"f","to":"a","partitioned":true},
	  {"id":"e4","from":"a","to":"out"},{"id":"e5","from":"m","to":"w","partitioned":true},{"id":"e6","from":"w","to":"out2"}],
	 "sources":[`+clicksSource+`],
	 "sinks":[{"operator_id":"out","output_type":"drop"},{"operator_id":"out2","output_type":"memory"}]}`)
	g, err := build.Build(s, build.Env{})
	if err != nil {
		t.Fatal(err)
	}
	agg := "user:utf8 n:int64 sum_amount:int64"
	win := "user:utf8 window_start:timestamp[ms, tz=UTC] window_end:timestamp[ms, tz=UTC] top:int64 __arkflow_window_update:bool"
	mapped := "user:utf8 amount:int64 double:int64 " + meta
	for _, c := range []struct{ op, in, out string }{
		{"in", "<nil>", "user:utf8 amount:int64 " + meta},
		{"m", "user:utf8 amount:int64 " + meta, mapped}, // the new column goes before the metadata
		{"f", mapped, mapped},
		{"a", mapped, agg},
		{"w", mapped, win},
		{"out", agg, agg},
		{"out2", win, win},
	} {
		if got := cols(g.InputSchemas[c.op]); got != c.in {
			t.Errorf("InputSchemas[%s] = %s, want %s", c.op, got, c.in)
		}
		if got := cols(g.Schemas[c.op]); got != c.out {
			t.Errorf("Schemas[%s] = %s, want %s", c.op, got, c.out)
		}
	}
	var inputs, outputs, built []string
	for k := range g.Inputs {
		inputs = append(inputs, k)
	}
	for k := range g.Outputs {
		outputs = append(outputs, k)
	}
	for k := range g.Ops {
		built = append(built, k)
	}
	slices.Sort(outputs)
	slices.Sort(built)
	if fmt.Sprint(inputs, outputs, built) != "[in] [out out2] [a f m w]" {
		t.Errorf("inputs, outputs, ops = %v %v %v", inputs, outputs, built)
	}
	// Forward edges between equal parallelisms chain; partitioned edges
	// and a change of parallelism start a new chain. The two subtasks of
	// a split the key groups.
	var chains []string
	for _, c := range g.Plan.Chains {
		chains = append(chains, c.ID+"="+strings.Join(c.Operators, ","))
	}
	if got, want := strings.Join(chains, " "), "chain-in=in,m,f chain-w=w,out2 chain-a=a chain-out=out"; got != want {
		t.Errorf("chains = %s, want %s", got, want)
	}
	var tasks []string
	for _, tk := range g.Plan.Tasks {
		tasks = append(tasks, fmt.Sprintf("%s@%s%v", tk.ID, tk.Chain, tk.Partitions[0].KeyGroup))
	}
	slices.Sort(tasks)
	want := "a-0@chain-a[0,63] a-1@chain-a[64,127] f-0@chain-in[0,127] in-0@chain-in[0,127] m-0@chain-in[0,127] out-0@chain-out[0,127] out2-0@chain-w[0,127] w-0@chain-w[0,127]"
	if got := strings.Join(tasks, " "); got != want {
		t.Errorf("tasks = %s\nwant    %s", got, want)
	}
	var modes []string
	for _, e := range g.Plan.Edges {
		modes = append(modes, e.ID+"="+e.Mode)
	}
	if got, want := strings.Join(modes, " "), "e1=chained e2=chained e3=key_groups e4=rebalance e5=key_groups e6=chained"; got != want {
		t.Errorf("edge modes = %s, want %s", got, want)
	}
	if g.Spec == nil || g.Spec.ID != "j" || g.Plan.MaxParallelism != jobdefaults.MaxParallelism {
		t.Errorf("Spec = %v, MaxParallelism = %d", g.Spec, g.Plan.MaxParallelism)
	}
}

// Every problem is reported in one error, in spec order, each with its
// operator and field path; the texts are the ones the code gives today.
func TestBuildReportsEveryProblem(t *testing.T) {
	t.Parallel()
	unbound := func(name string) string {
		return `no Go function "` + name + `" is bound to this operator: functions exist only in the program that registered them through the builder; a declarative spec uses expressions instead`
	}
	cases := []struct {
		name, spec string
		bind       map[string]any // Env.Bindings
		want       []string
	}{{
		name: "lookups, edges and unbound functions",
		spec: `{"id":"j","operators":[{"id":"in","kind":"source"},{"id":"m","kind":"map","config":{"function":"double"}},
		  {"id":"f","kind":"filter","config":{"function":"big"}},{"id":"u","kind":"udf","config":{}},
		  {"id":"x","kind":"bogus"},{"id":"jn","kind":"join"},{"id":"out","kind":"sink"}],
		 "edges":[{"id":"e1","from":"in","to":"m"},{"id":"e2","from":"m","to":"f"},{"id":"e3","from":"f","to":"u"},{"id":"e4","from":"u","to":"out"},
		  {"id":"e5","from":"out","to":"x"},{"id":"e6","from":"nope","to":"m"}],
		 "sources":[{"operator_id":"in","input_type":"kafkaz"}],"sinks":[{"operator_id":"out","output_type":"s3z"}]}`,
		want: []string{
			"m | operators[1].config.function | " + unbound("double"),
			"f | operators[2].config.function | " + unbound("big"),
			"u | operators[3].config.function | a udf operator needs a Go function bound by the builder",
			`x | operators[4].kind | unknown operator kind "bogus" (known: source, map, filter, aggregate, window, join, sink, udf)`,
			"jn | operators[5].config.type | is required: the kind of join (window, interval or temporal)",
			"jn | operators[5].config.left | is required: the operator whose rows are the left side",
			"jn | operators[5].config.left_key | is required: the key column of the left side",
			"jn | operators[5].config.right | is required: the operator whose rows are the right side",
			"jn | operators[5].config.right_key | is required: the key column of the right side",
			"jn | operators[5] | a join needs exactly two input edges, from left and right (has 0)",
			`out | edges[4].from | operator "out" is a sink; sinks have no outputs`,
			`m | edges[5].from | unknown operator "nope" (operators: "f", "in", "jn", "m", "out", "u", "x")`,
			`in | sources[0].input_type | unknown input type "kafkaz" (known: generate, memory)`,
			`out | sinks[0].output_type | unknown output type "s3z" (known: drop, memory)`,
		},
	}, {
		name: "column checks against the received schema",
		spec: `{"id":"j","operators":[{"id":"in","kind":"source"},
		  {"id":"m","kind":"map","config":{"set":[{"name":"d","expr":"amount +"},{"name":"__meta_x","expr":"1"}],"drop":["nope"],"select":["user","user"]}},
		  {"id":"f","kind":"filter","config":{"expr":"amount"}},
		  {"id":"a","kind":"aggregate","key_field":"nope","config":{"aggregates":[{"function":"sum","field":"zz"}]}},
		  {"id":"out","kind":"sink"}],
		 "edges":[{"id":"e1","from":"in","to":"m"},{"id":"e2","from":"in","to":"f"},{"id":"e3","from":"in","to":"a","partitioned":true},
		  {"id":"e4","from":"a","to":"out"}],
		 "sources":[` + clicksSource + `],"sinks":[{"operator_id":"out","output_type":"drop"}]}`,
		want: []string{
			`m | operators[1] | operator "m" has no outgoing edge; its output would be discarded`,
			"m | operators[1].config.set[0].expr | column 9: unexpected end of expression",
			`m | operators[1].config.set[1].name | columns starting with "__meta_" are source metadata and cannot be set`,
			`m | operators[1].config.drop[0] | unknown column "nope" (columns: user, amount, __meta_source, __meta_partition, __meta_offset)`,
			`m | operators[1].config.select[1] | column "user" is selected twice`,
			`f | operators[2] | operator "f" has no outgoing edge; its output would be discarded`,
			"f | operators[2].config.expr | must be a boolean expression (got int64)",
			`a | operators[3].key_field | unknown column "nope" (columns: user, amount, __meta_source, __meta_partition, __meta_offset)`,
			`a | operators[3].config.aggregates[0].field | unknown column "zz" (columns: user, amount, __meta_source, __meta_partition, __meta_offset)`,
		},
	}, {
		// keyed_by names a column of the source; a keyed
		// operator behind it needs no partitioned edge when keyed by the
		// same column, and still does when keyed by another.
		name: "keyed_by",
		spec: `{"id":"j","parallelism":2,"operators":[{"id":"in","kind":"source"},{"id":"in2","kind":"source"},
		  {"id":"a","kind":"aggregate","key_field":"user","config":{"aggregates":[{"function":"count"}]}},
		  {"id":"b","kind":"aggregate","key_field":"amount","config":{"aggregates":[{"function":"count"}]}},
		  {"id":"out","kind":"sink"},{"id":"out2","kind":"sink"},{"id":"out3","kind":"sink"}],
		 "edges":[{"id":"e1","from":"in","to":"a"},{"id":"e2","from":"in","to":"b"},{"id":"e3","from":"a","to":"out"},{"id":"e4","from":"b","to":"out2"},
		   {"id":"e5","from":"in2","to":"out3"}],
		 "sources":[{"operator_id":"in","input_type":"memory","keyed_by":"user"},{"operator_id":"in2","input_type":"memory","keyed_by":"nope"}],
		 "sinks":[{"operator_id":"out","output_type":"drop"},{"operator_id":"out2","output_type":"drop"},{"operator_id":"out3","output_type":"drop"}]}`,
		bind: map[string]any{"in": memory.NewSource(userAmount, 2), "in2": memory.NewSource(userAmount, 2)},
		want: []string{
			`b | operators[3].key_field | rows of one key must all reach the same subtask: make every input edge of "b" partitioned, give it parallelism 1, or (when the input is already partitioned by this key) declare the source's keyed_by "amount"`,
			`in2 | sources[1].keyed_by | unknown column "nope" (columns: user, amount, __meta_source, __meta_partition, __meta_offset)`,
		},
	}, {
		name: "key field type, keyed routing, event time",
		spec: `{"id":"j","parallelism":2,"operators":[{"id":"in","kind":"source"},
		  {"id":"a","kind":"aggregate","key_field":"tags","config":{"aggregates":[{"function":"count"}]}},
		  {"id":"b","kind":"aggregate","key_field":"user","config":{"aggregates":[{"function":"count"}]}},
		  {"id":"out","kind":"sink"},{"id":"out2","kind":"sink"}],
		 "edges":[{"id":"e1","from":"in","to":"a","partitioned":true},{"id":"e2","from":"in","to":"b"},{"id":"e3","from":"a","to":"out"},{"id":"e4","from":"b","to":"out2"}],
		 "sources":[{"operator_id":"in","input_type":"memory","time":{"mode":"event_time","timestamp_field":"user","watermark":{"strategy":"monotonous"}}}],
		 "sinks":[{"operator_id":"out","output_type":"drop"},{"operator_id":"out2","output_type":"drop"}]}`,
		// No connector declares a list column: a Go source does.
		bind: map[string]any{"in": memory.NewSource(arrow.NewSchema([]arrow.Field{
			{Name: "user", Type: arrow.BinaryTypes.String}, {Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)}}, nil), 1)},
		want: []string{
			`a | operators[1].key_field | column "tags" has type list<item: utf8, nullable>, which cannot be a key`,
			`b | operators[2].key_field | rows of one key must all reach the same subtask: make every input edge of "b" partitioned, give it parallelism 1, or (when the input is already partitioned by this key) declare the source's keyed_by "user"`,
			`in | sources[0].time.timestamp_field | column "user" has type utf8; event time needs int64 (milliseconds) or a timestamp`,
		},
	}, {
		name: "inputs with different schemas",
		spec: `{"id":"j","operators":[{"id":"in","kind":"source"},{"id":"in2","kind":"source"},{"id":"out","kind":"sink"}],
		 "edges":[{"id":"e1","from":"in","to":"out"},{"id":"e2","from":"in2","to":"out"}],
		 "sources":[` + clicksSource + `,{"operator_id":"in2","input_type":"generate","config":{"fields":[{"name":"id","type":"int64"}]}}],
		 "sinks":[{"operator_id":"out","output_type":"drop"}]}`,
		want: []string{
			`out | operators[2] | inputs have different schemas: "in" sends (user utf8, amount int64, ` + "__meta_source utf8, __meta_partition int32, __meta_offset int64" + `); "in2" sends (id int64, __meta_source utf8, __meta_partition int32, __meta_offset int64)`,
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g, err := build.Build(parse(t, c.spec), build.Env{Bindings: c.bind})
			if g != nil {
				t.Errorf("Build returned a graph with its error")
			}
			if got := problems(t, err); !slices.Equal(got, c.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// When a source fails to build, every operator after it is still built,
// with a nil input schema: its own config problems are reported, the ones
// that depend on the rows are not (m's and f2's expressions name an
// unknown column, but the rows are unknown).
func TestBuildReportsDownstreamOfAFailedSource(t *testing.T) {
	t.Parallel()
	s := parse(t, `{"id":"j","operators":[{"id":"in","kind":"source"},
	  {"id":"m","kind":"map","config":{"set":[{"name":"d","expr":"nope +"}],"sett":1}},
	  {"id":"f","kind":"filter","config":{}},
	  {"id":"f2","kind":"filter","config":{"expr":"nope > 1"}},
	  {"id":"a","kind":"aggregate","config":{"emit":"sometimes","aggregates":[{"function":"median","field":"amount"}]}},
	  {"id":"out","kind":"sink"}],
	 "edges":[{"id":"e1","from":"in","to":"m"},{"id":"e2","from":"m","to":"f"},{"id":"e3","from":"f","to":"f2"},
	  {"id":"e4","from":"f2","to":"a"},{"id":"e5","from":"a","to":"out"}],
	 "sources":[{"operator_id":"in","input_type":"generate","config":{"batch_size":-1,"fields":[{"name":"amount","type":"int64"}]}}],
	 "sinks":[{"operator_id":"out","output_type":"drop","config":{"x":1}}]}`)
	_, err := build.Build(s, build.Env{})
	want := []string{
		`m | operators[1].config.sett | unknown field (known fields: set, drop, select, function, sql, table_name); did you mean "set"?`,
		`f | operators[2].config.expr | is required (a boolean expression, e.g. "amount > 10")`,
		`a | operators[4].config.emit | must be "updates" or "final" (got "sometimes")`,
		"a | operators[4].key_field | the aggregate operator needs key_field",
		`a | operators[4].config.aggregates[0].function | unknown aggregate function "median" (known: count, sum, min, max, avg, first, last)`,
		"in | sources[0].config.batch_size | must be > 0 (got -1)",
		"out | sinks[0].config.x | unknown field (the drop output takes no config)",
	}
	if got := problems(t, err); !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Go values bound to operators replace their declarative config: a memory
// source and sink, a map function with its own output schema, a filter
// function, a keyed process function. A binding of the wrong kind counts
// as none.
func TestBuildWithBindings(t *testing.T) {
	t.Parallel()
	in := arrow.NewSchema([]arrow.Field{{Name: "user", Type: arrow.BinaryTypes.String}}, nil)
	mapped := arrow.NewSchema([]arrow.Field{{Name: "user", Type: arrow.BinaryTypes.String}, {Name: "len", Type: arrow.PrimitiveTypes.Int32}}, nil)
	noop := func(context.Context, arrow.RecordBatch) (arrow.RecordBatch, error) { return nil, nil }
	spec := `{"id":"j","operators":[{"id":"in","kind":"source"},{"id":"m","kind":"map","config":{"function":"m"}},
	  {"id":"f","kind":"filter","config":{"function":"f"}},{"id":"p","kind":"udf","key_field":"user","stateful":true,"config":{"function":"p"}},
	  {"id":"out","kind":"sink"}],
	 "edges":[{"id":"e1","from":"in","to":"m"},{"id":"e2","from":"m","to":"f"},{"id":"e3","from":"f","to":"p","partitioned":true},{"id":"e4","from":"p","to":"out"}],
	 "sources":[{"operator_id":"in","input_type":"memory"}],"sinks":[{"operator_id":"out","output_type":"memory"}]}`
	bindings := map[string]any{
		"in": memory.NewSource(in, 1),
		"m":  ops.MapBinding{Name: "m", Fn: noop, Output: mapped},
		"f":  ops.FilterBinding{Name: "f", Fn: func(context.Context, arrow.RecordBatch) ([]bool, error) { return nil, nil }},
		"p": ops.ProcessBinding{Name: "p", Fn: func(context.Context, func(int) (*statestore.Keyed, error), arrow.RecordBatch) (arrow.RecordBatch, error) {
			return nil, nil
		}},
		"out": memory.NewSink(),
	}
	g, err := build.Build(parse(t, spec), build.Env{Bindings: bindings})
	if err != nil {
		t.Fatal(err)
	}
	for op, want := range map[string]string{
		"in":  "user:utf8 " + meta,
		"m":   "user:utf8 len:int32", // the function's declared schema
		"f":   "user:utf8 len:int32",
		"p":   "user:utf8 len:int32", // nil Output: the input schema
		"out": "user:utf8 len:int32",
	} {
		if got := cols(g.Schemas[op]); got != want {
			t.Errorf("Schemas[%s] = %s, want %s", op, got, want)
		}
	}

	// The filter's binding on the map, and none on the filter.
	bindings["m"], bindings["f"] = bindings["f"], nil
	_, err = build.Build(parse(t, spec), build.Env{Bindings: bindings})
	want := []string{
		`m | operators[1].config.function | no Go function "m" is bound to this operator: functions exist only in the program that registered them through the builder; a declarative spec uses expressions instead`,
		`f | operators[2].config.function | no Go function "f" is bound to this operator: functions exist only in the program that registered them through the builder; a declarative spec uses expressions instead`,
	}
	if got := problems(t, err); !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The checks a start makes from the spec and the Env alone: where state
// and write-ahead logs live, and the checkpoint store.
func TestBuildStartChecks(t *testing.T) {
	t.Parallel()
	spec := func(extra, srcExtra string) string {
		return `{"id":"j","operators":[{"id":"in","kind":"source"},{"id":"out","kind":"sink"}],"edges":[{"id":"e","from":"in","to":"out"}],
		 "sources":[{"operator_id":"in","input_type":"generate","config":{"fields":[{"name":"id","type":"int64"}]}` + srcExtra + `}],
		 "sinks":[{"operator_id":"out","output_type":"drop"}]` + extra + `}`
	}
	needsDir := func(field string) string {
		return "the write-ahead log needs a directory: set " + field + ", or give the job a data directory (arkflow.WithDataDir; arkflow run --data-dir)"
	}
	// Checkpoints need a state block.
	ck := func(uri string) string {
		return `,"state":{"backend":"memory"},"checkpoint":{"interval_ms":1000,"object_store_uri":"` + uri + `"}`
	}
	s3 := ck("s3://bucket/prefix")
	cases := []struct {
		name, extra, srcExtra string
		env                   build.Env
		want                  []string
	}{
		{name: "memory state", extra: `,"state":{"backend":"memory"}`},
		{name: "badger state without a directory", extra: `,"state":{"backend":"badger"}`,
			want: []string{" | state.path | the badger state needs a directory: set state.path, or give the job a data directory (arkflow.WithDataDir; arkflow run --data-dir)"}},
		{name: "badger state with state.path", extra: `,"state":{"backend":"badger","path":"/tmp/s"}`},
		{name: "badger state with a data dir", extra: `,"state":{"backend":"badger"}`, env: build.Env{DataDir: "/tmp/d"}},
		{name: "job-wide WAL without a directory", extra: `,"durability":{"enabled":true}`,
			want: []string{" | durability.path | " + needsDir("durability.path")}},
		{name: "source WAL without a directory", srcExtra: `,"durability":{"enabled":true}`,
			want: []string{"in | sources[0].durability.path | " + needsDir("sources[0].durability.path")}},
		{name: "source WAL with a data dir", srcExtra: `,"durability":{"enabled":true}`, env: build.Env{DataDir: "/tmp/d"}},
		{name: "file checkpoint store", extra: ck("file:///tmp/ck")},
		{name: "relative file checkpoint store", extra: ck("file://tmp/ck"),
			want: []string{` | checkpoint.object_store_uri | object store URI "file://tmp/ck": a file URI needs an absolute path, file:///absolute/dir (the part after file:// is read as a host)`}},
		{name: "s3 store", extra: s3, env: build.Env{CheckpointStore: ckptstore.StoreOptions{Options: blob.Options{Endpoint: "localhost:9000", AccessKeyID: "k", SecretAccessKey: "s"}}}},
		{name: "s3 endpoint scheme", extra: s3, env: build.Env{CheckpointStore: ckptstore.StoreOptions{Options: blob.Options{Endpoint: "ftp://h", AccessKeyID: "k"}}},
			want: []string{` | checkpoint.object_store_uri | object store "s3://bucket/prefix": endpoint "ftp://h": the scheme must be http or https`}},
		{name: "s3 secret without key", extra: s3, env: build.Env{CheckpointStore: ckptstore.StoreOptions{Options: blob.Options{Endpoint: "localhost:9000", SecretAccessKey: "s"}}},
			want: []string{` | checkpoint.object_store_uri | object store "s3://bucket/prefix": a secret access key is set without an access key id`}},
		{name: "s3 part size", extra: s3, env: build.Env{CheckpointStore: ckptstore.StoreOptions{Options: blob.Options{Endpoint: "localhost:9000", AccessKeyID: "k"}, PartSize: 1}},
			want: []string{` | checkpoint.object_store_uri | object store "s3://bucket/prefix": part size 1 is below S3's minimum of 5 MiB`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := build.Build(parse(t, spec(c.extra, c.srcExtra)), c.env)
			if got := problems(t, err); !slices.Equal(got, c.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

var userAmount = arrow.NewSchema([]arrow.Field{{Name: "user", Type: arrow.BinaryTypes.String}, {Name: "amount", Type: arrow.PrimitiveTypes.Int64}}, nil)

// A column name that is not in the rows at that point of the job is
// reported with the column it probably misspells, wherever the spec names
// a column: the event-time field, keyed_by, a key_field, a map's drop and
// expressions, an aggregate's field, a window's event-time field.
func TestBuildSuggestsColumns(t *testing.T) {
	t.Parallel()
	s := parse(t, `{"id":"j","operators":[{"id":"in","kind":"source"},
	  {"id":"m","kind":"map","config":{"set":[{"name":"d","expr":"amuont * 2"}],"drop":["amout"],"select":["user","TS","Amount"]}},
	  {"id":"a","kind":"aggregate","key_field":"usr","stateful":true,"config":{"aggregates":[{"function":"sum","field":"amont"}]}},
	  {"id":"w","kind":"window","key_field":"user","stateful":true,"config":{"window":{"type":"tumbling","size_ms":1000},"aggregates":[{"function":"sum","field":"amunt"}]}},
	  {"id":"out","kind":"sink"},{"id":"out2","kind":"sink"},{"id":"out3","kind":"sink"}],
	 "edges":[{"id":"e1","from":"in","to":"m"},{"id":"e2","from":"in","to":"a","partitioned":true},{"id":"e3","from":"in","to":"w","partitioned":true},
	  {"id":"e4","from":"m","to":"out"},{"id":"e5","from":"a","to":"out2"},{"id":"e6","from":"w","to":"out3"}],
	 "sources":[{"operator_id":"in","input_type":"memory","keyed_by":"uesr",
	  "time":{"mode":"event_time","timestamp_field":"ts","watermark":{"out_of_orderness_ms":0}},
	  "config":{"schema":[{"name":"user","type":"string"},{"name":"TS","type":"int64"},{"name":"amount","type":"int64"}]}}],
	 "sinks":[{"operator_id":"out","output_type":"drop"},{"operator_id":"out2","output_type":"drop"},{"operator_id":"out3","output_type":"drop"}]}`)
	_, err := build.Build(s, build.Env{})
	got := problems(t, err)
	for _, want := range []struct{ op, field, hint string }{
		{"in", "sources[0].time.timestamp_field", `; did you mean "TS"? Column names are case-sensitive`},
		{"in", "sources[0].keyed_by", `; did you mean "user"?`},
		{"m", "operators[1].config.set[0].expr", `; did you mean "amount"?`},
		{"m", "operators[1].config.drop[0]", `; did you mean "amount"?`},
		{"m", "operators[1].config.select[2]", `; did you mean "amount"? Column names are case-sensitive`},
		{"a", "operators[2].key_field", `; did you mean "user"?`},
		{"a", "operators[2].config.aggregates[0].field", `; did you mean "amount"?`},
		{"w", "operators[3].config.aggregates[0].field", `; did you mean "amount"?`},
		{"w", "operators[3].config", `; did you mean "TS"? Column names are case-sensitive`},
	} {
		n := 0
		for _, line := range got {
			if strings.HasPrefix(line, want.op+" | "+want.field+" | ") && (strings.Contains(line, "unknown column") || strings.Contains(line, "is not in the rows")) {
				n++
				if !strings.HasSuffix(line, want.hint) {
					t.Errorf("%s %s: no hint %q in\n%s", want.op, want.field, want.hint, line)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d problems about an unknown column at %s %s, want 1, in:\n%s", n, want.op, want.field, strings.Join(got, "\n"))
		}
	}
}
