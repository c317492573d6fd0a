package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// dial builds a client for the mode and tls block and checks the server
// answers (PING); ctx (and ConnectTimeout) bound that check. The client
// reconnects by itself; callers retry what failed on a connection error.
func dial(ctx context.Context, m Mode, tc *TLS, name string) (goredis.UniversalClient, error) {
	var tcfg *tls.Config
	if tc != nil {
		c, err := tlsConfig(tc)
		if err != nil {
			return nil, err
		}
		tcfg = c
	}
	var client goredis.UniversalClient
	where := redact(m.URL)
	if m.Type == ModeCluster {
		co := &goredis.ClusterOptions{ClientName: name}
		for i, u := range m.URLs {
			o, err := goredis.ParseURL(u)
			if err != nil {
				return nil, fmt.Errorf("redis: mode.urls[%d]: %w", i, err)
			}
			co.Addrs = append(co.Addrs, o.Addr)
			if i == 0 {
				co.Username, co.Password, co.TLSConfig = o.Username, o.Password, o.TLSConfig
			}
		}
		if tcfg != nil {
			co.TLSConfig = tcfg
		}
		client = goredis.NewClusterClient(co)
		where = fmt.Sprint(co.Addrs)
	} else {
		o, err := goredis.ParseURL(m.URL)
		if err != nil {
			return nil, fmt.Errorf("redis: mode.url: %w", err)
		}
		o.ClientName = name
		if tcfg != nil {
			if tcfg.ServerName == "" {
				tcfg.ServerName, _, _ = net.SplitHostPort(o.Addr)
			}
			o.TLSConfig = tcfg
		}
		client = goredis.NewClient(o)
	}
	pctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis: connecting to %s: %w%s", where, err, hint(err, tc != nil && tc.CA != ""))
	}
	return client, nil
}

// hint says what to check for the errors of a failed connect.
func hint(err error, withCA bool) string {
	var ce *tls.CertificateVerificationError
	if errors.As(err, &ce) {
		if withCA {
			return " (the server's certificate is not signed by the CA in tls.ca)"
		}
		return " (the server's certificate is not signed by a CA the system trusts: name its CA in tls.ca)"
	}
	if strings.Contains(err.Error(), "certificate required") {
		return " (the server wants a client certificate: give tls.client_cert and tls.client_key)"
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return " (is the server running, is the URL's host and port right, and does it want TLS (rediss://)?)"
	}
	return ""
}

// tlsConfig builds the client's TLS config from the tls block.
func tlsConfig(tc *TLS) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if tc.CA != "" {
		pem, err := os.ReadFile(tc.CA)
		if err != nil {
			return nil, fmt.Errorf("redis: reading tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redis: tls.ca %s holds no PEM certificate", tc.CA)
		}
		cfg.RootCAs = pool
	}
	if tc.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(tc.ClientCert, tc.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("redis: loading tls.client_cert and tls.client_key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// redact drops the password from a URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// connName is the client's name in the server's CLIENT LIST:
// "arkflow:JOB/OPERATOR/SUBTASK" (spaces are not allowed).
func connName(job, op string, subtask int) string {
	b := []byte(fmt.Sprintf("arkflow:%s/%s/%d", job, op, subtask))
	for i, c := range b {
		if c <= ' ' || c > '~' {
			b[i] = '_'
		}
	}
	return string(b)
}

// retryable reports whether err is a connection problem (the command may
// succeed on a new connection) rather than the server's answer.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var re goredis.Error
	if errors.As(err, &re) {
		return false
	}
	return true
}

// retryWait is the pause before the next attempt after a connection error.
const retryWait = 250 * time.Millisecond

// sleepCtx waits d or until ctx ends, and returns ctx.Err().
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
