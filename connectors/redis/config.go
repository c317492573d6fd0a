package redis

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
const Type = "redis"

// Connection modes (mode.type).
const (
	// ModeSingle is one server: mode.url.
	ModeSingle = "single"
	// ModeCluster is a Redis Cluster: mode.urls, its seed nodes.
	ModeCluster = "cluster"
)

// Input kinds (redis_type.type).
const (
	// TypeSubscribe is pub/sub: channels or patterns, at-most-once.
	TypeSubscribe = "subscribe"
	// TypeList pops lists (BLMOVE into a processing list), at-least-once.
	TypeList = "list"
	// TypeStream reads streams through a consumer group, with exact
	// positions.
	TypeStream = "stream"
)

// Output kinds (redis_type.type) besides TypeList and TypeStream.
const (
	// TypePublish publishes every row to a channel.
	TypePublish = "publish"
	// TypeHashes sets a field of a hash to every row (HSET key field).
	TypeHashes = "hashes"
	// TypeStrings sets a string key to every row (SET key).
	TypeStrings = "strings"
)

// Payload formats of the input.
const (
	// FormatJSON decodes every payload as one JSON object into the
	// declared schema (internal/rowjson's rules). The default with a
	// schema.
	FormatJSON = "json"
	// FormatRaw keeps the payload bytes in a binary column "value". The
	// default without a schema.
	FormatRaw = "raw"
)

// RawValueColumn is the value column of FormatRaw.
const RawValueColumn = "value"

// Defaults.
const (
	// DefaultBatchSize is the default maximum number of messages per batch.
	DefaultBatchSize = 1024
	// DefaultField is the stream entry field that holds the payload,
	// unless redis_type.field names another.
	DefaultField = "value"
	// DefaultBlockMS is how long one read waits on the server for new
	// entries before the source looks at its context again.
	DefaultBlockMS = 200
	// ConnectTimeout bounds connecting (the connect ctx may end it sooner).
	ConnectTimeout = 10 * time.Second
)

// SourceConfig is the config of the "redis" input. mode and redis_type
// are ArkFlow's keys (redis_type stream is an addition); tls, format,
// schema and batch_size are additions.
type SourceConfig struct {
	// Mode is the server or cluster to connect to. Required.
	Mode Mode `json:"mode"`
	// RedisType is what to read. Required.
	RedisType SourceType `json:"redis_type"`
	// TLS holds the CA and client certificate. With it, the connection is
	// TLS whatever the URL's scheme (rediss:// is TLS too).
	TLS *TLS `json:"tls,omitempty"`
	// Format is "json" (the default with a schema) or "raw" (the default
	// without one: a binary "value" column).
	Format string `json:"format,omitempty"`
	// Schema declares the columns a JSON payload decodes into.
	Schema connectors.Schema `json:"schema,omitempty"`
	// BatchSize is the maximum number of messages per batch (default
	// 1024).
	BatchSize int `json:"batch_size,omitempty"`
}

// InputType returns "redis".
func (SourceConfig) InputType() string { return Type }

// Mode is {type: single, url} or {type: cluster, urls}. URLs are
// redis://[user:password@]host:port[/db], or rediss:// for TLS.
type Mode struct {
	// Type is "single" or "cluster". Required.
	Type string `json:"type"`
	// URL (single) is the server.
	URL string `json:"url,omitempty"`
	// URLs (cluster) are seed nodes of the cluster.
	URLs []string `json:"urls,omitempty"`
}

