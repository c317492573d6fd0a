package httpconn

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// writeRows connects a sink of out, writes rows in one batch and closes
// it, returning Write's error.
func writeRows(t *testing.T, out connectors.Output, rows []conformance.Row) (connectors.Sink, error) {
	t.Helper()
	s, err := out.NewSink(connectors.TaskInfo{OperatorID: "out", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	rec := conformance.NewRecord(rows)
	defer rec.Release()
	return s, s.Write(context.Background(), rec)
}

func ids(rows []map[string]any) string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprint(r["id"]))
	}
	return strings.Join(out, ",")
}

var threeRows = []conformance.Row{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}, {ID: 3, Name: "c\nd"}}

// 5xx answers and connection errors are retried; the write returns once
// every request was answered 2xx, and the server has each row once.
func TestSinkRetries(t *testing.T) {
	srv := newStore(t, func(n int, _ *http.Request) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	out := newTestOutput(t, map[string]any{"url": srv.URL, "retry_count": 2}, conformance.Schema())
	s, err := writeRows(t, out, threeRows)
	if err != nil {
		t.Fatalf("Write after two 503s with retry_count 2: %v", err)
	}
	rows, _, _, requests := srv.kept()
	if ids(rows) != "1,2,3" || requests != 3 {
		t.Errorf("server kept %s after %d requests, want 1,2,3 after 3", ids(rows), requests)
	}
	if rows[2]["name"] != "c\nd" {
		t.Errorf("a newline in a string came back as %q", rows[2]["name"])
	}
	var retries float64
	for _, m := range s.(connectors.Metered).Metrics() {
		if m.Name == MetricClientRetries {
			retries = m.Value
		}
	}
	if retries != 2 {
		t.Errorf("%s = %v, want 2", MetricClientRetries, retries)
	}
}

func TestSinkGivesUp(t *testing.T) {
	srv := newStore(t, func(int, *http.Request) int { return http.StatusBadGateway })
	out := newTestOutput(t, map[string]any{"url": srv.URL, "retry_count": 1}, conformance.Schema())
	_, err := writeRows(t, out, threeRows)
	if _, _, _, requests := srv.kept(); err == nil || requests != 2 || !strings.Contains(err.Error(), "502") {
		t.Errorf("Write against a server answering 502: %v after %d requests, want an error naming 502 after 2", err, requests)
	}
	// A connection error is retried too, and then fails the write.
	srv.Close()
	_, err = writeRows(t, out, threeRows)
	if err == nil {
		t.Error("Write to a closed server succeeded")
	}
}

// A 4xx fails the write at once, with the status and the response's body.
func TestSink4xxFails(t *testing.T) {
	srv := newStore(t, func(int, *http.Request) int { return http.StatusUnprocessableEntity })
	out := newTestOutput(t, map[string]any{"url": srv.URL, "retry_count": 5}, conformance.Schema())
	_, err := writeRows(t, out, threeRows)
	if _, _, _, requests := srv.kept(); err == nil || requests != 1 || !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), "injected 422") {
		t.Errorf("Write against 422: %v after %d requests, want the status and body after 1 request", err, requests)
	}
}

func TestSinkFormatsAndAuth(t *testing.T) {
	for _, tc := range []struct {
		cfg      map[string]any
		requests int
		ctype    string
		auth     string
	}{
		{map[string]any{"auth": map[string]any{"Basic": map[string]any{"username": "u", "password": "p"}}}, 1, "application/json", "Basic dTpw"},
		{map[string]any{"format": "ndjson", "auth": map[string]any{"Bearer": map[string]any{"token": "t"}}}, 1, "application/x-ndjson", "Bearer t"},
		{map[string]any{"format": "per-row", "auth": map[string]any{"type": "bearer", "token": "t2"}, "headers": map[string]any{"X-Job": "j"}}, 3, "application/json", "Bearer t2"},
	} {
		srv := newStore(t, nil)
		tc.cfg["url"] = srv.URL
		out := newTestOutput(t, tc.cfg, conformance.Schema())
		if _, err := writeRows(t, out, threeRows); err != nil {
			t.Fatalf("%v: %v", tc.cfg, err)
		}
		rows, _, hdrs, requests := srv.kept()
		if ids(rows) != "1,2,3" || requests != tc.requests {
			t.Errorf("%v: kept %s in %d requests, want 1,2,3 in %d", tc.cfg, ids(rows), requests, tc.requests)
		}
		for _, h := range hdrs {
			if h.Get("Content-Type") != tc.ctype || h.Get("Authorization") != tc.auth {
				t.Errorf("%v: Content-Type %q Authorization %q, want %q %q", tc.cfg, h.Get("Content-Type"), h.Get("Authorization"), tc.ctype, tc.auth)
			}
		}
		if tc.cfg["headers"] != nil && hdrs[0].Get("X-Job") != "j" {
			t.Errorf("headers: X-Job %q", hdrs[0].Get("X-Job"))
		}
	}
}

