package windowop

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/rowbin"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Join types and how a join treats rows without a match.
const (
	JoinWindow   = "window"
	JoinInterval = "interval"
	JoinTemporal = "temporal"
	HowInner     = "inner"
	HowLeft      = "left"
)

// JoinConfig is a join operator's spec config (kind join).
//
// A window join pairs the rows of its two inputs whose keys are equal and
// whose event times fall in the same window (tumbling or sliding). A
// window's pairs are emitted when the operator's watermark, the lower of
// its inputs', reaches the window's end; under how "left", a left row
// with no right row of its key in the window is emitted once, with the
// right columns null. A null key matches no key, not even a null.
//
// An interval join pairs rows of equal keys whose event times are within
// the bounds of each other (LowerMS, UpperMS). A pair is emitted as soon
// as its second row arrives; a row is kept until the watermark passes
// the last time a partner of it could have.
//
// A temporal join treats its right side as a table, the latest row of
// each key, and joins every left row with the table's row for its key as
// of the left row's event time (or the newest, when the left side runs on
// processing time).
type JoinConfig struct {
	// Type is the kind of join: "window".
	Type string `json:"type"`
	// Left and Right name the operators whose rows are the two sides.
	Left  string `json:"left"`
	Right string `json:"right"`
	// LeftKey and RightKey are the key columns of each side; the rows of
	// a side arrive partitioned by its key.
	LeftKey  string `json:"left_key"`
	RightKey string `json:"right_key"`
	// How is "inner" (the default) or "left".
	How string `json:"how,omitempty"`
	// Window is the window of a window join: tumbling or sliding.
	Window Spec `json:"window"`
	// LowerMS and UpperMS bound an interval join: a left row and a right
	// row of one key pair when left.ts is in [right.ts + LowerMS,
	// right.ts + UpperMS] (both ends included; either may be negative).
	LowerMS *int64 `json:"lower_ms,omitempty"`
	UpperMS *int64 `json:"upper_ms,omitempty"`
	// DeletedField names a boolean column of a temporal join's table
	// side whose true deletes the key (a row whose columns are all null
	// does too).
	DeletedField string `json:"deleted_field,omitempty"`
	// RetentionMS is how far behind the watermark a temporal join keeps
	// the table's versions: a stream row behind the watermark by up to
	// it joins the version current at its time at once instead of being
	// dropped as late.
	RetentionMS int64 `json:"retention_ms,omitempty"`
	// LeftPrefix and RightPrefix are put before a column name that both
	// sides have (default "left_" and "right_").
	LeftPrefix  string `json:"left_prefix,omitempty"`
	RightPrefix string `json:"right_prefix,omitempty"`
}

// JoinInputKeys returns the key column of each input of a join operator,
// by upstream operator ID: the rows of a partitioned edge into the join
// are routed by it. Nil when the config does not decode.
func JoinInputKeys(op *job.Operator) map[string]string {
	var cfg JoinConfig
	if err := connectors.DecodeConfig(op.Config, &cfg); err != nil {
		return nil
	}
	return map[string]string{cfg.Left: cfg.LeftKey, cfg.Right: cfg.RightKey}
}

// joinSide is what a join knows of one of its inputs.
type joinSide struct {
	op            string
	tm            timing
	keyCol, tsCol int
	meta          ops.MetaColumns
	// cols are the input columns the output carries, in order, and
	// outCols their index in the output.
	cols []int
}

