package stream

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/config"
	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"

	// The connectors a Stream config can name. Kafka (cgo, librdkafka)
	// registers when its package is imported, as for jobs.
	_ "github.com/arkflow-rs/arkflow-go/connectors/drop"
	_ "github.com/arkflow-rs/arkflow-go/connectors/file"
	_ "github.com/arkflow-rs/arkflow-go/connectors/generate"
	_ "github.com/arkflow-rs/arkflow-go/connectors/http"
	_ "github.com/arkflow-rs/arkflow-go/connectors/memory"
	_ "github.com/arkflow-rs/arkflow-go/connectors/mqtt"
	_ "github.com/arkflow-rs/arkflow-go/connectors/nats"
	_ "github.com/arkflow-rs/arkflow-go/connectors/redis"
	_ "github.com/arkflow-rs/arkflow-go/connectors/sql"
	_ "github.com/arkflow-rs/arkflow-go/connectors/stdout"
	_ "github.com/arkflow-rs/arkflow-go/connectors/websocket"
)

// Validate checks cfg as deeply as a start would, without side effects:
// every input and output is built through the connectors registry with its
// config (no file is created, no port bound, no connection opened), every
// processor and buffer is checked, and sql queries are compiled by the
// registered SQL engine. It returns every problem at once as Errors, each
// naming its path (streams[0].input.brokers), or nil.
func Validate(cfg *Config) error {
	v := &validator{}
	if len(cfg.Streams) == 0 {
		v.add("streams", "empty: there is no stream to run (an ArkFlow config with no streams is a control-plane server's; here that is arkflow-hub)")
	}
	cfg.HealthCheck.check(v)
	ids := map[string]int{}
	for i := range cfg.Streams {
		v.stream(config.Index("streams", i), &cfg.Streams[i], ids)
	}
	if len(v.errs) == 0 {
		return nil
	}
	out := problemsToErrors(v.errs)
	sortErrors(out)
	return out
}

// validator collects the problems of one Validate.
type validator struct {
	errs config.Problems
	// view is the stream being checked as the connectors' job-wide
	// checks see a job: its built inputs and outputs.
	view    connectors.JobView
	durable bool
	temps   map[string]bool // the stream's temporaries' names
}

func (v *validator) add(path, format string, args ...any) { v.errs.Add(path, format, args...) }

// merge adds every field error of err under base.
func (v *validator) merge(base string, err error) {
	for _, e := range connectors.FlattenFieldErrors(err) {
		v.add(config.Join(base, e.Path), "%s", e.Reason)
	}
}

// decode decodes a component's keys strictly into dst, adding problems
// under path; it reports whether there were none.
func (v *validator) decode(path string, raw json.RawMessage, dst any) bool {
	ps := config.Decode(raw, dst)
	for _, p := range ps {
		v.add(config.Join(path, p.Path), "%s", p.Reason)
	}
	return len(ps) == 0
}

var streamID = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// stream checks one stream, in the order its data flows.
func (v *validator) stream(path string, s *Stream, ids map[string]int) {
	if s.ID != "" {
		if !streamID.MatchString(s.ID) {
			v.add(config.Join(path, "id"), "must be letters, digits, _ and - (got %q)", s.ID)
		} else if j, dup := ids[s.ID]; dup {
			v.add(config.Join(path, "id"), "%q is also the id of streams[%d]", s.ID, j)
		} else {
			ids[s.ID] = len(ids)
		}
	}
	if _, ps := decodeWAL(s.Durability); len(ps) > 0 {
		for _, p := range ps {
			v.add(config.Join(path, p.Path), "%s", p.Reason)
		}
	}
	d, _ := decodeWAL(s.Durability)
	v.view, v.durable = connectors.JobView{JobID: streamName(s, len(ids))}, d != nil
	v.temporaries(config.Join(path, "temporary"), s.Temporary)
	schema := v.input(config.Join(path, "input"), &s.Input)
	if s.Buffer != nil {
		schema = v.buffer(config.Join(path, "buffer"), s.Buffer, schema)
	}
	for j := range s.Pipeline.Processors {
		schema = v.processor(config.Index(config.Join(path, "pipeline.processors"), j), &s.Pipeline.Processors[j], schema)
	}
	v.output(config.Join(path, "output"), &s.Output)
	if s.ErrorOutput != nil {
		v.output(config.Join(path, "error_output"), s.ErrorOutput)
	}
	v.jobChecks()

}

