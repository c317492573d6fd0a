package stream_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/stream"
)

// paths returns the paths of err's problems, in order.
func paths(t *testing.T, err error) []string {
	t.Helper()
	var es stream.Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %v (%T) is not stream.Errors", err, err)
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Path
	}
	return out
}

func wantPaths(t *testing.T, err error, want ...string) {
	t.Helper()
	got := paths(t, err)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("error paths:\n got %q\nwant %q\nerror:\n%v", got, want, err)
	}
}

const minimalYAML = `
logging:
  level: debug
streams:
  - id: s1
    input:
      type: http
      name: in
      address: 127.0.0.1:0
      path: /ingest
    pipeline:
      thread_num: 2
      processors:
        - type: json_to_arrow
          value_field: value
    output:
      type: stdout
`

const minimalJSON = `{
  "logging": {"level": "debug"},
  "streams": [{
    "id": "s1",
    "input": {"type": "http", "name": "in", "address": "127.0.0.1:0", "path": "/ingest"},
    "pipeline": {"thread_num": 2, "processors": [{"type": "json_to_arrow", "value_field": "value"}]},
    "output": {"type": "stdout"}
  }]
}`

func TestParseYAMLAndJSONAgree(t *testing.T) {
	y, err := stream.Parse([]byte(minimalYAML), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := stream.Parse([]byte(minimalJSON), ".json")
	if err != nil {
		t.Fatal(err)
	}
	yb, _ := json.Marshal(y)
	jb, _ := json.Marshal(j)
	if string(yb) != string(jb) {
		t.Fatalf("YAML and JSON differ:\n%s\n%s", yb, jb)
	}
	in := y.Streams[0].Input
	if in.Type != "http" || in.Name != "in" || string(in.Config) != `{"address":"127.0.0.1:0","path":"/ingest"}` {
		t.Fatalf("input = %+v (config %s)", in, in.Config)
	}
	if y.Logging.Level != "debug" || y.Logging.Format != "plain" || y.Streams[0].Pipeline.ThreadNum != 2 {
		t.Fatalf("config = %+v", y)
	}
	if _, err := stream.Parse([]byte(minimalYAML), ".yml"); err != nil {
		t.Fatal(err)
	}
}

func TestParseDefaultsAndEmptyProcessors(t *testing.T) {
	cfg, err := stream.Parse([]byte("streams:\n  - input: {type: http, address: 'a:1', path: /}\n    pipeline:\n      processors:\n    output: {type: drop}\n"), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logging.Level != "info" || cfg.Logging.Format != "plain" {
		t.Fatalf("logging = %+v, want ArkFlow's defaults", cfg.Logging)
	}
	if p := cfg.Streams[0].Pipeline.Processors; p == nil || len(p) != 0 {
		t.Fatalf("processors = %#v, want empty", p)
	}
}

// A TOML file is the same config as its YAML form; an unknown extension
// is refused, naming the ones taken.
func TestParseTOMLAndUnknownExtensions(t *testing.T) {
	const y = `
logging: {level: debug}
streams:
  - id: s1
    input: {type: generate, context: "{\"v\": 1}", interval: 1s, count: 3}
    pipeline:
      thread_num: 2
      processors:
        - {type: sql, query: "SELECT * FROM flow"}
    output: {type: stdout, append_newline: false}
`
	const tm = `
[logging]
level = "debug"

[[streams]]
id = "s1"
input = { type = "generate", context = '{"v": 1}', interval = "1s", count = 3 }
output = { type = "stdout", append_newline = false }

[streams.pipeline]
thread_num = 2
processors = [ { type = "sql", query = "SELECT * FROM flow" } ]
`
	fromYAML, err := stream.Parse([]byte(y), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	fromTOML, err := stream.Parse([]byte(tm), ".toml")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(fromYAML)
	b, _ := json.Marshal(fromTOML)
	if string(a) != string(b) {
		t.Fatalf("TOML gives\n%s\nYAML\n%s", b, a)
	}
	if _, err := stream.Parse([]byte("[[streams]"), ".toml"); err == nil || !strings.Contains(err.Error(), "invalid TOML") {
		t.Fatalf("bad toml: %v", err)
	}
	_, err = stream.Parse([]byte("{}"), ".ini")
	if err == nil || !strings.Contains(err.Error(), ".yaml, .yml, .json or .toml") {
		t.Fatalf("ini: %v", err)
	}
}

func TestParseUnknownKeysWithPaths(t *testing.T) {
	const y = `
streams:
  - input:
      type: http
      address: a:1
      path: /
    pipline:
      processors: []
    pipeline:
      processors: []
      threads: 4
    output:
      type: stdout
loging:
  level: info
health_check:
  adress: 127.0.0.1:9000
`
	_, err := stream.Parse([]byte(y), ".yaml")
	wantPaths(t, err, "health_check.adress", "loging", "streams[0].pipeline.threads", "streams[0].pipline")
	if !strings.Contains(err.Error(), `did you mean "pipeline"`) {
		t.Fatalf("no suggestion in:\n%v", err)
	}
	var fe *job.FieldError
	if !errors.As(err, &fe) {
		t.Fatal("errors.As finds no *job.FieldError")
	}
}

func TestParseChecksLoggingAndThreadNum(t *testing.T) {
	const y = `
logging: {level: verbose, format: text}
streams:
  - input: {type: http, address: 'a:1', path: /}
    pipeline: {thread_num: 0, processors: []}
    output: {type: drop}
`
	_, err := stream.Parse([]byte(y), ".yaml")
	wantPaths(t, err, "logging.format", "logging.level", "streams[0].pipeline.thread_num")
}

func TestParseMissingKeys(t *testing.T) {
	_, err := stream.Parse([]byte(`{"logging": {}, "streams": [{"input": {"name": "x"}, "output": 3}]}`), ".json")
	wantPaths(t, err, "logging.level", "streams[0].input.type", "streams[0].output", "streams[0].pipeline")
	_, err = stream.Parse([]byte(`logging: {level: info}`), ".yaml")
	wantPaths(t, err, "streams")
	_, err = stream.Parse([]byte(`{"streams": [{"input": {"type": null}, "pipeline": {"processors": [{"type": ""}]}, "output": {"type": 7}}]}`), ".json")
	wantPaths(t, err, "streams[0].input.type", "streams[0].output.type", "streams[0].pipeline.processors[0].type")
	_, err = stream.Parse([]byte(`[1]`), ".json")
	if err == nil || !strings.Contains(err.Error(), "must be an object") {
		t.Fatalf("list: %v", err)
	}
}

func TestParseExpandsEnvironment(t *testing.T) {
	t.Setenv("ARKFLOW_TEST_HOST", "broker.example")
	t.Setenv("ARKFLOW_TEST_EMPTY", "")
	const y = `
streams:
  - id: ${ARKFLOW_TEST_ID:-s1}
    input:
      type: http
      address: ${ARKFLOW_TEST_HOST}:8080
      path: /${ARKFLOW_TEST_EMPTY:-in}
    pipeline: {processors: []}
    output:
      type: stdout
      note: $${NOT_EXPANDED}
`
	cfg, err := stream.Parse([]byte(y), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Streams[0]
	if s.ID != "s1" || string(s.Input.Config) != `{"address":"broker.example:8080","path":"/in"}` {
		t.Fatalf("stream = %+v, input %s", s, s.Input.Config)
	}
	if string(s.Output.Config) != `{"note":"${NOT_EXPANDED}"}` {
		t.Fatalf("output config %s", s.Output.Config)
	}
}

func TestParseUnsetEnvironmentIsAnErrorWithItsPath(t *testing.T) {
	const y = `
streams:
  - input: {type: http, address: "${ARKFLOW_TEST_UNSET_1}", path: "${1BAD}"}
    pipeline: {processors: []}
    output: {type: stdout, x: "${ARKFLOW_TEST_UNSET_2"}
`
	_, err := stream.Parse([]byte(y), ".yaml")
	wantPaths(t, err, "streams[0].input.address", "streams[0].input.path", "streams[0].output.x")
	for _, s := range []string{"ARKFLOW_TEST_UNSET_1 is not set", "not an environment variable name", "unterminated"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("no %q in:\n%v", s, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{
		"1s": time.Second, "500ms": 500 * time.Millisecond, "1h 30m": 90 * time.Minute,
		"1day": 24 * time.Hour, "2 days": 48 * time.Hour, "100us": 100 * time.Microsecond,
		"1ns": 1, "10m": 10 * time.Minute, "1min 5sec": 65 * time.Second, "1w": 7 * 24 * time.Hour,
		" 3 hours ": 3 * time.Hour, "1h30m0s": 90 * time.Minute, "2µs": 2 * time.Microsecond,
	}
	for in, want := range good {
		got, err := stream.ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1", "s", "1.5s", "-1s", "1 parsec", "10 s x", "99999999999999999999s", "9999999y"} {
		if d, err := stream.ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		}
	}
}

func TestComponentJSONRoundTrip(t *testing.T) {
	var c stream.Component
	if err := json.Unmarshal([]byte(`{"type":"kafka","name":"k","codec":{"type":"json"},"brokers":["a:1"]}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Type != "kafka" || c.Name != "k" || c.Codec == nil || c.Codec.Type != "json" || string(c.Config) != `{"brokers":["a:1"]}` {
		t.Fatalf("component = %+v", c)
	}
	b, err := json.Marshal(c)
	if err != nil || string(b) != `{"brokers":["a:1"],"codec":{"type":"json"},"name":"k","type":"kafka"}` {
		t.Fatalf("marshal = %s, %v", b, err)
	}
	if err := json.Unmarshal([]byte(`{"name": 3}`), &c); err == nil {
		t.Fatal("a component without a type and with a numeric name decoded")
	}
}
