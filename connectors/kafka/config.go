package kafka

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Type is the input and output type name.
const Type = "kafka"

// Value formats of the input.
const (
	// FormatJSON decodes every record value as one JSON object into the
	// declared schema (internal/rowjson's rules). It is the default when a
	// schema is declared.
	FormatJSON = "json"
	// FormatRaw keeps the value bytes as they are, in a binary column named
	// "value". It is the default without a schema.
	FormatRaw = "raw"
)

// RawValueColumn is the value column of FormatRaw.
const RawValueColumn = "value"

// Defaults and fixed timeouts.
const (
	// DefaultBatchSize is the default maximum number of records per batch.
	DefaultBatchSize = 1024
	// MetadataTimeout bounds every metadata, watermark and committed-offset
	// request the connector makes while connecting or rebalancing.
	MetadataTimeout = 10 * time.Second
	// JoinTimeout bounds how long Connect waits for a subscription's first
	// assignment (it goes on without one; brokers may delay a new group's
	// first rebalance by group.initial.rebalance.delay.ms, 3 s by default).
	JoinTimeout = 30 * time.Second
	// InitTransactionsTimeout bounds InitTransactions at Connect (ArkFlow's
	// value).
	InitTransactionsTimeout = 60 * time.Second
	// TransactionTimeout bounds each CommitTransaction and
	// AbortTransaction call (ArkFlow's value).
	TransactionTimeout = 30 * time.Second
	// CloseFlushTimeout bounds the flush of an at-least-once producer in
	// Close (ArkFlow's value).
	CloseFlushTimeout = 30 * time.Second
	// MaxTransactionAttempts is how often one Write runs its transaction
	// before giving up: an abortable error or a fatal, unfenced producer
	// error ends an attempt, aborts it (or rebuilds the producer) and
	// replays the same rows in a new transaction.
	MaxTransactionAttempts = 5
)

// SourceConfig is the config of the "kafka" input. Field names follow
// ArkFlow v1's Kafka input; format, schema, batch_size and properties are
// additions.
type SourceConfig struct {
	// Brokers are the bootstrap brokers, host:port. Required.
	Brokers []string `json:"brokers"`
	// Topics to read. Required; every subtask reads its share of the
	// partitions of every topic.
	Topics []string `json:"topics"`
	// ConsumerGroup is the consumer group (group.id): a single subtask
	// joins it with a subscription, and every subtask commits its
	// contiguous acknowledged frontier to it (with transactional_offsets,
	// the paired output commits it). Required.
	ConsumerGroup string `json:"consumer_group"`
	// ClientID is librdkafka's client.id (default "rdkafka").
	ClientID string `json:"client_id,omitempty"`
	// StartFromLatest makes partitions without a restored position and
	// without a committed group offset start at their end instead of their
	// beginning (the default).
	StartFromLatest bool `json:"start_from_latest,omitempty"`
	// TransactionalOffsets (L3) hands the commit of this
	// input's offsets to the exactly-once kafka output whose
	// offset_commit_group names consumer_group: the source registers its
	// consumer group metadata in an in-process registry and commits
	// nothing itself; acknowledgements only move its in-memory contiguous
	// frontier (which checkpoints still record), and the output commits
	// offsets with SendOffsetsToTransaction inside the transaction that
	// writes the rows. Needs exactly one topic, and an output of the same
	// job naming consumer_group in offset_commit_group.
	TransactionalOffsets bool `json:"transactional_offsets,omitempty"`
	// FetchMinBytes, FetchMaxBytes, FetchMaxPartitionBytes and
	// FetchWaitMaxMS are ArkFlow's fetch keys, librdkafka's fetch.min.bytes,
	// fetch.max.bytes, max.partition.fetch.bytes and fetch.wait.max.ms
	// (its defaults when 0). Giving one both here and in properties is an
	// error.
	FetchMinBytes          int `json:"fetch_min_bytes,omitempty"`
	FetchMaxBytes          int `json:"fetch_max_bytes,omitempty"`
	FetchMaxPartitionBytes int `json:"fetch_max_partition_bytes,omitempty"`
	FetchWaitMaxMS         int `json:"fetch_wait_max_ms,omitempty"`
	// Format is "json" (the default with a schema) or "raw" (the default
	// without one: a binary "value" column).
	Format string `json:"format,omitempty"`
	// Schema declares the columns a JSON value decodes into.
	Schema connectors.Schema `json:"schema,omitempty"`
	// BatchSize is the maximum number of records per batch (default 1024).
	// A batch holds the records of one partition that were available
	// without waiting, so batches are smaller when records trickle in.
	BatchSize int `json:"batch_size,omitempty"`
	// Properties are passed to librdkafka as they are, for everything the
	// connector has no key of its own for: TLS (security.protocol,
	// ssl.ca.location, …), SASL, fetch sizes, isolation.level (default
	// read_committed), session.timeout.ms (default 45000). Keys the
	// connector sets itself are errors.
	//
	// group.instance.id overrides the static group membership (KIP-345)
	// of a subscribing source (parallelism 1): by default it is
	// "arkflow.JOB.OPERATOR.SUBTASK" (see the package doc, Assignment);
	// a value of 1–249 letters, digits, '.', '_' or '-' replaces it, and
	// "" turns static membership off (the consumer joins as a dynamic
	// member). Sources with parallelism > 1 join no group and ignore it.
	Properties Properties `json:"properties,omitempty"`
}

