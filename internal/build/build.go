// Package build performs the deep build of a job spec: structural checks,
// then every source, operator and sink built from its config against the
// schema of the rows it receives, then the plan. It is side-effect free, and
// it is the one code path behind every validation entry (CLI validate, the
// builder's Build, arkflow.Validate, the Hub) and behind a real start:
// what validates, starts; what fails validation never starts.
package build

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/config"
	"github.com/arkflow-rs/arkflow-go/internal/durable"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/suggest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// factories are the operator kinds this program implements (sources and
// sinks are connectors).
var factories = map[string]ops.Factory{
	job.KindJoin:      windowop.BuildJoin,
	job.KindMap:       ops.BuildMap,
	job.KindUDF:       ops.BuildMap,
	job.KindFilter:    ops.BuildFilter,
	job.KindAggregate: ops.BuildAggregate,
	job.KindWindow:    windowop.Build,
}

// Env carries what a program adds to a spec: Go values bound to operators
// by the builder (memory sources and sinks, functions).
type Env struct {
	Bindings map[string]any
	// DataDir is where the job keeps the state and write-ahead logs whose
	// spec gives no path (DataDir/<job>/state, DataDir/<job>/wal); empty
	// when none is given.
	DataDir string
	// CheckpointStore configures an s3:// checkpoint store.
	CheckpointStore ckptstore.StoreOptions
	// Connectors is where input and output types are found (nil: the
	// global registry).
	Connectors *connectors.Environment
	// Logger is the job's logger as given (arkflow.WithLogger), without
	// the job key: the build adds job and operator for each connector's
	// BuildContext.Logger. nil discards.
	Logger *slog.Logger
}

// opLogger is the logger a connector factory gets for operator op: the
// job's, with the job and operator keys (the same keys the runtime adds).
func (b *builder) opLogger(op string) *slog.Logger {
	if b.env.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.env.Logger.With("job", b.s.ID, "operator", op)
}

// connectors returns the environment the build finds connectors in.
func (e Env) connectors() *connectors.Environment {
	if e.Connectors != nil {
		return e.Connectors
	}
	return connectors.Global()
}

// Graph is a built job: the plan and every component ready to be
// instantiated per subtask.
type Graph struct {
	Spec    *job.Spec
	Plan    *job.Plan
	Inputs  map[string]connectors.Input
	Outputs map[string]connectors.Output
	Ops     map[string]ops.Built
	// Schemas is the schema of the rows each operator emits (for a sink,
	// the rows it receives).
	Schemas map[string]*arrow.Schema
	// Inputs is the schema of the rows each operator receives.
	InputSchemas map[string]*arrow.Schema
	// Durability is the effective WAL configuration of each source that
	// has one, by source operator ID.
	Durability map[string]*job.Durability
}

// Build validates spec deeply and returns the built graph, or every problem
// found as job.ValidationErrors.
func Build(spec *job.Spec, env Env) (*Graph, error) {
	s := spec.Clone()
	job.ApplyDefaults(s)
	p := &planner.Problems{Job: s.ID}
	planner.CheckStructure(s, p)
	g := &Graph{Inputs: map[string]connectors.Input{}, Outputs: map[string]connectors.Output{}, Ops: map[string]ops.Built{}, Schemas: map[string]*arrow.Schema{}, InputSchemas: map[string]*arrow.Schema{}, Durability: map[string]*job.Durability{}}
	b := builder{s: s, p: p, g: g, env: env}
	b.sources()
	b.operators()
	b.jobChecks()
	b.startChecks()
	if err := p.Err(); err != nil {
		return nil, err
	}
	plan, err := planner.NewPlan(s)
	if err != nil {
		return nil, err
	}
	g.Plan = plan
	g.Spec = plan.Spec
	return g, nil
}

type builder struct {
	s    *job.Spec
	p    *planner.Problems
	g    *Graph
	env  Env
	late map[string]bool // IDs of implicit late-row edges
}

func rawOrEmpty(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("{}")
	}
	return r
}

// report adds the field errors of err under base.
func (b *builder) report(op, base string, err error) {
	for _, fe := range connectors.FlattenFieldErrors(err) {
		b.p.Add(op, config.Join(base, fe.Path), "%s", fe.Reason)
	}
}