// BuildJoin is the factory of join operators (job.KindJoin): it checks
// the config, each side's time declaration and key column, and derives
// the output schema.
func BuildJoin(c ops.Context) (ops.Built, error) {
	var cfg JoinConfig
	if err := connectors.DecodeConfig(c.Op.Config, &cfg); err != nil {
		return ops.Built{}, ops.PrefixErrors("config", err)
	}
	sides, errs := cfg.check(c)
	// The columns are checked against the rows each side sends when both
	// are known (an upstream that failed to build reported its problems).
	schemas := [2]*arrow.Schema{c.Inputs[cfg.Left], c.Inputs[cfg.Right]}
	if schemas[0] == nil || schemas[1] == nil || cfg.Left == cfg.Right {
		return ops.Built{}, errs.Err()
	}
	errs = append(errs, cfg.checkColumns(schemas, &sides)...)
	if err := errs.Err(); err != nil {
		return ops.Built{}, err
	}
	lk, rk := schemas[0].Field(sides[0].keyCol), schemas[1].Field(sides[1].keyCol)
	if !arrow.TypeEqual(lk.Type, rk.Type) {
		return ops.Built{}, ops.Errf("config.right_key", "column %q has type %s, but the left key %q has type %s; the keys of a join must have one type", rk.Name, rk.Type, lk.Name, lk.Type)
	}
	// A temporal join's delete marker says what the table holds; it is
	// not a column of the table's rows.
	skip := [2]int{-1, -1}
	if cfg.DeletedField != "" {
		skip[1] = schemas[1].FieldIndices(cfg.DeletedField)[0]
	}
	out, err := joinSchema(lk, schemas, &sides, cfg.LeftPrefix, cfg.RightPrefix, cfg.Type == JoinWindow, skip)
	if err != nil {
		return ops.Built{}, err
	}
	jb := &joinBuild{cfg: cfg, sides: sides, out: out, keyType: lk.Type, in: schemas, warn: newDropWarner(c.Spec, c.Op.ID), deletedCol: -1}
	if cfg.DeletedField != "" {
		jb.deletedCol = schemas[1].FieldIndices(cfg.DeletedField)[0]
	}
	// The rows a join keeps are state: every column they keep must
	// encode (a temporal join keeps its table's, an interval join both
	// sides').
	for i, field := range [2]string{"config.left", "config.right"} {
		cols := sides[i].cols
		if cfg.Type == JoinInterval {
			cols = keptCols(sides[i])
		}
		if cfg.Type == JoinInterval || (cfg.Type == JoinTemporal && i == 1) {
			if _, err := rowbin.New(schemas[i], cols); err != nil {
				return ops.Built{}, ops.Errf(field, "%v", err)
			}
		}
	}
	late, err := lateInput(cfg, sides, schemas)
	if err != nil {
		return ops.Built{}, err
	}
	built := ops.Built{Output: out, State: true, Timed: true, Carry: floorCarrier{}, New: jb.newInstance,
		InputKeys: map[string]string{cfg.Left: cfg.LeftKey, cfg.Right: cfg.RightKey}, LateInput: late}
	if cfg.Type == JoinTemporal {
		built.Query = &ops.QueryShape{Key: lk.Type, Schema: jb.tableSchema()}
	}
	return built, nil
}

// lateInput is the schema of the late rows a join routes: the schema of
// the side whose sources route them (late_event_policy route), or of both,
// which must then have one. nil when neither routes.
func lateInput(cfg JoinConfig, sides [2]joinSide, schemas [2]*arrow.Schema) (*arrow.Schema, error) {
	var late *arrow.Schema
	for i := range sides {
		if sides[i].tm.policy != job.LateRoute {
			continue
		}
		if late != nil && !batch.SameSchema(late, schemas[i]) {
			return nil, ops.Errf("config.right", "the sources of %q and %q route late rows to one sink, %q, with different columns: %s and %s; route one side only, or give both one schema",
				cfg.Left, cfg.Right, sides[i].tm.route, schemaFields(late), schemaFields(schemas[i]))
		}
		late = schemas[i]
	}
	return late, nil
}

