package websocket

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Type is the input type name.
const Type = "websocket"

// Payload formats.
const (
	// FormatJSON decodes every frame as JSON objects, one per line
	// (NDJSON; a frame of one object is one row), into the declared
	// schema. It is the default when a schema is declared.
	FormatJSON = "json"
	// FormatRaw keeps each frame's bytes as one row, in a binary column
	// named "value". It is the default without a schema.
	FormatRaw = "raw"
)

// RawValueColumn is the value column of FormatRaw.
const RawValueColumn = "value"

// Defaults.
const (
	// DefaultBatchSize is the default maximum number of rows per batch.
	DefaultBatchSize = 1024
	// DefaultTimeoutSeconds bounds a connection's opening handshake
	// unless timeout sets it.
	DefaultTimeoutSeconds = 10
	// DefaultMaxMessageBytes is the largest frame read unless
	// max_message_bytes sets it.
	DefaultMaxMessageBytes = 1 << 20
	// DefaultReconnectInitialMS and DefaultReconnectMaxMS are the first
	// and the largest wait between attempts to connect again.
	DefaultReconnectInitialMS = 100
	DefaultReconnectMaxMS     = 10_000
)

// SourceConfig is the config of the "websocket" input. url, headers and
// timeout are ArkFlow's keys; tls, format, schema, batch_size,
// max_message_bytes and reconnect are additions.
type SourceConfig struct {
	// URL is the server, ws://host[:port]/path or wss:// (TLS). Required.
	URL string `json:"url"`
	// Headers are sent with the opening handshake (Authorization, say).
	Headers map[string]string `json:"headers,omitempty"`
	// Timeout bounds the opening handshake, in seconds (default 10).
	Timeout int `json:"timeout,omitempty"`
	// TLS holds the CA and client certificate of a wss:// URL.
	TLS *TLS `json:"tls,omitempty"`
	// Format is "json" (the default with a schema) or "raw" (the default
	// without one: a binary "value" column).
	Format string `json:"format,omitempty"`
	// Schema declares the columns a JSON frame decodes into.
	Schema connectors.Schema `json:"schema,omitempty"`
	// BatchSize is the maximum number of rows per batch (default 1024).
	// A batch holds the frames that were there without waiting.
	BatchSize int `json:"batch_size,omitempty"`
	// MaxMessageBytes is the largest frame read (default 1 MiB). A larger
	// one fails the source: it is never cut or skipped.
	MaxMessageBytes int64 `json:"max_message_bytes,omitempty"`
	// Reconnect sets the waits between attempts to connect again after
	// the connection was lost: exponential, with jitter.
	Reconnect *Reconnect `json:"reconnect,omitempty"`
}

// InputType returns "websocket".
func (SourceConfig) InputType() string { return Type }

// Reconnect is the reconnect block: the wait before the first attempt
// after a lost connection, doubled after each failed attempt up to max_ms.
type Reconnect struct {
	InitialMS int64 `json:"initial_ms,omitempty"`
	MaxMS     int64 `json:"max_ms,omitempty"`
}

// TLS is the tls block: files in PEM.
type TLS struct {
	// CA is the CA certificate that signed the server's (default: the
	// system's roots).
	CA string `json:"ca,omitempty"`
	// ClientCert and ClientKey are the client certificate and its key,
	// for servers that verify clients; both or neither.
	ClientCert string `json:"client_cert,omitempty"`
	ClientKey  string `json:"client_key,omitempty"`
	// InsecureSkipVerify accepts any server certificate. For tests only.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
}

