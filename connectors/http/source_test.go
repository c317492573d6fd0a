package httpconn

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/job"
)

var testSchema = []map[string]any{
	{"name": "user", "type": "string"},
	{"name": "n", "type": "int64", "nullable": false},
}

// readN reads batches until n rows arrived and returns them as "user:n".
func readN(t *testing.T, s connectors.Source, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := s.Read(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Read after %d of %d rows: %v", len(out), n, err)
		}
		users := b.Record.Column(0).(*array.String)
		ns := b.Record.Column(1).(*array.Int64)
		for i := 0; i < int(b.Record.NumRows()); i++ {
			out = append(out, fmt.Sprintf("%s:%d", users.Value(i), ns.Value(i)))
		}
		b.Record.Release()
		if b.Ack != nil {
			b.Ack(nil)
		}
	}
	return out
}

// expectNothing checks that no batch is waiting.
func expectNothing(t *testing.T, s connectors.Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if b, err := s.Read(ctx); err == nil {
		t.Errorf("a batch of %d rows was read; none should have entered", b.Record.NumRows())
		b.Record.Release()
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct {
		format, body string
	}{
		{"json", `{"user":"a","n":1}`},
		{"json", ` [{"user":"a","n":1}, {"user":"b","n":2}] `},
		{"ndjson", "{\"user\":\"a\",\"n\":1}\n\n{\"user\":\"b\",\"n\":2}"},
	} {
		in := newTestInput(t, map[string]any{"address": "127.0.0.1:0", "format": tc.format, "schema": testSchema})
		src, url := startedSource(t, in)
		ans := postBg(t, nil, url, []byte(tc.body), nil)
		want := strings.Count(tc.body, `"user"`)
		got := readN(t, src, want)
		if a := <-ans; a.code != http.StatusOK || a.resp.Accepted != want {
			t.Fatalf("%s %q: %d %+v, want 200 with %d accepted", tc.format, tc.body, a.code, a.resp, want)
		}
		if exp := []string{"a:1", "b:2"}[:want]; fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Errorf("%s: read %v, want %v", tc.format, got, exp)
		}
	}
}

func TestRawFormat(t *testing.T) {
	in := newTestInput(t, map[string]any{"address": "127.0.0.1:0"})
	src, url := startedSource(t, in)
	body := []byte("any \x00 bytes\n")
	ans := postBg(t, nil, url, body, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := src.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Record.Release()
	b.Ack(nil)
	if a := <-ans; a.code != http.StatusOK {
		t.Fatalf("raw post: %d", a.code)
	}
	if got := b.Record.Column(0).(*array.Binary).Value(0); !bytes.Equal(got, body) || b.Record.NumRows() != 1 {
		t.Errorf("raw row %q (%d rows), want %q", got, b.Record.NumRows(), body)
	}
}

// A body that does not decode is answered 400 naming the element or line
// and the field, and none of its rows enter; the next good body does.
func TestBadBodyTakesNothing(t *testing.T) {
	for _, tc := range []struct {
		format, body string
		want         []string
	}{
		{"json", `[{"user":"a","n":1},{"user":"b","n":"x"}]`, []string{"element 1", `field "n"`}},
		{"json", `[{"user":"a","n":1},{"user":"b"}]`, []string{"element 1", `field "n"`}},
		{"json", `{"user":"a","n":1`, []string{"nothing of the body"}},
		{"json", `[{"user":"a","n":1}] x`, []string{"after the array"}},
		{"json", ``, []string{"empty"}},
		{"ndjson", "{\"user\":\"a\",\"n\":1}\n{\"user\":\"b\",\"n\":2.5}\n", []string{"line 2", `field "n"`}},
		{"ndjson", "{\"user\":\"a\",\"n\":1}\nnot json\n", []string{"line 2"}},
	} {
		in := newTestInput(t, map[string]any{"address": "127.0.0.1:0", "format": tc.format, "schema": testSchema})
		src, url := startedSource(t, in)
		code, resp := post(t, nil, url, []byte(tc.body), nil)
		if code != http.StatusBadRequest {
			t.Errorf("%s %q: %d %+v, want 400", tc.format, tc.body, code, resp)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(resp.Error, w) {
				t.Errorf("%s %q: error %q does not say %q", tc.format, tc.body, resp.Error, w)
			}
		}
		expectNothing(t, src)
		ans := postBg(t, nil, url, []byte(`{"user":"ok","n":9}`), nil)
		if got := readN(t, src, 1); fmt.Sprint(got) != "[ok:9]" {
			t.Errorf("%s: after the bad body read %v, want only the good row", tc.format, got)
		}
		if a := <-ans; a.code != http.StatusOK {
			t.Fatalf("good body after a bad one: %d", a.code)
		}
	}
}

func TestRefusals(t *testing.T) {
	in := newTestInput(t, map[string]any{
		"address": "127.0.0.1:0", "path": "/rows", "format": "json", "schema": testSchema,
		"max_body_bytes": 64, "auth": map[string]any{"type": "bearer", "token": "s3cret"},
	})
	src, url := startedSource(t, in)
	ok := map[string]string{"Authorization": "Bearer s3cret"}
	row := []byte(`{"user":"a","n":1}`)
	if code, _ := post(t, nil, url, row, nil); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _ := post(t, nil, url, row, map[string]string{"Authorization": "Bearer s3cre"}); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	big := []byte(`[` + strings.Repeat(`{"user":"a","n":1},`, 10) + `{"user":"a","n":1}]`)
	if code, resp := post(t, nil, url, big, ok); code != http.StatusRequestEntityTooLarge || !strings.Contains(resp.Error, "max_body_bytes") {
		t.Errorf("large body: %d %+v, want 413 naming max_body_bytes", code, resp)
	}
	if code, _ := post(t, nil, url+"?partition=3", row, ok); code != http.StatusBadRequest {
		t.Errorf("partition out of range: %d, want 400", code)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d Allow %q, want 405 Allow POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
	expectNothing(t, src)
	ans := postBg(t, nil, url, row, map[string]string{"Authorization": "bearer s3cret"})
	readN(t, src, 1)
	if a := <-ans; a.code != http.StatusOK {
		t.Fatalf("good request: %d", a.code)
	}
	var codes []string
	for _, m := range src.Metrics() {
		if m.Name == MetricServerRequests {
			codes = append(codes, fmt.Sprintf("%s=%v", m.LabelValues[0], m.Value))
		}
	}
	if got := strings.Join(codes, " "); got != "200=1 400=1 401=2 405=1 413=1" {
		t.Errorf("%s: %s", MetricServerRequests, got)
	}
}

func TestBasicAuthAndCORS(t *testing.T) {
	in := newTestInput(t, map[string]any{
		"address": "127.0.0.1:0", "format": "json", "schema": testSchema, "cors_enabled": true,
		"auth": map[string]any{"type": "basic", "username": "u", "password": "p"},
	})
	src, url := startedSource(t, in)
	req, _ := http.NewRequest(http.MethodOptions, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight: %d, origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	req, _ = http.NewRequest(http.MethodPost, url, strings.NewReader(`{"user":"a","n":1}`))
	req.SetBasicAuth("u", "wrong")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong password: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, url, strings.NewReader(`{"user":"a","n":1}`))
	req.SetBasicAuth("u", "p")
	ok := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ok <- 0
			return
		}
		resp.Body.Close()
		ok <- resp.StatusCode
	}()
	readN(t, src, 1)
	if code := <-ok; code != http.StatusOK {
		t.Errorf("right password: %d", code)
	}
}

