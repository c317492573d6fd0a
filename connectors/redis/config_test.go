package redis

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
	const mode = `"mode":{"type":"single","url":"redis://h:6379"}`
	const stream = `"redis_type":{"type":"stream","streams":["s"],"group":"g"}`
	cases := []struct{ cfg, want string }{
		{`{}`, "mode.type: is required (single or cluster)\nredis_type.type: is required (subscribe, list or stream)"},
		{`{"mode":{"type":"single","url":"http://h"},"redis_type":{"type":"queue"}}`, "mode.url: scheme \"http\" of \"http://h\": must be redis or rediss\nredis_type.type: must be subscribe, list or stream (got \"queue\")"},
		{`{"mode":{"type":"cluster","url":"redis://h"},` + stream + `}`, "mode.url: is a key of mode type single only (this is cluster)\nmode.urls: is required: at least one seed node of the cluster"},
		{`{"mode":{"type":"single","urls":["redis://h"]},` + stream + `}`, "mode.url: is required (redis://host:port, or rediss://host:port for TLS)\nmode.urls: is a key of mode type cluster only (this is single)"},
		{`{` + mode + `,"redis_type":{"type":"stream","streams":["a","","a"]}}`, "redis_type.streams[1]: must not be empty\nredis_type.streams[2]: duplicate \"a\" (also redis_type.streams[0])\nredis_type.group: is required: the consumer group the source reads through"},
		{`{` + mode + `,"redis_type":{"type":"list","list":["l"],"group":"g","block_ms":0}}`, "redis_type.group: is a key of redis_type stream only (this is list)\nredis_type.block_ms: must be > 0 (got 0)"},
		{`{` + mode + `,"redis_type":{"type":"subscribe","list":["l"]}}`, "redis_type.list: is a key of redis_type list only (this is subscribe)\nredis_type.subscribe: is required with redis_type subscribe: {type: channels, channels: [...]} or {type: patterns, patterns: [...]}"},
		{`{` + mode + `,"redis_type":{"type":"subscribe","subscribe":{"type":"channels","patterns":["p*"]}}}`, "redis_type.subscribe.channels: must list at least one\nredis_type.subscribe.patterns: is a key of subscribe type patterns only (this is channels)"},
		{`{` + mode + `,"redis_type":{"type":"subscribe","subscribe":{"type":"channels","channels":["c"]},"consumer":"x"}}`, "redis_type.consumer: is a key of redis_type stream or list only (this is subscribe)"},
		{`{` + mode + `,` + stream + `,"format":"json"}`, `schema: is required with format "json"`},
		{`{` + mode + `,` + stream + `,"format":"avro","batch_size":0}`, "format: must be \"json\" or \"raw\" (got \"avro\")\nbatch_size: must be > 0 (got 0)"},
		{`{` + mode + `,` + stream + `,"tls":{"client_key":"k.pem"}}`, "tls: client_cert and client_key go together (got only one)"},
		{`{"mode":{"type":"single","url":"http://u:secret@h"},` + stream + `}`, "mode.url: scheme \"http\" of \"http://u:xxxxx@h\": must be redis or rediss"},
		{`{` + mode + `,` + stream + `,"url":"x"}`, "url: unknown field (known fields: mode, redis_type, tls, format, schema, batch_size)"},
	}
	for _, c := range cases {
		_, err := inputOf(c.cfg)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
	in, err := inputOf(`{` + mode + `,` + stream + `}`)
	if err != nil {
		t.Fatal(err)
	}
	cfg := in.(*input).cfg
	if cfg.Format != FormatRaw || cfg.BatchSize != DefaultBatchSize || cfg.RedisType.Field != DefaultField || cfg.RedisType.Consumer != "arkflow" || cfg.RedisType.BlockMS != DefaultBlockMS {
		t.Errorf("defaults not applied: %+v", cfg)
	}
}

func TestSinkConfigErrors(t *testing.T) {
	const mode = `"mode":{"type":"single","url":"redis://h:6379"}`
	cases := []struct{ cfg, want string }{
		{`{}`, "mode.type: is required (single or cluster)\nredis_type.type: is required (publish, list, hashes, strings or stream)"},
		{`{` + mode + `,"redis_type":{"type":"publish","key":"k"}}`, "redis_type.channel: is required with redis_type publish: the channel to publish to\nredis_type.key: is not a key of redis_type publish"},
		{`{` + mode + `,"redis_type":{"type":"hashes","key":{"type":"value","value":"h"}}}`, "redis_type.field: is required with redis_type hashes: the hash field every row sets"},
		{`{` + mode + `,"redis_type":{"type":"strings","key":{"type":"sql","expr":"x"}}}`, `redis_type.key: must be {type: value, value: STRING} or {type: expr, expr: EXPRESSION} (got type "sql")`},
		{`{` + mode + `,"redis_type":{"type":"stream","key":"s","field":{"type":"expr","expr":"name"}}}`, "redis_type.field: must be a plain name with redis_type stream (the entry field that holds the payload)"},
		{`{` + mode + `,"redis_type":{"type":"set","key":"s"}}`, `redis_type.type: must be publish, list, hashes, strings or stream (got "set")`},
	}
	for _, c := range cases {
		_, err := outputOf(c.cfg, nil)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "f", Type: arrow.PrimitiveTypes.Float64}}, nil)
	for _, c := range []struct{ cfg, want string }{
		{`{` + mode + `,"redis_type":{"type":"strings","key":{"type":"expr","expr":"nope"}}}`, "redis_type.key.expr: "},
		{`{` + mode + `,"redis_type":{"type":"strings","key":{"type":"expr","expr":"f"}}}`, `redis_type.key.expr: "f" has type float64; it must give a string, an integer or a timestamp`},
		{`{` + mode + `,"redis_type":{"type":"strings","key":"k"},"value_field":"id"}`, `value_field: column "id" has type int64; the value column must be string or binary`},
	} {
		_, err := outputOf(c.cfg, schema)
		if err == nil || len(err.Error()) < len(c.want) || err.Error()[:len(c.want)] != c.want {
			t.Errorf("%s:\n got %v\nwant %s…", c.cfg, err, c.want)
		}
	}
}
