package main

import (
	"bytes"
	"context"
	"net/http"
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
