package ops

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/expr"
	"github.com/arkflow-rs/arkflow-go/job"
)

// MapFunc transforms a batch in Go. It must not keep rec after returning;
// the returned record is owned by the caller.
type MapFunc func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error)

// FilterFunc returns, for every row of rec, whether to keep it.
type FilterFunc func(ctx context.Context, rec arrow.RecordBatch) ([]bool, error)

// MapBinding is the Go value a builder binds to a map or udf operator
// configured with {"function": name}.
type MapBinding struct {
	Name string
	Fn   MapFunc
	// Output is the schema Fn returns; nil means the input schema.
	Output *arrow.Schema
	// Check, when set, is called at build with the input schema (see
	// CheckFunc).
	Check CheckFunc
}

// CheckFunc checks at build that a bound function can read the rows of
// its input (a typed function's rows name their columns). input is nil
// when an upstream operator failed to build: it then checks only what
// does not depend on the rows. Its errors fail the operator's build,
// *job.FieldErrors among them at their Path under the operator's config.
type CheckFunc func(input *arrow.Schema) error

// check runs f, if set, on the operator's input.
func (f CheckFunc) check(c Context) error {
	if f == nil {
		return nil
	}
	if err := f(c.Input); err != nil {
		return PrefixErrors("config", err)
	}
	return nil
}

// FilterBinding is the Go value a builder binds to a filter operator
// configured with {"function": name}.
type FilterBinding struct {
	Name string
	Fn   FilterFunc
	// Check, when set, is called at build with the input schema (see
	// CheckFunc).
	Check CheckFunc
}

// MapConfig configures a map operator. Either Function, or SQL, or the
// fields of the declarative job.Columns (Set, Drop and Select, applied
// in that order; see NewMapConfig).
type MapConfig struct {
	Set    []job.Column `json:"set,omitempty"`
	Drop   []string     `json:"drop,omitempty"`
	Select []string     `json:"select,omitempty"`
	// Function names a Go function bound by the program (builder only).
	Function string `json:"function,omitempty"`
	// SQL is a single SELECT query run over each batch, read as the
	// table TableName (flow when empty), by the SQL engine linked into
	// the program (package duckdb).
	SQL       string `json:"sql,omitempty"`
	TableName string `json:"table_name,omitempty"`
}

// NewMapConfig is the config of the declarative map c.
func NewMapConfig(c job.Columns) MapConfig {
	return MapConfig{Set: c.Set, Drop: c.Drop, Select: c.Select}
}

// Assign is one computed column.
type Assign = job.Column

// FilterConfig configures a filter operator: exactly one of Expr and
// Function.
type FilterConfig struct {
	// Expr keeps rows where it is true (null counts as false).
	Expr string `json:"expr,omitempty"`
	// Function names a Go function bound by the program (builder only).
	Function string `json:"function,omitempty"`
}

// BuildMap is the factory of map and udf operators. A udf keeps keyed
// state (a Process function reads and writes it).
func BuildMap(c Context) (Built, error) {
	b, err := buildMap(c)
	b.State = c.Op.Kind == job.KindUDF
	return b, err
}

// BuildFilter is the factory of filter operators.
func BuildFilter(c Context) (Built, error) { return buildFilter(c) }

func exprErr(path string, err error) error {
	if e, ok := err.(*expr.Error); ok && e.Pos > 0 {
		return Errf(path, "%s", e.Error())
	}
	return Errf(path, "%v", err)
}

func unboundFunction(name string) string {
	return fmt.Sprintf("no Go function %q is bound to this operator: functions exist only in the program that registered them through the builder; a declarative spec uses expressions instead", name)
}

// buildMap builds a map (or udf) operator: a bound Go function, or the
// declarative steps of its config — set (each expression sees the columns
// the previous ones made), then drop, then select — checked against the
// input schema, with every problem reported at once.
func buildMap(c Context) (Built, error) {
	var cfg MapConfig
	if err := connectors.DecodeConfig(c.Op.Config, &cfg); err != nil {
		return Built{}, PrefixErrors("config", err)
	}
	if cfg.SQL != "" || cfg.TableName != "" {
		return buildSQLMap(c, cfg)
	}
	if cfg.Function != "" {
		return buildFuncMap(c, cfg)
	}
	if c.Op.Kind == job.KindUDF {
		return Built{}, Errf("config.function", "a udf operator needs a Go function bound by the builder")
	}
	if c.Input == nil {
		return Built{}, nil
	}
	steps, schema, errs := compileSets(cfg.Set, c.Input)
	keep, kerrs := keptColumns(cfg, schema)
	errs = append(errs, kerrs...)
	if err := errs.Err(); err != nil {
		return Built{}, err
	}
	fields := make([]arrow.Field, len(keep))
	for i, k := range keep {
		fields[i] = schema.Field(k)
	}
	out := arrow.NewSchema(fields, nil)
	// Identity only when every input column is kept in its place: a
	// select that reorders all of them is not.
	identity := len(steps) == 0 && len(keep) == c.Input.NumFields()
	for i, k := range keep {
		identity = identity && k == i
	}
	return Built{Output: out, New: func(Task) (Instance, error) {
		if identity {
			return Passthrough{}, nil
		}
		return &exprMap{op: c.Op.ID, steps: steps, keep: keep, out: out}, nil
	}}, nil
}

