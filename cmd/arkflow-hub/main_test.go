package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The binary serves health and refuses an operator request without a
// token; it stops when its context ends.
func TestRunServes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	var logs syncBuffer
	go func() {
		errc <- run(ctx, []string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--token", "ops|operator|operator-secret-0123456789"},
			&logs, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("run: %v\n%s", err, logs.String())
	}
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("health: %d", resp.StatusCode)
	}
	resp, err = http.Get("http://" + addr + "/api/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("jobs without a token: %d", resp.StatusCode)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
}

func TestBadTokenRefusesToStart(t *testing.T) {
	var logs syncBuffer
	err := run(context.Background(), []string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--token", "ops|operator|short"}, &logs, nil)
	if err == nil {
		t.Fatal("a malformed token was accepted")
	}
}

func TestSplitTokens(t *testing.T) {
	got := splitTokens(" a|admin|x ;\nb|viewer|y;; ")
	if len(got) != 2 || got[0] != "a|admin|x" || got[1] != "b|viewer|y" {
		t.Fatalf("splitTokens: %q", got)
	}
}

// --log-format json writes one JSON object a line, each with time, level
// and msg.
func TestLogFormatJSON(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	var logs syncBuffer
	go func() {
		errc <- run(ctx, []string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-no-auth", "--log-format", "json"},
			&logs, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("run: %v\n%s", err, logs.String())
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
	var msgs []string
	for i, line := range strings.Split(strings.TrimRight(logs.String(), "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %d is not a JSON object: %v\n%s", i+1, err, line)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k].(string); !ok {
				t.Errorf("line %d has no %s: %s", i+1, k, line)
			}
		}
		if rec["msg"] == "hub listening" && rec["addr"] != addr {
			t.Errorf("hub listening names %v, want %s", rec["addr"], addr)
		}
		msgs = append(msgs, fmt.Sprint(rec["msg"]))
	}
	if !slices.Contains(msgs, "hub listening") || len(msgs) < 2 {
		t.Errorf("want the --insecure-no-auth warning and hub listening, got %q", msgs)
	}
}

// A --log-format other than text or json is a usage error naming the flag
// and the values it takes.
func TestBadLogFormat(t *testing.T) {
	var logs syncBuffer
	err := run(context.Background(), []string{"--data-dir", t.TempDir(), "--log-format", "xml"}, &logs, nil)
	var usage usageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "-log-format") || !strings.Contains(err.Error(), "must be text or json") {
		t.Fatalf("got %v, want a usage error naming --log-format and its values", err)
	}
}