func (b *builder) sources() {
	reported := map[job.FieldError]bool{}
	for i, src := range b.s.Sources {
		at := fmt.Sprintf("sources[%d]", i)
		if op, _ := b.s.Operator(src.OperatorID); op == nil || op.Kind != job.KindSource {
			continue // reported by CheckStructure
		}
		cfg, probs := durable.Resolve(b.s, &src, at)
		for _, pr := range probs {
			op := src.OperatorID
			if !strings.HasPrefix(pr.Path, at+".") {
				// The job-wide block's: once, not once per source that
				// inherits it, and without an operator.
				if reported[*pr] {
					continue
				}
				reported[*pr] = true
				op = ""
			}
			b.p.Add(op, pr.Path, "%s", pr.Reason)
		}
		if cfg != nil {
			b.g.Durability[src.OperatorID] = cfg
		}
		if src.InputType == "" {
			continue
		}
		f, ok := b.env.connectors().LookupInput(src.InputType)
		if !ok {
			known := b.env.connectors().InputTypes()
			b.p.Add(src.OperatorID, at+".input_type", "unknown input type %q (known: %s)%s", src.InputType, strings.Join(known, ", "), suggest.Hint(src.InputType, known))
			continue
		}
		in, err := f(connectors.BuildContext{JobID: b.s.ID, OperatorID: src.OperatorID, Config: rawOrEmpty(src.Config), Bound: b.env.Bindings[src.OperatorID], Time: src.Time, Logger: b.opLogger(src.OperatorID)})
		if err != nil {
			b.report(src.OperatorID, at+".config", err)
			continue
		}
		// An input whose schema is read from its data (a csv or parquet
		// file) says here when it could not be.
		if se, ok := in.(interface{ SchemaErr() error }); ok {
			if err := se.SchemaErr(); err != nil {
				b.report(src.OperatorID, at+".config", err)
				continue
			}
		}
		b.g.Inputs[src.OperatorID] = in
		b.g.Schemas[src.OperatorID] = in.Schema()
		b.checkTime(src, at, in.Schema())
		if src.KeyedBy != "" {
			if idx := in.Schema().FieldIndices(src.KeyedBy); len(idx) == 0 {
				b.p.Add(src.OperatorID, at+".keyed_by", "%s", ops.UnknownColumn(src.KeyedBy, in.Schema()))
			} else if t := in.Schema().Field(idx[0]).Type; !keys.Supported(t) {
				b.p.Add(src.OperatorID, at+".keyed_by", "column %q has type %s, which cannot be a key", src.KeyedBy, t)
			}
		}
	}
}

// checkTime checks an event-time source's timestamp field against its
// schema: it must exist and be Int64 (ms) or a Timestamp.
func (b *builder) checkTime(src job.Source, at string, schema *arrow.Schema) {
	t := src.Time
	if t == nil || t.Mode != job.EventTime || t.TimestampField == "" {
		return
	}
	idx := schema.FieldIndices(t.TimestampField)
	if len(idx) == 0 {
		b.p.Add(src.OperatorID, at+".time.timestamp_field", "%s", ops.UnknownColumn(t.TimestampField, schema))
		return
	}
	switch ty := schema.Field(idx[0]).Type; ty.ID() {
	case arrow.INT64, arrow.TIMESTAMP:
	default:
		b.p.Add(src.OperatorID, at+".time.timestamp_field", "column %q has type %s; event time needs int64 (milliseconds) or a timestamp", t.TimestampField, ty)
	}
}

func (b *builder) operators() {
	s := b.s
	// The implicit late-row edges count: a route sink comes after its
	// windows and receives the rows they receive.
	edges := append(append([]job.Edge(nil), s.Edges...), planner.LateEdges(s)...)
	late := map[string]bool{}
	for _, e := range planner.LateEdges(s) {
		late[e.ID] = true
	}
	order, ok := topo(s, edges)
	if !ok {
		return // cycle or bad endpoints: reported by CheckStructure
	}
	incoming := map[string][]job.Edge{}
	for _, e := range edges {
		incoming[e.To] = append(incoming[e.To], e)
	}
	b.late = late
	coPart := CoPartitioned(s)
	for _, id := range order {
		op, i := s.Operator(id)
		if op == nil || op.Kind == job.KindSource {
			continue
		}
		at := fmt.Sprintf("operators[%d]", i)
		// When an upstream component failed to build, the input schema is
		// unknown (nil): the component is still built, so that its own
		// config problems are reported too, but it gets no schema.
		var in *arrow.Schema
		var inputs map[string]*arrow.Schema
		if op.Kind == job.KindJoin {
			// A join's inputs differ: each side has its own schema.
			inputs = b.inputSchemas(incoming[id])
		} else if in, _ = b.inputSchema(op, at, incoming[id]); in != nil {
			b.g.InputSchemas[op.ID] = in
		}
		// Rows of one key meet in one subtask when there is only one, or
		// when every input edge routes by key group.
		keyed := len(incoming[id]) > 0
		for _, e := range incoming[id] {
			keyed = keyed && e.Partitioned
		}
		keyed = keyed || planner.OperatorParallelism(s, op) == 1 || CoPartitionedKeyed(s, op, coPart)
		for _, e := range incoming[id] {
			if in != nil && e.Partitioned && op.KeyField != "" {
				if err := CheckKeyField(in, op.KeyField); err != nil {
					b.report(op.ID, at, err)
				}
				break
			}
		}
		if op.Kind == job.KindSink {
			b.sink(op, in)
			continue
		}
		f, ok := factories[op.Kind]
		if !ok {
			if op.Kind != job.KindJoin && slicesContains(planner.Kinds, op.Kind) {
				b.p.Add(op.ID, at+".kind", "kind %q has no implementation in this program", op.Kind)
			}
			continue // unknown kinds are reported by CheckStructure
		}
		built, err := f(ops.Context{JobID: s.ID, Spec: s, Op: op, Input: in, Inputs: inputs, Keyed: keyed, Bound: b.env.Bindings[op.ID]})
		if err != nil {
			b.report(op.ID, at, err)
			continue
		}
		if in == nil && inputs == nil {
			continue
		}
		b.g.Ops[op.ID] = built
		b.g.Schemas[op.ID] = built.Output
		if built.LateInput != nil {
			b.g.InputSchemas[op.ID] = built.LateInput
		}
	}
}

