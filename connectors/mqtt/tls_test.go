package mqtt

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// The TLS test starts a Mosquitto of its own: the binary is
// ARKFLOW_TEST_MOSQUITTO, else mosquitto on the PATH, else Debian's
// /usr/sbin/mosquitto.
const noMosquitto = "no mosquitto binary: set ARKFLOW_TEST_MOSQUITTO to one (apt-get install mosquitto puts one in /usr/sbin)"

func mosquittoBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ARKFLOW_TEST_MOSQUITTO"); p != "" {
		return p
	}
	if p, err := exec.LookPath("mosquitto"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/mosquitto"); err == nil {
		return "/usr/sbin/mosquitto"
	}
	t.Skip(noMosquitto)
	return ""
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startMosquitto runs mosquitto with conf until the end of the test and
// waits until every port accepts connections.
func startMosquitto(t *testing.T, conf string, ports ...int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mosquitto.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mosquittoBinary(t), "-c", path)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(15 * time.Second)
	for _, port := range ports {
		for {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("mosquitto did not listen on %d in 15 s: %s", port, log.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// pki is a CA and the files of a server and a client certificate it
// signed, and another CA.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey, otherCA string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir, err := os.MkdirTemp("", "mqtt-pki-") // readable by mosquitto's user
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

// A Mosquitto with two TLS listeners, one requiring client certificates:
// a source and a sink with the tls block move rows over each; without the
// client certificate where one is required, with the wrong CA, or without
// TLS, Connect fails saying what to check.
func TestTLS(t *testing.T) {
	p := newPKI(t)
	mutual, serverOnly := freePort(t), freePort(t)
	listener := func(port int, require bool) string {
		return fmt.Sprintf("listener %d 127.0.0.1\ncafile %s\ncertfile %s\nkeyfile %s\nrequire_certificate %v\n", port, p.ca, p.serverCert, p.serverKey, require)
	}
	startMosquitto(t, "allow_anonymous true\npersistence false\nlog_dest stderr\n"+listener(mutual, true)+listener(serverOnly, false), mutual, serverOnly)

	for _, c := range []struct {
		name string
		port int
		tls  *TLS
	}{
		{"client certificate", mutual, &TLS{CA: p.ca, ClientCert: p.clientCert, ClientKey: p.clientKey}},
		{"server certificate only", serverOnly, &TLS{CA: p.ca}},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic := uniqueName(t, "tls")
			in := buildInput(t, SourceConfig{Host: "127.0.0.1", Port: c.port, ClientID: uniqueName(t, "src"), Topics: []string{topic}, TLS: c.tls, Schema: conformance.Declared()})
			src := openSource(t, in, 0, 1)
			rec := conformance.NewRecord([]conformance.Row{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}})
			defer rec.Release()
			out := buildOutput(t, SinkConfig{Host: "127.0.0.1", Port: c.port, ClientID: uniqueName(t, "snk"), Topic: Topic{Value: topic}, TLS: c.tls}, rec.Schema())
			if err := openSink(t, out).Write(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
			bs := readBatches(t, src, 2)
			if got := strings.Join(column(t, bs, "name"), ","); got != "a,b" {
				t.Fatalf("read over TLS: %s, want a,b", got)
			}
		})
	}

	no := false
	for _, c := range []struct {
		name, want string
		port       int
		tls        *TLS
	}{
		{"no client certificate", "tls.client_cert and tls.client_key", mutual, &TLS{CA: p.ca}},
		{"wrong CA", "the broker's certificate is not signed by the CA in tls.ca", serverOnly, &TLS{CA: p.otherCA}},
		{"system roots", "not signed by a CA the system trusts: name its CA in tls.ca", serverOnly, &TLS{}},
		{"TLS off", "A broker listening with TLS needs a tls block", serverOnly, &TLS{Enabled: &no, CA: p.ca}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := buildInput(t, SourceConfig{Host: "127.0.0.1", Port: c.port, ClientID: uniqueName(t, "src"), Topics: []string{"x"}, TLS: c.tls})
			s := newTestSource(t, in, 0, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := s.Connect(ctx)
			if err == nil {
				t.Fatal("Connect succeeded")
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("connecting to 127.0.0.1:%d", c.port)) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Connect: %v; want it to name the broker and say %q", err, c.want)
			}
			t.Logf("Connect: %v", err)
		})
	}
}