// buildFuncMap builds a map over the Go function its config names, which
// the builder bound (a Process binding makes it a process operator).
func buildFuncMap(c Context, cfg MapConfig) (Built, error) {
	if len(cfg.Set)+len(cfg.Drop)+len(cfg.Select) > 0 {
		return Built{}, Errf("config.function", "cannot be combined with set, drop or select")
	}
	if pb, ok := c.Bound.(ProcessBinding); ok && pb.Fn != nil {
		return buildProcess(c, pb)
	}
	mb, ok := c.Bound.(MapBinding)
	if !ok || mb.Fn == nil {
		return Built{}, Errf("config.function", "%s", unboundFunction(cfg.Function))
	}
	if err := mb.Check.check(c); err != nil {
		return Built{}, err
	}
	out := mb.Output
	if out == nil {
		out = c.Input
	}
	return Built{Output: out, New: func(Task) (Instance, error) {
		return &funcMap{op: c.Op.ID, fn: mb.Fn, out: out}, nil
	}}, nil
}

// compileSets compiles the set assignments in order, each against the
// schema the ones before it made: a new column goes before the metadata
// columns, an existing one is replaced in place. It returns the steps,
// the schema after the last, and the problems.
func compileSets(sets []job.Column, schema *arrow.Schema) ([]mapStep, *arrow.Schema, Errors) {
	var errs Errors
	var steps []mapStep
	for i, a := range sets {
		at := fmt.Sprintf("config.set[%d]", i)
		if a.Name == "" {
			errs = append(errs, Errf(at+".name", "is required"))
			continue
		}
		if connectors.IsMeta(a.Name) {
			errs = append(errs, Errf(at+".name", "columns starting with %q are source metadata and cannot be set", connectors.MetaPrefix))
			continue
		}
		e, err := expr.Compile(a.Expr, schema)
		if err != nil {
			errs = append(errs, exprErr(at+".expr", err))
			continue
		}
		fields := slices.Clone(schema.Fields())
		f := arrow.Field{Name: a.Name, Type: e.Type(), Nullable: true}
		pos := schema.FieldIndices(a.Name)
		if len(pos) > 0 {
			fields[pos[0]] = f
			steps = append(steps, mapStep{expr: e, replace: pos[0]})
		} else {
			fields = insertBeforeMeta(fields, f)
			steps = append(steps, mapStep{expr: e, replace: -1})
		}
		schema = arrow.NewSchema(fields, nil)
		steps[len(steps)-1].schema = schema
	}
	return steps, schema, errs
}

// keptColumns returns the indexes in schema of the columns the map
// outputs, in order: with select, the selected ones and then the metadata
// columns neither selected nor dropped; else every column not dropped.
func keptColumns(cfg MapConfig, schema *arrow.Schema) ([]int, Errors) {
	var errs Errors
	keep := make([]int, 0, schema.NumFields())
	dropped := map[string]bool{}
	for i, d := range cfg.Drop {
		if len(schema.FieldIndices(d)) == 0 {
			errs = append(errs, Errf(fmt.Sprintf("config.drop[%d]", i), "%s", UnknownColumn(d, schema)))
		}
		dropped[d] = true
	}
	if len(cfg.Select) == 0 {
		for i, f := range schema.Fields() {
			if !dropped[f.Name] {
				keep = append(keep, i)
			}
		}
		return keep, errs
	}
	seen := map[string]bool{}
	for i, s := range cfg.Select {
		idx := schema.FieldIndices(s)
		switch {
		case len(idx) == 0:
			errs = append(errs, Errf(fmt.Sprintf("config.select[%d]", i), "%s", UnknownColumn(s, schema)))
		case seen[s]:
			errs = append(errs, Errf(fmt.Sprintf("config.select[%d]", i), "column %q is selected twice", s))
		case dropped[s]:
			errs = append(errs, Errf(fmt.Sprintf("config.select[%d]", i), "column %q is also dropped", s))
		default:
			keep = append(keep, idx[0])
		}
		seen[s] = true
	}
	for i, f := range schema.Fields() {
		if connectors.IsMeta(f.Name) && !seen[f.Name] && !dropped[f.Name] {
			keep = append(keep, i)
		}
	}
	return keep, errs
}

// insertBeforeMeta appends f after the last non-metadata column, so
// metadata columns stay last.
func insertBeforeMeta(fields []arrow.Field, f arrow.Field) []arrow.Field {
	i := len(fields)
	for i > 0 && connectors.IsMeta(fields[i-1].Name) {
		i--
	}
	return slices.Insert(fields, i, f)
}

type mapStep struct {
	expr    *expr.Expr
	replace int           // column index to replace, or -1 to insert before meta
	schema  *arrow.Schema // schema after this step
}

