package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/arkflow-rs/arkflow-go"
)

// The control socket lets `arkflow checkpoint` and `arkflow savepoint` reach
// the job an `arkflow run` is running: HTTP over a Unix socket, only for
// the local user (mode 0600).

// controlPath is the socket of a job: --control, else <data-dir>/<job>.sock.
func controlPath(control, dataDir, jobID string) string {
	if control != "" {
		return control
	}
	if dataDir == "" {
		return ""
	}
	return filepath.Join(dataDir, jobID+".sock")
}

// serveControl serves the job's control API on path until ctx ends.
func serveControl(ctx context.Context, path string, j *arkflow.Job, logger *slog.Logger) (stop func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	// A socket left by a killed run: nobody listens on it any more.
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s is in use: is the job already running?", path)
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	os.Chmod(path, 0o600)
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any, err error) {
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("POST /checkpoint", func(w http.ResponseWriter, r *http.Request) {
		id, err := j.Checkpoint(r.Context())
		reply(w, map[string]string{"checkpoint_id": id}, err)
	})
	mux.HandleFunc("POST /savepoint", func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("name")
		err := j.Savepoint(r.Context(), name)
		reply(w, map[string]string{"savepoint": name}, err)
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		m := j.Metrics()
		reply(w, map[string]any{"state": m.State.String(), "checkpoints": m.Checkpoints}, nil)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("control socket", "error", err)
		}
	}()
	logger.Info("control socket listening", "path", path)
	return func() {
		srv.Close()
		os.Remove(path)
	}, nil
}

// controlCommand runs `arkflow checkpoint` or `arkflow savepoint`.
func controlCommand(name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	control := fs.String("control", "", "the control socket of the running job (default <data-dir>/<job>.sock)")
	dataDir := fs.String("data-dir", "", "the data directory the job runs with")
	spName := ""
	if name == "savepoint" {
		fs.StringVar(&spName, "name", "", "the savepoint's name (required)")
	}
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for the checkpoint")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	path := *control
	if path == "" {
		if fs.NArg() != 1 || *dataDir == "" {
			fmt.Fprintf(stderr, "arkflow %s: give --control SOCKET, or --data-dir DIR and the job's SPEC\n", name)
			return 2
		}
		spec, ok := load(fs.Arg(0), stderr)
		if !ok {
			return 1
		}
		path = controlPath("", *dataDir, spec.ID)
	}
	if name == "savepoint" && spName == "" {
		fmt.Fprintln(stderr, "arkflow savepoint: --name is required")
		return 2
	}
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	url := "http://job/checkpoint"
	if name == "savepoint" {
		url = "http://job/savepoint?name=" + spName
	}
	resp, err := client.Post(url, "application/json", nil)
	if err != nil {
		fmt.Fprintf(stderr, "arkflow %s: reaching the job at %s: %v\n", name, path, err)
		return 1
	}
	defer resp.Body.Close()
	var body map[string]string
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "arkflow %s: %s\n", name, body["error"])
		return 1
	}
	if name == "savepoint" {
		fmt.Fprintln(stdout, body["savepoint"])
	} else {
		fmt.Fprintln(stdout, body["checkpoint_id"])
	}
	return 0
}
