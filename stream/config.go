package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	yaml "go.yaml.in/yaml/v3"

	"github.com/arkflow-rs/arkflow-go/internal/config"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Config is a Stream config file: the streams, and the engine's logging
// and health check settings.
type Config struct {
	Streams     []Stream    `json:"streams"`
	Logging     Logging     `json:"logging"`
	HealthCheck HealthCheck `json:"health_check"`
}

// Logging is the top-level logging block. Absent, it is level info and
// format plain, ArkFlow's defaults.
type Logging struct {
	// Level is trace, debug, info, warn or error.
	Level    string `json:"level"`
	FilePath string `json:"file_path,omitempty"`
	// Format is plain or json.
	Format string `json:"format,omitempty"`
}

// HealthCheck is the top-level health_check block, with ArkFlow's keys.
// Nil pointers are absent keys (ArkFlow's defaults apply).
type HealthCheck struct {
	Enabled         *bool    `json:"enabled,omitempty"`
	Address         string   `json:"address,omitempty"`
	HealthPath      string   `json:"health_path,omitempty"`
	ReadinessPath   string   `json:"readiness_path,omitempty"`
	LivenessPath    string   `json:"liveness_path,omitempty"`
	APIPrefix       string   `json:"api_prefix,omitempty"`
	APIToken        string   `json:"api_token,omitempty"`
	CORSOrigins     []string `json:"cors_origins,omitempty"`
	HubURL          string   `json:"hub_url,omitempty"`
	NodeID          string   `json:"node_id,omitempty"`
	NodeToken       string   `json:"node_token,omitempty"`
	AgentLeaseTTLMS *int64   `json:"agent_lease_ttl_ms,omitempty"`
}

// Stream is one stream: input, optional buffer, pipeline, output.
type Stream struct {
	// ID is optional; ArkFlow names a stream without one stream-<index>.
	ID          string      `json:"id,omitempty"`
	Input       Component   `json:"input"`
	Buffer      *Component  `json:"buffer,omitempty"`
	Pipeline    Pipeline    `json:"pipeline"`
	Output      Component   `json:"output"`
	ErrorOutput *Component  `json:"error_output,omitempty"`
	Temporary   []Component `json:"temporary,omitempty"`
	// Durability is ArkFlow's input write-ahead log block (its WalConfig:
	// enabled, path, sync, backend), kept verbatim; Run puts a local
	// write-ahead log in front of the input with it.
	Durability json.RawMessage `json:"durability,omitempty"`
}

// Pipeline is the ordered list of processors and their worker count.
type Pipeline struct {
	// ThreadNum is the number of processor workers; 0 means the number
	// of CPUs.
	ThreadNum  int         `json:"thread_num,omitempty"`
	Processors []Component `json:"processors"`
}

// Component is an input, output, processor, buffer, codec or temporary
// as ArkFlow writes it: `type`, an optional `name` (and for inputs and
// outputs an optional `codec`) beside the component's own keys, which
// Config holds as a JSON object.
type Component struct {
	Type  string     `json:"type"`
	Name  string     `json:"name,omitempty"`
	Codec *Component `json:"codec,omitempty"`
	// Config is the component's other keys, a JSON object ("{}" when
	// there are none).
	Config json.RawMessage `json:"-"`
}

// MarshalJSON writes the component flat, as ArkFlow nests it.
func (c Component) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if len(c.Config) > 0 {
		if err := json.Unmarshal(c.Config, &m); err != nil {
			return nil, err
		}
	}
	m["type"] = c.Type
	if c.Name != "" {
		m["name"] = c.Name
	}
	if c.Codec != nil {
		m["codec"] = c.Codec
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads a flat component: type, name and codec, and the
// other keys into Config.
func (c *Component) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	var errs config.Problems
	*c = decodeComponent("", v, true, &errs)
	if len(errs) > 0 {
		return problemsToErrors(errs)
	}
	return nil
}

// Errors is every problem found in a Stream config, each naming the path
// of the key at fault (streams[0].input.brokers), in path order.
type Errors []*job.FieldError

// Error returns the problems, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, so errors.As finds each *job.FieldError.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

func problemsToErrors(ps config.Problems) Errors {
	out := make(Errors, len(ps))
	for i, p := range ps {
		out[i] = &job.FieldError{Path: p.Path, Reason: p.Reason}
	}
	return out
}

// Load reads a Stream config file; its extension (.yaml, .yml or .json)
// says how to parse it.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading stream config: %w", err)
	}
	return Parse(data, filepath.Ext(path))
}

