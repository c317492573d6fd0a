package mqtt

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
	"github.com/arkflow-rs/arkflow-go/internal/testpki"
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

// A Mosquitto with two TLS listeners, one requiring client certificates:
// a source and a sink with the tls block move rows over each; without the
// client certificate where one is required, with the wrong CA, or without
// TLS, Connect fails saying what to check.
func TestTLS(t *testing.T) {
	p := testpki.New(t)
	mutual, serverOnly := freePort(t), freePort(t)
	listener := func(port int, require bool) string {
		return fmt.Sprintf("listener %d 127.0.0.1\ncafile %s\ncertfile %s\nkeyfile %s\nrequire_certificate %v\n", port, p.CA, p.ServerCert, p.ServerKey, require)
	}
	startMosquitto(t, "allow_anonymous true\npersistence false\nlog_dest stderr\n"+listener(mutual, true)+listener(serverOnly, false), mutual, serverOnly)

	for _, c := range []struct {
		name string
		port int
		tls  *TLS
	}{
		{"client certificate", mutual, &TLS{CA: p.CA, ClientCert: p.ClientCert, ClientKey: p.ClientKey}},
		{"server certificate only", serverOnly, &TLS{CA: p.CA}},
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
		{"no client certificate", "tls.client_cert and tls.client_key", mutual, &TLS{CA: p.CA}},
		{"wrong CA", "the broker's certificate is not signed by the CA in tls.ca", serverOnly, &TLS{CA: p.OtherCA}},
		{"system roots", "not signed by a CA the system trusts: name its CA in tls.ca", serverOnly, &TLS{}},
		{"TLS off", "A broker listening with TLS needs a tls block", serverOnly, &TLS{Enabled: &no, CA: p.CA}},
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