// SourceType is the input's redis_type: {type: subscribe, subscribe:
// {type: channels, channels} | {type: patterns, patterns}}, {type: list,
// list: [keys]} or {type: stream, streams, group, consumer, field,
// block_ms}. Keys of the other types are errors.
type SourceType struct {
	// Type is "subscribe", "list" or "stream". Required.
	Type string `json:"type"`
	// Subscribe (subscribe) names the channels or patterns.
	Subscribe *Subscribe `json:"subscribe,omitempty"`
	// List (list) names the lists to pop, one partition each.
	List []string `json:"list,omitempty"`
	// Streams (stream) names the streams to read, one partition each;
	// their order must not change across restarts.
	Streams []string `json:"streams,omitempty"`
	// Group (stream) is the consumer group, created at the first start.
	// Required with stream.
	Group string `json:"group,omitempty"`
	// Consumer (stream and list) names the consumer within the group
	// (default "arkflow"); for lists it names the processing lists.
	Consumer string `json:"consumer,omitempty"`
	// Field (stream) is the entry field that holds the payload (default
	// "value").
	Field string `json:"field,omitempty"`
	// BlockMS (stream and list) is how long one read waits on the server
	// for new messages (default 200).
	BlockMS int `json:"block_ms,omitempty"`
}

// Subscribe is {type: channels, channels: [...]} or {type: patterns,
// patterns: [...]}.
type Subscribe struct {
	// Type is "channels" or "patterns". Required.
	Type string `json:"type"`
	// Channels (channels) are the channels to SUBSCRIBE to.
	Channels []string `json:"channels,omitempty"`
	// Patterns (patterns) are the glob-style patterns to PSUBSCRIBE to.
	Patterns []string `json:"patterns,omitempty"`
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
}

// SinkConfig is the config of the "redis" output. mode, redis_type and
// value_field are ArkFlow's keys (redis_type stream is an addition), tls
// is an addition.
type SinkConfig struct {
	// Mode is the server or cluster to connect to. Required.
	Mode Mode `json:"mode"`
	// RedisType is where the rows go. Required.
	RedisType SinkType `json:"redis_type"`
	// TLS holds the CA and client certificate, as for the input.
	TLS *TLS `json:"tls,omitempty"`
	// ValueField names a string or binary column whose bytes are written.
	// Absent: the row as a JSON object without its __meta_* columns.
	ValueField string `json:"value_field,omitempty"`
}

// OutputType returns "redis".
func (SinkConfig) OutputType() string { return Type }

// SinkType is the output's redis_type: {type: publish, channel}, {type:
// list, key}, {type: hashes, key, field}, {type: strings, key} or {type:
// stream, key, field}.
type SinkType struct {
	// Type is "publish", "list", "hashes", "strings" or "stream". Required.
	Type string `json:"type"`
	// Channel (publish) is the channel to publish to.
	Channel *Expr `json:"channel,omitempty"`
	// Key (list, hashes, strings, stream) is the key written to.
	Key *Expr `json:"key,omitempty"`
	// Field (hashes) is the hash field; (stream) the entry field, a plain
	// name (default "value").
	Field *Expr `json:"field,omitempty"`
}

// Expr is a string computed per row: ArkFlow's {type: value, value} (a
// constant; a plain string means the same) or {type: expr, expr}, an
// expression of the job spec's expression language over the row's
// columns (a column name is the simplest) whose value is used: a string,
// an integer, or a timestamp as its milliseconds since the epoch.
type Expr struct {
	// Value is the constant, when Expr is empty.
	Value string
	// Expr is the expression.
	Expr string
}

