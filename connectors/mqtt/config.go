package mqtt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Type is the input and output type name.
const Type = "mqtt"

// Payload formats of the input.
const (
	// FormatJSON decodes every payload as one JSON object into the
	// declared schema (internal/rowjson's rules). It is the default when a
	// schema is declared.
	FormatJSON = "json"
	// FormatRaw keeps the payload bytes as they are, in a binary column
	// named "value". It is the default without a schema.
	FormatRaw = "raw"
)

// RawValueColumn is the value column of FormatRaw.
const RawValueColumn = "value"

// Defaults and fixed timeouts.
const (
	// DefaultPort is the broker's port unless port sets it.
	DefaultPort = 1883
	// DefaultQoS is the QoS of the subscriptions and publishes unless qos
	// sets it (ArkFlow's default).
	DefaultQoS = 1
	// DefaultKeepAlive is the keep-alive interval in seconds unless
	// keep_alive sets it.
	DefaultKeepAlive = 60
	// DefaultBatchSize is the default maximum number of messages per batch.
	DefaultBatchSize = 1024
	// ConnectTimeout bounds connecting to the broker (the connect ctx may
	// end it sooner).
	ConnectTimeout = 10 * time.Second
	// RequestTimeout bounds a subscription's acknowledgement and a
	// publish's acknowledgement by the broker.
	RequestTimeout = 30 * time.Second
)

