package stream

import (
	"encoding/json"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors/redis"
	"github.com/arkflow-rs/arkflow-go/internal/config"
	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
)

// unavailable are ArkFlow's inputs and outputs this library has no
// connector for.
var unavailable = map[string]string{
	"pulsar":   "there is no Pulsar connector; read and write through kafka, nats, mqtt or redis, or register a connector of your own under this name",
	"modbus":   "there is no Modbus connector; register a connector of your own under this name",
	"mongodb":  "there is no MongoDB connector; write through sql (postgres or mysql) or register a connector of your own under this name",
	"influxdb": "there is no InfluxDB connector; write through http (InfluxDB's line protocol API) or register a connector of your own under this name",
}

// ballistaHint is said for ArkFlow's distributed DataFusion option.
const ballistaHint = "Ballista (distributed DataFusion) is not available here: drop it to read in this process"

// inputDifferences are, per input type, ArkFlow's keys that this
// library's connector of the same name does not take, with what it takes
// instead.
var inputDifferences = map[string]map[string]string{
	"file": {
		"ballista": ballistaHint,
	},
	"sql": {
		"ballista": ballistaHint,
	},
}

// outputDifferences are outputs' keys as inputDifferences.
var outputDifferences = map[string]map[string]string{}

// refusedProcessors are ArkFlow's processors this library cannot run.
var refusedProcessors = map[string]string{
	"vrl":               "VRL has no Go implementation",
	"python":            "there is no embedded Python",
	"protobuf_to_arrow": "protobuf decoding is not available",
	"arrow_to_protobuf": "protobuf encoding is not available",
}

const migrationHint = "use a sql processor, or a Go function in a Job"

// fieldsConfig is the config of json_to_arrow and arrow_to_json.
type fieldsConfig struct {
	ValueField      string   `json:"value_field"`
	FieldsToInclude []string `json:"fields_to_include"`
}

// processor checks one processor for rows of schema (nil when unknown)
// and returns the schema of the rows it emits.
func (v *validator) processor(path string, c *Component, schema *arrow.Schema) *arrow.Schema {
	switch c.Type {
	case "":
		return nil
	case "json_to_arrow":
		v.decode(path, c.Config, &fieldsConfig{})
		return nil
	case "arrow_to_json":
		if !v.decode(path, c.Config, &fieldsConfig{}) || schema == nil {
			return nil
		}
		if schema.HasField(valueField) {
			return nil
		}
		fields := append(append([]arrow.Field{}, schema.Fields()...), arrow.Field{Name: valueField, Type: arrow.BinaryTypes.Binary})
		return arrow.NewSchema(fields, nil)
	case "batch":
		var cfg struct {
			Count     *int64 `json:"count"`
			TimeoutMS *int64 `json:"timeout_ms"`
		}
		if v.decode(path, c.Config, &cfg) {
			positive(v, path, "count", cfg.Count)
			nonNegative(v, path, "timeout_ms", cfg.TimeoutMS)
		}
		return schema
	case "sql":
		return v.sqlProcessor(path, c, schema)
	}
	if why, ok := refusedProcessors[c.Type]; ok {
		v.add(config.Join(path, "type"), "processor %q is not available here (%s): %s", c.Type, why, migrationHint)
		return nil
	}
	v.add(config.Join(path, "type"), "unknown processor type %q (available: %s)", c.Type, fmtList([]string{"arrow_to_json", "batch", "json_to_arrow", "sql"}))
	return nil
}

// valueField is the binary column raw payloads arrive in.
const valueField = "__value__"

