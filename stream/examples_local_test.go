//go:build cgo

package stream_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The context of the generate inputs of generate_example,
// http_client_example and drop_output_example.
const sensorValue = 10

// generate_example: ten one-row batches, each grouped by sensor: the sum
// and the average are the one value, x is 111. arrow_to_json puts the row
// in __value__, the last query keeps it, and stdout writes __value__.
func runGenerateExample(t *testing.T, yaml string) {
	r := startExample(t, yaml)
	r.wait(t)
	line := fmt.Sprintf(`{"sum(flow.value)":%d,"avg(flow.value)":%.1f,"x":111}`, sensorValue, float64(sensorValue))
	checkLines(t, r.stdout.lines(), repeated(line, 10))
}

// drop_output_example: 30,000 rows (a count bounds the endless input) go
// through the query and are dropped: nothing is written, nothing fails.
func runDropOutputExample(t *testing.T, yaml string) {
	yaml = substitute(t, yaml, "batch_size: 10000\n", "batch_size: 10000\n      count: 30000\n")
	r := startExample(t, yaml)
	r.wait(t)
	if out := r.stdout.String(); out != "" {
		t.Fatalf("the drop output wrote %q", out)
	}
}

// durability_example: 1000 rows through a write-ahead log (moved to a
// temporary directory) and json_to_arrow, arrow_to_json: each comes out
// as the context, re-encoded compactly.
func runDurabilityExample(t *testing.T, yaml string) {
	wal := filepath.Join(t.TempDir(), "wal")
	yaml = substitute(t, yaml, `path: "./data/wal"`, fmt.Sprintf("path: %q", wal))
	r := startExample(t, yaml)
	r.wait(t)
	checkLines(t, r.stdout.lines(), repeated(`{"value":10,"sensor":"temp_1"}`, 1000))
	entries, err := os.ReadDir(wal)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no write-ahead log in %s: %v", wal, err)
	}
}

// control_plane_example: ten rows, with the health routes served while
// they flow (the interval shortened from 1s to 100ms to keep the test
// short).
func runControlPlaneExample(t *testing.T, yaml string) {
	addr := freeAddr(t)
	yaml = substitute(t, yaml, `"127.0.0.1:8080"`, fmt.Sprintf("%q", addr), "interval: 1s", "interval: 100ms")
	runWithHealth(t, yaml, addr, "demo-events", 10)
}

// control_plane_smoke: as control_plane_example, its endless input bound
// by a count of 3.
func runControlPlaneSmoke(t *testing.T, yaml string) {
	addr := freeAddr(t)
	yaml = substitute(t, yaml, `"127.0.0.1:8080"`, fmt.Sprintf("%q", addr), "batch_size: 1\n", "batch_size: 1\n      count: 3\n")
	runWithHealth(t, yaml, addr, "smoke", 3)
}

// runWithHealth runs a control-plane example: while it runs, /health
// answers 200 naming the stream id, and stdout gets rows lines of the
// context.
func runWithHealth(t *testing.T, yaml, addr, id string, rows int) {
	r := startExample(t, yaml)
	var health struct {
		Status  string            `json:"status"`
		Streams map[string]string `json:"streams"`
	}
	waitUntil(t, "answer of /health", func() bool {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&health) == nil
	}, r.logs.String)
	if _, ok := health.Streams[id]; !ok || health.Status != "ok" {
		t.Errorf("/health answered %+v, want status ok and stream %s", health, id)
	}
	r.wait(t)
	checkLines(t, r.stdout.lines(), repeated(`{"value": 1}`, rows))
}

