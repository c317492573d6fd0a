package nats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Type is the input and output type name.
const Type = "nats"

// Modes of the input and the output (mode.type).
const (
	// ModeRegular is core NATS: plain subjects, no persistence.
	ModeRegular = "regular"
	// ModeJetStream is JetStream: a stream read through a durable pull
	// consumer, or published to with acknowledgements.
	ModeJetStream = "jet_stream"
)

// Payload formats of the input.
const (
	// FormatJSON decodes every payload as one JSON object into the
	// declared schema (internal/rowjson's rules, as the file and kafka
	// inputs do). It is the default when a schema is declared.
	FormatJSON = "json"
	// FormatRaw keeps the payload bytes as they are, in a binary column
	// named "value". It is the default without a schema.
	FormatRaw = "raw"
)

// RawValueColumn is the value column of FormatRaw.
const RawValueColumn = "value"

// Defaults and fixed timeouts.
const (
	// DefaultBatchSize is the default maximum number of messages per batch.
	DefaultBatchSize = 1024
	// DefaultAckWait is the JetStream consumer's ack wait unless
	// mode.ack_wait_ms sets it: how long the server waits for the
	// acknowledgement of a delivered message before it delivers it again.
	DefaultAckWait = 5 * time.Minute
	// ConnectTimeout bounds connecting to one server (the connect ctx may
	// end it sooner).
	ConnectTimeout = 10 * time.Second
	// RequestTimeout bounds every JetStream API request (stream and
	// consumer lookups, consumer creation and reset) and a core sink's
	// flush.
	RequestTimeout = 10 * time.Second
)

// SourceConfig is the config of the "nats" input. url, mode and auth are
// ArkFlow's keys; tls, format, schema, batch_size and mode's subjects,
// ack_wait_ms and max_ack_pending are additions.
type SourceConfig struct {
	// URL is the server, nats://host:port or tls://host:port (TLS), or
	// several of them separated by commas. Required.
	URL string `json:"url"`
	// Mode is how the input reads: core subjects or a JetStream stream.
	// Required.
	Mode SourceMode `json:"mode"`
	// Auth holds the credentials, if the server wants any.
	Auth *Auth `json:"auth,omitempty"`
	// TLS holds the CA and client certificate. With it, the connection is
	// TLS whatever the URL's scheme.
	TLS *TLS `json:"tls,omitempty"`
	// Format is "json" (the default with a schema) or "raw" (the default
	// without one: a binary "value" column).
	Format string `json:"format,omitempty"`
	// Schema declares the columns a JSON payload decodes into.
	Schema connectors.Schema `json:"schema,omitempty"`
	// BatchSize is the maximum number of messages per batch (default
	// 1024). A batch holds the messages that were there without waiting.
	BatchSize int `json:"batch_size,omitempty"`
}

// InputType returns "nats".
func (SourceConfig) InputType() string { return Type }

// SourceMode is the input's mode: {type: regular, subject, queue_group}
// or {type: jet_stream, stream, consumer_name, durable_name, subjects,
// ack_wait_ms, max_ack_pending}. Keys of the other type are errors.
type SourceMode struct {
	// Type is "regular" or "jet_stream". Required.
	Type string `json:"type"`
	// Subject (regular) is the subject to subscribe to; wildcards are
	// allowed. Required with regular.
	Subject string `json:"subject,omitempty"`
	// QueueGroup (regular) subscribes as a member of a queue group: the
	// server gives each message to one member. With it, every subtask of
	// the source subscribes; without it, only subtask 0 does.
	QueueGroup string `json:"queue_group,omitempty"`
	// Stream (jet_stream) is the stream to read. Required with jet_stream.
	Stream string `json:"stream,omitempty"`
	// ConsumerName (jet_stream) names the durable pull consumer the
	// source creates (or takes over) and manages. Required with jet_stream.
	ConsumerName string `json:"consumer_name,omitempty"`
	// DurableName (jet_stream) is ArkFlow's durable name; it must equal
	// consumer_name when set (JetStream names a durable consumer once).
	DurableName string `json:"durable_name,omitempty"`
	// Subjects (jet_stream) splits the stream into partitions: partition
	// p reads subjects[p] (wildcards allowed) through its own consumer,
	// consumer_name-p. Without it, one partition reads the whole stream
	// through consumer_name. Their order must not change across restarts.
	Subjects []string `json:"subjects,omitempty"`
	// AckWaitMS (jet_stream) is the consumer's ack wait in milliseconds
	// (default 300000, DefaultAckWait). Messages the job holds longer
	// (in open windows) are delivered again and skipped by the source.
	AckWaitMS int64 `json:"ack_wait_ms,omitempty"`
	// MaxAckPending (jet_stream) caps the messages delivered and not yet
	// acknowledged (default -1: no cap). A cap below what open windows
	// hold stalls the source, and so the windows: leave it unless the
	// server's limits require one.
	MaxAckPending int `json:"max_ack_pending,omitempty"`
}