// UnmarshalJSON accepts a string, {type: value, value} or {type: expr,
// expr}.
func (e *Expr) UnmarshalJSON(b []byte) error {
	var str string
	if json.Unmarshal(b, &str) == nil {
		*e = Expr{Value: str}
		return nil
	}
	var v struct {
		Type  string  `json:"type"`
		Value *string `json:"value,omitempty"`
		Expr  *string `json:"expr,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("must be a string, {type: value, value: STRING} or {type: expr, expr: EXPRESSION}: %v", err)
	}
	switch {
	case v.Type == "value" && v.Value != nil && v.Expr == nil:
		*e = Expr{Value: *v.Value}
	case v.Type == "expr" && v.Expr != nil && v.Value == nil && *v.Expr != "":
		*e = Expr{Expr: *v.Expr}
	default:
		return fmt.Errorf("must be {type: value, value: STRING} or {type: expr, expr: EXPRESSION} (got type %q)", v.Type)
	}
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (e Expr) MarshalJSON() ([]byte, error) {
	if e.Expr != "" {
		return json.Marshal(map[string]string{"type": "expr", "expr": e.Expr})
	}
	return json.Marshal(map[string]string{"type": "value", "value": e.Value})
}

func checkMode(f *connectors.Fields, m *Mode) {
	switch m.Type {
	case ModeSingle:
		checkURL(f, "mode.url", m.URL)
		if m.URLs != nil {
			f.Add("mode.urls", "is a key of mode type cluster only (this is single)")
		}
	case ModeCluster:
		if m.URL != "" {
			f.Add("mode.url", "is a key of mode type single only (this is cluster)")
		}
		if len(m.URLs) == 0 {
			f.Add("mode.urls", "is required: at least one seed node of the cluster")
		}
		for i, u := range m.URLs {
			checkURL(f, fmt.Sprintf("mode.urls[%d]", i), u)
		}
	case "":
		f.Add("mode.type", "is required (%s or %s)", ModeSingle, ModeCluster)
	default:
		f.Add("mode.type", "must be %s or %s (got %q)", ModeSingle, ModeCluster, m.Type)
	}
}

func checkURL(f *connectors.Fields, path, raw string) {
	if strings.TrimSpace(raw) == "" {
		f.Add(path, "is required (redis://host:port, or rediss://host:port for TLS)")
		return
	}
	p, err := url.Parse(raw)
	switch {
	case err != nil:
		f.Add(path, "is not a URL: %v", err)
	case p.Scheme != "redis" && p.Scheme != "rediss":
		f.Add(path, "scheme %q of %q: must be redis or rediss", p.Scheme, p.Redacted())
	case p.Host == "":
		f.Add(path, "%q has no host", p.Redacted())
	}
}

func checkTLS(f *connectors.Fields, t *TLS) {
	if t != nil && (t.ClientCert == "") != (t.ClientKey == "") {
		f.Add("tls", "client_cert and client_key go together (got only one)")
	}
}

// checkKeys checks a list of keys (or channels): at least one, none
// empty, no duplicates.
func checkKeys(f *connectors.Fields, path string, keys []string) {
	if len(keys) == 0 {
		f.Add(path, "must list at least one")
	}
	seen := map[string]int{}
	for i, k := range keys {
		at := fmt.Sprintf("%s[%d]", path, i)
		if k == "" {
			f.Add(at, "must not be empty")
		} else if j, dup := seen[k]; dup {
			f.Add(at, "duplicate %q (also %s[%d])", k, path, j)
		} else {
			seen[k] = i
		}
	}
}

func checkSource(c *SourceConfig, zero map[string]bool) error {
	var f connectors.Fields
	checkMode(&f, &c.Mode)
	checkSourceType(&f, &c.RedisType, zero)
	checkTLS(&f, c.TLS)
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

// checkSourceType checks redis_type and applies its defaults.
func checkSourceType(f *connectors.Fields, r *SourceType, zero map[string]bool) {
	only := func(key string, set bool, types string) {
		if set {
			f.Add("redis_type."+key, "is a key of redis_type %s only (this is %s)", types, r.Type)
		}
	}
	isStream, isList := r.Type == TypeStream, r.Type == TypeList
	only("subscribe", r.Subscribe != nil && r.Type != TypeSubscribe, TypeSubscribe)
	only("list", r.List != nil && !isList, TypeList)
	only("streams", r.Streams != nil && !isStream, TypeStream)
	only("group", r.Group != "" && !isStream, TypeStream)
	only("field", r.Field != "" && !isStream, TypeStream)
	only("consumer", r.Consumer != "" && !isStream && !isList, "stream or list")
	only("block_ms", (r.BlockMS != 0 || zero["redis_type.block_ms"]) && !isStream && !isList, "stream or list")
	switch r.Type {
	case TypeSubscribe:
		checkSubscribe(f, r.Subscribe)
	case TypeList:
		checkKeys(f, "redis_type.list", r.List)
	case TypeStream:
		checkKeys(f, "redis_type.streams", r.Streams)
		if r.Group == "" {
			f.Add("redis_type.group", "is required: the consumer group the source reads through")
		}
		if r.Field == "" {
			r.Field = DefaultField
		}
	case "":
		f.Add("redis_type.type", "is required (%s, %s or %s)", TypeSubscribe, TypeList, TypeStream)
		return
	default:
		f.Add("redis_type.type", "must be %s, %s or %s (got %q)", TypeSubscribe, TypeList, TypeStream, r.Type)
		return
	}
	if isStream || isList {
		if r.Consumer == "" {
			r.Consumer = "arkflow"
		}
		switch {
		case r.BlockMS < 0 || zero["redis_type.block_ms"]:
			f.Add("redis_type.block_ms", "must be > 0 (got %d)", r.BlockMS)
		case r.BlockMS == 0:
			r.BlockMS = DefaultBlockMS
		}
	}
}

func checkSubscribe(f *connectors.Fields, s *Subscribe) {
	if s == nil {
		f.Add("redis_type.subscribe", "is required with redis_type subscribe: {type: channels, channels: [...]} or {type: patterns, patterns: [...]}")
		return
	}
	switch s.Type {
	case "channels":
		checkKeys(f, "redis_type.subscribe.channels", s.Channels)
		if s.Patterns != nil {
			f.Add("redis_type.subscribe.patterns", "is a key of subscribe type patterns only (this is channels)")
		}
	case "patterns":
		checkKeys(f, "redis_type.subscribe.patterns", s.Patterns)
		if s.Channels != nil {
			f.Add("redis_type.subscribe.channels", "is a key of subscribe type channels only (this is patterns)")
		}
	case "":
		f.Add("redis_type.subscribe.type", "is required (channels or patterns)")
	default:
		f.Add("redis_type.subscribe.type", "must be channels or patterns (got %q)", s.Type)
	}
}

func checkSink(c *SinkConfig) error {
	var f connectors.Fields
	checkMode(&f, &c.Mode)
	checkTLS(&f, c.TLS)
	r := &c.RedisType
	need := func(key string, e *Expr, what string) {
		if e == nil || (e.Value == "" && e.Expr == "") {
			f.Add("redis_type."+key, "is required with redis_type %s: %s", r.Type, what)
		}
	}
	not := func(key string, e *Expr) {
		if e != nil {
			f.Add("redis_type."+key, "is not a key of redis_type %s", r.Type)
		}
	}
	switch r.Type {
	case TypePublish:
		need("channel", r.Channel, "the channel to publish to")
		not("key", r.Key)
		not("field", r.Field)
	case TypeList, TypeStrings:
		need("key", r.Key, "the key to write to")
		not("channel", r.Channel)
		not("field", r.Field)
	case TypeHashes:
		need("key", r.Key, "the hash to write to")
		need("field", r.Field, "the hash field every row sets")
		not("channel", r.Channel)
	case TypeStream:
		need("key", r.Key, "the stream to add entries to")
		not("channel", r.Channel)
		if r.Field != nil && r.Field.Expr != "" {
			f.Add("redis_type.field", "must be a plain name with redis_type stream (the entry field that holds the payload)")
		}
		if r.Field == nil {
			r.Field = &Expr{Value: DefaultField}
		}
	case "":
		f.Add("redis_type.type", "is required (%s, %s, %s, %s or %s)", TypePublish, TypeList, TypeHashes, TypeStrings, TypeStream)
	default:
		f.Add("redis_type.type", "must be %s, %s, %s, %s or %s (got %q)", TypePublish, TypeList, TypeHashes, TypeStrings, TypeStream, r.Type)
	}
	return f.Err()
}

// explicitZero returns the keys (top level, or "redis_type." and a key of
// it) of raw whose value is the number 0.
func explicitZero(raw json.RawMessage, keys ...string) map[string]bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var sub map[string]json.RawMessage
	_ = json.Unmarshal(m["redis_type"], &sub)
	out := map[string]bool{}
	for _, k := range keys {
		v, ok := m[k]
		if s, nested := strings.CutPrefix(k, "redis_type."); nested {
			v, ok = sub[s]
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
