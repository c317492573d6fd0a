package httpconn

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// newTestInput builds an input from a config map, as a spec would.
func newTestInput(t testing.TB, cfg map[string]any) *input {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := connectors.LookupInput(Type)
	if !ok {
		t.Fatal("input type http is not registered")
	}
	in, err := f(connectors.BuildContext{OperatorID: "in", Config: raw})
	if err != nil {
		t.Fatalf("building the input: %v", err)
	}
	return in.(*input)
}

// post sends body to the input and returns the status and decoded answer.
func post(t testing.TB, client *http.Client, url string, body []byte, hdr map[string]string) (int, Response) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, Response{}
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if client == nil {
		client = http.DefaultClient
	}
	// Errors, not Fatal: post runs in goroutines too (postBg).
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", url, err)
		return 0, Response{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r Response
	if len(b) > 0 {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Errorf("answer %d %q is not a Response: %v", resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, r
}

// accepting wraps a source as the runtime uses it: every batch read is
// accepted at once (the runtime calls Accepted when it takes a batch from
// Read, without a WAL).
type accepting struct {
	*source
	onConnect func()
}

func (a *accepting) Connect(ctx context.Context) error {
	if err := a.source.Connect(ctx); err != nil {
		return err
	}
	if a.onConnect != nil {
		a.onConnect()
	}
	return nil
}

func (a *accepting) Read(ctx context.Context) (connectors.Batch, error) {
	b, err := a.source.Read(ctx)
	if err == nil && b.Accepted != nil {
		b.Accepted(nil)
	}
	return b, err
}

// startedSource connects a source of in (subtask 0 of 1) and closes it at
// the end of the test; it returns the source and the input's URL.
func startedSource(t testing.TB, in *input) (*accepting, string) {
	t.Helper()
	s, err := in.NewSource(connectors.TaskInfo{OperatorID: "in", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := &accepting{source: s.(*source)}
	if err := a.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	scheme := "http"
	if in.cfg.TLS != nil {
		scheme = "https"
	}
	return a, fmt.Sprintf("%s://%s%s", scheme, in.boundAddr(), in.cfg.Path)
}

// store is an HTTP server that keeps what it was sent: every request
// answered 2xx, and the rows of its body (a JSON array, NDJSON lines or
// one object). fail, when set, may answer a request with another status
// (given the request's 1-based number); such a request's rows are not
// kept.
type store struct {
	*httptest.Server
	fail func(n int, r *http.Request) int

	mu       sync.Mutex
	requests int
	bodies   [][]byte
	headers  []http.Header
	rows     []map[string]any
}

func newStore(t testing.TB, fail func(n int, r *http.Request) int) *store {
	s := &store{fail: fail}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *store) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests++
	n := s.requests
	s.mu.Unlock()
	if s.fail != nil {
		if code := s.fail(n, r); code != 0 {
			w.WriteHeader(code)
			fmt.Fprintf(w, "injected %d", code)
			return
		}
	}
	var rows []map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		if err := dec.Decode(&rows); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	default:
		for dec.More() {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rows = append(rows, m)
		}
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, r.Header.Clone())
	s.rows = append(s.rows, rows...)
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// readBack is the conformance suite's ReadBack: a sink's Write returns
// after the server answered, so everything is there already.
func (s *store) readBack(t *testing.T, n int) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.rows...)
}

func (s *store) kept() ([]map[string]any, [][]byte, []http.Header, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.rows...), append([][]byte(nil), s.bodies...), append([]http.Header(nil), s.headers...), s.requests
}

// newTestOutput builds an output from a config map, as a spec would.
func newTestOutput(t testing.TB, cfg map[string]any, schema *arrow.Schema) connectors.Output {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := connectors.LookupOutput(Type)
	if !ok {
		t.Fatal("output type http is not registered")
	}
	out, err := f(connectors.BuildContext{OperatorID: "out", Config: raw}, schema)
	if err != nil {
		t.Fatalf("building the output: %v", err)
	}
	return out
}

// answer is a request's outcome.
type answer struct {
	code int
	resp Response
}

// postBg posts in the background: a 200 comes only once the job took the
// rows, so the caller reads them, then waits for the answer.
func postBg(t testing.TB, client *http.Client, url string, body []byte, hdr map[string]string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		code, resp := post(t, client, url, body, hdr)
		ch <- answer{code, resp}
	}()
	return ch
}