// input builds an input through the connectors registry and returns the
// schema of its rows (nil when unknown).
func (v *validator) input(path string, c *Component) *arrow.Schema {
	if c.Type == "" {
		return nil
	}
	if hint, ok := unavailable[c.Type]; ok {
		v.add(config.Join(path, "type"), "input %q is not available here: %s", c.Type, hint)
		return nil
	}
	if c.Type == "multiple_inputs" {
		v.multipleInputs(path, c)
		return nil
	}
	coded := v.codec(path, c, true)
	if v.sqlFileInput(path, c) {
		return nil
	}
	raw := v.differences(path, c, inputDifferences)
	f, ok := connectors.LookupInput(c.Type)
	if !ok {
		v.add(config.Join(path, "type"), "unknown input type %q (available: %s)%s", c.Type, strings.Join(connectors.InputTypes(), ", "), cgoHint(c.Type))
		return nil
	}
	in, err := f(connectors.BuildContext{OperatorID: "input", Config: raw})
	if err != nil {
		v.merge(path, err)
		return nil
	}
	if se, ok := in.(interface{ SchemaErr() error }); ok { // a file's schema, read from it
		if err := se.SchemaErr(); err != nil {
			v.merge(path, err)
			return nil
		}
	}
	v.view.Inputs = append(v.view.Inputs, connectors.JobInput{OperatorID: path, Path: path, Input: in, Durable: v.durable})
	schema := streamSchema(c, in.Schema())
	if coded {
		if !schema.HasField(valueField) {
			v.add(config.Join(path, "codec"), "decodes the raw payload, which this input does not give with its config: leave out its schema and format")
		}
		return nil // the columns are known once rows are decoded
	}
	return schema
}

// multipleInputs checks a fan-in input and each of its inputs.
func (v *validator) multipleInputs(path string, c *Component) {
	var cfg struct {
		Inputs []json.RawMessage `json:"inputs"`
	}
	if !v.decode(path, c.Config, &cfg) {
		return
	}
	if len(cfg.Inputs) == 0 {
		v.add(config.Join(path, "inputs"), "missing or empty: list the inputs to read")
	}
	names := map[string]int{}
	for k, raw := range cfg.Inputs {
		p := config.Index(config.Join(path, "inputs"), k)
		var sub Component
		if err := sub.UnmarshalJSON(raw); err != nil {
			v.merge(p, err)
			continue
		}
		switch j, dup := names[sub.Name]; {
		case sub.Name == "":
			v.add(config.Join(p, "name"), "missing: each of multiple_inputs' inputs needs a name (its table name in a buffer's join)")
		case dup:
			v.add(config.Join(p, "name"), "%q is also the name of inputs[%d]", sub.Name, j)
		default:
			names[sub.Name] = k
		}
		v.input(p, &sub)
	}
}

// output builds an output through the connectors registry, for rows of a
// schema not known before the stream runs.
func (v *validator) output(path string, c *Component) {
	if c.Type == "" {
		return
	}
	if hint, ok := unavailable[c.Type]; ok {
		v.add(config.Join(path, "type"), "output %q is not available here: %s", c.Type, hint)
		return
	}
	v.codec(path, c, false)
	raw := v.differences(path, c, outputDifferences)
	if valueOutputs[c.Type] != nil {
		if rewritten, x, err := rewriteExprs(raw); err == nil && x != nil {
			for _, e := range x.exprs {
				v.compile(path, "SELECT CAST(("+e+") AS VARCHAR) FROM flow", sqlengine.DefaultTable, nil)
			}
			raw = rewritten
		}
	}
	f, ok := connectors.LookupOutput(c.Type)
	if !ok {
		v.add(config.Join(path, "type"), "unknown output type %q (available: %s)%s", c.Type, strings.Join(connectors.OutputTypes(), ", "), cgoHint(c.Type))
		return
	}
	out, err := f(connectors.BuildContext{OperatorID: "output", Config: raw}, nil)
	if err != nil {
		v.merge(path, err)
		return
	}
	var srcs []string
	for _, in := range v.view.Inputs {
		srcs = append(srcs, in.OperatorID)
	}
	v.view.Outputs = append(v.view.Outputs, connectors.JobOutput{OperatorID: path, Path: path, Output: out, Sources: srcs})
}

