package stream_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
	"github.com/arkflow-rs/arkflow-go/stream"
)

// needEngine skips a test whose configs have sql processors when no SQL
// engine is linked in (a build without cgo).
func needEngine(t *testing.T) {
	t.Helper()
	if sqlengine.Lookup() == nil {
		t.Skip("no SQL engine linked in (needs cgo)")
	}
}

func parse(t *testing.T, y string) *stream.Config {
	t.Helper()
	cfg, err := stream.Parse([]byte(y), ".yaml")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return cfg
}

func TestValidateArkFlowExamples(t *testing.T) {
	needEngine(t)
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	if len(files) < 5 {
		t.Fatalf("only %d example configs", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := stream.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Validate(cfg); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// listDir lists every file under dir.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		out = append(out, p)
		return err
	})
	sort.Strings(out)
	return out
}

func TestValidateReportsEveryMistakeWithoutSideEffects(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	health := freeAddr(t)
	y := fmt.Sprintf(`
health_check: {enabled: true, address: %q}
streams:
  - input: {type: http, address: %q, path: /ingest}
    durability: {path: %q, sync: per_entry}
    buffer: {type: sliding_window, window_size: 1, slide_size: 2, interval: 1s}
    pipeline:
      processors:
        - {type: batch, count: 0, timeout_ms: 100}
    output: {type: file, path: %q, format: csv}
  - input: {type: http, address: %q, path: /other}
    buffer: {type: memory, capacity: 10, timeout: 1s}
    pipeline: {processors: []}
    output: {type: file, path: %q}
`, health, addr, filepath.Join(dir, "wal"), filepath.Join(dir, "out.csv"), addr, filepath.Join(dir, "sub", "out.jsonl"))
	cfg := parse(t, y)
	before := listDir(t, dir)
	err = stream.Validate(cfg)
	wantPaths(t, err, "streams[0].buffer.window_size", "streams[0].output.format", "streams[0].pipeline.processors[0].count")
	if after := listDir(t, dir); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("Validate changed the directory: %q, then %q", before, after)
	}
	for _, a := range []string{addr, health} {
		l, err = net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("Validate left %s bound: %v", a, err)
		}
		l.Close()
	}
}

