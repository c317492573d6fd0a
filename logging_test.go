package arkflow_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/logtest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// loggingSpec is a job through every part that logs: a source with a
// write-ahead log, Badger state, a keyed window and checkpoints every
// 50 ms into a local directory.
func loggingSpec(t *testing.T, dir string) *job.Spec {
	t.Helper()
	spec, err := job.Parse([]byte(`id: logs
durability: {sync: periodic, sync_interval_ms: 10}
state: {backend: badger}
checkpoint: {interval_ms: 50, retention: 1, object_store_uri: "file://` + filepath.Join(dir, "checkpoints") + `"}
operators:
  - {id: in, kind: source}
  - {id: w, kind: window, stateful: true, key_field: user,
     config: {window: {type: tumbling, size_ms: 100}, aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: w, partitioned: true}
  - {id: b, from: w, to: out}
sources:
  - operator_id: in
    input_type: generate
    config:
      count: 1400
      batch_size: 50
      rate_per_sec: 1000
      fields:
        - {name: user, type: string, prefix: "u", cardinality: 3}
        - {name: ts, type: timestamp, unit: ms, step_ms: 1, jitter_ms: 300}
    time: {mode: event_time, timestamp_field: ts, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 0}}
sinks:
  - {operator_id: out, output_type: drop}
`))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// No library code logs through the default logger: with
// slog.SetDefault pointing at a recorder (which also takes package log's
// output), jobs run through the public API, with a logger and without
// one, through the write-ahead log, the state store, checkpoints, late
// rows and a restore, and nothing reaches the recorder, while the job's
// own logger gets the job's records. Not parallel: it sets the process's
// default logger.
func TestNoDefaultLoggerAtRuntime(t *testing.T) {
	def := logtest.New()
	prev := slog.Default()
	slog.SetDefault(slog.New(def))
	t.Cleanup(func() { slog.SetDefault(prev) })

	dir := t.TempDir()
	own := logtest.New()
	for i, lg := range []*slog.Logger{slog.New(own), nil, slog.New(own)} {
		j, err := arkflow.FromSpec(loggingSpec(t, dir), arkflow.WithLogger(lg), arkflow.WithDataDir(filepath.Join(dir, "data")))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = j.Run(ctx)
		cancel()
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if got := def.Messages(); len(got) > 0 {
		t.Errorf("library code logged through the default logger:\n%s", strings.Join(got, "\n"))
	}
	var running, checkpoint, restoring bool
	for _, r := range own.Records() {
		info := r.Level == slog.LevelInfo
		running = running || info && r.Msg == "job running"
		checkpoint = checkpoint || info && r.Msg == "checkpoint completed"
		restoring = restoring || info && r.Msg == "restoring"
	}
	if !running || !checkpoint || !restoring {
		t.Errorf("the job's logger missed records (running %v, checkpoint %v, restoring %v):\n%s",
			running, checkpoint, restoring, strings.Join(own.Messages(), "\n"))
	}
}

// defaultLogging lists, per import path, the calls that log through the
// process-wide default logger.
var defaultLogging = map[string]map[string]bool{
	"log/slog": {
		"Default": true, "Debug": true, "Info": true, "Warn": true, "Error": true, "Log": true, "LogAttrs": true,
		"DebugContext": true, "InfoContext": true, "WarnContext": true, "ErrorContext": true,
	},
	"log": {
		"Default": true, "Output": true,
		"Print": true, "Printf": true, "Println": true,
		"Fatal": true, "Fatalf": true, "Fatalln": true,
		"Panic": true, "Panicf": true, "Panicln": true,
	},
}

// No library code logs through the default logger, statically: every
// non-test Go file outside the programs (cmd/, examples/, internal/tools,
// and any other package main, such as the bench module's command) is
// parsed, and a call of slog.Default, slog.Info and the like, or of
// log.Print, log.Fatal and the like, fails the test with its file:line.
// The library logs only through the logger it is given.
func TestNoDefaultLoggerInSource(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch {
			case path == ".":
				return nil
			case strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata",
				path == "cmd", path == "examples", path == filepath.Join("internal", "tools"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil // a program's own output
		}
		files++
		// The names this file imports log and log/slog under.
		names := map[string]string{}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if defaultLogging[p] == nil {
				continue
			}
			name := filepath.Base(p)
			if im.Name != nil {
				name = im.Name.Name
			}
			names[name] = p
		}
		if len(names) == 0 {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if p, ok := names[id.Name]; ok && defaultLogging[p][sel.Sel.Name] {
				t.Errorf("%s: %s.%s logs through the default logger; log through the logger passed down (nil: discard)",
					fset.Position(sel.Pos()), id.Name, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("parsed only %d files; is the walk starting at the module root?", files)
	}
}
