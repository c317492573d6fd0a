// Package testpki makes a throwaway PKI for TLS tests: a CA, a server
// certificate for 127.0.0.1 and localhost and a client certificate it
// signed, and another CA that signed neither, written as PEM files into
// a temporary directory removed after the test. The certificates are
// valid for an hour. The directory and files are readable by every user
// (t.TempDir's are not): a server a test starts as root may drop to its
// own user, as mosquitto does, and must read them.
package testpki

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
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI holds the paths of the PEM files.
type PKI struct {
	CA, OtherCA           string // CA certificates
	ServerCert, ServerKey string // for 127.0.0.1 and localhost, signed by CA
	ClientCert, ClientKey string // a client certificate signed by CA
}

// New writes a PKI into a new directory.
func New(t testing.TB) PKI {
	t.Helper()
	dir, err := os.MkdirTemp("", "arkflow-pki-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca, caKey, caDER := newCA(t, "arkflow test CA")
	_, _, otherDER := newCA(t, "another CA")
	sDER, sKey := leaf(t, ca, caKey, 2, x509.ExtKeyUsageServerAuth)
	cDER, cKey := leaf(t, ca, caKey, 3, x509.ExtKeyUsageClientAuth)
	return PKI{
		CA:         write("ca.pem", "CERTIFICATE", caDER),
		OtherCA:    write("other-ca.pem", "CERTIFICATE", otherDER),
		ServerCert: write("server.pem", "CERTIFICATE", sDER),
		ServerKey:  write("server-key.pem", "EC PRIVATE KEY", keyDER(t, sKey)),
		ClientCert: write("client.pem", "CERTIFICATE", cDER),
		ClientKey:  write("client-key.pem", "EC PRIVATE KEY", keyDER(t, cKey)),
	}
}

// Pool returns a pool holding the CA.
func (p PKI) Pool(t testing.TB) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(p.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("%s holds no certificate", p.CA)
	}
	return pool
}

// Server returns the server certificate and key, for a tls.Config.
func (p PKI) Server(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(p.ServerCert, p.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func key(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keyDER(t testing.TB, k *ecdsa.PrivateKey) []byte {
	b, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	k := key(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, k, der
}

func leaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
	k := key(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "arkflow test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, k
}
