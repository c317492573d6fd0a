package nats

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

// reconnectWait is the pause between two reconnection attempts to a
// server that went away (nats.go's default is 2 s).
const reconnectWait = 250 * time.Millisecond

// dial connects to the servers of url with the auth and tls blocks. name
// is the connection's name, which the server shows in its connection
// list. The connection reconnects forever: a source or sink fails on what
// it cannot do while disconnected (a publish that is not acknowledged in
// time), not on the disconnection itself, which is logged. ctx bounds only
// connecting.
func dial(ctx context.Context, url string, auth *Auth, tc *TLS, name string, lg *slog.Logger) (*natsgo.Conn, error) {
	timeout := ConnectTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(d), time.Millisecond))
	}
	opts := []natsgo.Option{
		natsgo.Name(name),
		natsgo.Timeout(timeout),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(reconnectWait),
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) {
			if err != nil {
				lg.Warn("disconnected from the NATS server; reconnecting", "error", err)
			}
		}),
		natsgo.ReconnectHandler(func(c *natsgo.Conn) {
			lg.Info("reconnected to the NATS server", "server", c.ConnectedUrlRedacted())
		}),
		natsgo.ErrorHandler(func(_ *natsgo.Conn, sub *natsgo.Subscription, err error) {
			if sub != nil {
				lg.Warn("NATS subscription error", "subject", sub.Subject, "error", err)
				return
			}
			lg.Warn("NATS connection error", "error", err)
		}),
	}
	if auth != nil {
		switch {
		case auth.Username != "":
			opts = append(opts, natsgo.UserInfo(auth.Username, auth.Password))
		case auth.Token != "":
			opts = append(opts, natsgo.Token(auth.Token))
		case auth.CredsFile != "":
			opts = append(opts, natsgo.UserCredentials(auth.CredsFile))
		}
	}
	if tc != nil {
		cfg, err := tlsConfig(tc)
		if err != nil {
			return nil, err
		}
		opts = append(opts, natsgo.Secure(cfg))
	}
	type result struct {
		nc  *natsgo.Conn
		err error
	}
	// The client's Connect takes no ctx: it runs beside the wait for ctx, and a
	// connection that comes after ctx ended is closed.
	ch := make(chan result, 1)
	go func() {
		nc, err := natsgo.Connect(url, opts...)
		ch <- result{nc, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("nats: connecting to %s: %w%s", redact(url), r.err, hint(r.err, tc != nil && tc.CA != ""))
		}
		return r.nc, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, fmt.Errorf("nats: connecting to %s: %w", redact(url), ctx.Err())
	}
}

// hint says what to check for the errors of a failed connect; withCA:
// the tls block names a CA.
func hint(err error, withCA bool) string {
	switch {
	case errors.Is(err, natsgo.ErrAuthorization), errors.Is(err, natsgo.ErrAuthExpired):
		return " (check the auth block: the server refused the credentials)"
	case errors.Is(err, natsgo.ErrSecureConnRequired):
		return " (the server requires TLS: use a tls:// URL or a tls block)"
	case errors.Is(err, natsgo.ErrSecureConnWanted):
		return " (TLS was asked for, by a tls:// URL or a tls block, and the server does not offer it)"
	case errors.Is(err, natsgo.ErrNoServers):
		return " (is the server running, and is the URL's host and port right?)"
	}
	var ce *tls.CertificateVerificationError
	if errors.As(err, &ce) {
		if withCA {
			return " (the server's certificate is not signed by the CA in tls.ca)"
		}
		return " (the server's certificate is not signed by a CA the system trusts: name its CA in tls.ca)"
	}
	return ""
}

// tlsConfig builds the client's TLS config from the tls block.
func tlsConfig(tc *TLS) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: tc.InsecureSkipVerify} //nolint:gosec // opt-in, documented as for tests
	if tc.CA != "" {
		pem, err := os.ReadFile(tc.CA)
		if err != nil {
			return nil, fmt.Errorf("nats: reading tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("nats: tls.ca %s holds no PEM certificate", tc.CA)
		}
		cfg.RootCAs = pool
	}
	if tc.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(tc.ClientCert, tc.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("nats: loading tls.client_cert and tls.client_key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// redact drops the credentials from URLs (user:password@host).
func redact(url string) string {
	parts := strings.Split(url, ",")
	for i, u := range parts {
		at := strings.LastIndexByte(u, '@')
		if at < 0 {
			continue
		}
		if s := strings.Index(u, "://"); s >= 0 && s < at {
			parts[i] = u[:s+3] + "***@" + u[at+1:]
		} else {
			parts[i] = "***@" + u[at+1:]
		}
	}
	return strings.Join(parts, ",")
}

// connName is the name a connection has in the server's list:
// "arkflow JOB/OPERATOR/SUBTASK".
func connName(job, op string, subtask int) string {
	return fmt.Sprintf("arkflow %s/%s/%d", job, op, subtask)
}