// InputType returns "kafka".
func (SourceConfig) InputType() string { return Type }

// SinkConfig is the config of the "kafka" output. Field names follow
// ArkFlow v1's Kafka output; properties is an addition.
type SinkConfig struct {
	// Brokers are the bootstrap brokers, host:port. Required.
	Brokers []string `json:"brokers"`
	// Topic every row is written to. Required. ArkFlow's form
	// {type: value, value: NAME} is accepted too.
	Topic Topic `json:"topic"`
	// Key names the column whose value becomes the record key (string,
	// binary or integer; integers as decimal text; null: no key). Absent:
	// records have no key. ArkFlow's form {type: expr, expr: COLUMN} is
	// accepted when the expression is a column name.
	Key KeyColumn `json:"key,omitempty"`
	// ValueField names a string or binary column whose bytes become the
	// record value. Absent: the value is the row as a JSON object without
	// its __meta_* columns (internal/rowjson's format, as the file sink
	// writes it).
	ValueField string `json:"value_field,omitempty"`
	// ClientID is librdkafka's client.id.
	ClientID string `json:"client_id,omitempty"`
	// Compression is none (the default), gzip, snappy, lz4 or zstd.
	Compression string `json:"compression,omitempty"`
	// Acks is all (the default; also -1), 1 or 0. exactly_once needs all.
	Acks string `json:"acks,omitempty"`
	// ExactlyOnce makes every Write one Kafka transaction (L2): begin,
	// produce every row, commit; the rows are acknowledged only after the
	// commit. Needs TransactionalID.
	ExactlyOnce bool `json:"exactly_once,omitempty"`
	// TransactionalID is the producer's transactional.id: stable across
	// restarts and unique per producer (sink subtask). "{subtask}" is
	// replaced by the subtask index, so a sink with parallelism > 1 can
	// give every subtask its own id. Required with exactly_once; ignored
	// without it.
	TransactionalID string `json:"transactional_id,omitempty"`
	// OffsetCommitGroup (L3) names the consumer_group of a
	// kafka input with transactional_offsets: true in the same job (and
	// process). Every transaction then also commits that input's offsets
	// to the group (SendOffsetsToTransaction), derived from the rows'
	// __meta_topic/__meta_partition/__meta_offset columns and clamped per
	// partition to the input's contiguous acknowledged frontier. Requires
	// exactly_once.
	OffsetCommitGroup string `json:"offset_commit_group,omitempty"`
	// Properties are passed to librdkafka as they are (TLS, SASL,
	// linger.ms, partitioner, …). Keys the connector sets itself are
	// errors.
	Properties Properties `json:"properties,omitempty"`
}

// OutputType returns "kafka".
func (SinkConfig) OutputType() string { return Type }

// SubtaskPlaceholder in a transactional_id is replaced by the subtask
// index.
const SubtaskPlaceholder = "{subtask}"

// Properties are librdkafka configuration properties. In a spec, values
// may be strings, numbers or booleans; they are passed on as strings.
type Properties map[string]string

// UnmarshalJSON accepts an object of scalar values.
func (p *Properties) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("must be an object of librdkafka properties")
	}
	out := make(Properties, len(m))
	var bad []string
	for k, raw := range m {
		raw = bytes.TrimSpace(raw)
		switch {
		case len(raw) > 0 && raw[0] == '"':
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return err
			}
			out[k] = s
		case string(raw) == "true" || string(raw) == "false":
			out[k] = string(raw)
		case len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')):
			out[k] = string(raw)
		default:
			bad = append(bad, strconv.Quote(k))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("values must be strings, numbers or booleans (not %s)", strings.Join(bad, ", "))
	}
	*p = out
	return nil
}

