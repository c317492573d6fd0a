package kafka

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
	"github.com/arkflow-rs/arkflow-go/job"
)

func buildInput(cfg string) (connectors.Input, error) {
	f, _ := connectors.LookupInput(Type)
	return f(connectors.BuildContext{Config: json.RawMessage(cfg)})
}

func buildOutput(cfg string, schema *arrow.Schema) (connectors.Output, error) {
	f, _ := connectors.LookupOutput(Type)
	return f(connectors.BuildContext{Config: json.RawMessage(cfg)}, schema)
}

func TestSourceConfigErrors(t *testing.T) {
	const ok = `"brokers":["b:9092"],"topics":["t"],"consumer_group":"g"`
	cases := []struct{ cfg, want string }{
		{`{}`, "brokers: is required (a list of host:port)\ntopics: is required (a list of topic names)\nconsumer_group: is required: acknowledged offsets are committed to it"},
		{`{"brokers":[""],"topics":["a","","a"],"consumer_group":" "}`, "brokers[0]: must not be empty\ntopics[1]: must not be empty\ntopics[2]: duplicate topic \"a\" (also topics[0])\nconsumer_group: is required: acknowledged offsets are committed to it"},
		{`{` + ok + `,"format":"json"}`, `schema: is required with format "json"`},
		{`{` + ok + `,"format":"raw","schema":[{"name":"a","type":"int64"}]}`, `schema: must be absent with format "raw" (the value is one binary column "value")`},
		{`{` + ok + `,"format":"avro"}`, `format: must be "json" or "raw" (got "avro")`},
		{`{` + ok + `,"schema":[{"name":"a","type":"int"}]}`, `schema[0].type: must be one of int64, float32, float64, string, bool, timestamp (got "int")`},
		{`{` + ok + `,"batch_size":0}`, "batch_size: must be > 0 (got 0)"},
		{`{` + ok + `,"batch_size":-1}`, "batch_size: must be > 0 (got -1)"},
		{`{"brokers":["b:9092"],"topics":["a","b"],"consumer_group":"g","transactional_offsets":true}`, "transactional_offsets: needs exactly one topic (got 2 in topics): the output that commits the offsets (offset_commit_group) pairs them with this input per partition; use one input per topic"},
		{`{` + ok + `,"properties":{"group.id":"x","auto.offset.reset":"latest","enable.auto.commit":true,"go.events.channel.enable":true,"security.protocol":"SSL"}}`,
			"properties.auto.offset.reset: is set by the connector (use start_from_latest)\nproperties.enable.auto.commit: is set by the connector\nproperties.go.events.channel.enable: go.* properties are managed by the connector\nproperties.group.id: is set by the connector (use consumer_group)"},
		{`{` + ok + `,"properties":{"a":{"b":1}}}`, `properties: values must be strings, numbers or booleans (not "a")`},
		{`{` + ok + `,"bogus":1}`, "bogus: unknown field (known fields: brokers, topics, consumer_group, client_id, start_from_latest, transactional_offsets, fetch_min_bytes, fetch_max_bytes, fetch_max_partition_bytes, fetch_wait_max_ms, format, schema, batch_size, properties)"},
		{`{` + ok + `,"fetch_wait_max_ms":10,"fetch_min_bytes":-1,"properties":{"fetch.wait.max.ms":"5"}}`, "fetch_min_bytes: must be ≥ 0 (got -1)\nfetch_wait_max_ms: is also given as properties.fetch.wait.max.ms: give it once"},
	}
	for _, c := range cases {
		_, err := buildInput(c.cfg)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
}

// ArkFlow's fetch keys become librdkafka's properties.
func TestFetchKeys(t *testing.T) {
	var c SourceConfig
	if err := json.Unmarshal([]byte(`{"fetch_min_bytes":1,"fetch_max_bytes":2,"fetch_max_partition_bytes":3,"fetch_wait_max_ms":4}`), &c); err != nil {
		t.Fatal(err)
	}
	m := *consumerConfig(&c)
	for k, want := range map[string]int{"fetch.min.bytes": 1, "fetch.max.bytes": 2, "max.partition.fetch.bytes": 3, "fetch.wait.max.ms": 4} {
		if m[k] != want {
			t.Errorf("%s = %v, want %d", k, m[k], want)
		}
	}
	if _, set := (*consumerConfig(&SourceConfig{}))["fetch.wait.max.ms"]; set {
		t.Error("fetch.wait.max.ms set without fetch_wait_max_ms")
	}
}

func TestSinkConfigErrors(t *testing.T) {
	const ok = `"brokers":["b:9092"],"topic":"t"`
	cases := []struct{ cfg, want string }{
		{`{}`, "brokers: is required (a list of host:port)\ntopic: is required"},
		{`{` + ok + `,"exactly_once":true}`, "transactional_id: is required and must be non-empty when exactly_once is true (a stable id, unique per producer: the broker fences older producers with the same id)"},
		{`{` + ok + `,"exactly_once":true,"transactional_id":"  "}`, "transactional_id: is required and must be non-empty when exactly_once is true (a stable id, unique per producer: the broker fences older producers with the same id)"},
		{`{` + ok + `,"exactly_once":true,"transactional_id":"x","acks":"1"}`, `acks: must be all with exactly_once (got "1")`},
		{`{` + ok + `,"acks":"2","compression":"brotli"}`, "compression: must be one of none, gzip, snappy, lz4, zstd (got \"brotli\")\nacks: must be all, -1, 1 or 0 (got \"2\")"},
		{`{"brokers":["b"],"topic":{"type":"expr","expr":"x"}}`, `topic: only {type: value, value: TOPIC} is supported (got type "expr"): topics computed by expressions are not`},
		{`{` + ok + `,"key":{"type":"value","value":"k"}}`, `key: only a column name or {type: expr, expr: COLUMN} is supported (got type "value"): constant keys are not`},
		{`{` + ok + `,"properties":{"transactional.id":"x","acks":"1","linger.ms":5}}`, "properties.acks: is set by the connector (use acks)\nproperties.transactional.id: is set by the connector (use transactional_id)"},
		{`{` + ok + `,"exactly_once":true,"transactional_id":"x","properties":{"enable.idempotence":false}}`, "properties.enable.idempotence: is set by the connector with exactly_once"},
		{`{` + ok + `,"offset_commit_group":"g"}`, "offset_commit_group: requires exactly_once: true (the input's offsets are committed inside the output's transactions)"},
		{`{` + ok + `,"offset_commit_group":"g","exactly_once":true}`, "transactional_id: is required and must be non-empty when exactly_once is true (a stable id, unique per producer: the broker fences older producers with the same id)"},
		{`{` + ok + `,"offset_commit_group":" ","exactly_once":true,"transactional_id":"x"}`, "offset_commit_group: must not be blank (the consumer_group of the kafka input with transactional_offsets: true)"},
		{`{` + ok + `,"exactly_once":true,"transactional_id":"x","properties":{"transaction.timeout.ms":"soon"}}`, `properties.transaction.timeout.ms: must be a positive integer (milliseconds; got "soon")`},
	}
	for _, c := range cases {
		_, err := buildOutput(c.cfg, nil)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
	}, nil)
	schemaCases := []struct{ cfg, want string }{
		{`{` + ok + `,"key":"nope","value_field":"f"}`, "key: unknown column \"nope\" (columns: id, f, l)\nvalue_field: column \"f\" has type float64; the value column must be string or binary"},
		{`{` + ok + `,"key":"ID","value_field":"iid"}`, "key: unknown column \"ID\" (columns: id, f, l); did you mean \"id\"? Column names are case-sensitive\nvalue_field: unknown column \"iid\" (columns: id, f, l); did you mean \"id\"?"},
		{`{` + ok + `,"key":"f"}`, "key: column \"f\" has type float64; a key column must be string, binary or an integer\nthe rows cannot be written as JSON values: column \"l\": type list<item: int64, nullable> cannot be written as JSON (or name a string or binary column in value_field)"},
	}
	for _, c := range schemaCases {
		_, err := buildOutput(c.cfg, schema)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
}

func TestConfigDefaultsAndGoStructs(t *testing.T) {
	in, err := NewInput(SourceConfig{Brokers: []string{"b:1"}, Topics: []string{"t"}, ConsumerGroup: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if c := in.Config(); c.Format != FormatRaw || c.BatchSize != DefaultBatchSize {
		t.Errorf("defaults: %+v", c)
	}
	want := []string{"value", "__meta_source", "__meta_partition", "__meta_offset", "__meta_topic", "__meta_key", "__meta_timestamp"}
	var got []string
	for _, f := range in.Schema().Fields() {
		got = append(got, f.Name)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("raw schema %v", got)
	}
	js := sourceInputNoBroker(t, `{"brokers":["b:1"],"topics":["t"],"consumer_group":"g","schema":[{"name":"id","type":"int64"}],"properties":{"fetch.max.bytes":1048576,"check.crcs":true,"security.protocol":"SSL"}}`)
	if js.Config().Format != FormatJSON || js.Schema().Field(0).Name != "id" {
		t.Errorf("json input: %+v %s", js.Config(), js.Schema())
	}
	if p := js.Config().Properties; p["fetch.max.bytes"] != "1048576" || p["check.crcs"] != "true" || p["security.protocol"] != "SSL" {
		t.Errorf("properties %v", p)
	}
	// ArkFlow's forms of topic and key.
	out, err := buildOutput(`{"brokers":["b"],"topic":{"type":"value","value":"copy"},"key":{"type":"expr","expr":"id"}}`, conformance.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if c := out.(*Output).Config(); c.Topic != "copy" || c.Key != "id" || c.Acks != "all" || c.Compression != "none" {
		t.Errorf("output config %+v", c)
	}
	// Go structs encode to the spec form.
	raw, _ := json.Marshal(SinkConfig{Brokers: []string{"b"}, Topic: "t", ExactlyOnce: true, TransactionalID: "x-{subtask}"})
	if string(raw) != `{"brokers":["b"],"topic":"t","exactly_once":true,"transactional_id":"x-{subtask}"}` {
		t.Errorf("SinkConfig JSON %s", raw)
	}
	if (SourceConfig{}).InputType() != "kafka" || (SinkConfig{}).OutputType() != "kafka" {
		t.Error("type names")
	}
	snk := out.(*Output).newSink(connectors.TaskInfo{Subtask: 3})
	if snk.TransactionalID() != "" {
		t.Errorf("transactional id without exactly_once: %q", snk.TransactionalID())
	}
	eo, err := NewOutput(SinkConfig{Brokers: []string{"b"}, Topic: "t", ExactlyOnce: true, TransactionalID: "copy-{subtask}"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id := eo.newSink(connectors.TaskInfo{Subtask: 3}).TransactionalID(); id != "copy-3" {
		t.Errorf("transactional id %q", id)
	}
}

func sourceInputNoBroker(t *testing.T, cfg string) *Input {
	t.Helper()
	in, err := buildInput(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return in.(*Input)
}

// Building inputs and outputs (what validation does) touches no broker;
// neither do NewSource and NewSink; Close without Connect is fine.
func TestFactoriesDoNoIO(t *testing.T) {
	in := sourceInputNoBroker(t, `{"brokers":["192.0.2.1:9"],"topics":["t"],"consumer_group":"g"}`)
	src, err := in.NewSource(connectors.TaskInfo{OperatorID: "s", Parallelism: 2, Subtask: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Read(context.Background()); err != ErrClosed {
		t.Errorf("Read after Close: %v", err)
	}
	if _, err := in.NewSource(connectors.TaskInfo{Parallelism: 2, Subtask: 2}); err == nil {
		t.Error("subtask out of range accepted")
	}
	out, err := buildOutput(`{"brokers":["192.0.2.1:9"],"topic":"t","exactly_once":true,"transactional_id":"x"}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	snk, err := out.NewSink(connectors.TaskInfo{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := conformance.NewRecord([]conformance.Row{{ID: 1}})
	defer rec.Release()
	if err := snk.Write(context.Background(), rec); err == nil {
		t.Error("Write before Connect succeeded")
	}
	if err := snk.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

const specYAML = `
id: copy
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: in-out, from: in, to: out}
sources:
  - operator_id: in
    input_type: kafka
    config: {brokers: ["b:9092"], topics: [orders], consumer_group: copy, schema: [{name: id, type: int64}, {name: ts, type: timestamp}]}
sinks:
  - operator_id: out
    output_type: kafka
    config: {brokers: ["b:9092"], topic: orders-copy, exactly_once: true}
`

// Validation names the field in the spec (exactly_once without a
// transactional_id).
func TestValidationNamesSpecField(t *testing.T) {
	spec, err := job.Parse([]byte(specYAML))
	if err != nil {
		t.Fatal(err)
	}
	err = arkflow.Validate(spec)
	if err == nil {
		t.Fatal("exactly_once without transactional_id validated")
	}
	want := `job "copy": operator "out": sinks[0].config.transactional_id: is required and must be non-empty when exactly_once is true`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("got %v\nwant it to contain %s", err, want)
	}
	// Fixed (with durability: exactly-once needs it), it validates; event
	// time may come from __meta_timestamp or a value column.
	for _, field := range []string{"__meta_timestamp", "ts"} {
		fixed := strings.Replace(specYAML, "exactly_once: true}", "exactly_once: true, transactional_id: copy-0}", 1)
		fixed = strings.Replace(fixed, "id: copy\n", "id: copy\ndurability: {sync: group_commit}\n", 1)
		fixed = strings.Replace(fixed, "    input_type: kafka\n", "    input_type: kafka\n    time: {mode: event_time, timestamp_field: "+field+", watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 200}}\n", 1)
		spec, err := job.Parse([]byte(fixed))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compile(spec, arkflow.WithDataDir(t.TempDir())); err != nil {
			t.Errorf("event time on %s: %v", field, err)
		}
	}
}

// The Go structs work with the builder; problems come back named as in a
// spec.
func TestBuilderWithGoStructs(t *testing.T) {
	build := func(snk SinkConfig) error {
		_, err := arkflow.NewJob("copy").
			Source("in", SourceConfig{Brokers: []string{"b:9092"}, Topics: []string{"orders"}, ConsumerGroup: "copy",
				Schema: conformance.Declared(), Properties: Properties{"security.protocol": "SSL"}},
				arkflow.Durable(job.Durability{})).
			Sink("out", snk).
			Build(arkflow.WithDataDir(t.TempDir()))
		return err
	}
	if err := build(SinkConfig{Brokers: []string{"b:9092"}, Topic: "copy", Key: "id", ExactlyOnce: true, TransactionalID: "copy-{subtask}"}); err != nil {
		t.Fatal(err)
	}
	err := build(SinkConfig{Brokers: []string{"b:9092"}, Topic: "copy", Key: "nope", ExactlyOnce: true})
	for _, want := range []string{`.Sink("out", ...): transactional_id: is required`, `.Sink("out", ...): key: unknown column "nope"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v\nwant %s", err, want)
		}
	}
}

// compile validates spec as a job with opts and returns its plan.
func compile(spec *job.Spec, opts ...arkflow.Option) (*job.Plan, error) {
	j, err := arkflow.FromSpec(spec, opts...)
	if err != nil {
		return nil, err
	}
	return j.Plan(), nil
}
