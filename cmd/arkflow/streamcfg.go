package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	yaml "go.yaml.in/yaml/v3"

	"github.com/arkflow-rs/arkflow-go/internal/logformat"
	"github.com/arkflow-rs/arkflow-go/stream"
)

// isStreamConfig reports whether the file at path is an ArkFlow Stream
// config: a YAML or JSON object with a top-level streams key, or a TOML
// file (job specs are never TOML).
func isStreamConfig(path string) bool {
	if strings.EqualFold(filepath.Ext(path), ".toml") {
		return true
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var top map[string]any
	if yaml.Unmarshal(data, &top) != nil {
		return false
	}
	_, ok := top["streams"]
	return ok
}

// streamArg returns the one file argument when it is a Stream config.
func streamArg(args []string) (string, bool) {
	if len(args) == 1 && isStreamConfig(args[0]) {
		return args[0], true
	}
	return "", false
}

// validateStream loads and validates a Stream config; on success it says
// so on stdout.
func validateStream(path string, stdout io.Writer) error {
	cfg, err := stream.Load(path)
	if err != nil {
		return err
	}
	if err := stream.Validate(cfg); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ok: stream config %s: %d streams\n", path, len(cfg.Streams))
	for _, n := range stream.Notes(cfg) {
		fmt.Fprintf(stdout, "note: %s: %s\n", n.Path, n.Text)
	}
	return nil
}

// runStream runs a Stream config until its inputs end or a SIGINT or
// SIGTERM stops it (a second signal stops it at once, without draining).
func runStream(path string, f *jobFlags, stdout, stderr io.Writer) error {
	cfg, err := stream.Load(path)
	if err != nil {
		return err
	}
	logger, closeLog, err := streamLogger(cfg.Logging, f, stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case s := <-sigs:
			logger.Info("signal received: stopping, what was read goes out first (send it again to stop at once)", "signal", s.String())
			cancel()
		case <-finished:
			return
		}
		select {
		case <-sigs:
			os.Exit(1)
		case <-finished:
		}
	}()
	logger.Info("stream config running", "config", path, "streams", len(cfg.Streams))
	return stream.Run(ctx, cfg, stream.WithLogger(logger), stream.WithDataDir(f.dataDir), stream.WithDrainTimeout(f.stopTimeout), stream.WithStdout(stdout))
}

// isArkFlowInvocation reports whether args are ArkFlow's own command line
// (arkflow -c FILE [--validate], its flags in any order) rather than one
// of this program's commands.
func isArkFlowInvocation(args []string) bool {
	flagName := func(a string) string {
		if !strings.HasPrefix(a, "-") {
			return ""
		}
		n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		return n
	}
	if len(args) == 0 {
		return false
	}
	switch flagName(args[0]) {
	case "c", "config", "v", "validate":
	default:
		return false
	}
	for _, a := range args {
		if n := flagName(a); n == "c" || n == "config" {
			return true
		}
	}
	return false
}

// arkflowCompat runs ArkFlow's command line: -c/--config FILE runs the
// file, with -v/--validate it only validates it. A job spec is run or
// validated as arkflow run and arkflow validate would.
func arkflowCompat(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("-c")
	var path string
	var validate bool
	fs.StringVar(&path, "c", "", "")
	fs.StringVar(&path, "config", "", "")
	fs.BoolVar(&validate, "v", false, "")
	fs.BoolVar(&validate, "validate", false, "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || path == "" {
		msg := "expected -c FILE and optionally --validate"
		if err != nil {
			msg = err.Error()
		} else if fs.NArg() > 0 {
			msg = "unexpected arguments: " + strings.Join(fs.Args(), " ")
		}
		fmt.Fprintf(stderr, "arkflow: %s; usage: arkflow -c|--config FILE [-v|--validate] (ArkFlow's command line), or %s\n", msg, mainUsage)
		return 2
	}
	cmd := "run"
	if validate {
		cmd = "validate"
	}
	return run([]string{cmd, path}, stdout, stderr)
}

// streamLogger is the logger a Stream config's logging block asks for:
// its level, json or plain (text) records, written to file_path
// (appended, its directory created) or stderr. --log-format json and -v
// win over the block.
func streamLogger(l stream.Logging, f *jobFlags, stderr io.Writer) (*slog.Logger, func(), error) {
	w, closeFn := stderr, func() {}
	if l.FilePath != "" {
		if err := os.MkdirAll(filepath.Dir(l.FilePath), 0o755); err != nil {
			return nil, nil, fmt.Errorf("logging.file_path: %w", err)
		}
		file, err := os.OpenFile(l.FilePath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("logging.file_path: %w", err)
		}
		w, closeFn = file, func() { file.Close() }
	}
	var level slog.Level
	switch l.Level {
	case "trace", "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	if f.verbose {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" || f.logFormat == logformat.JSON {
		return slog.New(slog.NewJSONHandler(w, opts)), closeFn, nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), closeFn, nil
}