// Topic is a topic name. In a spec it is a string or ArkFlow's
// {type: value, value: NAME}.
type Topic string

// UnmarshalJSON accepts a string or {type: value, value: NAME}.
func (t *Topic) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*t = Topic(s)
		return nil
	}
	var e arkExpr
	if err := decodeExpr(b, &e); err != nil {
		return err
	}
	if e.Type != "value" {
		return fmt.Errorf(`only {type: value, value: TOPIC} is supported (got type %q): topics computed by expressions are not`, e.Type)
	}
	*t = Topic(e.Value)
	return nil
}

// KeyColumn names the column the record key comes from. In a spec it is a
// column name or ArkFlow's {type: expr, expr: COLUMN}.
type KeyColumn string

// UnmarshalJSON accepts a string or {type: expr, expr: COLUMN}.
func (k *KeyColumn) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*k = KeyColumn(s)
		return nil
	}
	var e arkExpr
	if err := decodeExpr(b, &e); err != nil {
		return err
	}
	if e.Type != "expr" {
		return fmt.Errorf(`only a column name or {type: expr, expr: COLUMN} is supported (got type %q): constant keys are not`, e.Type)
	}
	*k = KeyColumn(strings.TrimSpace(e.Expr))
	return nil
}

// arkExpr is ArkFlow's Expr<String>: {type: value, value} or {type: expr, expr}.
type arkExpr struct {
	Type  string `json:"type"`
	Value string `json:"value,omitempty"`
	Expr  string `json:"expr,omitempty"`
}

func decodeExpr(b []byte, e *arkExpr) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(e); err != nil {
		return fmt.Errorf("must be a string or {type: value, value: ...} / {type: expr, expr: ...}: %v", err)
	}
	return nil
}

// Properties the connector sets itself, with the config key to use instead.
var (
	sourceReserved = map[string]string{
		"bootstrap.servers":        "brokers",
		"metadata.broker.list":     "brokers",
		"group.id":                 "consumer_group",
		"client.id":                "client_id",
		"enable.auto.commit":       "", // offsets are committed on acknowledgement
		"enable.auto.offset.store": "",
		"auto.offset.reset":        "start_from_latest", // never used: every start is an explicit offset
		"enable.partition.eof":     "",
	}
	sinkReserved = map[string]string{
		"bootstrap.servers":     "brokers",
		"metadata.broker.list":  "brokers",
		"client.id":             "client_id",
		"transactional.id":      "transactional_id",
		"compression.type":      "compression",
		"compression.codec":     "compression",
		"acks":                  "acks",
		"request.required.acks": "acks",
	}
)

func checkProperties(f *connectors.Fields, p Properties, reserved map[string]string) {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := "properties." + k
		if strings.HasPrefix(k, "go.") {
			f.Add(path, "go.* properties are managed by the connector")
			continue
		}
		use, ok := reserved[k]
		if !ok {
			continue
		}
		if use == "" {
			f.Add(path, "is set by the connector")
		} else {
			f.Add(path, "is set by the connector (use %s)", use)
		}
	}
}

func checkBrokers(f *connectors.Fields, brokers []string) {
	if len(brokers) == 0 {
		f.Add("brokers", "is required (a list of host:port)")
	}
	for i, b := range brokers {
		if strings.TrimSpace(b) == "" {
			f.Add(fmt.Sprintf("brokers[%d]", i), "must not be empty")
		}
	}
}

func checkSource(c *SourceConfig, zero map[string]bool) error {
	var f connectors.Fields
	checkBrokers(&f, c.Brokers)
	if len(c.Topics) == 0 {
		f.Add("topics", "is required (a list of topic names)")
	}
	seen := map[string]int{}
	for i, t := range c.Topics {
		at := fmt.Sprintf("topics[%d]", i)
		if strings.TrimSpace(t) == "" {
			f.Add(at, "must not be empty")
		} else if j, dup := seen[t]; dup {
			f.Add(at, "duplicate topic %q (also topics[%d])", t, j)
		} else {
			seen[t] = i
		}
	}
	if strings.TrimSpace(c.ConsumerGroup) == "" {
		f.Add("consumer_group", "is required: acknowledged offsets are committed to it")
	}
	if c.TransactionalOffsets && len(c.Topics) > 1 {
		f.Add("transactional_offsets", "needs exactly one topic (got %d in topics): the output that commits the offsets (offset_commit_group) pairs them with this input per partition; use one input per topic", len(c.Topics))
	}
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
			f.Add("schema", "must be absent with format %q (the value is one binary column %q)", FormatRaw, RawValueColumn)
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
	checkProperties(&f, c.Properties, sourceReserved)
	for _, k := range c.fetchKeys() {
		switch {
		case k.value < 0:
			f.Add(k.key, "must be ≥ 0 (got %d)", k.value)
		case k.value > 0:
			if _, dup := c.Properties[k.property]; dup {
				f.Add(k.key, "is also given as properties.%s: give it once", k.property)
			}
		}
	}
	if id, ok := c.Properties[groupInstanceIDKey]; ok && id != "" {
		if err := checkInstanceID(id); err != "" {
			f.Add("properties."+groupInstanceIDKey, "%s (got %q); \"\" turns static group membership off", err, id)
		}
	}
	return f.Err()
}

