package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const streamExample = "../../stream/testdata/valid/http_server_example.yaml"

// arkflow validate recognises a Stream config and validates it deeply.
func TestStreamValidateCommand(t *testing.T) {
	code, out, errOut := runCLI("validate", streamExample)
	if code != 0 || !strings.HasPrefix(out, "ok: stream config ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Every mistake of a Stream config is printed, one per line with its
// path, and the command exits 1.
func TestStreamValidateListsEveryMistake(t *testing.T) {
	code, out, errOut := runCLI("validate", "testdata/stream-mistakes.yaml")
	if code != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	want := []string{
		"streams[0].buffer.interval: invalid duration",
		"streams[0].output.brokers: ",
		`streams[0].pipeline.processors[1].type: processor "python" is not available here`,
	}
	if len(lines) != len(want) {
		t.Fatalf("want %d lines, got:\n%s", len(want), errOut)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want it to start with %q", i, lines[i], w)
		}
	}
}

// ArkFlow's command line: -c FILE --validate validates, -c FILE (and
// arkflow run) runs a Stream config.
func TestStreamArkFlowCommandLine(t *testing.T) {
	for _, args := range [][]string{
		{"-c", streamExample, "--validate"},
		{"-c", streamExample, "-v"},
		{"--config=" + streamExample, "--validate"},
		{"--validate", "--config", streamExample},
	} {
		if code, out, errOut := runCLI(args...); code != 0 || !strings.HasPrefix(out, "ok: stream config") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"-c", "testdata/stream-run.yaml"}, {"run", "testdata/stream-run.yaml"}} {
		code, out, errOut := runCLI(args...)
		if want := "HELLO\nHELLO\nHELLO\n"; code != 0 || out != want {
			t.Errorf("%q: exit %d, stdout %q, want %q; stderr %q", args, code, out, want, errOut)
		}
	}
	code, _, errOut := runCLI("-c", "testdata/stream-mistakes.yaml")
	if code != 1 || !strings.Contains(errOut, "streams[0].buffer.interval") {
		t.Errorf("an invalid config run: exit %d, stderr %q", code, errOut)
	}
	for _, args := range [][]string{{"-c"}, {"-c", streamExample, "extra"}, {"--config", streamExample, "--bogus"}} {
		if code, _, errOut := runCLI(args...); code != 2 || !strings.Contains(errOut, "usage: arkflow -c|--config FILE") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
	// A job spec given ArkFlow's way is validated as a job.
	if code, out, errOut := runCLI("-c", "../../job/testdata/v1-orders.json", "--validate"); code != 0 || !strings.HasPrefix(out, "ok: job ") {
		t.Errorf("job spec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// plan has nothing to show for a Stream config, and a TOML Stream config
// runs as its YAML form does.
func TestStreamPlanAndTOML(t *testing.T) {
	code, _, errOut := runCLI("plan", streamExample)
	if code != 1 || !strings.Contains(errOut, "no physical plan") {
		t.Errorf("plan: exit %d, stderr %q", code, errOut)
	}
	toml := filepath.Join(t.TempDir(), "x.toml")
	cfg := `[[streams]]
input = { type = "generate", context = "hello", interval = "1ms", count = 2 }
pipeline = { processors = [] }
output = { type = "stdout" }
`
	if err := os.WriteFile(toml, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI("run", toml); code != 0 || out != "hello\nhello\n" {
		t.Errorf("toml: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A Stream config's logging block is followed: JSON records at its level
// into file_path, its directory created.
func TestStreamLoggingBlock(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "logs", "arkflow.log")
	raw, err := os.ReadFile("testdata/stream-run.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := "logging: {level: warn, format: json, file_path: " + logPath + "}\n" + string(raw)
	cfgPath := filepath.Join(dir, "stream.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI("run", cfgPath); code != 0 || out != "HELLO\nHELLO\nHELLO\n" || errOut != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	cfg = strings.Replace(cfg, "level: warn", "level: info", 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI("run", cfgPath); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var rec map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rec) != nil || rec["msg"] != "stream config running" {
		t.Fatalf("log file (the warn run writes nothing, the info run one JSON record):\n%s", data)
	}
}

// A job spec takes ArkFlow's component keys in its sources' and sinks'
// configs, as ArkFlow v1 jobs share the Stream plugins.
func TestJobSpecTakesArkFlowKeys(t *testing.T) {
	if code, out, errOut := runCLI("validate", "testdata/arkflow-keys-job.yaml"); code != 0 || !strings.HasPrefix(out, "ok: job arkflow-keys") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
