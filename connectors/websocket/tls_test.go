package websocket

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// pki is a CA, a server certificate and a client certificate it signed,
// and another CA, as PEM files.
type pki struct {
	ca, otherCA, clientCert, clientKey string
	server                             tls.Certificate
	pool                               *x509.CertPool
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
	leaf := func(serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "arkflow test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	sDER, sKey := leaf(2, x509.ExtKeyUsageServerAuth)
	cDER, cKey := leaf(3, x509.ExtKeyUsageClientAuth)
	cKeyDER, _ := x509.MarshalECPrivateKey(cKey)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pki{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		otherCA:    write("other-ca.pem", "CERTIFICATE", otherDER),
		clientCert: write("client.pem", "CERTIFICATE", cDER),
		clientKey:  write("client-key.pem", "EC PRIVATE KEY", cKeyDER),
		server:     tls.Certificate{Certificate: [][]byte{sDER}, PrivateKey: sKey},
		pool:       pool,
	}
}

// A wss:// server that requires a client certificate: the source reads
// its frames with the tls block's CA and client certificate, and Connect
// fails, naming the URL, without the certificate or with another CA.
func TestTLS(t *testing.T) {
	p := newPKI(t)
	srv := newServer(t, true, func(s *httptest.Server) {
		s.TLS = &tls.Config{Certificates: []tls.Certificate{p.server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.pool, MinVersion: tls.VersionTLS12}
	})
	url := srv.url()
	if !strings.HasPrefix(url, "wss://") {
		t.Fatalf("url %s", url)
	}
	s := openSource(t, buildInput(t, SourceConfig{URL: url, Schema: userSchema, TLS: &TLS{CA: p.ca, ClientCert: p.clientCert, ClientKey: p.clientKey}}), 0, 1)
	srv.waitJoined(t, 1)
	srv.send(t, ws.MessageText, []byte(`{"user":"tls","n":7}`))
	if rows, _ := rowsOf(t, readN(t, s, 1)); len(rows) != 1 || rows[0] != "tls:7" {
		t.Errorf("rows %v", rows)
	}
	for name, tc := range map[string]*TLS{
		"no client certificate": {CA: p.ca},
		"another CA":            {CA: p.otherCA, ClientCert: p.clientCert, ClientKey: p.clientKey},
		"the system's roots":    {ClientCert: p.clientCert, ClientKey: p.clientKey},
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