func TestValidateRefusedComponentsSayWhy(t *testing.T) {
	cases := []struct{ block, path, want string }{
		{"input: {type: pulsar, service_url: pulsar://x, topic: t, subscription_name: s}", "streams[0].input.type", "no Pulsar connector"},
		{"input: {type: modbus, addr: 'x:502', slave_id: 1, points: [], interval: 1s}", "streams[0].input.type", "no Modbus connector"},
		{"output: {type: pulsar, service_url: x, topic: {type: value, value: t}}", "streams[0].output.type", "no Pulsar connector"},
		{"output: {type: mongodb, uri: x, database: d, collection: c}", "streams[0].output.type", "no MongoDB connector"},
		{"output: {type: influxdb, url: x, org: o, bucket: b, token: t, measurement: m, fields: []}", "streams[0].output.type", "no InfluxDB connector"},
		{"input: {type: sql, select_sql: 'SELECT id FROM t WHERE id > :last ORDER BY id LIMIT :limit', tracking_column: id, schema: [{name: id, type: int64}], input_type: {type: sqlite, path: x.db}, ballista: {remote_url: 'df://x'}}", "streams[0].input.ballista", "Ballista"},
		{"pipeline: {processors: [{type: vrl, statement: '.'}]}", "streams[0].pipeline.processors[0].type", "use a sql processor, or a Go function in a Job"},
		{"pipeline: {processors: [{type: python, function: f}]}", "streams[0].pipeline.processors[0].type", "use a sql processor, or a Go function in a Job"},
		{"pipeline: {processors: [{type: protobuf_to_arrow, proto_inputs: [x], message_type: M}]}", "streams[0].pipeline.processors[0].type", "use a sql processor, or a Go function in a Job"},
		{"pipeline: {processors: [{type: arrow_to_protobuf, c: {}}]}", "streams[0].pipeline.processors[0].type", "use a sql processor, or a Go function in a Job"},
		{"temporary: [{type: mongodb, name: users, uri: 'mongodb://x'}]", "streams[0].temporary[0].type", "redis is"},
		{"temporary: [{type: redis, name: users, mode: {type: single, url: 'redis://x'}, redis_type: {type: string}}]", "streams[0].temporary[0].codec", "must be {type: json}"},
		{"durability: {backend: {type: object_store, stream_id: s, s3: {bucket: b}}}", "streams[0].durability.backend.node_id", "is required"},
		{"durability: {backend: {type: object_store, node_id: n, sync: per_entry, s3: {bucket: b}}}", "streams[0].durability.sync", "per_entry is not available with the object_store backend"},
		{"durability: {sync: sometimes}", "streams[0].durability.sync", "group_commit, per_entry or {periodic: 100ms}"},
		{"input: {type: http, address: 'a:1', path: /, codec: {type: protobuf, proto_inputs: [x], message_type: M}}", "streams[0].input.codec.type", "decode the payloads in a Go function of a Job"},
		{"input: {type: http, address: 'a:1', path: /, format: ndjson, schema: [{name: a, type: int64}], codec: {type: json}}", "streams[0].input.codec", "leave out its schema and format"},
		{"output: {type: drop, codec: {type: debezium_json}}", "streams[0].output.codec.type", "available here: json"},
		{"buffer: {type: tumbling_window, interval: 1s, join: {query: 'SELECT 1', codec: {type: protobuf}}}", "streams[0].buffer.join.codec.type", "only json is"},
	}
	for _, c := range cases {
		t.Run(c.path+"/"+c.want, func(t *testing.T) {
			if strings.Contains(c.block, "query") {
				needEngine(t)
			}
			blocks := map[string]string{
				"input":    "input: {type: http, address: 'a:1', path: /}",
				"pipeline": "pipeline: {processors: []}",
				"output":   "output: {type: drop}",
			}
			key := c.block[:strings.IndexByte(c.block, ':')]
			blocks[key] = c.block
			y := "streams:\n"
			pre := "  - "
			for _, k := range []string{"input", "pipeline", "output", "temporary", "durability", "buffer"} {
				if b, ok := blocks[k]; ok {
					y += pre + b + "\n"
					pre = "    "
				}
			}
			err := stream.Validate(parse(t, y))
			if err == nil {
				t.Fatal("validated")
			}
			if ps := paths(t, err); len(ps) != 1 || ps[0] != c.path || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want one error at %s saying %q", err, c.path, c.want)
			}
		})
	}
}

func TestValidateNamesArkFlowKeysOurConnectorsLack(t *testing.T) {
	needEngine(t)
	cases := map[string][]string{
		"join_buffer_example.yaml": {"streams[0].input.buffer"},
	}
	for file, want := range cases {
		cfg, err := stream.Load(filepath.Join("testdata", "arkflow", file))
		if err != nil {
			t.Fatal(err)
		}
		err = stream.Validate(cfg)
		wantPaths(t, err, want...)
		for _, s := range []string{"ArkFlow's generate key context", "in the binary column value", "unknown field"} {
			if strings.Contains(err.Error(), s) {
				goto found
			}
		}
		t.Errorf("%s: no explanation in %v", file, err)
	found:
	}
	y := `
streams:
  - input: {type: kafka, brokers: [a], topics: [t], consumer_group: g, start_from_latest: false, fetch_wait_max_ms: 10, properties: {fetch.wait.max.ms: "5"}}
    pipeline: {processors: []}
    output: {type: stdout, append_newline: false, value_fields: x}
  - input: {type: memory, messages: [a, b]}
    pipeline: {processors: []}
    output: {type: drop}
`
	err := stream.Validate(parse(t, y))
	wantPaths(t, err, "streams[0].input.fetch_wait_max_ms", "streams[0].output.value_fields")
	for _, s := range []string{"also given as properties.fetch.wait.max.ms", "value_field"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("no %q in:\n%v", s, err)
		}
	}
}