// sqlProcessor checks a sql processor and compiles its query.
func (v *validator) sqlProcessor(path string, c *Component, schema *arrow.Schema) *arrow.Schema {
	var cfg struct {
		Query         *string   `json:"query"`
		TableName     string    `json:"table_name"`
		TemporaryList []tempRef `json:"temporary_list"`
	}
	if !v.decode(path, c.Config, &cfg) {
		return nil
	}
	for i, ref := range cfg.TemporaryList {
		v.tempRef(config.Index(config.Join(path, "temporary_list"), i), ref)
	}
	if cfg.Query == nil || *cfg.Query == "" {
		v.add(config.Join(path, "query"), "missing: the SQL query to run on each batch")
		return nil
	}
	table := cfg.TableName
	if table == "" {
		table = sqlengine.DefaultTable
	}
	if len(cfg.TemporaryList) > 0 {
		schema = nil // the temporaries' columns are known once fetched
	}
	return v.compile(config.Join(path, "query"), *cfg.Query, table, schema)
}

// tempRef checks one temporary_list entry.
func (v *validator) tempRef(path string, ref tempRef) {
	if ref.Name == "" {
		v.add(config.Join(path, "name"), "missing: the name of one of the stream's temporary entries")
	} else if !v.temps[ref.Name] {
		v.add(config.Join(path, "name"), "no temporary of the stream is named %q", ref.Name)
	}
	if ref.TableName == "" {
		v.add(config.Join(path, "table_name"), "missing: the table the query reads the temporary's rows as")
	}
	switch ref.Key.Type {
	case "value":
		if ref.Key.Value == "" {
			v.add(config.Join(path, "key.value"), "missing: the key to look up")
		}
	case "expr":
		if ref.Key.Expr == "" {
			v.add(config.Join(path, "key.expr"), "missing: the SQL expression over the batch giving the keys")
		}
	default:
		v.add(config.Join(path, "key.type"), "must be value or expr (got %q)", ref.Key.Type)
	}
}

// temporaries checks the stream's temporary entries and records their
// names for the sql processors' temporary_list.
func (v *validator) temporaries(path string, ts []Component) {
	v.temps = map[string]bool{}
	for j, t := range ts {
		p := config.Index(path, j)
		switch {
		case t.Name == "":
			v.add(config.Join(p, "name"), "missing: the name temporary_list entries refer to")
		case v.temps[t.Name]:
			v.add(config.Join(p, "name"), "%q names another temporary too", t.Name)
		}
		v.temps[t.Name] = true
		if t.Type != "redis" {
			v.add(config.Join(p, "type"), "temporary type %q is not available here (redis is)", t.Type)
			continue
		}
		if t.Codec == nil || t.Codec.Type != "json" {
			v.add(config.Join(p, "codec"), "must be {type: json}: the values are decoded as JSON objects")
		}
		if _, err := redis.DecodeLookupConfig(t.Config); err != nil {
			v.merge(p, err)
		}
	}
}

// joinConfig is a window buffer's join block.
type joinConfig struct {
	Query      *string         `json:"query"`
	Codec      json.RawMessage `json:"codec"`
	ValueField string          `json:"value_field"`
	ThreadNum  *int64          `json:"thread_num"`
}

// buffer checks a buffer and returns the schema of what it emits.
func (v *validator) buffer(path string, c *Component, schema *arrow.Schema) *arrow.Schema {
	var join *joinConfig
	switch c.Type {
	case "":
		return nil
	case "memory":
		var cfg struct {
			Capacity *int64          `json:"capacity"`
			Timeout  json.RawMessage `json:"timeout"`
		}
		v.decode(path, c.Config, &cfg)
		positive(v, path, "capacity", cfg.Capacity)
		requiredDuration(v, path, "timeout", cfg.Timeout)
	case "tumbling_window", "session_window":
		key := map[string]string{"tumbling_window": "interval", "session_window": "gap"}[c.Type]
		var cfg map[string]json.RawMessage
		if !v.decode(path, c.Config, &cfg) {
			return nil
		}
		join = v.window(path, key, cfg)
	case "sliding_window":
		v.slidingWindow(path, c)
	default:
		v.add(config.Join(path, "type"), "unknown buffer type %q (available: %s)", c.Type, fmtList([]string{"memory", "session_window", "sliding_window", "tumbling_window"}))
		return nil
	}
	if join != nil {
		return nil
	}
	return schema
}

