package websocket

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// server is a WebSocket server for the tests: it keeps the connections
// open and sends frames to them on request.
type server struct {
	*httptest.Server
	mu      sync.Mutex
	conns   []*ws.Conn
	opening int           // handshakes under way: their connections are not in conns yet
	joined  chan struct{} // a value per connection accepted
	headers chan http.Header
}

func newServer(t testing.TB, tlsServer bool, cfg func(*httptest.Server)) *server {
	t.Helper()
	s := &server{joined: make(chan struct{}, 64), headers: make(chan http.Header, 64)}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.opening++
		s.mu.Unlock()
		c, err := ws.Accept(w, r, nil)
		s.mu.Lock()
		s.opening--
		if err == nil {
			s.conns = append(s.conns, c)
		}
		s.mu.Unlock()
		if err != nil {
			return
		}
		s.headers <- r.Header.Clone()
		s.joined <- struct{}{}
		// Read until the client goes: control frames (close) need a reader.
		_, _, _ = c.Read(context.Background())
		s.drop(c)
	})
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // refused TLS handshakes are the point of some tests
	if cfg != nil {
		cfg(s.Server)
	}
	if tlsServer {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(func() {
		s.dropAll()
		s.Close()
	})
	return s
}

// url is the server's ws:// (or wss://) URL.
func (s *server) url() string {
	return "ws" + strings.TrimPrefix(s.URL, "http") + "/feed"
}

func (s *server) drop(c *ws.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.conns {
		if x == c {
			s.conns = append(s.conns[:i], s.conns[i+1:]...)
			return
		}
	}
}

// dropAll cuts every connection without a close handshake (a lost
// connection, to the client).
func (s *server) dropAll() {
	s.mu.Lock()
	cs := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range cs {
		c.CloseNow()
	}
}

// waitJoined waits for n more connections.
func (s *server) waitJoined(t testing.TB, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-s.joined:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d connections arrived in 30s", i, n)
		}
	}
}

// send sends frames to every open connection, in order. It waits for
// the handshakes under way (a client whose Connect returned has at least
// begun its handshake here). A connection a client closed may still be
// listed: a write to it that fails is ignored, but one connection must
// take every frame.
func (s *server) send(t testing.TB, typ ws.MessageType, frames ...[]byte) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var cs []*ws.Conn
	for {
		s.mu.Lock()
		if s.opening == 0 {
			cs = append([]*ws.Conn(nil), s.conns...)
		}
		s.mu.Unlock()
		if len(cs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no client connected in 30s")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	took := 0
	for _, c := range cs {
		ok := true
		for _, f := range frames {
			if err := c.Write(ctx, typ, f); err != nil {
				ok = false
				break
			}
		}
		if ok {
			took++
		}
	}
	if took == 0 {
		t.Fatal("no connection took the frames")
	}
}

// buildInput builds a websocket input from a config, through the
// registered factory.
func buildInput(t testing.TB, cfg SourceConfig) *input {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in, err := buildRaw(raw)
	if err != nil {
		t.Fatalf("building the input: %v", err)
	}
	return in
}

func buildRaw(raw []byte) (*input, error) {
	f, ok := connectors.LookupInput(Type)
	if !ok {
		panic("websocket input not registered")
	}
	in, err := f(connectors.BuildContext{OperatorID: "src", Config: raw})
	if err != nil {
		return nil, err
	}
	return in.(*input), nil
}

// openSource creates and connects subtask sub of par.
func openSource(t testing.TB, in *input, sub, par int) *source {
	t.Helper()
	s, err := in.NewSource(connectors.TaskInfo{JobID: "test", OperatorID: "src", Subtask: sub, Parallelism: par})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s.(*source)
}

// readN reads until n rows arrived (or 30 s), returning the batches.
func readN(t testing.TB, s connectors.Source, n int) []connectors.Batch {
	t.Helper()
	var out []connectors.Batch
	got := 0
	deadline := time.Now().Add(30 * time.Second)
	for got < n {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		b, err := s.Read(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Read after %d of %d rows: %v", got, n, err)
		}
		if b.Record == nil {
			continue
		}
		t.Cleanup(b.Record.Release)
		out = append(out, b)
		got += int(b.Record.NumRows())
	}
	return out
}