// schemaFields lists a schema's columns, as "(name type, ...)".
func schemaFields(s *arrow.Schema) string {
	parts := make([]string, 0, s.NumFields())
	for _, f := range s.Fields() {
		parts = append(parts, f.Name+" "+f.Type.String())
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// check reports the problems of the config that need no schema, fills in
// the default prefixes and returns what it learnt of each side: the
// operator and its sources' time declaration.
func (cfg *JoinConfig) check(c ops.Context) ([2]joinSide, ops.Errors) {
	var errs ops.Errors
	switch cfg.Type {
	case JoinWindow:
		errs = append(errs, cfg.Window.Check("config.window")...)
		if cfg.Window.Type == TypeSession {
			errs = append(errs, ops.Errf("config.window.type", "a window join takes tumbling or sliding windows (got session)"))
		}
	case JoinInterval:
		switch {
		case cfg.LowerMS == nil:
			errs = append(errs, ops.Errf("config.lower_ms", "is required: an interval join pairs rows with left.ts in [right.ts + lower_ms, right.ts + upper_ms]"))
		case cfg.UpperMS == nil:
			errs = append(errs, ops.Errf("config.upper_ms", "is required: an interval join pairs rows with left.ts in [right.ts + lower_ms, right.ts + upper_ms]"))
		case *cfg.LowerMS > *cfg.UpperMS:
			errs = append(errs, ops.Errf("config.upper_ms", "must be >= lower_ms (got lower_ms %d, upper_ms %d)", *cfg.LowerMS, *cfg.UpperMS))
		case max(abs(*cfg.LowerMS), abs(*cfg.UpperMS)) > eventtime.MaxSpanMS:
			errs = append(errs, ops.Errf("config", "lower_ms and upper_ms must be within ±%d (1000 years)", int64(eventtime.MaxSpanMS)))
		}
	case JoinTemporal:
		if cfg.RetentionMS < 0 || cfg.RetentionMS > eventtime.MaxSpanMS {
			errs = append(errs, ops.Errf("config.retention_ms", "must be between 0 and %d (1000 years) (got %d)", int64(eventtime.MaxSpanMS), cfg.RetentionMS))
		}
	case "":
		errs = append(errs, ops.Errf("config.type", "is required: the kind of join (window, interval or temporal)"))
	default:
		errs = append(errs, ops.Errf("config.type", "unknown join type %q (known: window, interval, temporal)", cfg.Type))
	}
	if cfg.RetentionMS != 0 && cfg.Type != JoinTemporal && cfg.Type != "" {
		errs = append(errs, ops.Errf("config.retention_ms", "is only used by a temporal join"))
	}
	switch cfg.How {
	case "", HowInner, HowLeft:
	default:
		errs = append(errs, ops.Errf("config.how", "must be inner or left (got %q)", cfg.How))
	}
	cfg.LeftPrefix = cmp.Or(cfg.LeftPrefix, "left_")
	cfg.RightPrefix = cmp.Or(cfg.RightPrefix, "right_")
	if cfg.LeftPrefix == cfg.RightPrefix {
		errs = append(errs, ops.Errf("config.right_prefix", "must differ from left_prefix (both %q)", cfg.LeftPrefix))
	}
	in := map[string]bool{}
	for _, e := range c.Spec.Edges {
		if e.To == c.Op.ID {
			in[e.From] = true
		}
	}
	sides := [2]joinSide{{op: cfg.Left}, {op: cfg.Right}}
	for i, f := range [2]struct{ name, key, field string }{{cfg.Left, cfg.LeftKey, "left"}, {cfg.Right, cfg.RightKey, "right"}} {
		switch {
		case f.name == "":
			errs = append(errs, ops.Errf("config."+f.field, "is required: the operator whose rows are the %s side", f.field))
		case !in[f.name]:
			errs = append(errs, ops.Errf("config."+f.field, "operator %q has no edge into the join", f.name))
		}
		if f.key == "" {
			errs = append(errs, ops.Errf("config."+f.field+"_key", "is required: the key column of the %s side", f.field))
		}
		if f.name == "" || !in[f.name] {
			continue
		}
		tm, err := sideTiming(c.Spec, f.name)
		if err != nil {
			errs = append(errs, ops.Errf("config."+f.field, "%v", err))
		}
		sides[i].tm = tm
		switch {
		case cfg.Type == JoinTemporal && i == 0:
			// The stream may run on processing time: it joins the newest row.
		case cfg.Type == JoinTemporal && !tm.event && sides[0].tm.event:
			errs = append(errs, ops.Errf("config."+f.field, "the table's sources %q run on processing time, the stream on event time: a table joined as of the stream's event time needs event time too", f.name))
		case cfg.Type != JoinTemporal && !tm.event:
			errs = append(errs, ops.Errf("config."+f.field, "a %s join needs event time on both inputs: the sources of %q run on processing time", cfg.Type, f.name))
		}
		if tm.policy == job.LateUpdate {
			errs = append(errs, ops.Errf("config."+f.field, "the sources of %q declare late_event_policy %q; a join drops late rows or routes them (late_event_policy drop or route)", f.name, tm.policy))
		}
	}
	if l, r := sides[0].tm, sides[1].tm; l.policy == job.LateRoute && r.policy == job.LateRoute && l.route != r.route {
		errs = append(errs, ops.Errf("config.right", "the sources of %q route late rows to %q, those of %q to %q: a join routes the late rows of both sides to one sink", cfg.Left, l.route, cfg.Right, r.route))
	}
	if cfg.Left != "" && cfg.Left == cfg.Right {
		errs = append(errs, ops.Errf("config.right", "must differ from left (both %q)", cfg.Left))
	}
	if !c.Keyed {
		errs = append(errs, ops.Errf("", "the edges into a join that runs with parallelism > 1 must be partitioned (partitioned: true), or both come forward from sources keyed_by each side's key at the join's parallelism, so that equal keys of both sides meet in one subtask"))
	}
	if len(in) != 2 {
		errs = append(errs, ops.Errf("", "a join needs exactly two input edges, from left and right (has %d)", len(in)))
	}
	return sides, errs
}

// checkColumns finds each side's key and event-time columns in the rows
// it sends.
func (cfg *JoinConfig) checkColumns(schemas [2]*arrow.Schema, sides *[2]joinSide) ops.Errors {
	var errs ops.Errors
	for i, f := range [2]struct{ key, field string }{{cfg.LeftKey, "left_key"}, {cfg.RightKey, "right_key"}} {
		if f.key == "" {
			continue
		}
		idx := schemas[i].FieldIndices(f.key)
		if len(idx) == 0 {
			errs = append(errs, ops.Errf("config."+f.field, "%s", ops.UnknownColumn(f.key, schemas[i])))
			continue
		}
		if t := schemas[i].Field(idx[0]).Type; !keys.Supported(t) {
			errs = append(errs, ops.Errf("config."+f.field, "column %q has type %s, which cannot be a key", f.key, t))
			continue
		}
		sides[i].keyCol = idx[0]
		ts, err := eventTimeColumn(schemas[i], sides[i].tm)
		if err != nil {
			errs = append(errs, ops.Errf("config."+[2]string{"left", "right"}[i], "%v", err))
		}
		sides[i].tsCol = ts
		sides[i].meta = ops.MetaColumnsOf(schemas[i])
	}
	if cfg.DeletedField != "" {
		switch idx := schemas[1].FieldIndices(cfg.DeletedField); {
		case cfg.Type != JoinTemporal:
			errs = append(errs, ops.Errf("config.deleted_field", "is only used by a temporal join"))
		case len(idx) == 0:
			errs = append(errs, ops.Errf("config.deleted_field", "%s", ops.UnknownColumn(cfg.DeletedField, schemas[1])))
		case schemas[1].Field(idx[0]).Type.ID() != arrow.BOOL:
			errs = append(errs, ops.Errf("config.deleted_field", "column %q has type %s; a delete marker is a bool", cfg.DeletedField, schemas[1].Field(idx[0]).Type))
		}
	}
	return errs
}

// sideTiming is the time declaration of the sources upstream of one side.
func sideTiming(s *job.Spec, op string) (timing, error) {
	tm, first, other := sourcesTiming(planner.UpstreamSources(s, op, nil))
	if other != "" {
		return tm, fmt.Errorf("its sources %q and %q declare different time semantics (mode, timestamp field, lateness or late policy)", first, other)
	}
	return tm, nil
}

// joinSchema is a join's output: the key (named as on the left), a window
// join's window start and end, then the other columns of the left side and of
// the right side, without the sources' metadata columns and the column of
// each side skip names (-1: none). A column name both sides have, or one
// the output has already, gets the side's prefix.
func joinSchema(key arrow.Field, in [2]*arrow.Schema, sides *[2]joinSide, lp, rp string, window bool, skip [2]int) (*arrow.Schema, error) {
	key.Nullable = true
	fields := []arrow.Field{key}
	if window {
		fields = append(fields, arrow.Field{Name: ColumnStart, Type: tsMillis}, arrow.Field{Name: ColumnEnd, Type: tsMillis})
	}
	count := map[string]int{}
	for i := range in {
		for c, f := range in[i].Fields() {
			if c != sides[i].keyCol && c != skip[i] && !connectors.IsMeta(f.Name) {
				count[f.Name]++
			}
		}
	}
	seen := map[string]bool{key.Name: true, ColumnStart: true, ColumnEnd: true}
	for i, prefix := range [2]string{lp, rp} {
		for c, f := range in[i].Fields() {
			if c == sides[i].keyCol || c == skip[i] || connectors.IsMeta(f.Name) {
				continue
			}
			name := f.Name
			if count[name] > 1 || seen[name] {
				name = prefix + name
			}
			if seen[name] {
				return nil, ops.Errf("config", "the output would have two columns named %q; set left_prefix or right_prefix", name)
			}
			seen[name] = true
			f.Name, f.Nullable = name, true
			fields = append(fields, f)
			sides[i].cols = append(sides[i].cols, c)
		}
	}
	return arrow.NewSchema(fields, nil), nil
}

type joinBuild struct {
	cfg     JoinConfig
	sides   [2]joinSide
	out     *arrow.Schema
	keyType arrow.DataType
	in      [2]*arrow.Schema // the rows of each side
	warn    *dropWarner      // shared by the subtasks
	// deletedCol is a temporal join table's deleted_field column, or -1.
	deletedCol int
}

// newInstance creates one subtask of a join; windowJoin, intervalJoin and
// temporalJoin say how each keeps its rows.
func (jb *joinBuild) newInstance(info ops.Task) (ops.Instance, error) {
	t, err := keys.NewTable(jb.keyType)
	if err != nil {
		return nil, err
	}
	j, err := statestore.NewJournal(info.State, info.JobID, info.OperatorID, info.KeyGroups)
	if err != nil {
		return nil, err
	}
	fl := newFloor(info.State, info.JobID, info.OperatorID, info.KeyGroups.Start)
	wm, reached, err := fl.load(info.Now())
	if err != nil {
		return nil, fmt.Errorf("operator %q: reading the watermark floor: %w", info.OperatorID, err)
	}
	b := base{op: info.OperatorID, tm: jb.sides[0].tm, keys: t, out: jb.out, wm: wm, input: eventtime.NoWatermark, reached: reached, m: &counters{},
		journal: j, groups: info.Grouper(), floor: fl, warn: jb.warn, log: info.Logger, now: info.Now}
	switch jb.cfg.Type {
	case JoinInterval:
		return jb.newInterval(b, info)
	case JoinTemporal:
		return jb.newTemporal(b, info)
	}
	return jb.newWindowJoin(b, info)
}

// sideOf returns the side of the join a batch from operator from is on,
// and points b's columns, time and metadata at that side's.
func (jb *joinBuild) sideOf(b *base, from string, maxPar int) (int, error) {
	for i := range jb.sides {
		if s := &jb.sides[i]; from == s.op {
			b.tm, b.keyCol, b.tsCol, b.meta = s.tm, s.keyCol, s.tsCol, s.meta
			b.meta.Key, b.meta.MaxParallelism = s.keyCol, maxPar
			return i, nil
		}
	}
	return -1, fmt.Errorf("operator %q: a batch from %q, which is neither side of the join", b.op, from)
}

// start begins a join's input batch: it finds its side (pointing b at
// that side's columns), drops the rows already in committed state and
// starts the batch's journal epoch (base.begin), and converts its event
// times and keys (base.prepare). A zero Batch means nothing is left to
// process; on error the batch is released.
func (jb *joinBuild) start(b *base, in ops.Batch, maxPar int) (int, ops.Batch, *statestore.Epoch, error) {
	side, err := jb.sideOf(b, in.From, maxPar)
	if err != nil {
		in.Rec.Release()
		in.Ack.Release(nil)
		return 0, ops.Batch{}, nil, err
	}
	in, epoch, err := b.begin(in)
	if err != nil || in.Rec == nil {
		return 0, ops.Batch{}, nil, err
	}
	if err := b.prepare(in.Rec); err != nil {
		in.Rec.Release()
		in.Ack.Release(err)
		return 0, ops.Batch{}, nil, fmt.Errorf("operator %q: %w", b.op, err)
	}
	return side, in, epoch, nil
}

// emitLate sends the rows of rec a join routes as late (late_event_policy
// route), with their columns as they came, on PortLate, holding one more
// reference of node.
func emitLate(ctx context.Context, out ops.Emitter, rec arrow.RecordBatch, rows []int32, node *ack.Node) error {
	if len(rows) == 0 {
		return nil
	}
	taken, err := batch.Take(rec, rows)
	if err != nil {
		return err
	}
	node.Retain(1)
	return out.Emit(ctx, ops.Batch{Rec: taken, Ack: node, Port: ops.PortLate})
}

func releaseAll(as []arrow.Array) {
	for _, a := range as {
		a.Release()
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