// window checks a tumbling or session window's keys: its duration key
// and an optional join. It returns the join, if any.
func (v *validator) window(path, key string, cfg map[string]json.RawMessage) *joinConfig {
	for _, k := range sortedKeys(cfg) {
		if k != key && k != "join" {
			v.add(config.Join(path, k), "unknown field (known fields: %s, join)", key)
		}
	}
	requiredDuration(v, path, key, cfg[key])
	raw, ok := cfg["join"]
	if !ok || string(raw) == "null" {
		return nil
	}
	var j joinConfig
	jp := config.Join(path, "join")
	if !v.decode(jp, raw, &j) {
		return &j
	}
	if j.Query == nil || *j.Query == "" {
		v.add(config.Join(jp, "query"), "missing: the SQL query over the inputs' tables")
	} else {
		v.compile(config.Join(jp, "query"), *j.Query, sqlengine.DefaultTable, nil)
	}
	v.joinCodec(config.Join(jp, "codec"), j.Codec)
	if j.ThreadNum != nil {
		positive(v, jp, "thread_num", j.ThreadNum)
	}
	return &j
}

// joinCodec checks the codec a join decodes each input's rows with.
func (v *validator) joinCodec(path string, raw json.RawMessage) {
	if len(raw) == 0 || string(raw) == "null" {
		v.add(path, "missing (codec: {type: json})")
		return
	}
	var c Component
	if err := c.UnmarshalJSON(raw); err != nil {
		v.merge(path, err)
		return
	}
	if c.Type != "" && c.Type != "json" {
		v.add(config.Join(path, "type"), "codec %q is not available here; only json is", c.Type)
	}
	if c.Type == "json" && string(c.Config) != "{}" {
		v.decode(path, c.Config, &struct{}{})
	}
}

// slidingWindow checks a sliding window with ArkFlow's checks.
func (v *validator) slidingWindow(path string, c *Component) {
	var cfg struct {
		WindowSize *int64          `json:"window_size"`
		SlideSize  *int64          `json:"slide_size"`
		Interval   json.RawMessage `json:"interval"`
	}
	v.decode(path, c.Config, &cfg)
	okW := positive(v, path, "window_size", cfg.WindowSize)
	okS := positive(v, path, "slide_size", cfg.SlideSize)
	requiredDuration(v, path, "interval", cfg.Interval)
	if okW && okS && *cfg.WindowSize < *cfg.SlideSize {
		v.add(config.Join(path, "window_size"), "must be ≥ slide_size (got window_size %d, slide_size %d)", *cfg.WindowSize, *cfg.SlideSize)
	}
}

// positive checks that the required integer key k is > 0 and reports
// whether it is.
func positive(v *validator, path, k string, n *int64) bool {
	switch {
	case n == nil:
		v.add(config.Join(path, k), "missing (an integer > 0)")
	case *n <= 0:
		v.add(config.Join(path, k), "must be > 0 (got %d)", *n)
	default:
		return true
	}
	return false
}

// nonNegative checks that the required integer key k is ≥ 0.
func nonNegative(v *validator, path, k string, n *int64) {
	switch {
	case n == nil:
		v.add(config.Join(path, k), "missing (an integer ≥ 0)")
	case *n < 0:
		v.add(config.Join(path, k), "must be ≥ 0 (got %d)", *n)
	}
}

// requiredDuration checks that the duration key k is given, a humantime
// duration, and > 0.
func requiredDuration(v *validator, path, k string, raw json.RawMessage) {
	if len(raw) == 0 || string(raw) == "null" {
		v.add(config.Join(path, k), "missing (a duration such as 10s, 500ms or 1h 30m)")
		return
	}
	var d duration
	if err := d.UnmarshalJSON(raw); err != nil {
		v.add(config.Join(path, k), "%v", err)
	} else if d <= 0 {
		v.add(config.Join(path, k), "must be > 0")
	}
}