func TestValidateSQLQueryErrorsHaveTheirPath(t *testing.T) {
	needEngine(t)
	y := `
streams:
  - input: {type: http, address: 'a:1', path: /}
    pipeline:
      processors:
        - {type: sql, query: "SELECT __value__ FROM flow"}
        - {type: sql, query: "SELECT nope FROM flow"}
        - {type: json_to_arrow}
        - {type: sql, query: "SELECT sensor FROM flow"}
        - {type: sql, query: "SELEC sensor FROM flow"}
        - {type: sql}
        - {type: sql, table_name: t, query: "SELECT * FROM t", temporary_list: [{name: x, table_name: y, key: {type: value, value: k}}]}
    output: {type: drop}
`
	err := stream.Validate(parse(t, y))
	wantPaths(t, err,
		"streams[0].pipeline.processors[1].query",
		"streams[0].pipeline.processors[4].query",
		"streams[0].pipeline.processors[5].query",
		"streams[0].pipeline.processors[6].temporary_list[0].name")
	if !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "SELEC") {
		t.Fatalf("engine messages missing:\n%v", err)
	}
}

func TestValidateProcessorsAndBuffers(t *testing.T) {
	needEngine(t)
	y := `
streams:
  - id: a
    input: {type: http, address: 'a:1', path: /}
    buffer: {type: session_window, gap: 0s, join: {query: 'SELECT 1', codec: {type: json}, thread_num: 0}}
    pipeline:
      processors:
        - {type: json_to_arrow, fields: [a]}
        - {type: arrow_to_json, fields_to_include: a}
        - {type: batch, timeout_ms: -1}
        - {type: filter}
    output: {type: drop}
  - id: a
    input: {type: http, address: 'a:1', path: /}
    buffer: {type: tumbling_window, every: 1s}
    pipeline: {processors: []}
    output: {type: drop}
  - id: "b c"
    input: {type: http, address: 'a:1', path: /}
    buffer: {type: memory, capacity: 0, timeout: soon}
    pipeline: {processors: []}
    output: {type: drop}
  - input: {type: http, address: 'a:1', path: /}
    buffer: {type: sliding_window, window_size: 0}
    pipeline: {processors: []}
    output: {type: drop}
  - input: {type: http, address: 'a:1', path: /}
    buffer: {type: ring}
    pipeline: {processors: []}
    output: {type: nowhere}
`
	err := stream.Validate(parse(t, y))
	wantPaths(t, err,
		"streams[0].buffer.gap",
		"streams[0].buffer.join.thread_num",
		"streams[0].pipeline.processors[0].fields",
		"streams[0].pipeline.processors[1].fields_to_include",
		"streams[0].pipeline.processors[2].count",
		"streams[0].pipeline.processors[2].timeout_ms",
		"streams[0].pipeline.processors[3].type",
		"streams[1].buffer.every",
		"streams[1].buffer.interval",
		"streams[1].id",
		"streams[2].buffer.capacity",
		"streams[2].buffer.timeout",
		"streams[2].id",
		"streams[3].buffer.interval",
		"streams[3].buffer.slide_size",
		"streams[3].buffer.window_size",
		"streams[4].buffer.type",
		"streams[4].output.type",
	)
}

func TestValidateRefusesNoStreams(t *testing.T) {
	wantPaths(t, stream.Validate(parse(t, "streams: []")), "streams")
}

func TestValidateMultipleInputs(t *testing.T) {
	y := `
streams:
  - input:
      type: multiple_inputs
      inputs:
        - {type: http, name: a, address: 'a:1', path: /a}
        - {type: http, name: a, address: 'a:1', path: /b}
        - {type: http, address: 'a:1'}
    pipeline: {processors: []}
    output: {type: drop}
  - input: {type: multiple_inputs}
    pipeline: {processors: []}
    output: {type: drop}
`
	err := stream.Validate(parse(t, y))
	wantPaths(t, err, "streams[0].input.inputs[1].name", "streams[0].input.inputs[2].name", "streams[1].input.inputs")
}
