package httpconn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Type is the input and output type name.
const Type = "http"

// Body formats of the input and the output (format).
const (
	// FormatJSON is, for the input, a body of one JSON object or an array
	// of objects; for the output, one JSON array of the batch's rows per
	// request. The input's default with a schema, the output's default.
	FormatJSON = "json"
	// FormatNDJSON is one JSON object per line.
	FormatNDJSON = "ndjson"
	// FormatRaw (input) keeps the body as bytes in a binary column named
	// "value": one row per request. The default without a schema.
	FormatRaw = "raw"
	// FormatPerRow (output) sends one request per row, ArkFlow's way: the
	// body is the row as a JSON object, or the bytes of body_field.
	FormatPerRow = "per-row"
)

// RawValueColumn is the value column of FormatRaw.
const RawValueColumn = "value"

// Defaults.
const (
	// DefaultPath is the input's path unless path sets it.
	DefaultPath = "/"
	// DefaultMaxBodyBytes bounds a request's body (1 MiB); a larger one is
	// answered 413 and none of it enters the job.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxPending bounds the rows received and not yet taken by
	// the job; requests beyond it wait up to busy_wait_ms, then get 429.
	DefaultMaxPending = 1 << 16
	// DefaultBusyWaitMS is how long a request waits for room in a full
	// queue before it is answered 429 with Retry-After.
	DefaultBusyWaitMS = 1000
	// DefaultMaxInFlight bounds the requests read and handled at once;
	// more wait (unread) up to busy_wait_ms, then get 429.
	DefaultMaxInFlight = 64
	// DefaultIdempotencyHeader is the request header carrying the key.
	DefaultIdempotencyHeader = "Idempotency-Key"
	// DefaultIdempotencyRetention is how many row keys are remembered.
	DefaultIdempotencyRetention = 1_000_000
	// DefaultTimeoutMS is the output's per-request timeout (5 s).
	DefaultTimeoutMS = 5000
	// DefaultRetryCount is how often the output retries a request.
	DefaultRetryCount = 3
)

// SourceConfig is the config of the "http" input. address, path,
// cors_enabled and auth are ArkFlow's keys; format, schema,
// max_body_bytes, tls, partitions, max_pending, max_in_flight,
// busy_wait_ms and idempotency are additions.
type SourceConfig struct {
	// Address is the host:port the server listens on. Required.
	Address string `json:"address"`
	// Path is the URL path rows are POSTed to (default "/").
	Path string `json:"path,omitempty"`
	// CORSEnabled answers preflight requests and adds
	// Access-Control-Allow-Origin: * to every answer.
	CORSEnabled bool `json:"cors_enabled,omitempty"`
	// Auth, when set, is required of every request.
	Auth *Auth `json:"auth,omitempty"`
	// Format is json (the default with a schema), ndjson or raw (the
	// default without one).
	Format string `json:"format,omitempty"`
	// Schema declares the columns a JSON row decodes into.
	Schema connectors.Schema `json:"schema,omitempty"`
	// MaxBodyBytes bounds a request's body (default 1 MiB).
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// TLS serves https with this certificate.
	TLS *ServerTLS `json:"tls,omitempty"`
	// Partitions is the number of source partitions (default 1): requests
	// go round-robin, or to the one their ?partition=N query names.
	Partitions int `json:"partitions,omitempty"`
	// MaxPending bounds the rows received and not yet taken by the job
	// (default 65536).
	MaxPending int `json:"max_pending,omitempty"`
	// BusyWaitMS is how long a request waits for room when MaxPending rows
	// wait, before it is answered 429 (default 1000).
	BusyWaitMS int `json:"busy_wait_ms,omitempty"`
	// MaxInFlight bounds the requests whose bodies are read and handled
	// at once (default 64), so that memory stays below about
	// max_in_flight × max_body_bytes.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// Idempotency, when present, deduplicates requests by a header.
	Idempotency *Idempotency `json:"idempotency,omitempty"`
}

// InputType returns "http".
func (SourceConfig) InputType() string { return Type }