// Auth is the input's and output's auth block. At most one way to
// authenticate may be given: username and password, token, or a
// credentials file.
type Auth struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Token    string `json:"token,omitempty"`
	// CredsFile is a NATS credentials file (a user JWT and its NKey seed),
	// as `nsc` writes it. An addition to ArkFlow's keys.
	CredsFile string `json:"creds_file,omitempty"`
}

// TLS is the tls block (an addition to ArkFlow's keys): files in PEM.
type TLS struct {
	// CA is the CA certificate that signed the server's (default: the
	// system's roots).
	CA string `json:"ca,omitempty"`
	// ClientCert and ClientKey are the client certificate and its key, for
	// servers that verify clients; both or neither.
	ClientCert string `json:"client_cert,omitempty"`
	ClientKey  string `json:"client_key,omitempty"`
	// InsecureSkipVerify accepts any server certificate. For tests only.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
}

// SinkConfig is the config of the "nats" output. url, mode, auth and
// value_field are ArkFlow's keys; tls and msg_id_fields are additions.
type SinkConfig struct {
	// URL is the server, as for the input. Required.
	URL string `json:"url"`
	// Mode is {type: regular | jet_stream, subject}. Required.
	Mode SinkMode `json:"mode"`
	// Auth holds the credentials, if the server wants any.
	Auth *Auth `json:"auth,omitempty"`
	// TLS holds the CA and client certificate, as for the input.
	TLS *TLS `json:"tls,omitempty"`
	// ValueField names a string or binary column whose bytes become the
	// payload. Absent: the payload is the row as a JSON object without
	// its __meta_* columns (internal/rowjson's format).
	ValueField string `json:"value_field,omitempty"`
	// MsgIDFields (jet_stream) names the columns whose values make every
	// message's Nats-Msg-Id, after the job's ID: rows with equal values
	// are one message to the stream's duplicate window. Absent: the row's
	// source position (__meta_source, __meta_partition, __meta_offset),
	// which rows that passed through a window or an aggregate do not
	// carry; such rows need msg_id_fields (their key and window start).
	MsgIDFields []string `json:"msg_id_fields,omitempty"`
}

// OutputType returns "nats".
func (SinkConfig) OutputType() string { return Type }

// SinkMode is the output's mode.
type SinkMode struct {
	// Type is "regular" (publish) or "jet_stream" (publish and wait for
	// the stream's acknowledgement). Required.
	Type string `json:"type"`
	// Subject every row is published to, without wildcards. Required.
	// ArkFlow's form {type: value, value: SUBJECT} is accepted too.
	Subject Subject `json:"subject"`
}

// Subject is a subject to publish to. In a spec it is a string or
// ArkFlow's {type: value, value: SUBJECT}.
type Subject string

