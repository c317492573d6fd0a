package httpconn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// pki is a CA and the files of a server and a client certificate it
// signed.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey, otherCA string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return c, k, der
	}
	ca, caKey, caDER := newCA("arkflow test CA")
	_, _, otherDER := newCA("another CA")
	leaf := func(serial int64, usage x509.ExtKeyUsage, ip bool) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "arkflow test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if ip {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	sDER, sKey := leaf(2, x509.ExtKeyUsageServerAuth, true)
	cDER, cKey := leaf(3, x509.ExtKeyUsageClientAuth, false)
	return pki{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		otherCA:    write("other-ca.pem", "CERTIFICATE", otherDER),
		serverCert: write("server.pem", "CERTIFICATE", sDER),
		serverKey:  write("server-key.pem", "EC PRIVATE KEY", keyDER(sKey)),
		clientCert: write("client.pem", "CERTIFICATE", cDER),
		clientKey:  write("client-key.pem", "EC PRIVATE KEY", keyDER(cKey)),
	}
}

// A server that requires TLS with client certificates, and a token: a
// JetStream source and a JetStream sink connect with a tls:// URL, the
// tls block and the token, and move rows; without the client certificate,
// with the wrong CA, with a nats:// URL and no tls block (its CA is not
// the system's), or with the wrong token, Connect fails saying what to

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
	p := newPKI(t)
	in := newTestInput(t, map[string]any{"address": "127.0.0.1:0", "format": "json", "schema": testSchema,
		"tls": map[string]any{"cert": p.serverCert, "key": p.serverKey}})
	src, url := startedSource(t, in)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("url %s", url)
	}
	good := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(t, p.ca)}}}
	ans := postBg(t, good, url, []byte(`{"user":"tls","n":1}`), nil)
	if got := readN(t, src, 1); got[0] != "tls:1" {
		t.Errorf("read %v", got)
	}
	if a := <-ans; a.code != http.StatusOK {
		t.Errorf("https post: %d", a.code)
	}
	wrongCA := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(t, p.otherCA)}}}
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
	p := newPKI(t)
	st := &store{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(st.serve))
	cert, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: certPool(t, p.ca)}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	schema := conformance.Schema()
	rows := []conformance.Row{{ID: 1, Name: "a"}}
	ok := newTestOutput(t, map[string]any{"url": srv.URL, "retry_count": 0,
		"tls": map[string]any{"ca": p.ca, "client_cert": p.clientCert, "client_key": p.clientKey}}, schema)
	if _, err := writeRows(t, ok, rows); err != nil {
		t.Fatalf("write with CA and client certificate: %v", err)
	}
	if got, _, _, _ := st.kept(); ids(got) != "1" {
		t.Errorf("server kept %s", ids(got))
	}
	for name, tlsCfg := range map[string]map[string]any{
		"no client certificate": {"ca": p.ca},
		"another CA":            {"ca": p.otherCA, "client_cert": p.clientCert, "client_key": p.clientKey},
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