// Parse decodes a Stream config from YAML (ext ".yaml" or ".yml"), JSON
// (".json") or TOML (".toml"), the same keys in each. ${VAR} and
// ${VAR:-default} in string values are replaced from the environment
// first. Unknown keys, values of the wrong type, missing required keys and
// unset variables are errors naming their path, all returned at once as
// Errors, with the config as far as it decoded (nil when the data is not
// an object). Components' own keys are checked by Validate.
func Parse(data []byte, ext string) (*Config, error) {
	v, err := decodeDocument(data, ext)
	if err != nil {
		return nil, err
	}
	var errs config.Problems
	v = expandEnv("", v, &errs)
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, Errors{{Reason: "a stream config must be an object with a streams list (got " + config.Describe(v) + ")"}}
	}
	cfg := decodeConfig(obj, &errs)
	if len(errs) > 0 {
		out := problemsToErrors(errs)
		sortErrors(out)
		return cfg, out
	}
	return cfg, nil
}

// decodeDocument parses data by its extension into a generic JSON value
// (numbers as json.Number).
func decodeDocument(data []byte, ext string) (any, error) {
	switch strings.ToLower(ext) {
	case ".yaml", ".yml":
		var y any
		if err := yaml.Unmarshal(data, &y); err != nil {
			return nil, Errors{{Reason: "invalid YAML: " + err.Error()}}
		}
		j, err := json.Marshal(jsonValue(y))
		if err != nil {
			return nil, Errors{{Reason: "invalid YAML: " + err.Error()}}
		}
		data = j
	case ".json":
	case ".toml":
		var m map[string]any
		if err := toml.Unmarshal(data, &m); err != nil {
			return nil, Errors{{Reason: "invalid TOML: " + err.Error()}}
		}
		j, err := json.Marshal(jsonValue(m))
		if err != nil {
			return nil, Errors{{Reason: "invalid TOML: " + err.Error()}}
		}
		data = j
	default:
		return nil, Errors{{Reason: fmt.Sprintf("unknown config file extension %q: use .yaml, .yml, .json or .toml", ext)}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, Errors{{Reason: "invalid JSON: " + err.Error()}}
	}
	if dec.More() {
		return nil, Errors{{Reason: "invalid JSON: data after the config object"}}
	}
	return v, nil
}

// jsonValue turns what yaml.v3 decodes into values encoding/json accepts:
// map keys become strings; NaN and infinities become strings, which the
// typed decode then refuses with their path.
func jsonValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonValue(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonValue(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonValue(e)
		}
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x)
		}
		return x
	default:
		return x
	}
}

// rawStream is a stream as decoded before its components are taken apart.
type rawStream struct {
	ID          string          `json:"id"`
	Input       any             `json:"input"`
	Buffer      any             `json:"buffer"`
	Pipeline    *rawPipeline    `json:"pipeline"`
	Output      any             `json:"output"`
	ErrorOutput any             `json:"error_output"`
	Temporary   []any           `json:"temporary"`
	Durability  json.RawMessage `json:"durability"`
}

type rawPipeline struct {
	ThreadNum  *int  `json:"thread_num"`
	Processors []any `json:"processors"`
}

type rawConfig struct {
	Streams     *[]rawStream `json:"streams"`
	Logging     *Logging     `json:"logging"`
	HealthCheck HealthCheck  `json:"health_check"`
}

// decodeConfig decodes the top level and every stream, adding problems.
func decodeConfig(obj map[string]any, errs *config.Problems) *Config {
	var raw rawConfig
	config.DecodeValue("", obj, &raw, errs)
	cfg := &Config{HealthCheck: raw.HealthCheck, Logging: Logging{Level: "info", Format: "plain"}}
	if raw.Logging != nil {
		cfg.Logging = *raw.Logging
		if lo, ok := obj["logging"].(map[string]any); ok && lo["level"] == nil {
			errs.Add("logging.level", "missing (trace, debug, info, warn or error)")
		}
		if cfg.Logging.Format == "" {
			cfg.Logging.Format = "plain"
		}
		checkLogging(cfg.Logging, errs)
	}
	if raw.Streams == nil {
		if _, ok := obj["streams"]; !ok {
			errs.Add("streams", "missing: a stream config lists its streams under streams")
		}
		return cfg
	}
	for i, rs := range *raw.Streams {
		cfg.Streams = append(cfg.Streams, decodeStream(config.Index("streams", i), rs, errs))
	}
	return cfg
}

// checkLogging checks the logging block's level and format. ArkFlow
// takes an unknown level as info; here it is an error.
func checkLogging(l Logging, errs *config.Problems) {
	switch l.Level {
	case "", "trace", "debug", "info", "warn", "error":
	default:
		errs.Add("logging.level", "must be trace, debug, info, warn or error (got %q)", l.Level)
	}
	if l.Format != "plain" && l.Format != "json" {
		errs.Add("logging.format", "must be plain or json (got %q)", l.Format)
	}
}