// codec checks a codec on an input (json, debezium_json) or output
// (json) and reports whether one is set. Others are refused with a hint.
func (v *validator) codec(path string, c *Component, input bool) bool {
	if c.Codec == nil {
		return false
	}
	p := config.Join(path, "codec")
	switch t := c.Codec.Type; {
	case t == "json" || (input && t == "debezium_json"):
		if len(c.Codec.Config) > 0 && string(c.Codec.Config) != "{}" {
			v.decode(p, c.Codec.Config, &struct{}{})
		}
	case t == "protobuf" || t == "schema_registry":
		v.add(config.Join(p, "type"), "codec %q is not available here: decode the payloads in a Go function of a Job, or send JSON", t)
	default:
		kinds := "json"
		if input {
			kinds = "json or debezium_json"
		}
		v.add(config.Join(p, "type"), "unknown codec %q (available here: %s)", t, kinds)
	}
	return true
}

// differences reports the keys of ArkFlow's component that this library's
// connector of the same name does not take (nothing is mapped silently),
// and returns the config without them, for the connector to check the
// rest.
func (v *validator) differences(path string, c *Component, table map[string]map[string]string) json.RawMessage {
	keys := table[c.Type]
	if len(keys) == 0 {
		return c.Config
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(c.Config, &m) != nil {
		return c.Config
	}
	found := false
	for _, k := range sortedKeys(m) {
		if hint, ok := keys[k]; ok {
			v.add(config.Join(path, k), "ArkFlow's %s key %s is not taken by this library's %s connector: %s", c.Type, k, c.Type, hint)
			delete(m, k)
			found = true
		}
	}
	if !found {
		return c.Config
	}
	b, err := json.Marshal(m)
	if err != nil {
		return c.Config
	}
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cgoHint explains why a component ArkFlow has is not registered.
func cgoHint(typ string) string {
	if typ == "kafka" {
		return "; the kafka connector registers when github.com/arkflow-rs/arkflow-go/connectors/kafka is imported (it needs cgo)"
	}
	return ""
}

// compile compiles a query with the registered SQL engine. With the
// input schema unknown (after json_to_arrow, a join, fan-in) only a syntax
// error is reported: the columns are known once rows arrive. It returns
// the result's schema when known.
func (v *validator) compile(path, query, table string, input *arrow.Schema) *arrow.Schema {
	e := sqlengine.Lookup()
	if e == nil {
		v.add(path, "no SQL engine is linked into this program (the DuckDB engine needs cgo: import github.com/arkflow-rs/arkflow-go/connectors/duckdb)")
		return nil
	}
	probe := input
	if probe == nil {
		probe = arrow.NewSchema([]arrow.Field{{Name: "__value__", Type: arrow.BinaryTypes.Binary}}, nil)
	}
	q, err := e.Compile(query, table, probe)
	if err != nil {
		if input != nil || isSyntaxError(err) {
			v.add(path, "%v", err)
		}
		return nil
	}
	defer q.Close()
	if input == nil {
		return nil
	}
	return q.Schema()
}

// isSyntaxError tells a parse error from one about the columns or tables
// a query reads.
func isSyntaxError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Parser Error") || strings.Contains(s, "syntax error") || strings.Contains(s, "must be a single")
}

// fmtList quotes names for messages.
func fmtList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// jobChecks runs the connectors' job-wide checks (a transactional kafka
// input and the output committing its offsets, an idempotent http input
// and its WAL) over the stream's built inputs and outputs. Their paths
// name a job spec's config block, which a stream's components do not
// have: it is cut out.
func (v *validator) jobChecks() {
	for _, check := range connectors.JobChecks() {
		for _, p := range check(v.view) {
			v.add(strings.Replace(p.Field, ".config.", ".", 1), "%s", p.Reason)
		}
	}
}

// sqlFileInput refuses ArkFlow's sql input over files (input_type json,
// csv, parquet, avro or arrow, read by DataFusion, possibly from an
// object store), which this library's sql input does not read, with one
// error instead of one per key the connector does not know.
func (v *validator) sqlFileInput(path string, c *Component) bool {
	if c.Type != "sql" {
		return false
	}
	var cfg struct {
		InputType struct {
			Type string `json:"type"`
		} `json:"input_type"`
	}
	if json.Unmarshal(c.Config, &cfg) != nil {
		return false
	}
	switch t := cfg.InputType.Type; t {
	case "json", "csv", "parquet", "avro", "arrow":
		v.add(config.Join(path, "input_type.type"), "ArkFlow's sql input over %s files is not available here: this library's sql input polls postgres and sqlite tables; read a local file with the file input and put a sql processor after it", t)
		return true
	}
	return false
}
