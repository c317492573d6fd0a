package nats

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

func inputOf(cfg string) (connectors.Input, error) {
	f, _ := connectors.LookupInput(Type)
	return f(connectors.BuildContext{Config: json.RawMessage(cfg)})
}

func outputOf(cfg string, schema *arrow.Schema) (connectors.Output, error) {
	f, _ := connectors.LookupOutput(Type)
	return f(connectors.BuildContext{Config: json.RawMessage(cfg)}, schema)
}

func TestSourceConfigErrors(t *testing.T) {
	const url = `"url":"nats://h:4222"`
	const js = `"mode":{"type":"jet_stream","stream":"S","consumer_name":"c"}`
	cases := []struct{ cfg, want string }{
		{`{}`, "url: is required (nats://host:port, or tls://host:port for TLS)\nmode.type: is required (regular or jet_stream)"},
		{`{"url":"http://h:1","mode":{"type":"push"}}`, "url: scheme \"http\" of \"http://h:1\": must be nats, tls, ws or wss\nmode.type: must be regular or jet_stream (got \"push\")"},
		{`{` + url + `,"mode":{"type":"regular"}}`, "mode.subject: is required"},
		{`{` + url + `,"mode":{"type":"regular","subject":"a..b","stream":"S","ack_wait_ms":0}}`,
			"mode.subject: has an empty token (got \"a..b\")\nmode.stream: is a key of mode type jet_stream only (this is regular)\nmode.ack_wait_ms: is a key of mode type jet_stream only (this is regular)"},
		{`{` + url + `,"mode":{"type":"regular","subject":"a.>.b","queue_group":"q q"}}`, "mode.subject: '>' must be the last token (got \"a.>.b\")\nmode.queue_group: must not contain whitespace (got \"q q\")"},
		{`{` + url + `,"mode":{"type":"jet_stream","subject":"x"}}`, "mode.subject: is a key of mode type regular only (this is jet_stream)\nmode.stream: is required\nmode.consumer_name: is required"},
		{`{` + url + `,"mode":{"type":"jet_stream","stream":"a.b","consumer_name":"c*","durable_name":"d"}}`,
			"mode.stream: must not contain '.', '*', '>', '/', '\\' or whitespace (got \"a.b\")\nmode.consumer_name: must not contain '.', '*', '>', '/', '\\' or whitespace (got \"c*\")\nmode.durable_name: must equal consumer_name when set (got \"d\" and \"c*\"): JetStream names a durable consumer once"},
		{`{` + url + `,"mode":{"type":"jet_stream","stream":"S","consumer_name":"c","subjects":["a","","a"],"ack_wait_ms":0,"max_ack_pending":-2}}`,
			"mode.subjects[1]: is required\nmode.subjects[2]: duplicate subject \"a\" (also mode.subjects[0])\nmode.ack_wait_ms: must be > 0 (got 0)\nmode.max_ack_pending: must be > 0, or -1 for no cap (got -2)"},
		{`{` + url + `,"mode":{"type":"jet_stream","stream":"S","consumer_name":"c","subjects":[]}}`, "mode.subjects: must list at least one subject when present"},
		{`{` + url + `,` + js + `,"auth":{"username":"u","token":"t"}}`, "auth.password: is required with auth.username\nauth: give one of username and password, token, or creds_file (got 2)"},
		{`{` + url + `,` + js + `,"tls":{"client_cert":"c.pem"}}`, "tls: client_cert and client_key go together (got only one)"},
		{`{` + url + `,` + js + `,"format":"json"}`, `schema: is required with format "json"`},
		{`{` + url + `,` + js + `,"format":"raw","schema":[{"name":"a","type":"int64"}]}`, `schema: must be absent with format "raw" (the payload is one binary column "value")`},
		{`{` + url + `,` + js + `,"format":"avro"}`, `format: must be "json" or "raw" (got "avro")`},
		{`{` + url + `,` + js + `,"batch_size":0}`, "batch_size: must be > 0 (got 0)"},
		{`{` + url + `,` + js + `,"mode2":1}`, "mode2: unknown field (known fields: url, mode, auth, tls, format, schema, batch_size); did you mean \"mode\"?"},
		{`{` + url + `,"mode":{"type":"regular","subject":"s","queue":"q"}}`, "mode.queue: unknown field (known fields: type, subject, queue_group, stream, consumer_name, durable_name, subjects, ack_wait_ms, max_ack_pending)"},
	}
	for _, c := range cases {
		_, err := inputOf(c.cfg)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
}

func TestSinkConfigErrors(t *testing.T) {
	const url = `"url":"nats://h:4222"`
	cases := []struct{ cfg, want string }{
		{`{}`, "url: is required (nats://host:port, or tls://host:port for TLS)\nmode.type: is required (regular or jet_stream)\nmode.subject: is required"},
		{`{` + url + `,"mode":{"type":"regular","subject":"a.*"},"msg_id_fields":["id"]}`, "msg_id_fields: is for mode type jet_stream only: core NATS has no duplicate window\nmode.subject: must not contain wildcards: messages are published to it (got \"a.*\")"},
		{`{` + url + `,"mode":{"type":"jet_stream","subject":{"type":"expr","expr":"x"}}}`, `mode.subject: only {type: value, value: SUBJECT} is supported (got type "expr"): subjects computed by expressions are not`},
		{`{` + url + `,"mode":{"type":"jet_stream","subject":"s"},"msg_id_fields":["a","","a"]}`, "msg_id_fields[1]: must not be empty\nmsg_id_fields[2]: duplicate column \"a\" (also msg_id_fields[0])"},
	}
	for _, c := range cases {
		_, err := outputOf(c.cfg, nil)
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
		{`{` + url + `,"mode":{"type":"regular","subject":"s"},"value_field":"f"}`, "value_field: column \"f\" has type float64; the payload column must be string or binary"},
		{`{` + url + `,"mode":{"type":"regular","subject":"s"}}`, "the rows cannot be written as JSON payloads: column \"l\": type list<item: int64, nullable> cannot be written as JSON (or name a string or binary column in value_field)"},
		{`{` + url + `,"mode":{"type":"jet_stream","subject":"s"},"value_field":"id"}`, "value_field: column \"id\" has type int64; the payload column must be string or binary\nmsg_id_fields: is required: the rows carry no source position (__meta_source, __meta_partition, __meta_offset) to derive the Nats-Msg-Id from, as rows out of a window or an aggregate do not; name the columns that identify a row (its key and window start)"},
		{`{` + url + `,"mode":{"type":"jet_stream","subject":"s"},"msg_id_fields":["ID","f"],"value_field":"iid"}`,
			"value_field: unknown column \"iid\" (columns: id, f, l); did you mean \"id\"?\nmsg_id_fields[0]: unknown column \"ID\" (columns: id, f, l); did you mean \"id\"? Column names are case-sensitive\nmsg_id_fields[1]: column \"f\" has type float64; a message ID column must be a string, binary, integer, bool or timestamp"},
	}
	for _, c := range schemaCases {
		_, err := outputOf(c.cfg, schema)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
	// Rows that carry their source position need no msg_id_fields.
	if _, err := outputOf(`{`+url+`,"mode":{"type":"jet_stream","subject":"s"}}`, connectors.WithMeta(conformance.Schema())); err != nil {
		t.Errorf("rows with their position: %v", err)
	}
}

func TestConfigDefaultsAndGoStructs(t *testing.T) {
	in, err := inputOf(`{"url":"nats://a:1, tls://b:2","mode":{"type":"jet_stream","stream":"S","consumer_name":"c","durable_name":"c"}}`)
	if err != nil {
		t.Fatal(err)
	}
	c := in.(*input).cfg
	if c.Format != FormatRaw || c.BatchSize != DefaultBatchSize || c.Mode.AckWaitMS != DefaultAckWait.Milliseconds() || c.Mode.MaxAckPending != -1 {
		t.Errorf("defaults: %+v", c)
	}
	var got []string
	for _, f := range in.Schema().Fields() {
		got = append(got, f.Name)
	}
	if want := "value,__meta_source,__meta_partition,__meta_offset,__meta_topic,__meta_timestamp"; strings.Join(got, ",") != want {
		t.Errorf("raw schema %v, want %s", got, want)
	}
	if in.Partitions() != 1 {
		t.Errorf("partitions without subjects: %d", in.Partitions())
	}
	for cfg, want := range map[string]int{
		`{"url":"n:1","mode":{"type":"jet_stream","stream":"S","consumer_name":"c","subjects":["a","b","c"]}}`: 3,
		`{"url":"n:1","mode":{"type":"regular","subject":"a"}}`:                                                1,
		`{"url":"n:1","mode":{"type":"regular","subject":"a","queue_group":"q"}}`:                              0,
	} {
		in, err := inputOf(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if in.Partitions() != want {
			t.Errorf("%s: %d partitions, want %d", cfg, in.Partitions(), want)
		}
	}
	// ArkFlow's form of the output subject.
	out, err := outputOf(`{"url":"n:1","mode":{"type":"regular","subject":{"type":"value","value":"copy"}}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := out.(*output).cfg.Mode.Subject; s != "copy" {
		t.Errorf("subject %q", s)
	}
	// Go structs encode to the spec form.
	raw, _ := json.Marshal(SinkConfig{URL: "nats://h:4222", Mode: SinkMode{Type: ModeJetStream, Subject: "totals"}, MsgIDFields: []string{"user"}})
	if string(raw) != `{"url":"nats://h:4222","mode":{"type":"jet_stream","subject":"totals"},"msg_id_fields":["user"]}` {
		t.Errorf("SinkConfig JSON %s", raw)
	}
	raw, _ = json.Marshal(SourceConfig{URL: "nats://h:4222", Mode: SourceMode{Type: ModeRegular, Subject: "a.b"}, Auth: &Auth{Token: "t"}})
	if string(raw) != `{"url":"nats://h:4222","mode":{"type":"regular","subject":"a.b"},"auth":{"token":"t"}}` {
		t.Errorf("SourceConfig JSON %s", raw)
	}
	if (SourceConfig{}).InputType() != "nats" || (SinkConfig{}).OutputType() != "nats" {
		t.Error("type names")
	}
	if got := redact("nats://u:p@a:1,tls://tok@b:2,c:3"); got != "nats://***@a:1,tls://***@b:2,c:3" {
		t.Errorf("redact: %s", got)
	}
}

// Building inputs and outputs (what validation does) touches no server;
// neither do NewSource and NewSink; Close without Connect is fine, and
// Read and Write after it say so.
func TestFactoriesDoNoIO(t *testing.T) {
	for _, mode := range []string{
		`{"type":"regular","subject":"a"}`,
		`{"type":"jet_stream","stream":"S","consumer_name":"c"}`,
	} {
		in, err := inputOf(`{"url":"nats://192.0.2.1:9","mode":` + mode + `}`)
		if err != nil {
			t.Fatal(err)
		}
		src, err := in.NewSource(connectors.TaskInfo{OperatorID: "s", Parallelism: 2, Subtask: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := src.Read(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("Read after Close: %v", err)
		}
		if _, err := in.NewSource(connectors.TaskInfo{Parallelism: 2, Subtask: 2}); err == nil {
			t.Error("subtask out of range accepted")
		}
	}
	out, err := outputOf(`{"url":"nats://192.0.2.1:9","mode":{"type":"jet_stream","subject":"s"},"msg_id_fields":["id"]}`, nil)
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
	if err := snk.Write(context.Background(), rec); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
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
    input_type: nats
    config: {url: "nats://localhost:4222", mode: {type: jet_stream, stream: ORDERS, consumer_name: "orders.copy"}, schema: [{name: id, type: int64}]}
sinks:
  - operator_id: out
    output_type: nats
    config: {url: "nats://localhost:4222", mode: {type: jet_stream, subject: copy}}
`

// Validation names the field in the spec.
func TestValidationNamesSpecField(t *testing.T) {
	spec, err := job.Parse([]byte(specYAML))
	if err != nil {
		t.Fatal(err)
	}
	err = arkflow.Validate(spec)
	want := `job "copy": operator "in": sources[0].config.mode.consumer_name: must not contain '.'`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v\nwant it to contain %s", err, want)
	}
	fixed := strings.Replace(specYAML, `"orders.copy"`, `orders-copy`, 1)
	spec, err = job.Parse([]byte(fixed))
	if err != nil {
		t.Fatal(err)
	}
	if err := arkflow.Validate(spec); err != nil {
		t.Fatalf("the fixed spec: %v", err)
	}
}

// The Go structs work with the builder; problems come back named as in a
// spec.
func TestBuilderWithGoStructs(t *testing.T) {
	src := SourceConfig{URL: "nats://localhost:4222", Mode: SourceMode{Type: ModeJetStream, Stream: "ORDERS", ConsumerName: "copy"}, Schema: conformance.Declared()}
	build := func(snk SinkConfig) error {
		_, err := arkflow.NewJob("copy").Source("in", src).KeyBy("id").
			Window("w", windowCount()).
			Sink("out", snk).
			Build()
		return err
	}
	// Window results carry no source position: msg_id_fields is required.
	err := build(SinkConfig{URL: "nats://localhost:4222", Mode: SinkMode{Type: ModeJetStream, Subject: "totals"}})
	if want := `.Sink("out", ...): msg_id_fields: is required`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if err := build(SinkConfig{URL: "nats://localhost:4222", Mode: SinkMode{Type: ModeJetStream, Subject: "totals"}, MsgIDFields: []string{"id", window.ColumnStart}}); err != nil {
		t.Fatal(err)
	}
}

func windowCount() window.Definition {
	return window.Tumbling(time.Minute, job.Count("n"))
}
