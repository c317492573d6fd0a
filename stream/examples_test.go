//go:build cgo

package stream_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/stream"
)

// examplesDir holds ArkFlow's examples, copied verbatim (see its README).
const examplesDir = "testdata/arkflow-examples"

// outcome is what this library does with one of ArkFlow's examples.
type outcome int

const (
	// validates: Load and Validate accept the file.
	validates outcome = iota
	// refused: Validate refuses it, at the paths given, with a hint.
	refused
	// runs: it validates, and runs in the process (pointed at the test
	// servers) with its output checked.
	runs
	// knownGap: Load or Validate answers an error it should not, or (for
	// a row with run) the run fails where ArkFlow's does not; the row's
	// gap holds the message.
	knownGap
)

// arkflowExample is one row of TestArkFlowExamples.
type arkflowExample struct {
	file    string
	outcome outcome
	env     map[string]string // variables the file's ${VAR}s need
	paths   []string          // refused: the error paths, in order
	hint    string            // refused: a substring of one of the messages
	gap     string            // knownGap: a substring of the error
	run     func(t *testing.T, yaml string)
}

// s3Env is what the object_store durability examples interpolate.
var s3Env = map[string]string{"ARKFLOW_NODE_ID": "node-a", "AWS_ACCESS_KEY_ID": "key", "AWS_SECRET_ACCESS_KEY": "secret"}

// arkflowExamples lists every file of examplesDir.
var arkflowExamples = []arkflowExample{
	{file: "cdc_debezium.yaml", outcome: runs, run: runCDCDebeziumExample},
	{file: "control_plane_example.yaml", outcome: runs, run: runControlPlaneExample},
	{file: "control_plane_hub.yaml", outcome: refused, paths: []string{"streams"}, hint: "arkflow-hub"},
	{file: "control_plane_node.yaml", outcome: refused, paths: []string{"health_check.hub_url"}, hint: "arkflow agent --hub"},
	{file: "control_plane_smoke.yaml", outcome: runs, run: runControlPlaneSmoke},
	{file: "drop_output_example.yaml", outcome: runs, run: runDropOutputExample},
	{file: "durability_example.yaml", outcome: runs, run: runDurabilityExample},
	{file: "durability_example_aggressive.yaml", outcome: runs, env: s3Env, run: runObjectStoreExample(objectStoreExample{bucket: "my-bucket", count: "count: 100000", shortCount: "count: 2000", row: `{"value":10,"sensor":"temp_1"}`, rows: 2000, prefix: "arkflow/wal", node: "node-a"})},
	{file: "durability_example_compressed.yaml", outcome: runs, env: s3Env, run: runObjectStoreExample(objectStoreExample{bucket: "my-bucket", count: "count: 100000", shortCount: "count: 2000", row: `{"value":10,"sensor":"cost_optimized"}`, rows: 2000, prefix: "arkflow/wal", node: "node-a"})},
	{file: "durability_example_parallel.yaml", outcome: runs, env: s3Env, run: runObjectStoreExample(objectStoreExample{bucket: "my-bucket", count: "count: 1000000", shortCount: "count: 5000", row: `{"value":10,"sensor":"high_throughput"}`, rows: 5000, prefix: "arkflow/wal", node: "node-a"})},
	{file: "durability_example_s3.yaml", outcome: runs, env: s3Env, run: runObjectStoreExample(objectStoreExample{bucket: "my-bucket", count: "count: 1000", shortCount: "count: 1000", row: `{"value":10,"sensor":"temp_1"}`, rows: 1000, prefix: "arkflow/wal", node: "node-a"})},
	{file: "durability_smoke_test.yaml", outcome: runs, run: runObjectStoreExample(objectStoreExample{bucket: "smoke-test-bucket", count: "count: 100", shortCount: "count: 100", prefix: "arkflow/smoke-test", node: "smoke-test-pod"})},
	{file: "eos-kafka.yaml", outcome: runs, run: runEOSKafkaExample},
	{file: "generate_example.yaml", outcome: runs, run: runGenerateExample},
	{file: "http_client_example.yaml", outcome: runs, run: runHTTPClientExample},
	{file: "http_server_example.yaml", outcome: runs, run: runHTTPServerExample},
	{file: "join_buffer_example.yaml", outcome: runs, run: runJoinBufferExample},
	{file: "kafka_example.yaml", outcome: runs, run: runKafkaExample},
	{file: "mongodb_output_example.yaml", outcome: refused, paths: []string{"streams[0].output.type"}, hint: "no MongoDB connector"},
	{file: "mqtt_example.yaml", outcome: runs, run: runMQTTExample},
	{file: "nats_input_example.yaml", outcome: runs, run: runNATSInputExample},
	{file: "nats_output_example.yaml", outcome: runs, run: runNATSOutputExample},
	{file: "protobuf_example.yaml", outcome: refused, paths: []string{"streams[0].pipeline.processors[2].type", "streams[0].pipeline.processors[3].type"}, hint: "protobuf decoding is not available"},
	{file: "python_processor_example.yaml", outcome: refused, paths: []string{"streams[0].pipeline.processors[1].type"}, hint: "no embedded Python"},
	{file: "redis_input_example.yaml", outcome: runs, run: runRedisInputExample},
	{file: "redis_output_example.yaml", outcome: runs, run: runRedisOutputExample},
	{file: "redis_temporary_example.yaml", outcome: runs, run: runRedisTemporaryExample},
	{file: "schema_registry.yaml", outcome: refused, paths: []string{"streams[0].input.codec.type"}, hint: `codec "schema_registry" is not available`},
	{file: "sql_input_example.yaml", outcome: refused, paths: []string{"streams[0].input.input_type.type"}, hint: "sql input over json files is not available"},
	{file: "sql_output_example.yaml", outcome: refused, paths: []string{"streams[0].output.output_type.type"}, hint: "use postgres or sqlite"},
	{file: "vrl_example.yaml", outcome: refused, paths: []string{"streams[0].pipeline.processors[1].type"}, hint: "VRL has no Go implementation"},
	{file: "websocket_input_example.yaml", outcome: runs, run: runWebSocketInputExample},
}