// http_client_example: 20,000 rows (a count bounds the endless input) in
// batches of 1000; the buffer's capacity (10) counts rows, as ArkFlow's
// does (MessageBatch::len is its row count), so each batch is an
// emission: 20 emissions, each summed and
// averaged by the query and POSTed, as ArkFlow sends __value__, to a test
// server (in place of localhost:8080) at /v1/test (the example's URL ends
// in a space, which URL parsers drop, as here).
func runHTTPClientExample(t *testing.T, yaml string) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mu.Lock()
		bodies = append(bodies, req.Method+" "+req.URL.Path+" "+string(b))
		mu.Unlock()
	}))
	defer srv.Close()
	yaml = substitute(t, yaml, "http://localhost:8080", srv.URL, "batch_size: 1000\n", "batch_size: 1000\n      count: 20000\n")
	r := startExample(t, yaml)
	rows := 1000
	body := fmt.Sprintf(`POST /v1/test {"value":%d,"avg(flow.value)":%.1f,"x":111}`, rows*sensorValue, float64(sensorValue))
	r.wait(t)
	mu.Lock()
	defer mu.Unlock()
	// timeout_ms is 90 and retry_count 1: a request answered after 90 ms
	// is sent again (at-least-once), so each body may come twice.
	if len(bodies) < 20 || len(bodies) > 40 {
		t.Fatalf("%d requests, want 20 (up to 40 with retries)", len(bodies))
	}
	for i, b := range bodies {
		if b != body {
			t.Fatalf("request %d: %s\nwant %s", i, b, body)
		}
	}
}

// http_server_example: each POST (with the bearer token; one without is
// answered 401) is a batch the query sums and averages, which stdout
// writes as a JSON row; a body that is not JSON goes to error_output
// (stdout), which writes it as it came. The input listens on a free port
// in place of 0.0.0.0:8090.
func runHTTPServerExample(t *testing.T, yaml string) {
	addr := freeAddr(t)
	yaml = substitute(t, yaml, "'0.0.0.0:8090'", "'"+addr+"'")
	r := startExample(t, yaml)
	post := func(token, body string) int {
		req, _ := http.NewRequest("POST", "http://"+addr+"/", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitUntil(t, "answer from the http input", func() bool { return post("wrong", "{}") == http.StatusUnauthorized }, r.logs.String)
	var want []string
	for _, body := range []string{`{"value": 7}`, "not json", `{"value": 12, "sensor": "b"}`} {
		if code := post("123456", body); code != http.StatusOK {
			t.Fatalf("POST answered %d", code)
		}
		var row struct{ Value int }
		if json.Unmarshal([]byte(body), &row) != nil {
			want = append(want, body)
			continue
		}
		want = append(want, fmt.Sprintf(`{"sum(flow.value)":%d,"avg(flow.value)":%.1f,"x":111}`, row.Value, float64(row.Value)))
	}
	r.waitLines(t, len(want))
	r.stop(t)
	checkLines(t, r.stdout.lines(), want)
}

// join_buffer_example: ten rows of each input, all with one id, in one
// session (the intervals shortened from 1s to 10ms, so that the 1s gap
// never passes between rows): the join gives 10×10 rows, each the two
// contexts' fields side by side. Here the session closes when the inputs
// end (ArkFlow would wait for the gap).
func runJoinBufferExample(t *testing.T, yaml string) {
	yaml = substitute(t, yaml, "interval: 1s", "interval: 10ms")
	r := startExample(t, yaml)
	r.wait(t)
	line := `{"id":1625000000000,"value":10,"sensor":"temp_1","id":1625000000000,"value":20,"sensor":"temp_2"}`
	checkLines(t, r.stdout.lines(), repeated(line, 100))
}

// websocket_input_example: a test WebSocket server (in place of
// localhost:8800) sends messages; the query keeps __value__, so stdout
// writes each message as it came.
func runWebSocketInputExample(t *testing.T, yaml string) {
	msgs := []string{`{"n": 1}`, "plain text", `{"n": 3}`}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c, err := websocket.Accept(w, req, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := c.CloseRead(req.Context())
		for _, m := range msgs {
			if err := c.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
				return
			}
		}
		<-ctx.Done()
	}))
	defer srv.Close()
	yaml = substitute(t, yaml, "ws://localhost:8800", "ws"+strings.TrimPrefix(srv.URL, "http"))
	r := startExample(t, yaml)
	r.waitLines(t, len(msgs))
	time.Sleep(100 * time.Millisecond) // nothing more comes
	r.stop(t)
	checkLines(t, r.stdout.lines(), msgs)
}
