package redis

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
	"github.com/arkflow-rs/arkflow-go/internal/testpki"
)

// server is a redis-server a test runs on a port of its own, which it
// may kill and start again (on the same port and directory).
type server struct {
	t      *testing.T
	args   []string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
	log    *strings.Builder
}

// newServer runs redis-server with args (plus a free port, as tls-port
// when tlsPort, and a directory) until the end of the test; it skips the
// test when redis-server is missing, or built without TLS when TLS is
// asked for.
func newServer(t *testing.T, tlsPort bool, args ...string) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server on the PATH: bash .ci/test.sh installs Debian's")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, port: l.Addr().(*net.TCPAddr).Port}
	l.Close()
	portArgs := []string{"--port", fmt.Sprint(s.port)}
	if tlsPort {
		portArgs = []string{"--port", "0", "--tls-port", fmt.Sprint(s.port)}
	}
	s.args = append(append([]string{bin}, portArgs...), "--bind", "127.0.0.1", "--save", "", "--dir", t.TempDir())
	s.args = append(s.args, args...)
	s.start()
	t.Cleanup(s.kill)
	return s
}

// start runs the server and waits until it accepts connections.
func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.log = &strings.Builder{}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.cmd, s.exited)
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-s.exited:
			if strings.Contains(s.log.String(), "TLS") {
				s.t.Skipf("redis-server has no TLS support: %s", s.log.String())
			}
			s.t.Fatalf("redis-server exited: %s", s.log.String())
		default:
		}
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port)); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server did not listen on %d in 15 s: %s", s.port, s.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL.
func (s *server) kill() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.cmd = nil
	}
}

// startTLSServer runs a redis-server of the test's own that speaks only
// TLS and verifies client certificates, and returns its port.
func startTLSServer(t *testing.T, p testpki.PKI) int {
	return newServer(t, true, "--tls-cert-file", p.ServerCert, "--tls-key-file", p.ServerKey, "--tls-ca-cert-file", p.CA,
		"--tls-auth-clients", "yes", "--appendonly", "no").port
}

// A server that speaks only TLS and requires client certificates: a
// streams source and a stream sink connect with a rediss:// URL and the
// tls block, and move rows; without the client certificate, with the
// wrong CA, or without a tls block (its CA is not the system's), Connect
// fails, saying what to check where it can tell.
func TestTLS(t *testing.T) {
	p := testpki.New(t)
	port := startTLSServer(t, p)
	url := fmt.Sprintf("rediss://127.0.0.1:%d", port)
	tc := &TLS{CA: p.CA, ClientCert: p.ClientCert, ClientKey: p.ClientKey}
	cfg, err := tlsConfig(tc)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), TLSConfig: cfg})
	defer c.Close()
	var payloads [][]byte
	for i := 0; i < 3; i++ {
		payloads = append(payloads, conformance.Row{ID: int64(i), Name: fmt.Sprint("r", i)}.JSON())
	}
	xadd(t, c, "in", payloads...)

	mode := Mode{Type: ModeSingle, URL: url}
	in := buildInput(t, SourceConfig{Mode: mode, TLS: tc, RedisType: SourceType{Type: TypeStream, Streams: []string{"in"}, Group: "g"}, Schema: conformance.Declared()})
	src := openSource(t, in, 0, 1, nil)
	b, err := readBatch(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.Record.NumRows(); n != 3 {
		t.Fatalf("read over TLS: %d rows, want 3", n)
	}
	out := buildOutput(t, SinkConfig{Mode: mode, TLS: tc, RedisType: SinkType{Type: TypeStream, Key: &Expr{Value: "out"}}}, in.Schema())
	snk, err := out.NewSink(connectors.TaskInfo{JobID: "j", OperatorID: "snk"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := snk.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer snk.Close(ctx)
	if err := snk.Write(ctx, b.Record); err != nil {
		t.Fatal(err)
	}
	b.Record.Release()
	msgs, err := c.XRange(ctx, "out", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		if got, want := m.Values[DefaultField], string(payloads[i]); got != want {
			t.Errorf("written over TLS: entry %d is %v, want %s", i, got, want)
		}
	}
	if len(msgs) != 3 {
		t.Errorf("written over TLS: %d entries, want 3", len(msgs))
	}

	for _, bad := range []struct {
		name string
		url  string
		tls  *TLS
		want string
	}{
		{"no client certificate", url, &TLS{CA: p.CA}, "the server wants a client certificate"},
		{"wrong CA", url, &TLS{CA: p.OtherCA, ClientCert: p.ClientCert, ClientKey: p.ClientKey}, "not signed by the CA in tls.ca"},
		{"no tls block", url, nil, "not signed by a CA the system trusts"},
		{"plain URL, no tls block", fmt.Sprintf("redis://127.0.0.1:%d", port), nil, "redis: connecting to"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			in := buildInput(t, SourceConfig{Mode: Mode{Type: ModeSingle, URL: bad.url}, TLS: bad.tls, RedisType: SourceType{Type: TypeStream, Streams: []string{"in"}, Group: "g"}})
			src, err := in.NewSource(connectors.TaskInfo{JobID: "j", OperatorID: "src", Parallelism: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = src.Connect(ctx)
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("Connect: %v, want an error containing %q", err, bad.want)
			}
		})
	}
}
