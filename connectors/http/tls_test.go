package httpconn

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
	"github.com/arkflow-rs/arkflow-go/internal/testpki"
)

// certPool reads a CA file into a pool.
func certPool(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		t.Fatalf("no certificate in %s", path)
	}
	return p
}

// The input serves https with the configured certificate: a client
// trusting the CA posts rows; one that does not, or speaks plain http,
// gets nothing in.
func TestInputTLS(t *testing.T) {
	p := testpki.New(t)
	in := newTestInput(t, map[string]any{"address": "127.0.0.1:0", "format": "json", "schema": testSchema,
		"tls": map[string]any{"cert": p.ServerCert, "key": p.ServerKey}})
	src, url := startedSource(t, in)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("url %s", url)
	}
	good := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(t, p.CA)}}}
	ans := postBg(t, good, url, []byte(`{"user":"tls","n":1}`), nil)
	if got := readN(t, src, 1); got[0] != "tls:1" {
		t.Errorf("read %v", got)
	}
	if a := <-ans; a.code != http.StatusOK {
		t.Errorf("https post: %d", a.code)
	}
	wrongCA := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(t, p.OtherCA)}}}
	if _, err := wrongCA.Post(url, "application/json", strings.NewReader(`{"user":"x","n":2}`)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client trusting another CA: %v, want a certificate error", err)
	}
	if resp, err := http.Post(strings.Replace(url, "https://", "http://", 1), "application/json", strings.NewReader(`{"user":"x","n":3}`)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain http to the https input was answered 200")
		}
	}
	expectNothing(t, src)
}

// The output reaches a TLS server that verifies client certificates,
// given the CA and the client certificate; without the certificate, or
// trusting another CA, the write fails.
func TestOutputTLS(t *testing.T) {
	p := testpki.New(t)
	st := &store{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(st.serve))
	cert, err := tls.LoadX509KeyPair(p.ServerCert, p.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: certPool(t, p.CA)}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	schema := conformance.Schema()
	rows := []conformance.Row{{ID: 1, Name: "a"}}
	ok := newTestOutput(t, map[string]any{"url": srv.URL, "retry_count": 0,
		"tls": map[string]any{"ca": p.CA, "client_cert": p.ClientCert, "client_key": p.ClientKey}}, schema)
	if _, err := writeRows(t, ok, rows); err != nil {
		t.Fatalf("write with CA and client certificate: %v", err)
	}
	if got, _, _, _ := st.kept(); ids(got) != "1" {
		t.Errorf("server kept %s", ids(got))
	}
	for name, tlsCfg := range map[string]map[string]any{
		"no client certificate": {"ca": p.CA},
		"another CA":            {"ca": p.OtherCA, "client_cert": p.ClientCert, "client_key": p.ClientKey},
	} {
		out := newTestOutput(t, map[string]any{"url": srv.URL, "retry_count": 0, "tls": tlsCfg}, schema)
		if _, err := writeRows(t, out, rows); err == nil {
			t.Errorf("%s: the write succeeded", name)
		}
	}
	if got, _, _, _ := st.kept(); ids(got) != "1" {
		t.Errorf("server kept %s after the refused writes", ids(got))
	}
}