type exprMap struct {
	op    string
	steps []mapStep
	keep  []int
	out   *arrow.Schema
}

func (m *exprMap) Process(ctx context.Context, b Batch, out Emitter) error {
	rec := b.Rec
	for _, st := range m.steps {
		col, err := st.expr.Eval(rec)
		if err != nil {
			rec.Release()
			b.Ack.Release(err)
			return fmt.Errorf("operator %q: evaluating %q: %w", m.op, st.expr.String(), err)
		}
		cols := slices.Clone(rec.Columns())
		if st.replace >= 0 {
			cols[st.replace] = col
		} else {
			i := len(cols)
			for i > 0 && connectors.IsMeta(rec.ColumnName(i-1)) {
				i--
			}
			cols = slices.Insert(cols, i, col)
		}
		next := array.NewRecordBatch(st.schema, cols, rec.NumRows())
		col.Release()
		rec.Release()
		rec = next
	}
	cols := make([]arrow.Array, len(m.keep))
	for i, k := range m.keep {
		cols[i] = rec.Column(k)
	}
	res := array.NewRecordBatch(m.out, cols, rec.NumRows())
	rec.Release()
	return out.Emit(ctx, Batch{Rec: res, Ack: b.Ack})
}

func (m *exprMap) Watermark(context.Context, int64, Emitter) error { return nil }
func (m *exprMap) Close() error                                    { return nil }

type funcMap struct {
	op  string
	fn  MapFunc
	out *arrow.Schema
}

func (m *funcMap) Process(ctx context.Context, b Batch, out Emitter) error {
	res, err := m.fn(ctx, b.Rec)
	b.Rec.Release()
	if err != nil {
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", m.op, err)
	}
	if res == nil || res.NumRows() == 0 {
		if res != nil {
			res.Release()
		}
		b.Ack.Release(nil)
		return nil
	}
	if !batch.SameSchema(res.Schema(), m.out) {
		res.Release()
		err := fmt.Errorf("operator %q: function returned schema %s, but the operator declares %s", m.op, res.Schema(), m.out)
		b.Ack.Release(err)
		return err
	}
	return out.Emit(ctx, Batch{Rec: res, Ack: b.Ack})
}

func (m *funcMap) Watermark(context.Context, int64, Emitter) error { return nil }
func (m *funcMap) Close() error                                    { return nil }

func buildFilter(c Context) (Built, error) {
	var cfg FilterConfig
	if err := connectors.DecodeConfig(c.Op.Config, &cfg); err != nil {
		return Built{}, PrefixErrors("config", err)
	}
	switch {
	case cfg.Function != "" && cfg.Expr != "":
		return Built{}, Errf("config", "set either expr or function, not both")
	case cfg.Function != "":
		fb, ok := c.Bound.(FilterBinding)
		if !ok || fb.Fn == nil {
			return Built{}, Errf("config.function", "%s", unboundFunction(cfg.Function))
		}
		if err := fb.Check.check(c); err != nil {
			return Built{}, err
		}
		return Built{Output: c.Input, New: func(Task) (Instance, error) {
			return &filter{op: c.Op.ID, mask: func(ctx context.Context, rec arrow.RecordBatch) ([]bool, error) { return fb.Fn(ctx, rec) }}, nil
		}}, nil
	case cfg.Expr == "":
		return Built{}, Errf("config.expr", "is required (a boolean expression, e.g. \"amount > 10\")")
	case c.Input == nil:
		return Built{}, nil
	}
	e, err := expr.Compile(cfg.Expr, c.Input)
	if err != nil {
		return Built{}, exprErr("config.expr", err)
	}
	if e.Type().ID() != arrow.BOOL {
		return Built{}, Errf("config.expr", "must be a boolean expression (got %s)", e.Type())
	}
	return Built{Output: c.Input, New: func(Task) (Instance, error) {
		return &filter{op: c.Op.ID, mask: func(_ context.Context, rec arrow.RecordBatch) ([]bool, error) { return e.EvalMask(rec) }}, nil
	}}, nil
}

type filter struct {
	op   string
	mask func(context.Context, arrow.RecordBatch) ([]bool, error)
}

func (f *filter) Process(ctx context.Context, b Batch, out Emitter) error {
	keep, err := f.mask(ctx, b.Rec)
	if err == nil && len(keep) != int(b.Rec.NumRows()) {
		err = fmt.Errorf("filter returned %d values for %d rows", len(keep), b.Rec.NumRows())
	}
	if err != nil {
		b.Rec.Release()
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", f.op, err)
	}
	res, err := batch.Filter(b.Rec, keep)
	b.Rec.Release()
	if err != nil {
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", f.op, err)
	}
	if res == nil {
		b.Ack.Release(nil)
		return nil
	}
	return out.Emit(ctx, Batch{Rec: res, Ack: b.Ack})
}

func (f *filter) Watermark(context.Context, int64, Emitter) error { return nil }
func (f *filter) Close() error                                    { return nil }
