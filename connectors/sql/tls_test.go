package sql

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
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// pgBinDir finds PostgreSQL's initdb and pg_ctl: ARKFLOW_TEST_POSTGRES_BIN,
// the directory of pg_ctl on PATH, or Debian's /usr/lib/postgresql/*/bin.
func pgBinDir() string {
	var dirs []string
	if d := os.Getenv("ARKFLOW_TEST_POSTGRES_BIN"); d != "" {
		dirs = append(dirs, d)
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(r))
		}
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for _, d := range append(dirs, debian...) {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d
		}
	}
	return ""
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&0o111 != 0
}

// certs are a test CA and what it signed, as PEM files in dir.
type certs struct{ ca, serverCert, serverKey, clientCert, clientKey string }

// makeCerts writes a CA, a server certificate for 127.0.0.1 and
// localhost, and a client certificate for the user postgres.
func makeCerts(t *testing.T, dir, prefix string) certs {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte, mode os.FileMode) string {
		p := filepath.Join(dir, prefix+name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: prefix + "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP, dns []string) ([]byte, []byte) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature, IPAddresses: ips, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der, kder
	}
	sDER, sKey := leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	cDER, cKey := leaf(3, "postgres", x509.ExtKeyUsageClientAuth, nil, nil)
	return certs{
		ca:         write("ca.crt", "CERTIFICATE", caDER, 0o644),
		serverCert: write("server.crt", "CERTIFICATE", sDER, 0o644),
		serverKey:  write("server.key", "PRIVATE KEY", sKey, 0o600),
		clientCert: write("client.crt", "CERTIFICATE", cDER, 0o644),
		clientKey:  write("client.key", "PRIVATE KEY", cKey, 0o600),
	}
}