// Auth is the input's auth block, {type: basic, username, password} or
// {type: bearer, token}. The output accepts it too, beside ArkFlow's
// {Basic: {username, password}} and {Bearer: {token}}.
type Auth struct {
	// Type is "basic" or "bearer". Required.
	Type     string `json:"type"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Token    string `json:"token,omitempty"`
}

// ServerTLS is the input's tls block (an addition): PEM files.
type ServerTLS struct {
	// Cert and Key are the server's certificate (chain) and its key.
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// Idempotency is the input's idempotency block (an addition). A request
// whose header carries a key is taken once: row i of it has the key
// "KEY/i", and rows whose key was accepted before are acknowledged again
// without entering the job. It needs durability on the source.
type Idempotency struct {
	// Header is the request header holding the key (default
	// "Idempotency-Key").
	Header string `json:"header,omitempty"`
	// Retention is how many row keys are remembered (default 1000000).
	Retention int `json:"retention,omitempty"`
}

// SinkConfig is the config of the "http" output. url, method, timeout_ms,
// retry_count, headers, body_field and auth are ArkFlow's keys; format and
// tls are additions.
type SinkConfig struct {
	// URL is the http or https URL requests go to. Required.
	URL string `json:"url"`
	// Method is the request method (default POST).
	Method string `json:"method,omitempty"`
	// TimeoutMS bounds each request (default 5000).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// RetryCount is how often a request is retried after a 5xx, a 429 or
	// a connection error (default 3; 0 is no retry).
	RetryCount *int `json:"retry_count,omitempty"`
	// Headers are added to every request.
	Headers map[string]string `json:"headers,omitempty"`
	// BodyField (per-row) names a string or binary column whose bytes are
	// the body.
	BodyField string `json:"body_field,omitempty"`
	// Auth sets the Authorization header.
	Auth *SinkAuth `json:"auth,omitempty"`
	// Format is json (default: one JSON array per batch), ndjson (one
	// request per batch, a JSON object per line) or per-row.
	Format string `json:"format,omitempty"`
	// TLS holds the CA and client certificate for https.
	TLS *ClientTLS `json:"tls,omitempty"`
}

// OutputType returns "http".
func (SinkConfig) OutputType() string { return Type }

// ClientTLS is the output's tls block (an addition): PEM files.
type ClientTLS struct {
	// CA is the CA certificate that signed the server's (default: the
	// system's roots).
	CA string `json:"ca,omitempty"`
	// ClientCert and ClientKey are the client certificate and its key;
	// both or neither.
	ClientCert string `json:"client_cert,omitempty"`
	ClientKey  string `json:"client_key,omitempty"`
}

// SinkAuth is the output's auth: ArkFlow's externally tagged
// {Basic: {username, password}} or {Bearer: {token}}, or the input's
// form {type: basic | bearer, ...}.
type SinkAuth struct{ Auth }

// UnmarshalJSON accepts both forms of SinkAuth.
func (a *SinkAuth) UnmarshalJSON(b []byte) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Errorf("must be {Basic: {username, password}}, {Bearer: {token}} or {type: basic|bearer, ...}: %v", err)
	}
	strict := func(raw []byte, dst any) error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		return dec.Decode(dst)
	}
	if _, ok := probe["type"]; ok {
		return strict(b, &a.Auth)
	}
	if len(probe) != 1 {
		return fmt.Errorf("must hold exactly one of Basic or Bearer (got %d keys)", len(probe))
	}
	for k, v := range probe {
		switch k {
		case "Basic":
			a.Type = "basic"
			var c struct {
				Username string `json:"username"`
				Password string `json:"password"`
			}
			if err := strict(v, &c); err != nil {
				return fmt.Errorf("Basic: %v", err)
			}
			a.Username, a.Password = c.Username, c.Password
		case "Bearer":
			a.Type = "bearer"
			var c struct {
				Token string `json:"token"`
			}
			if err := strict(v, &c); err != nil {
				return fmt.Errorf("Bearer: %v", err)
			}
			a.Token = c.Token
		default:
			return fmt.Errorf("unknown auth %q: must be Basic or Bearer", k)
		}
	}
	return nil
}

func checkAuth(f *connectors.Fields, a *Auth) {
	if a == nil {
		return
	}
	switch a.Type {
	case "basic":
		if a.Username == "" {
			f.Add("auth.username", "is required with auth type basic")
		}
		if a.Token != "" {
			f.Add("auth.token", "is for auth type bearer only")
		}
	case "bearer":
		if a.Token == "" {
			f.Add("auth.token", "is required with auth type bearer")
		}
		if a.Username != "" || a.Password != "" {
			f.Add("auth", "username and password are for auth type basic only")
		}
	case "":
		f.Add("auth.type", "is required (basic or bearer)")
	default:
		f.Add("auth.type", "must be basic or bearer (got %q)", a.Type)
	}
}

// checkSource checks the input's config and applies its defaults.
func checkSource(c *SourceConfig, zero map[string]bool) error {
	var f connectors.Fields
	if c.Address == "" {
		f.Add("address", "is required (host:port, e.g. 0.0.0.0:8000)")
	} else if _, _, err := net.SplitHostPort(c.Address); err != nil {
		f.Add("address", "must be host:port (got %q): %v", c.Address, err)
	}
	if c.Path == "" {
		c.Path = DefaultPath
	} else if !strings.HasPrefix(c.Path, "/") {
		f.Add("path", "must start with / (got %q)", c.Path)
	}
	checkAuth(&f, c.Auth)
	checkFormat(&f, c)
	if c.TLS != nil && (c.TLS.Cert == "" || c.TLS.Key == "") {
		f.Add("tls", "cert and key are both required")
	}
	positive := func(key string, v *int64, def int64) {
		switch {
		case *v < 0 || zero[key]:
			f.Add(key, "must be > 0 (got %d)", *v)
		case *v == 0:
			*v = def
		}
	}
	positive("max_body_bytes", &c.MaxBodyBytes, DefaultMaxBodyBytes)
	for _, k := range []struct {
		key string
		v   *int
		def int
	}{{"partitions", &c.Partitions, 1}, {"max_pending", &c.MaxPending, DefaultMaxPending}, {"busy_wait_ms", &c.BusyWaitMS, DefaultBusyWaitMS}, {"max_in_flight", &c.MaxInFlight, DefaultMaxInFlight}} {
		v := int64(*k.v)
		positive(k.key, &v, int64(k.def))
		*k.v = int(v)
	}
	if id := c.Idempotency; id != nil {
		if id.Header == "" {
			id.Header = DefaultIdempotencyHeader
		}
		switch {
		case id.Retention < 0 || zero["idempotency.retention"]:
			f.Add("idempotency.retention", "must be > 0 (got %d)", id.Retention)
		case id.Retention == 0:
			id.Retention = DefaultIdempotencyRetention
		}
	}
	return f.Err()
}

func checkFormat(f *connectors.Fields, c *SourceConfig) {
	switch c.Format {
	case "":
		c.Format = FormatRaw
		if c.Schema != nil {
			c.Format = FormatJSON
		}
	case FormatJSON, FormatNDJSON:
		if c.Schema == nil {
			f.Add("schema", "is required with format %q", c.Format)
		}
	case FormatRaw:
		if c.Schema != nil {
			f.Add("schema", "must be absent with format %q (the body is one binary column %q)", FormatRaw, RawValueColumn)
		}
	default:
		f.Add("format", "must be %q, %q or %q (got %q)", FormatJSON, FormatNDJSON, FormatRaw, c.Format)
	}
	if c.Schema != nil {
		if _, err := c.Schema.Arrow("schema"); err != nil {
			f.Merge("", err)
		}
	}
}

// checkSink checks the output's config and applies its defaults.
func checkSink(c *SinkConfig, zero map[string]bool) error {
	var f connectors.Fields
	if c.URL == "" {
		f.Add("url", "is required (http://host:port/path or https://…)")
	} else if u, err := url.Parse(c.URL); err != nil {
		f.Add("url", "%q is not a URL: %v", c.URL, err)
	} else if u.Scheme != "http" && u.Scheme != "https" {
		f.Add("url", "scheme %q of %q: must be http or https", u.Scheme, c.URL)
	} else if u.Host == "" {
		f.Add("url", "%q has no host", c.URL)
	}
	if c.Method == "" {
		c.Method = "POST"
	} else if c.Method = strings.ToUpper(c.Method); !map[string]bool{"POST": true, "PUT": true, "PATCH": true}[c.Method] {
		f.Add("method", "must be POST, PUT or PATCH (got %q): the rows are the request's body", c.Method)
	}
	switch {
	case c.TimeoutMS < 0 || zero["timeout_ms"]:
		f.Add("timeout_ms", "must be > 0 (got %d)", c.TimeoutMS)
	case c.TimeoutMS == 0:
		c.TimeoutMS = DefaultTimeoutMS
	}
	if c.RetryCount == nil {
		n := DefaultRetryCount
		c.RetryCount = &n
	} else if *c.RetryCount < 0 {
		f.Add("retry_count", "must be >= 0 (got %d)", *c.RetryCount)
	}
	if c.Auth != nil {
		checkAuth(&f, &c.Auth.Auth)
	}
	switch c.Format {
	case "":
		c.Format = FormatJSON
		if c.BodyField != "" {
			c.Format = FormatPerRow // ArkFlow's output sends one request per row
		}
	case FormatJSON, FormatNDJSON:
		if c.BodyField != "" {
			f.Add("body_field", "is for format %q only (got format %q)", FormatPerRow, c.Format)
		}
	case FormatPerRow:
	default:
		f.Add("format", "must be %q, %q or %q (got %q)", FormatJSON, FormatNDJSON, FormatPerRow, c.Format)
	}
	if t := c.TLS; t != nil && (t.ClientCert == "") != (t.ClientKey == "") {
		f.Add("tls", "client_cert and client_key go together (got only one)")
	}
	for k := range c.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			f.Add("headers", "%q is not a header name", k)
		}
	}
	return f.Err()
}

// explicitZero returns the keys (top level, or "idempotency." and a key
// of it) of raw whose value is the number 0.
func explicitZero(raw json.RawMessage, keys ...string) map[string]bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var sub map[string]json.RawMessage
	_ = json.Unmarshal(m["idempotency"], &sub)
	out := map[string]bool{}
	for _, k := range keys {
		v, ok := m[k]
		if s, isSub := strings.CutPrefix(k, "idempotency."); isSub {
			v, ok = sub[s]
		}
		var n float64
		if ok && json.Unmarshal(v, &n) == nil && n == 0 {
			out[k] = true
		}
	}
	return out
}
