package websocket

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"strings"
	"testing"

	ws "github.com/coder/websocket"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/testpki"
)

// A wss:// server that requires a client certificate: the source reads
// its frames with the tls block's CA and client certificate, and Connect
// fails, naming the URL, without the certificate or with another CA.
func TestTLS(t *testing.T) {
	p := testpki.New(t)
	srv := newServer(t, true, func(s *httptest.Server) {
		s.TLS = &tls.Config{Certificates: []tls.Certificate{p.Server(t)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.Pool(t), MinVersion: tls.VersionTLS12}
	})
	url := srv.url()
	if !strings.HasPrefix(url, "wss://") {
		t.Fatalf("url %s", url)
	}
	s := openSource(t, buildInput(t, SourceConfig{URL: url, Schema: userSchema, TLS: &TLS{CA: p.CA, ClientCert: p.ClientCert, ClientKey: p.ClientKey}}), 0, 1)
	srv.waitJoined(t, 1)
	srv.send(t, ws.MessageText, []byte(`{"user":"tls","n":7}`))
	if rows, _ := rowsOf(t, readN(t, s, 1)); len(rows) != 1 || rows[0] != "tls:7" {
		t.Errorf("rows %v", rows)
	}
	for name, tc := range map[string]*TLS{
		"no client certificate": {CA: p.CA},
		"another CA":            {CA: p.OtherCA, ClientCert: p.ClientCert, ClientKey: p.ClientKey},
		"the system's roots":    {ClientCert: p.ClientCert, ClientKey: p.ClientKey},
	} {
		in := buildInput(t, SourceConfig{URL: url, TLS: tc, Timeout: 5})
		src, _ := in.NewSource(connectors.TaskInfo{OperatorID: "src", Parallelism: 1})
		err := src.Connect(context.Background())
		if err == nil || !strings.Contains(err.Error(), url) {
			t.Errorf("%s: Connect: %v, want an error naming %s", name, err, url)
		}
		_ = src.Close(context.Background())
	}
}