// UnmarshalJSON accepts a string or {type: value, value: SUBJECT}.
func (s *Subject) UnmarshalJSON(b []byte) error {
	var str string
	if json.Unmarshal(b, &str) == nil {
		*s = Subject(str)
		return nil
	}
	var e struct {
		Type  string `json:"type"`
		Value string `json:"value,omitempty"`
		Expr  string `json:"expr,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return fmt.Errorf("must be a string or {type: value, value: SUBJECT}: %v", err)
	}
	if e.Type != "value" {
		return fmt.Errorf(`only {type: value, value: SUBJECT} is supported (got type %q): subjects computed by expressions are not`, e.Type)
	}
	*s = Subject(e.Value)
	return nil
}

// checkURL checks a comma-separated list of server URLs.
func checkURL(f *connectors.Fields, raw string) {
	if strings.TrimSpace(raw) == "" {
		f.Add("url", "is required (nats://host:port, or tls://host:port for TLS)")
		return
	}
	for _, u := range strings.Split(raw, ",") {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u // nats.go accepts host:port
		}
		p, err := url.Parse(u)
		switch {
		case err != nil:
			f.Add("url", "%q is not a URL: %v", u, err)
		case p.Scheme != "nats" && p.Scheme != "tls" && p.Scheme != "ws" && p.Scheme != "wss":
			f.Add("url", "scheme %q of %q: must be nats, tls, ws or wss", p.Scheme, u)
		case p.Host == "":
			f.Add("url", "%q has no host", u)
		}
	}
}

func checkAuth(f *connectors.Fields, a *Auth) {
	if a == nil {
		return
	}
	ways := 0
	if a.Username != "" || a.Password != "" {
		ways++
		if a.Username == "" {
			f.Add("auth.username", "is required with auth.password")
		}
		if a.Password == "" {
			f.Add("auth.password", "is required with auth.username")
		}
	}
	if a.Token != "" {
		ways++
	}
	if a.CredsFile != "" {
		ways++
	}
	if ways > 1 {
		f.Add("auth", "give one of username and password, token, or creds_file (got %d)", ways)
	}
}

func checkTLS(f *connectors.Fields, t *TLS) {
	if t == nil {
		return
	}
	if (t.ClientCert == "") != (t.ClientKey == "") {
		f.Add("tls", "client_cert and client_key go together (got only one)")
	}
}

// checkSubject checks a subject; wildcards ('*' tokens, a final '>')
// only where allowed.
func checkSubject(f *connectors.Fields, path, s string, wildcards bool) {
	if s == "" {
		f.Add(path, "is required")
		return
	}
	if strings.ContainsAny(s, " \t\r\n") {
		f.Add(path, "must not contain whitespace (got %q)", s)
		return
	}
	toks := strings.Split(s, ".")
	for i, tok := range toks {
		switch {
		case tok == "":
			f.Add(path, "has an empty token (got %q)", s)
			return
		case !wildcards && strings.ContainsAny(tok, "*>"):
			f.Add(path, "must not contain wildcards: messages are published to it (got %q)", s)
			return
		case tok == ">" && i != len(toks)-1:
			f.Add(path, "'>' must be the last token (got %q)", s)
			return
		}
	}
}

// checkName checks a stream or consumer name.
func checkName(f *connectors.Fields, path, name string) {
	if name == "" {
		f.Add(path, "is required")
		return
	}
	if strings.ContainsAny(name, ".*> /\\\t\r\n") {
		f.Add(path, "must not contain '.', '*', '>', '/', '\\' or whitespace (got %q)", name)
	}
}

func checkSource(c *SourceConfig, zero map[string]bool) error {
	var f connectors.Fields
	checkURL(&f, c.URL)
	checkMode(&f, &c.Mode, zero)
	checkAuth(&f, c.Auth)
	checkTLS(&f, c.TLS)
	switch c.Format {
	case "":
		if c.Schema != nil {
			c.Format = FormatJSON
		} else {
			c.Format = FormatRaw
		}
	case FormatJSON:
		if c.Schema == nil {
			f.Add("schema", "is required with format %q", FormatJSON)
		}
	case FormatRaw:
		if c.Schema != nil {
			f.Add("schema", "must be absent with format %q (the payload is one binary column %q)", FormatRaw, RawValueColumn)
		}
	default:
		f.Add("format", "must be %q or %q (got %q)", FormatJSON, FormatRaw, c.Format)
	}
	if c.Schema != nil {
		if _, err := c.Schema.Arrow("schema"); err != nil {
			f.Merge("", err)
		}
	}
	switch {
	case c.BatchSize < 0 || zero["batch_size"]:
		f.Add("batch_size", "must be > 0 (got %d)", c.BatchSize)
	case c.BatchSize == 0:
		c.BatchSize = DefaultBatchSize
	}
	return f.Err()
}

// checkMode checks the input's mode and applies its defaults.
func checkMode(f *connectors.Fields, m *SourceMode, zero map[string]bool) {
	only := func(key string, set bool, typ string) {
		if set {
			f.Add("mode."+key, "is a key of mode type %s only (this is %s)", typ, m.Type)
		}
	}
	switch m.Type {
	case ModeRegular:
		checkSubject(f, "mode.subject", m.Subject, true)
		if m.QueueGroup != "" && strings.ContainsAny(m.QueueGroup, " \t\r\n") {
			f.Add("mode.queue_group", "must not contain whitespace (got %q)", m.QueueGroup)
		}
		only("stream", m.Stream != "", ModeJetStream)
		only("consumer_name", m.ConsumerName != "", ModeJetStream)
		only("durable_name", m.DurableName != "", ModeJetStream)
		only("subjects", m.Subjects != nil, ModeJetStream)
		only("ack_wait_ms", m.AckWaitMS != 0 || zero["mode.ack_wait_ms"], ModeJetStream)
		only("max_ack_pending", m.MaxAckPending != 0 || zero["mode.max_ack_pending"], ModeJetStream)
	case ModeJetStream:
		only("subject", m.Subject != "", ModeRegular)
		only("queue_group", m.QueueGroup != "", ModeRegular)
		checkName(f, "mode.stream", m.Stream)
		checkName(f, "mode.consumer_name", m.ConsumerName)
		if m.DurableName != "" && m.DurableName != m.ConsumerName {
			f.Add("mode.durable_name", "must equal consumer_name when set (got %q and %q): JetStream names a durable consumer once", m.DurableName, m.ConsumerName)
		}
		if m.Subjects != nil && len(m.Subjects) == 0 {
			f.Add("mode.subjects", "must list at least one subject when present")
		}
		seen := map[string]int{}
		for i, s := range m.Subjects {
			at := fmt.Sprintf("mode.subjects[%d]", i)
			if j, dup := seen[s]; dup {
				f.Add(at, "duplicate subject %q (also mode.subjects[%d])", s, j)
				continue
			}
			seen[s] = i
			checkSubject(f, at, s, true)
		}
		switch {
		case m.AckWaitMS < 0 || zero["mode.ack_wait_ms"]:
			f.Add("mode.ack_wait_ms", "must be > 0 (got %d)", m.AckWaitMS)
		case m.AckWaitMS == 0:
			m.AckWaitMS = DefaultAckWait.Milliseconds()
		}
		switch {
		case m.MaxAckPending < -1 || zero["mode.max_ack_pending"]:
			f.Add("mode.max_ack_pending", "must be > 0, or -1 for no cap (got %d)", m.MaxAckPending)
		case m.MaxAckPending == 0:
			m.MaxAckPending = -1
		}
	case "":
		f.Add("mode.type", "is required (%s or %s)", ModeRegular, ModeJetStream)
	default:
		f.Add("mode.type", "must be %s or %s (got %q)", ModeRegular, ModeJetStream, m.Type)
	}
}

func checkSink(c *SinkConfig) error {
	var f connectors.Fields
	checkURL(&f, c.URL)
	switch c.Mode.Type {
	case ModeRegular:
		if len(c.MsgIDFields) > 0 {
			f.Add("msg_id_fields", "is for mode type %s only: core NATS has no duplicate window", ModeJetStream)
		}
	case ModeJetStream:
	case "":
		f.Add("mode.type", "is required (%s or %s)", ModeRegular, ModeJetStream)
	default:
		f.Add("mode.type", "must be %s or %s (got %q)", ModeRegular, ModeJetStream, c.Mode.Type)
	}
	checkSubject(&f, "mode.subject", string(c.Mode.Subject), false)
	checkAuth(&f, c.Auth)
	checkTLS(&f, c.TLS)
	seen := map[string]int{}
	for i, col := range c.MsgIDFields {
		at := fmt.Sprintf("msg_id_fields[%d]", i)
		if col == "" {
			f.Add(at, "must not be empty")
		} else if j, dup := seen[col]; dup {
			f.Add(at, "duplicate column %q (also msg_id_fields[%d])", col, j)
		} else {
			seen[col] = i
		}
	}
	return f.Err()
}

// explicitZero returns the keys (top level, or "mode." and a key of the
// mode) of raw whose value is the number 0.
func explicitZero(raw json.RawMessage, keys ...string) map[string]bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var mode map[string]json.RawMessage
	_ = json.Unmarshal(m["mode"], &mode)
	out := map[string]bool{}
	for _, k := range keys {
		v, ok := m[k]
		if sub, isMode := strings.CutPrefix(k, "mode."); isMode {
			v, ok = mode[sub]
		}
		if !ok {
			continue
		}
		var n float64
		if json.Unmarshal(v, &n) == nil && n == 0 {
			out[k] = true
		}
	}
	return out
}
