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
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/job"
)

// The control socket lets `arkflow checkpoint` and `arkflow savepoint` reach
// the job an `arkflow run` is running: HTTP over a Unix socket, only for
// the local user (mode 0600).

// controlPath is the socket of a job: --control, else <data-dir>/<job id>.sock
// (with the default --data-dir, ./arkflow-data/<job id>.sock).
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
		reply(w, statusBody(j), nil)
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

// controlCmd is `arkflow checkpoint` or `arkflow savepoint` (name).
func controlCmd(name string, fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
	spName := ""
	if name == "savepoint" {
		fs.StringVar(&spName, "name", "", "the savepoint's `NAME` (required; letters, digits, '.', '-', '_')")
	}
	dataDir := fs.String("data-dir", defaultDataDir, "the data directory `DIR` the job runs with: its socket is DIR/<job id>.sock")
	control := fs.String("control", "", "the control socket `SOCKET` of the running job, instead of finding it from --data-dir and SPEC")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for the "+name)
	return func(args []string, stdout, _ io.Writer) error {
		if name == "savepoint" && spName == "" {
			return usagef("--name is required")
		}
		if *timeout <= 0 {
			return usagef("--timeout must be positive (got %s)", *timeout)
		}
		path := *control
		switch {
		case path != "" && len(args) > 1:
			return usagef("expected at most one SPEC file with --control (got %d: %s)", len(args), strings.Join(args, " "))
		case path == "" && len(args) == 0:
			return usagef("expected the job's SPEC file, or --control SOCKET (got neither)")
		case path == "":
			spec, err := oneSpec(args)
			if err != nil {
				return err
			}
			if *dataDir == "" {
				return usagef("--data-dir is empty: give the data directory the job runs with, or --control SOCKET")
			}
			s, err := job.ParseFile(spec)
			if err != nil {
				return err
			}
			if s.Checkpoint == nil {
				return fmt.Errorf("arkflow %s: job %q has no checkpoint block, so \"arkflow run\" serves no checkpoints for it; add one (checkpoint: {object_store_uri: ...})", name, s.ID)
			}
			path = controlPath("", *dataDir, s.ID)
		}
		client := &http.Client{Timeout: *timeout, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}}
		u := "http://job/checkpoint"
		if name == "savepoint" {
			u = "http://job/savepoint?name=" + url.QueryEscape(spName)
		}
		resp, err := client.Post(u, "application/json", nil)
		if err != nil {
			if _, statErr := os.Stat(path); errors.Is(statErr, os.ErrNotExist) {
				return fmt.Errorf("arkflow %s: no job is listening on %s: is \"arkflow run\" running it with the same --data-dir (or --control)?", name, path)
			}
			return fmt.Errorf("arkflow %s: reaching the job at %s: %w", name, path, err)
		}
		defer resp.Body.Close()
		var body map[string]string
		json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("arkflow %s: %s", name, body["error"])
		}
		if name == "savepoint" {
			fmt.Fprintln(stdout, body["savepoint"])
		} else {
			fmt.Fprintln(stdout, body["checkpoint_id"])
		}
		return nil
	}
}