// A full queue makes a request wait busy_wait_ms, then answers 429 with
// Retry-After, taking nothing; once the job reads, requests go in.
func TestBackpressure(t *testing.T) {
	in := newTestInput(t, map[string]any{"address": "127.0.0.1:0", "format": "json", "schema": testSchema, "max_pending": 1, "busy_wait_ms": 100})
	src, url := startedSource(t, in)
	first := postBg(t, nil, url, []byte(`{"user":"a","n":1}`), nil)
	for in.q.Pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"user":"b","n":2}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("full queue: %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if got := readN(t, src, 1); fmt.Sprint(got) != "[a:1]" {
		t.Errorf("read %v, want only the first request's row", got)
	}
	if a := <-first; a.code != http.StatusOK {
		t.Errorf("first request: %d", a.code)
	}
	expectNothing(t, src)
}

// Under event time a row without one is refused with the request, 400
// naming the field, instead of being dropped by the job after a 200.
func TestEventTimeRefusal(t *testing.T) {
	cfg := SourceConfig{Address: "127.0.0.1:0", Format: FormatJSON, Schema: connectors.Schema{{Name: "user", Type: "string"}, {Name: "n", Type: "int64"}, {Name: "ts", Type: "timestamp"}}}
	in, err := newInput(cfg, nil, &job.Time{Mode: job.EventTime, TimestampField: "ts"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, url := startedSource(t, in)
	code, resp := post(t, nil, url, []byte(`[{"user":"a","n":1,"ts":1700000000000},{"user":"b","n":2}]`), nil)
	if code != http.StatusBadRequest || !strings.Contains(resp.Error, `field "ts"`) || !strings.Contains(resp.Error, "row 1") {
		t.Errorf("a row without ts: %d %+v, want 400 naming row 1 and field ts", code, resp)
	}
	expectNothing(t, src)
	ans := postBg(t, nil, url, []byte(`{"user":"c","n":3,"ts":"2026-12-07T10:00:00Z"}`), nil)
	if got := readN(t, src, 1); fmt.Sprint(got) != "[c:3]" {
		t.Errorf("read %v", got)
	}
	if a := <-ans; a.code != http.StatusOK {
		t.Errorf("a row with ts: %d", a.code)
	}
}

// Requests beyond max_in_flight wait busy_wait_ms unread, then get 429.
func TestMaxInFlight(t *testing.T) {
	in := newTestInput(t, map[string]any{"address": "127.0.0.1:0", "format": "json", "schema": testSchema, "max_in_flight": 1, "busy_wait_ms": 100})
	src, url := startedSource(t, in)
	first := postBg(t, nil, url, []byte(`{"user":"a","n":1}`), nil)
	for in.q.Pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	code, resp := post(t, nil, url, []byte(`{"user":"b","n":2}`), nil)
	if code != http.StatusTooManyRequests || !strings.Contains(resp.Error, "max_in_flight") {
		t.Errorf("second request: %d %+v, want 429 naming max_in_flight", code, resp)
	}
	if got := readN(t, src, 1); fmt.Sprint(got) != "[a:1]" {
		t.Errorf("read %v, want only the first request's row", got)
	}
	if a := <-first; a.code != http.StatusOK {
		t.Errorf("first request: %d", a.code)
	}
	ans := postBg(t, nil, url, []byte(`{"user":"c","n":3}`), nil)
	readN(t, src, 1)
	if a := <-ans; a.code != http.StatusOK {
		t.Errorf("a request once the slot is free: %d", a.code)
	}
}