// CheckKeyField checks that a key field exists in schema with a key type.
// Errors name the field "key_field".
func CheckKeyField(schema *arrow.Schema, field string) error {
	idx := schema.FieldIndices(field)
	if len(idx) == 0 {
		return ops.Errf("key_field", "%s", ops.UnknownColumn(field, schema))
	}
	if t := schema.Field(idx[0]).Type; !keys.Supported(t) {
		return ops.Errf("key_field", "column %q has type %s, which cannot be a key", field, t)
	}
	return nil
}

// inputSchema returns the schema of the rows an operator receives: the
// output schema shared by all its upstream operators.
func (b *builder) inputSchema(op *job.Operator, at string, in []job.Edge) (*arrow.Schema, bool) {
	var schema *arrow.Schema
	var from string
	for _, e := range in {
		up, ok := b.g.Schemas[e.From]
		if b.late[e.ID] {
			// A window's late rows keep the columns the window receives.
			up, ok = b.g.InputSchemas[e.From]
		}
		if !ok {
			return nil, false // upstream failed to build; its errors are reported
		}
		if schema == nil {
			schema, from = up, e.From
			continue
		}
		if !batch.SameSchema(schema, up) {
			b.p.Add(op.ID, at, "inputs have different schemas: %q sends %s; %q sends %s", from, schemaString(schema), e.From, schemaString(up))
			return nil, false
		}
	}
	return schema, schema != nil
}

// inputSchemas returns the schema of the rows each upstream operator
// sends, or nil when one of them failed to build.
func (b *builder) inputSchemas(in []job.Edge) map[string]*arrow.Schema {
	out := map[string]*arrow.Schema{}
	for _, e := range in {
		up, ok := b.g.Schemas[e.From]
		if !ok {
			return nil // upstream failed to build; its errors are reported
		}
		out[e.From] = up
	}
	return out
}

