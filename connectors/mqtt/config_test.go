package mqtt

import (
	"encoding/json"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
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
	const ok = `"host":"h","client_id":"c","topics":["a/#"]`
	cases := []struct{ cfg, want string }{
		{`{}`, "host: is required (the broker's host name or address)\nclient_id: is required: it names the client's session on the broker\ntopics: is required: the topic filters to subscribe to"},
		{`{"host":"tcp://h:1","port":70000,"client_id":"c","topics":["a"],"password":"p"}`,
			"host: must be a host name or address, without scheme, port or path (got \"tcp://h:1\")\nport: must be between 1 and 65535 (got 70000)\nusername: is required with password"},
		{`{` + ok + `,"port":0,"keep_alive":0}`, "port: must be between 1 and 65535 (got 0)\nkeep_alive: must be between 1 and 65535 seconds (got 0)"},
		{`{"host":"h","client_id":"c","topics":["a/#/b","a+","","$share/g"]}`,
			"topics[0]: '#' must be the last level (got \"a/#/b\")\ntopics[1]: wildcards + and # must fill a whole level (got \"a+\")\ntopics[2]: must not be empty\ntopics[3]: a shared subscription is $share/GROUP/FILTER (got \"$share/g\")\ntopics: mixes shared ($share/...) and plain filters: every subtask subscribes to shared ones, subtask 0 alone to plain ones; make them all one kind"},
		{`{` + ok + `,"qos":2}`, "qos: must be 0 or 1 (got 2): the source acknowledges QoS 1 messages once they are safe, and QoS 2 has no more to offer it"},
		{`{` + ok + `,"tls":{"client_cert":"c.pem"}}`, "tls: client_cert and client_key go together (got only one)"},
		{`{` + ok + `,"format":"json"}`, `schema: is required with format "json"`},
		{`{` + ok + `,"format":"raw","schema":[{"name":"a","type":"int64"}]}`, `schema: must be absent with format "raw" (the payload is one binary column "value")`},
		{`{` + ok + `,"format":"avro","batch_size":0}`, "format: must be \"json\" or \"raw\" (got \"avro\")\nbatch_size: must be > 0 (got 0)"},
		{`{` + ok + `,"topic":"x"}`, "topic: unknown field (known fields: host, port, client_id, topics, username, password, qos, clean_session, keep_alive, tls, format, schema, batch_size); did you mean \"topics\"?"},
		{`{` + ok + `,"tls":{"enabled":true,"cert":"x"}}`, "tls.cert: unknown field (known fields: enabled, ca, client_cert, client_key)"},
	}
	for _, c := range cases {
		_, err := inputOf(c.cfg)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
}

func TestSourceConfigDefaults(t *testing.T) {
	in, err := inputOf(`{"host":"h","client_id":"c","topics":["a/+"],"schema":[{"name":"x","type":"int64"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	c := in.(*input).cfg
	if c.Port != 1883 || *c.QoS != 1 || *c.CleanSession || c.Format != FormatJSON || c.BatchSize != DefaultBatchSize {
		t.Fatalf("defaults: port %d qos %d clean_session %v format %s batch_size %d", c.Port, *c.QoS, *c.CleanSession, c.Format, c.BatchSize)
	}
	names := ""
	for _, f := range in.Schema().Fields() {
		names += f.Name + " "
	}
	if names != "x __meta_source __meta_partition __meta_offset __meta_topic __meta_mark " {
		t.Fatalf("schema %s", names)
	}
}

func TestSinkConfigErrors(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	const ok = `"host":"h","client_id":"c"`
	cases := []struct{ cfg, want string }{
		{`{}`, "host: is required (the broker's host name or address)\nclient_id: is required: it names the client's session on the broker\ntopic: is required (a topic, {type: value, value: TOPIC} or {type: expr, expr: EXPR})"},
		{`{` + ok + `,"topic":"a/#","qos":3}`, "topic: must not contain wildcards: messages are published to it (got \"a/#\")\nqos: must be 0, 1 or 2 (got 3)"},
		{`{` + ok + `,"topic":{"type":"value"}}`, "topic: is required (a topic, {type: value, value: TOPIC} or {type: expr, expr: EXPR})"},
		{`{` + ok + `,"topic":{"type":"template","value":"x"}}`, "topic: type must be value or expr (got \"template\")"},
		{`{` + ok + `,"topic":{"type":"expr","expr":"n"}}`, "topic.expr: gives int64; a topic must be a string"},
		{`{` + ok + `,"topic":{"type":"expr","expr":"nope"}}`, "topic.expr: "},
		{`{` + ok + `,"topic":"t","value_field":"n"}`, "value_field: column \"n\" has type int64; the payload column must be string or binary"},
		{`{` + ok + `,"topic":"t","value_field":"x"}`, "value_field: unknown column \"x\""},
	}
	for _, c := range cases {
		_, err := outputOf(c.cfg, schema)
		if err == nil || len(err.Error()) < len(c.want) || err.Error()[:len(c.want)] != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
	for _, good := range []string{
		`{` + ok + `,"topic":"t"}`,
		`{` + ok + `,"topic":{"type":"value","value":"t"},"qos":0,"retain":true,"value_field":"s"}`,
		`{` + ok + `,"topic":{"type":"expr","expr":"concat('x/', s)"},"qos":2}`,
	} {
		if _, err := outputOf(good, schema); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
}