// groupInstanceIDKey is librdkafka's property of static group membership
// (KIP-345).
const groupInstanceIDKey = "group.instance.id"

// maxInstanceIDLen is the longest group.instance.id brokers accept: they
// check it with the rules of topic names (Kafka's
// JoinGroupRequest.validateGroupInstanceId).
const maxInstanceIDLen = 249

// checkInstanceID returns what is wrong with a group.instance.id, or "".
func checkInstanceID(id string) string {
	if id == "." || id == ".." {
		return "must not be \".\" or \"..\""
	}
	if len(id) > maxInstanceIDLen {
		return fmt.Sprintf("must be at most %d characters (got %d)", maxInstanceIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		if !instanceIDChar(id[i]) {
			return "must be letters, digits, '.', '_' or '-' only"
		}
	}
	return ""
}

func instanceIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// Compression codecs of the output.
var compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}

func checkSink(c *SinkConfig) error {
	var f connectors.Fields
	checkBrokers(&f, c.Brokers)
	if strings.TrimSpace(string(c.Topic)) == "" {
		f.Add("topic", "is required")
	}
	if c.ExactlyOnce && strings.TrimSpace(c.TransactionalID) == "" {
		// ArkFlow's text: "Kafka output: transactional_id is required and
		// must be non-empty when exactly_once is true".
		f.Add("transactional_id", "is required and must be non-empty when exactly_once is true (a stable id, unique per producer: the broker fences older producers with the same id)")
	}
	switch c.Compression {
	case "":
		c.Compression = "none"
	case "none", "gzip", "snappy", "lz4", "zstd":
	default:
		f.Add("compression", "must be one of %s (got %q)", strings.Join(compressions, ", "), c.Compression)
	}
	switch c.Acks {
	case "", "-1":
		c.Acks = "all"
	case "all":
	case "0", "1":
		if c.ExactlyOnce {
			f.Add("acks", "must be all with exactly_once (got %q)", c.Acks)
		}
	default:
		f.Add("acks", "must be all, -1, 1 or 0 (got %q)", c.Acks)
	}
	switch g := c.OffsetCommitGroup; {
	case g == "":
	case strings.TrimSpace(g) == "":
		f.Add("offset_commit_group", "must not be blank (the consumer_group of the kafka input with transactional_offsets: true)")
	case !c.ExactlyOnce:
		f.Add("offset_commit_group", "requires exactly_once: true (the input's offsets are committed inside the output's transactions)")
	}
	if v, ok := c.Properties["transaction.timeout.ms"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
			f.Add("properties.transaction.timeout.ms", "must be a positive integer (milliseconds; got %q)", v)
		}
	}
	checkProperties(&f, c.Properties, sinkReserved)
	if c.ExactlyOnce {
		if _, ok := c.Properties["enable.idempotence"]; ok {
			f.Add("properties.enable.idempotence", "is set by the connector with exactly_once")
		}
	}
	return f.Err()
}

// explicitZero returns the top-level keys of raw whose value is the number 0.
func explicitZero(raw json.RawMessage, keys ...string) map[string]bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	out := map[string]bool{}
	for _, k := range keys {
		v, ok := m[k]
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

// fetchKey is one of ArkFlow's fetch keys and its librdkafka property.
type fetchKey struct {
	key, property string
	value         int
}

func (c *SourceConfig) fetchKeys() []fetchKey {
	return []fetchKey{
		{"fetch_min_bytes", "fetch.min.bytes", c.FetchMinBytes},
		{"fetch_max_bytes", "fetch.max.bytes", c.FetchMaxBytes},
		{"fetch_max_partition_bytes", "max.partition.fetch.bytes", c.FetchMaxPartitionBytes},
		{"fetch_wait_max_ms", "fetch.wait.max.ms", c.FetchWaitMaxMS},
	}
}