// SourceConfig is the config of the "mqtt" input. host, port, client_id,
// topics, username, password, qos, clean_session and keep_alive are
// ArkFlow's keys; tls, format, schema and batch_size are additions.
type SourceConfig struct {
	// Host is the broker's host name or address. Required.
	Host string `json:"host"`
	// Port is the broker's port (default 1883).
	Port int `json:"port,omitempty"`
	// ClientID names the client, and so its session on the broker.
	// Required. It is subtask 0's; subtask s > 0 is ClientID-s.
	ClientID string `json:"client_id"`
	// Topics are the topic filters to subscribe to (wildcards + and #
	// allowed). Required. Shared subscriptions ($share/GROUP/FILTER)
	// make every subtask subscribe; they must then all be shared.
	Topics []string `json:"topics"`
	// Username and Password are the credentials, if the broker wants any.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// QoS is the subscriptions' QoS, 0 or 1 (default 1).
	QoS *int `json:"qos,omitempty"`
	// CleanSession starts a new session at every connect (default false:
	// the broker keeps the session, and the QoS 1 messages not yet
	// acknowledged, across a restart).
	CleanSession *bool `json:"clean_session,omitempty"`
	// KeepAlive is the keep-alive interval in seconds (default 60).
	KeepAlive *int `json:"keep_alive,omitempty"`
	// TLS turns on TLS and names the CA and client certificate.
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

// InputType returns "mqtt".
func (SourceConfig) InputType() string { return Type }

// TLS is the tls block: files in PEM.
type TLS struct {
	// Enabled turns TLS on (default true when the block is present).
	Enabled *bool `json:"enabled,omitempty"`
	// CA is the CA certificate that signed the broker's (default: the
	// system's roots).
	CA string `json:"ca,omitempty"`
	// ClientCert and ClientKey are the client certificate and its key, for
	// brokers that verify clients; both or neither.
	ClientCert string `json:"client_cert,omitempty"`
	ClientKey  string `json:"client_key,omitempty"`
}

// on reports whether the block turns TLS on.
func (t *TLS) on() bool { return t != nil && (t.Enabled == nil || *t.Enabled) }

// SinkConfig is the config of the "mqtt" output. Every key is ArkFlow's
// but tls.
type SinkConfig struct {
	// Host is the broker's host name or address. Required.
	Host string `json:"host"`
	// Port is the broker's port (default 1883).
	Port int `json:"port,omitempty"`
	// ClientID names the client. Required. It is subtask 0's; subtask
	// s > 0 is ClientID-s.
	ClientID string `json:"client_id"`
	// Topic is the topic every row is published to: a string, ArkFlow's
	// {type: value, value: TOPIC}, or {type: expr, expr: EXPR} with an
	// expression over the row's columns that gives a string (a column
	// name, or concat('sensors/', device)). Required.
	Topic Topic `json:"topic"`
	// Username and Password are the credentials, if the broker wants any.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// QoS of the publishes, 0, 1 or 2 (default 1).
	QoS *int `json:"qos,omitempty"`
	// CleanSession starts a new session at every connect (default true:
	// a restarted sink's client has lost what it had in flight, and would
	// reuse packet identifiers the broker still holds for a persistent
	// session, which would take a new QoS 2 message for a duplicate).
	CleanSession *bool `json:"clean_session,omitempty"`
	// KeepAlive is the keep-alive interval in seconds (default 60).
	KeepAlive *int `json:"keep_alive,omitempty"`
	// Retain publishes with the retain flag: the broker keeps the last
	// message of every topic for later subscribers.
	Retain bool `json:"retain,omitempty"`
	// ValueField names a string or binary column whose bytes become the
	// payload. Absent: the payload is the row as a JSON object without
	// its __meta_* columns (internal/rowjson's format).
	ValueField string `json:"value_field,omitempty"`
	// TLS turns on TLS and names the CA and client certificate.
	TLS *TLS `json:"tls,omitempty"`
}

// OutputType returns "mqtt".
func (SinkConfig) OutputType() string { return Type }

// Topic is the output's topic: a fixed topic (Value) or an expression
// evaluated per row (Expr). In a spec it is a string, ArkFlow's
// {type: value, value: TOPIC} or {type: expr, expr: EXPR}.
type Topic struct {
	Value string
	Expr  string
}

// UnmarshalJSON accepts a string, {type: value, value} or {type: expr,
// expr}.
func (t *Topic) UnmarshalJSON(b []byte) error {
	var str string
	if json.Unmarshal(b, &str) == nil {
		*t = Topic{Value: str}
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
		return fmt.Errorf("must be a string, {type: value, value: TOPIC} or {type: expr, expr: EXPR}: %v", err)
	}
	switch e.Type {
	case "value":
		if e.Expr != "" {
			return fmt.Errorf("expr is for type expr (this is value)")
		}
		*t = Topic{Value: e.Value}
	case "expr":
		if e.Value != "" {
			return fmt.Errorf("value is for type value (this is expr)")
		}
		if strings.TrimSpace(e.Expr) == "" {
			return fmt.Errorf("expr is required with type expr")
		}
		*t = Topic{Expr: e.Expr}
	default:
		return fmt.Errorf("type must be value or expr (got %q)", e.Type)
	}
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (t Topic) MarshalJSON() ([]byte, error) {
	if t.Expr != "" {
		return json.Marshal(map[string]string{"type": "expr", "expr": t.Expr})
	}
	return json.Marshal(t.Value)
}

// common is what the input and output check alike.
type common struct {
	host                         string
	port                         *int
	clientID, username, password string
	keepAlive                    *int
	tls                          *TLS
	zeroPort                     bool
}

func checkCommon(f *connectors.Fields, c common) {
	if strings.TrimSpace(c.host) == "" {
		f.Add("host", "is required (the broker's host name or address)")
	} else if strings.Contains(c.host, "://") || strings.ContainsAny(c.host, " /") {
		f.Add("host", "must be a host name or address, without scheme, port or path (got %q)", c.host)
	}
	if p := *c.port; p < 0 || p > 65535 || c.zeroPort {
		f.Add("port", "must be between 1 and 65535 (got %d)", p)
	} else if p == 0 {
		*c.port = DefaultPort
	}
	switch {
	case c.clientID == "":
		f.Add("client_id", "is required: it names the client's session on the broker")
	case len(c.clientID) > 200:
		f.Add("client_id", "is too long (%d bytes, at most 200)", len(c.clientID))
	}
	if c.password != "" && c.username == "" {
		f.Add("username", "is required with password")
	}
	if c.keepAlive != nil && (*c.keepAlive < 1 || *c.keepAlive > 65535) {
		f.Add("keep_alive", "must be between 1 and 65535 seconds (got %d)", *c.keepAlive)
	}
	if t := c.tls; t != nil {
		if (t.ClientCert == "") != (t.ClientKey == "") {
			f.Add("tls", "client_cert and client_key go together (got only one)")
		}
	}
}

// checkFilter checks a topic filter of the input.
func checkFilter(f *connectors.Fields, path, s string) (shared bool) {
	if s == "" {
		f.Add(path, "must not be empty")
		return false
	}
	filter := s
	if rest, ok := strings.CutPrefix(s, "$share/"); ok {
		group, flt, found := strings.Cut(rest, "/")
		if !found || group == "" || strings.ContainsAny(group, "+#") || flt == "" {
			f.Add(path, "a shared subscription is $share/GROUP/FILTER (got %q)", s)
			return true
		}
		filter, shared = flt, true
	}
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		switch {
		case l == "#" && i != len(levels)-1:
			f.Add(path, "'#' must be the last level (got %q)", s)
			return shared
		case l != "#" && l != "+" && strings.ContainsAny(l, "+#"):
			f.Add(path, "wildcards + and # must fill a whole level (got %q)", s)
			return shared
		}
	}
	return shared
}

func checkSource(c *SourceConfig, zero map[string]bool) error {
	var f connectors.Fields
	checkCommon(&f, common{c.Host, &c.Port, c.ClientID, c.Username, c.Password, c.KeepAlive, c.TLS, zero["port"]})
	if len(c.Topics) == 0 {
		f.Add("topics", "is required: the topic filters to subscribe to")
	}
	shared := 0
	for i, t := range c.Topics {
		if checkFilter(&f, fmt.Sprintf("topics[%d]", i), t) {
			shared++
		}
	}
	if shared > 0 && shared < len(c.Topics) {
		f.Add("topics", "mixes shared ($share/...) and plain filters: every subtask subscribes to shared ones, subtask 0 alone to plain ones; make them all one kind")
	}
	if c.QoS == nil {
		q := DefaultQoS
		c.QoS = &q
	} else if *c.QoS != 0 && *c.QoS != 1 {
		f.Add("qos", "must be 0 or 1 (got %d): the source acknowledges QoS 1 messages once they are safe, and QoS 2 has no more to offer it", *c.QoS)
	}
	if c.CleanSession == nil {
		no := false
		c.CleanSession = &no
	}
	checkFormat(&f, c)
	switch {
	case c.BatchSize < 0 || zero["batch_size"]:
		f.Add("batch_size", "must be > 0 (got %d)", c.BatchSize)
	case c.BatchSize == 0:
		c.BatchSize = DefaultBatchSize
	}
	return f.Err()
}

func checkFormat(f *connectors.Fields, c *SourceConfig) {
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
}

func checkSink(c *SinkConfig, zero map[string]bool) error {
	var f connectors.Fields
	checkCommon(&f, common{c.Host, &c.Port, c.ClientID, c.Username, c.Password, c.KeepAlive, c.TLS, zero["port"]})
	switch {
	case c.Topic.Expr != "":
	case c.Topic.Value == "":
		f.Add("topic", "is required (a topic, {type: value, value: TOPIC} or {type: expr, expr: EXPR})")
	case strings.ContainsAny(c.Topic.Value, "+#"):
		f.Add("topic", "must not contain wildcards: messages are published to it (got %q)", c.Topic.Value)
	}
	if c.QoS == nil {
		q := DefaultQoS
		c.QoS = &q
	} else if *c.QoS < 0 || *c.QoS > 2 {
		f.Add("qos", "must be 0, 1 or 2 (got %d)", *c.QoS)
	}
	if c.CleanSession == nil {
		yes := true
		c.CleanSession = &yes
	}
	return f.Err()
}

// explicitZero returns the keys of raw whose value is the number 0.
func explicitZero(raw json.RawMessage, keys ...string) map[string]bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	out := map[string]bool{}
	for _, k := range keys {
		var n float64
		if v, ok := m[k]; ok && json.Unmarshal(v, &n) == nil && n == 0 {
			out[k] = true
		}
	}
	return out
}