// tlsCluster starts a PostgreSQL cluster of its own that accepts only TLS
// connections: trust for every database but certdb, which needs a client
// certificate. It returns its port and the certificates; it is stopped
// when the test ends. It skips without PostgreSQL's binaries.
func tlsCluster(t *testing.T) (int, certs) {
	t.Helper()
	bin := pgBinDir()
	if bin == "" {
		t.Skip("no PostgreSQL binaries (initdb, pg_ctl): set ARKFLOW_TEST_POSTGRES_BIN (bash .ci/test.sh does) or install Debian's postgresql")
	}
	dir, err := os.MkdirTemp("", "arkflow-pgtls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// PostgreSQL refuses to run as root: then the cluster is the postgres
	// user's, which must reach dir.
	var owner *user.User
	if os.Getuid() == 0 {
		if owner, err = user.Lookup("postgres"); err != nil {
			t.Skipf("running as root and there is no postgres user to run PostgreSQL as: %v", err)
		}
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	c := makeCerts(t, dir, "")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		if owner != nil {
			cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Fatalf("%s %s: %v\n%s\n%s", name, strings.Join(args, " "), err, out, log)
		}
	}
	if owner != nil {
		uid, _ := strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		for _, p := range []string{dir, c.serverKey, c.serverCert, c.ca} {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	data := filepath.Join(dir, "data")
	run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	hba := "hostssl certdb all 127.0.0.1/32 cert\nhostssl all all 127.0.0.1/32 trust\n"
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	if owner != nil {
		uid, _ := strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		_ = os.Chown(filepath.Join(data, "pg_hba.conf"), uid, gid)
	}
	port := freePort(t)
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c ssl=on -c ssl_cert_file=%s -c ssl_key_file=%s -c ssl_ca_file=%s",
		port, dir, c.serverCert, c.serverKey, c.ca)
	run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-s", "-w", "-t", "60", "-o", opts, "start")
	t.Cleanup(func() { run("pg_ctl", "-D", data, "-m", "immediate", "-s", "stop") })
	return port, c
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TLS to PostgreSQL, by the ssl block and by the connection string's
// sslmode, against a cluster that refuses connections without it: the
// output writes and the input reads over a verified connection; a
// connection without TLS, or with a CA that did not sign the server's
// certificate, fails at Connect at once (nothing to retry) saying why;
// a database that wants a client certificate takes the ssl block's.
func TestTLSPostgres(t *testing.T) {
	port, c := tlsCluster(t)
	url := func(db string) string { return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s", port, db) }
	base := url("postgres")
	verified := base + "?sslmode=verify-full&sslrootcert=" + c.ca
	pgExec(t, verified, "CREATE TABLE t (id bigint PRIMARY KEY, name text)", "CREATE DATABASE certdb")
	schema := schemaOf("id", arrow.PrimitiveTypes.Int64, "name", arrow.BinaryTypes.String)
	connect := func(db DB) (*Sink, error) {
		s, _ := must[*Output](t)(NewOutput(SinkConfig{Database: db, TableName: "t", Mode: ModeUpsert, Keys: []string{"id"}}, schema)).NewSink(connectorsInfo())
		snk := s.(*Sink)
		t.Cleanup(func() { _ = snk.Close(context.Background()) })
		return snk, snk.Connect(context.Background())
	}
	for i, db := range []DB{
		{Type: Postgres, URI: base, SSL: &SSL{SSLMode: "verify-full", RootCert: c.ca}},
		{Type: Postgres, URI: verified},
		{Type: Postgres, URI: fmt.Sprintf("host=localhost port=%d user=postgres dbname=postgres", port), SSL: &SSL{SSLMode: "verify-full", RootCert: c.ca}},
	} {
		s, err := connect(db)
		if err != nil {
			t.Fatalf("Connect over TLS (%s): %v", db.URI, err)
		}
		if err := write(t, s, record(t, schema, []any{int64(i), fmt.Sprintf("tls %d", i)})); err != nil {
			t.Fatalf("Write over TLS: %v", err)
		}
	}
	if got := pgQuery(t, verified, "SELECT id, name FROM t ORDER BY id"); fmt.Sprint(got) != "[[0 tls 0] [1 tls 1] [2 tls 2]]" {
		t.Errorf("table %v", got)
	}

	in := must[*Input](t)(NewInput(SourceConfig{Database: DB{Type: Postgres, URI: base, SSL: &SSL{SSLMode: "verify-ca", RootCert: c.ca}},
		TableName: "t", TrackingColumn: "id", Schema: idName}))
	if got := rowsOf(readBatch(t, newSource(t, in, nil))); fmt.Sprint(got) != "[{0 0 tls 0} {1 1 tls 1} {2 2 tls 2}]" {
		t.Errorf("read over TLS: %v", got)
	}

	other := makeCerts(t, t.TempDir(), "other-")
	for _, bad := range []struct {
		db   DB
		want string
	}{
		{DB{Type: Postgres, URI: base + "?sslmode=disable"}, "no encryption"},
		{DB{Type: Postgres, URI: base, SSL: &SSL{SSLMode: "verify-full", RootCert: other.ca}}, "certificate signed by unknown authority"},
		{DB{Type: Postgres, URI: url("certdb"), SSL: &SSL{SSLMode: "verify-full", RootCert: c.ca}}, "certificate"},
	} {
		start := time.Now()
		s, err := connect(bad.db)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Connect with %+v: %v, want %q", bad.db.SSL, err, bad.want)
		}
		if n := s.r.retries.Load(); n != 0 {
			t.Errorf("Connect with %+v retried %d times (in %v): the error cannot pass", bad.db.SSL, n, time.Since(start))
		}
	}
	withCert := DB{Type: Postgres, URI: url("certdb"),
		SSL: &SSL{SSLMode: "verify-full", RootCert: c.ca, ClientCert: c.clientCert, ClientKey: c.clientKey}}
	pgExec(t, url("certdb")+"?sslmode=verify-full&sslrootcert="+c.ca+"&sslcert="+c.clientCert+"&sslkey="+c.clientKey, "CREATE TABLE t (id bigint PRIMARY KEY, name text)")
	s, err := connect(withCert)
	if err != nil {
		t.Fatalf("Connect with a client certificate: %v", err)
	}
	if err := write(t, s, record(t, schema, []any{int64(7), "cert"})); err != nil {
		t.Fatal(err)
	}
}