// body_field sends one request per row whose body is the field's bytes.
func TestSinkBodyField(t *testing.T) {
	var n atomic.Int32
	srv := newStore(t, func(int, *http.Request) int { n.Add(1); return 0 })
	out := newTestOutput(t, map[string]any{"url": srv.URL, "body_field": "name"}, conformance.Schema())
	rows := []conformance.Row{{ID: 1, Name: `{"x":1}`}, {ID: 2, Name: `{"x":2}`}}
	if _, err := writeRows(t, out, rows); err != nil {
		t.Fatal(err)
	}
	_, bodies, _, _ := srv.kept()
	if len(bodies) != 2 || string(bodies[0]) != `{"x":1}` || string(bodies[1]) != `{"x":2}` {
		t.Errorf("bodies %q, want the name column's bytes one per request", bodies)
	}
}

// Config problems name their field.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		input bool
		cfg   string
		field string
	}{
		{true, `{}`, "address"},
		{true, `{"address":"nohostport"}`, "address"},
		{true, `{"address":":1","path":"x"}`, "path"},
		{true, `{"address":":1","format":"json"}`, "schema"},
		{true, `{"address":":1","format":"xml"}`, "format"},
		{true, `{"address":":1","auth":{"type":"basic"}}`, "auth.username"},
		{true, `{"address":":1","auth":{"type":"digest"}}`, "auth.type"},
		{true, `{"address":":1","max_body_bytes":0}`, "max_body_bytes"},
		{true, `{"address":":1","partitions":-1}`, "partitions"},
		{true, `{"address":":1","tls":{"cert":"c"}}`, "tls"},
		{true, `{"address":":1","bogus":1}`, "bogus"},
		{false, `{}`, "url"},
		{false, `{"url":"ftp://x"}`, "url"},
		{false, `{"url":"http://x","method":"GET"}`, "method"},
		{false, `{"url":"http://x","retry_count":-1}`, "retry_count"},
		{false, `{"url":"http://x","timeout_ms":0}`, "timeout_ms"},
		{false, `{"url":"http://x","auth":{"Digest":{}}}`, "auth"},
		{false, `{"url":"http://x","auth":{"Bearer":{"token":""}}}`, "auth.token"},
		{false, `{"url":"http://x","format":"ndjson","body_field":"name"}`, "body_field"},
		{false, `{"url":"http://x","body_field":"id"}`, "body_field"},
		{false, `{"url":"http://x","body_field":"nope"}`, "body_field"},
		{false, `{"url":"http://x","tls":{"client_cert":"c"}}`, "tls"},
	} {
		var err error
		if tc.input {
			f, _ := connectors.LookupInput(Type)
			_, err = f(connectors.BuildContext{Config: json.RawMessage(tc.cfg)})
		} else {
			f, _ := connectors.LookupOutput(Type)
			var schema *arrow.Schema = conformance.Schema()
			_, err = f(connectors.BuildContext{Config: json.RawMessage(tc.cfg)}, schema)
		}
		if err == nil {
			t.Errorf("%s: no error", tc.cfg)
			continue
		}
		found := false
		for _, fe := range connectors.FlattenFieldErrors(err) {
			found = found || fe.Path == tc.field
		}
		if !found {
			t.Errorf("%s: %v does not name field %q", tc.cfg, err, tc.field)
		}
	}
}
