package mqtt

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// maxReconnectInterval caps the pause between two reconnection attempts
// to a broker that went away.
const maxReconnectInterval = 2 * time.Second

// endpoint is what a client needs to reach and log in to the broker.
type endpoint struct {
	host               string
	port               int
	clientID           string
	username, password string
	cleanSession       bool
	keepAlive          *int
	tls                *TLS
}

// subtaskClientID is the client ID of one subtask (a broker allows one
// client per ID): id for subtask 0, which keeps its session when the
// parallelism changes, id-SUBTASK for the others.
func subtaskClientID(id string, subtask int) string {
	if subtask == 0 {
		return id
	}
	return id + "-" + strconv.Itoa(subtask)
}

// options returns the client options of e: auto-reconnecting (a source or
// sink fails on what it cannot do while disconnected, not on the
// disconnection itself), MQTT 3.1.1, paho's in-memory store.
func (e endpoint) options() (*paho.ClientOptions, error) {
	o := paho.NewClientOptions()
	scheme := "tcp"
	if e.tls.on() {
		scheme = "ssl"
		cfg, err := tlsConfig(e.tls, e.host)
		if err != nil {
			return nil, err
		}
		o.SetTLSConfig(cfg)
	}
	o.AddBroker(scheme + "://" + net.JoinHostPort(e.host, strconv.Itoa(e.port)))
	o.SetClientID(e.clientID)
	o.SetUsername(e.username)
	o.SetPassword(e.password)
	o.SetCleanSession(e.cleanSession)
	ka := DefaultKeepAlive
	if e.keepAlive != nil {
		ka = *e.keepAlive
	}
	o.SetKeepAlive(time.Duration(ka) * time.Second)
	o.SetProtocolVersion(4)
	o.SetAutoReconnect(true)
	o.SetConnectRetry(false)
	o.SetMaxReconnectInterval(maxReconnectInterval)
	o.SetConnectTimeout(ConnectTimeout)
	o.SetOrderMatters(true)
	return o, nil
}

// address is the broker as logs and errors name it.
func (e endpoint) address() string {
	return net.JoinHostPort(e.host, strconv.Itoa(e.port))
}

// connect connects c; ctx bounds only connecting. It returns whether the
// broker had a session for the client ID.
func connect(ctx context.Context, c paho.Client, e endpoint) (sessionPresent bool, err error) {
	tok := c.Connect()
	if err := wait(ctx, tok, ConnectTimeout); err != nil {
		c.Disconnect(0)
		return false, fmt.Errorf("mqtt: connecting to %s as %q: %w%s", e.address(), e.clientID, err, hint(err, e.tls))
	}
	return tok.(*paho.ConnectToken).SessionPresent(), nil
}

// errTimeout is wait's error when the broker did not answer in time.
var errTimeout = errors.New("the broker did not answer in time")

// wait waits for tok, at most d and until ctx ends.
func wait(ctx context.Context, tok paho.Token, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("%w (%s)", errTimeout, d)
	}
}

// hint says what to check for the errors of a failed connect.
func hint(err error, tc *TLS) string {
	var ce *tls.CertificateVerificationError
	var op *net.OpError
	switch {
	case errors.Is(err, packets.ErrorRefusedNotAuthorised), errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword):
		return " (check username and password: the broker refused them)"
	case errors.As(err, &ce):
		if tc != nil && tc.CA != "" {
			return " (the broker's certificate is not signed by the CA in tls.ca)"
		}
		return " (the broker's certificate is not signed by a CA the system trusts: name its CA in tls.ca)"
	case strings.Contains(err.Error(), "tls: certificate required"):
		return " (the broker requires a client certificate: set tls.client_cert and tls.client_key)"
	case errors.As(err, &op) && !tc.on():
		return " (is the broker running, and are host and port right? A broker listening with TLS needs a tls block)"
	case errors.As(err, &op) && tc.ClientCert == "":
		// Under TLS 1.3 a broker refuses a missing client certificate
		// after the handshake: the client may see only a reset.
		return " (is the broker running, and are host and port right? A broker that requires client certificates needs tls.client_cert and tls.client_key)"
	case errors.As(err, &op):
		return " (is the broker running, and are host and port right?)"
	}
	return ""
}

// tlsConfig builds the client's TLS config from the tls block.
func tlsConfig(tc *TLS, host string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	if tc.CA != "" {
		pem, err := os.ReadFile(tc.CA)
		if err != nil {
			return nil, fmt.Errorf("mqtt: reading tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mqtt: tls.ca %s holds no PEM certificate", tc.CA)
		}
		cfg.RootCAs = pool
	}
	if tc.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(tc.ClientCert, tc.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("mqtt: loading tls.client_cert and tls.client_key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