// decodeStream takes a stream's components apart.
func decodeStream(path string, rs rawStream, errs *config.Problems) Stream {
	s := Stream{ID: rs.ID, Durability: rs.Durability}
	s.Input = requiredComponent(config.Join(path, "input"), rs.Input, true, errs)
	s.Output = requiredComponent(config.Join(path, "output"), rs.Output, true, errs)
	if rs.Buffer != nil {
		b := decodeComponent(config.Join(path, "buffer"), rs.Buffer, false, errs)
		s.Buffer = &b
	}
	if rs.ErrorOutput != nil {
		e := decodeComponent(config.Join(path, "error_output"), rs.ErrorOutput, true, errs)
		s.ErrorOutput = &e
	}
	for j, t := range rs.Temporary {
		s.Temporary = append(s.Temporary, decodeComponent(config.Index(config.Join(path, "temporary"), j), t, true, errs))
	}
	if rs.Pipeline == nil {
		errs.Add(config.Join(path, "pipeline"), "missing (pipeline: {processors: [...]}; the list may be empty)")
		return s
	}
	if n := rs.Pipeline.ThreadNum; n != nil {
		s.Pipeline.ThreadNum = *n
		if *n <= 0 {
			errs.Add(config.Join(path, "pipeline.thread_num"), "must be > 0 (got %d; leave it out for one worker per CPU)", *n)
		}
	}
	s.Pipeline.Processors = []Component{}
	for j, p := range rs.Pipeline.Processors {
		s.Pipeline.Processors = append(s.Pipeline.Processors, decodeComponent(config.Index(config.Join(path, "pipeline.processors"), j), p, false, errs))
	}
	return s
}

func requiredComponent(path string, v any, codec bool, errs *config.Problems) Component {
	if v == nil {
		errs.Add(path, "missing")
		return Component{Config: json.RawMessage("{}")}
	}
	return decodeComponent(path, v, codec, errs)
}

// decodeComponent takes type, name and (when codec) codec out of a
// component object and keeps the other keys as its Config.
func decodeComponent(path string, v any, codec bool, errs *config.Problems) Component {
	c := Component{Config: json.RawMessage("{}")}
	obj, ok := v.(map[string]any)
	if !ok {
		errs.Add(path, "must be an object with a type (got %s)", config.Describe(v))
		return c
	}
	rest := make(map[string]any, len(obj))
	for k, e := range obj {
		rest[k] = e
	}
	takeString(path, "type", rest, &c.Type, errs)
	switch t, ok := obj["type"]; {
	case !ok || t == nil:
		errs.Add(config.Join(path, "type"), "missing")
	case t == "":
		errs.Add(config.Join(path, "type"), "must not be empty")
	}
	takeString(path, "name", rest, &c.Name, errs)
	if cv, ok := rest["codec"]; ok && codec {
		delete(rest, "codec")
		if cv != nil {
			cc := decodeComponent(config.Join(path, "codec"), cv, false, errs)
			c.Codec = &cc
		}
	}
	b, err := json.Marshal(rest)
	if err != nil {
		errs.Add(path, "cannot re-encode: %v", err)
		return c
	}
	c.Config = b
	return c
}

// takeString moves the string key k out of obj into dst.
func takeString(path, k string, obj map[string]any, dst *string, errs *config.Problems) {
	v, ok := obj[k]
	if !ok {
		return
	}
	delete(obj, k)
	if v == nil {
		return
	}
	s, ok := v.(string)
	if !ok {
		errs.Add(config.Join(path, k), "must be a string (got %s)", config.Describe(v))
		return
	}
	*dst = s
}

// pathLess orders paths key by key, indices by number:
// "streams[2].input" before "streams[10].buffer".
func pathLess(a, b string) bool {
	ta, tb := pathTokens.FindAllString(a, -1), pathTokens.FindAllString(b, -1)
	for i := 0; i < len(ta) && i < len(tb); i++ {
		if ta[i] == tb[i] {
			continue
		}
		na, ea := strconv.Atoi(strings.Trim(ta[i], "[]"))
		nb, eb := strconv.Atoi(strings.Trim(tb[i], "[]"))
		if ea == nil && eb == nil && ta[i][0] == '[' && tb[i][0] == '[' {
			return na < nb
		}
		return ta[i] < tb[i]
	}
	return len(ta) < len(tb)
}

var pathTokens = regexp.MustCompile(`\[\d+\]|[^.\[\]]+`)

// sortErrors orders problems by path, keeping the order of those with the
// same path.
func sortErrors(es Errors) {
	sort.SliceStable(es, func(i, j int) bool { return pathLess(es[i].Path, es[j].Path) })
}