func schemaString(s *arrow.Schema) string {
	parts := make([]string, 0, s.NumFields())
	for _, f := range s.Fields() {
		parts = append(parts, f.Name+" "+f.Type.String())
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func (b *builder) sink(op *job.Operator, in *arrow.Schema) {
	snk, i := b.s.Sink(op.ID)
	if snk == nil || snk.OutputType == "" {
		return
	}
	at := fmt.Sprintf("sinks[%d]", i)
	f, ok := b.env.connectors().LookupOutput(snk.OutputType)
	if !ok {
		known := b.env.connectors().OutputTypes()
		b.p.Add(op.ID, at+".output_type", "unknown output type %q (known: %s)%s", snk.OutputType, strings.Join(known, ", "), suggest.Hint(snk.OutputType, known))
		return
	}
	out, err := f(connectors.BuildContext{JobID: b.s.ID, OperatorID: op.ID, Config: rawOrEmpty(snk.Config), Bound: b.env.Bindings[op.ID], Logger: b.opLogger(op.ID)}, in)
	if err != nil {
		b.report(op.ID, at+".config", err)
		return
	}
	if in == nil {
		return
	}
	b.g.Outputs[op.ID] = out
	b.g.Schemas[op.ID] = in
}

// jobChecks runs the connectors' job-wide checks (connectors.RegisterJobCheck)
// over the inputs and outputs that were built.
func (b *builder) jobChecks() {
	checks := b.env.connectors().JobChecks()
	if len(checks) == 0 {
		return
	}
	v := connectors.JobView{JobID: b.s.ID}
	if cp := b.s.Checkpoint; cp != nil {
		v.CheckpointIntervalMS = cp.IntervalMS
	}
	for i, src := range b.s.Sources {
		if in, ok := b.g.Inputs[src.OperatorID]; ok {
			v.Inputs = append(v.Inputs, connectors.JobInput{OperatorID: src.OperatorID, Path: fmt.Sprintf("sources[%d]", i), Input: in, Durable: b.g.Durability[src.OperatorID] != nil})
		}
	}
	// The sources upstream of every operator, along edges and late-row
	// edges.
	edges := append(append([]job.Edge(nil), b.s.Edges...), planner.LateEdges(b.s)...)
	from := map[string][]string{}
	for _, e := range edges {
		from[e.To] = append(from[e.To], e.From)
	}
	for i, snk := range b.s.Sinks {
		out, ok := b.g.Outputs[snk.OperatorID]
		if !ok {
			continue
		}
		seen := map[string]bool{snk.OperatorID: true}
		queue := []string{snk.OperatorID}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			for _, up := range from[id] {
				if !seen[up] {
					seen[up] = true
					queue = append(queue, up)
				}
			}
		}
		var srcs []string
		for _, src := range b.s.Sources {
			if seen[src.OperatorID] {
				srcs = append(srcs, src.OperatorID)
			}
		}
		v.Outputs = append(v.Outputs, connectors.JobOutput{OperatorID: snk.OperatorID, Path: fmt.Sprintf("sinks[%d]", i), Output: out, Sources: srcs})
	}
	for _, check := range checks {
		for _, pr := range check(v) {
			b.p.Add(pr.OperatorID, pr.Field, "%s", pr.Reason)
		}
	}
}

// topo orders operators along valid edges; ok is false on a cycle.
func topo(s *job.Spec, edges []job.Edge) ([]string, bool) {
	known := map[string]bool{}
	for _, op := range s.Operators {
		known[op.ID] = true
	}
	inDeg := map[string]int{}
	out := map[string][]string{}
	for _, e := range edges {
		if known[e.From] && known[e.To] {
			inDeg[e.To]++
			out[e.From] = append(out[e.From], e.To)
		}
	}
	var order, ready []string
	for _, op := range s.Operators {
		if inDeg[op.ID] == 0 {
			ready = append(ready, op.ID)
		}
	}
	for len(ready) > 0 {
		n := ready[0]
		ready = ready[1:]
		order = append(order, n)
		for _, m := range out[n] {
			inDeg[m]--
			if inDeg[m] == 0 {
				ready = append(ready, m)
			}
		}
	}
	return order, len(order) == len(known)
}

func slicesContains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// startChecks are the checks a start makes before it touches anything
// that the spec and the Env decide alone: where state and write-ahead
// logs live, the checkpoint store's URI and options. A start runs them too (it builds first), so a job that
// validates with the options it runs with does not fail to start for
// these reasons.
func (b *builder) startChecks() {
	s, env := b.s, b.env
	if st := s.State; st != nil && st.Backend != job.BackendMemory && st.Path == "" && env.DataDir == "" {
		b.p.Add("", "state.path", "the %s state needs a directory: set state.path, or give the job a data directory (arkflow.WithDataDir; arkflow run --data-dir)", st.Backend)
	}
	jobWide := false
	for i, src := range s.Sources {
		cfg := b.g.Durability[src.OperatorID]
		if cfg == nil || durable.ObjectStore(cfg) || cfg.Path != "" || env.DataDir != "" {
			continue
		}
		field, op := "durability.path", ""
		if len(src.Durability) > 0 {
			field, op = fmt.Sprintf("sources[%d].durability.path", i), src.OperatorID
		} else if jobWide {
			continue // once for every source that inherits it
		} else {
			jobWide = true
		}
		b.p.Add(op, field, "the write-ahead log needs a directory: set %s, or give the job a data directory (arkflow.WithDataDir; arkflow run --data-dir)", field)
	}
	cp := s.Checkpoint
	if cp != nil && cp.ObjectStoreURI != "" {
		if err := ckptstore.CheckStore(cp.ObjectStoreURI, env.CheckpointStore); err != nil {
			b.p.Add("", "checkpoint.object_store_uri", "%s", strings.TrimPrefix(err.Error(), "checkpoint: "))
		}
	}
}