// Every ArkFlow example is read and checked here: it validates, is refused
// with a hint at the right paths, or runs with its output checked. No key
// of ArkFlow's is ever answered "unknown field". The table names every
// file of the directory, and only those.
func TestArkFlowExamples(t *testing.T) {
	checkExampleTable(t)
	for _, ex := range arkflowExamples {
		t.Run(strings.TrimSuffix(ex.file, ".yaml"), func(t *testing.T) {
			for k, v := range ex.env {
				t.Setenv(k, v)
			}
			path := filepath.Join(examplesDir, ex.file)
			errs := loadAndValidate(path)
			for _, e := range errs {
				if strings.Contains(e.Error(), "unknown field") {
					t.Errorf("an ArkFlow key is answered unknown field: %v", e)
				}
			}
			switch ex.outcome {
			case knownGap:
				if ex.run == nil {
					if !slices.ContainsFunc(errs, func(e error) bool { return strings.Contains(e.Error(), ex.gap) }) {
						t.Fatalf("the known gap %q is gone (errors: %v): update the row", ex.gap, errors.Join(errs...))
					}
					return
				}
				fallthrough
			case validates, runs:
				if len(errs) > 0 {
					t.Fatalf("%s does not validate: %v", ex.file, errors.Join(errs...))
				}
				if ex.run != nil {
					data, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					ex.run(t, string(data))
				}
			case refused:
				checkRefused(t, errs, ex.paths, ex.hint)
			}
		})
	}
}

// checkExampleTable fails the test when a file of examplesDir has no row,
// or a row names no file.
func checkExampleTable(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, ex := range arkflowExamples {
		if listed[ex.file] {
			t.Errorf("%s is listed twice", ex.file)
		}
		listed[ex.file] = true
	}
	for _, f := range files {
		name := filepath.Base(f)
		if !listed[name] {
			t.Errorf("%s has no row in arkflowExamples", name)
		}
		delete(listed, name)
	}
	for name := range listed {
		t.Errorf("arkflowExamples lists %s, which is not in %s", name, examplesDir)
	}
}

// loadAndValidate returns Load's and Validate's problems, one error each.
func loadAndValidate(path string) []error {
	cfg, err := stream.Load(path)
	if err == nil {
		err = stream.Validate(cfg)
	}
	if err == nil {
		return nil
	}
	var es stream.Errors
	if errors.As(err, &es) {
		out := make([]error, len(es))
		for i, e := range es {
			out[i] = e
		}
		return out
	}
	return []error{err}
}

// checkRefused checks that errs are at paths, in order, and that one of
// them carries hint.
func checkRefused(t *testing.T, errs []error, paths []string, hint string) {
	t.Helper()
	var got []string
	hinted := false
	for _, e := range errs {
		hinted = hinted || strings.Contains(e.Error(), hint)
		path := "(no path)"
		var fe *job.FieldError
		if errors.As(e, &fe) {
			path = fe.Path
		}
		got = append(got, path)
	}
	if !slices.Equal(got, paths) {
		t.Errorf("error paths %q, want %q (errors: %v)", got, paths, errors.Join(errs...))
	}
	if !hinted {
		t.Errorf("no error says %q: %v", hint, errors.Join(errs...))
	}
}