// check validates c and applies its defaults. zero holds the numeric keys
// the spec set to 0 explicitly (an error, where 0 is not a value).
func (c *SourceConfig) check(zero map[string]bool) error {
	var f connectors.Fields
	checkURL(&f, c.URL, c.TLS != nil)
	for k := range c.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			f.Add("headers", "%q is not a header name", k)
		}
	}
	if c.TLS != nil && (c.TLS.ClientCert == "") != (c.TLS.ClientKey == "") {
		f.Add("tls", "client_cert and client_key go together (got only one)")
	}
	switch c.Format {
	case "":
		c.Format = FormatRaw
		if c.Schema != nil {
			c.Format = FormatJSON
		}
	case FormatJSON:
		if c.Schema == nil {
			f.Add("schema", "is required with format %q", FormatJSON)
		}
	case FormatRaw:
		if c.Schema != nil {
			f.Add("schema", "must be absent with format %q (a frame is one binary column %q)", FormatRaw, RawValueColumn)
		}
	default:
		f.Add("format", "must be %q or %q (got %q)", FormatJSON, FormatRaw, c.Format)
	}
	if c.Schema != nil {
		if _, err := c.Schema.Arrow("schema"); err != nil {
			f.Merge("", err)
		}
	}
	positive(&f, "timeout", &c.Timeout, DefaultTimeoutSeconds, zero)
	positive(&f, "batch_size", &c.BatchSize, DefaultBatchSize, zero)
	positive(&f, "max_message_bytes", &c.MaxMessageBytes, DefaultMaxMessageBytes, zero)
	if c.Reconnect == nil {
		c.Reconnect = &Reconnect{}
	}
	positive(&f, "reconnect.initial_ms", &c.Reconnect.InitialMS, DefaultReconnectInitialMS, zero)
	positive(&f, "reconnect.max_ms", &c.Reconnect.MaxMS, DefaultReconnectMaxMS, zero)
	if c.Reconnect.MaxMS < c.Reconnect.InitialMS {
		f.Add("reconnect.max_ms", "must be ≥ reconnect.initial_ms (%d), got %d", c.Reconnect.InitialMS, c.Reconnect.MaxMS)
	}
	return f.Err()
}

// positive checks that *v is > 0 when set and sets it to def when not.
func positive[N int | int64](f *connectors.Fields, key string, v *N, def N, zero map[string]bool) {
	switch {
	case *v < 0 || zero[key]:
		f.Add(key, "must be > 0 (got %d)", *v)
	case *v == 0:
		*v = def
	}
}

func checkURL(f *connectors.Fields, raw string, hasTLS bool) {
	if strings.TrimSpace(raw) == "" {
		f.Add("url", "is required (ws://host:port/path, or wss:// for TLS)")
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		f.Add("url", "%q is not a URL: %v", raw, err)
	case u.Scheme != "ws" && u.Scheme != "wss":
		f.Add("url", "scheme %q of %q: must be ws or wss", u.Scheme, raw)
	case u.Host == "":
		f.Add("url", "%q has no host", raw)
	case hasTLS && u.Scheme != "wss":
		f.Add("tls", "is for wss:// URLs (url is %q)", raw)
	}
}

// explicitZero returns the numeric keys of raw (top level, or
// "reconnect." and a key of that block) whose value is 0.
func explicitZero(raw json.RawMessage) map[string]bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var rc map[string]json.RawMessage
	_ = json.Unmarshal(m["reconnect"], &rc)
	out := map[string]bool{}
	isZero := func(v json.RawMessage) bool {
		var n float64
		return json.Unmarshal(v, &n) == nil && n == 0
	}
	for k, v := range m {
		if isZero(v) {
			out[k] = true
		}
	}
	for k, v := range rc {
		if isZero(v) {
			out["reconnect."+k] = true
		}
	}
	return out
}

// httpClient is the client of the opening handshakes: it carries the TLS
// settings (a context bounds the handshake: the websocket library refuses
// a client timeout, which would end the connection too).
func (c *SourceConfig) httpClient() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c.TLS != nil {
		tc, err := tlsConfig(c.TLS)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
	}
	return &http.Client{Transport: tr}, nil
}

func tlsConfig(tc *TLS) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: tc.InsecureSkipVerify} //nolint:gosec // opt-in, documented as for tests
	if tc.CA != "" {
		pem, err := os.ReadFile(tc.CA)
		if err != nil {
			return nil, fmt.Errorf("websocket: reading tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("websocket: tls.ca %s holds no PEM certificate", tc.CA)
		}
		cfg.RootCAs = pool
	}
	if tc.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(tc.ClientCert, tc.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("websocket: loading tls.client_cert and tls.client_key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
