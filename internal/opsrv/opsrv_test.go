package opsrv

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCheckAddr(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:9090": true, ":0": true, "[::1]:9090": true, "localhost:9090": true,
		"9090": false, "localhost:http": false, "127.0.0.1:70000": false, "::1:9090": false,
	} {
		err := CheckAddr(addr)
		if (err == nil) != ok || (err != nil && !strings.HasPrefix(err.Error(), `--metrics-addr "`+addr+`"`)) {
			t.Errorf("CheckAddr(%q) = %v", addr, err)
		}
	}
}

// The four routes: /readyz adds "ready" to Ready's fields and answers
// 503 when not ready; /status encodes Status's value; /metrics has the
// collectors given and the Go and process ones.
func TestHandler(t *testing.T) {
	var ready atomic.Bool
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x."})
	h, err := Handler(Routes{
		Collectors: []prometheus.Collector{c},
		Ready: func() (bool, map[string]any) {
			if ready.Load() {
				return true, map[string]any{"state": "running"}
			}
			return false, map[string]any{"reason": "starting"}
		},
		Status: func() any { return map[string]int{"n": 1} },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	decode := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("%v: %s", err, s)
		}
		return m
	}
	if code, body := get("/readyz"); code != 503 || decode(body)["ready"] != false || decode(body)["reason"] != "starting" {
		t.Errorf("/readyz not ready: %d %s", code, body)
	}
	ready.Store(true)
	if code, body := get("/readyz"); code != 200 || decode(body)["ready"] != true || decode(body)["state"] != "running" {
		t.Errorf("/readyz ready: %d %s", code, body)
	}
	if code, body := get("/healthz"); code != 200 || decode(body)["live"] != true {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get("/status"); code != 200 || decode(body)["n"] != 1.0 {
		t.Errorf("/status: %d %s", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "x_total 0") || !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "process_cpu_seconds_total") {
		t.Errorf("/metrics: %d %s", code, body)
	}
	if code, _ := get("/nope"); code != 404 {
		t.Errorf("/nope: %d", code)
	}
	// Two collectors that clash are refused.
	if _, err := Handler(Routes{Collectors: []prometheus.Collector{c, c}}); err == nil {
		t.Error("a collector registered twice was accepted")
	}
}
