package ops

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/agg"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Aggregate emit modes, the spec config's "emit" (job.Running writes
// none, job.Final EmitFinal).
const (
	// EmitUpdates emits, after each input batch, the new values of the
	// keys it touched (the default).
	EmitUpdates = "updates"
	// EmitFinal emits every key once, when the input ends.
	EmitFinal = "final"
)

// AggregateConfig configures a keyed running aggregate (kind "aggregate"):
// what job.Aggregation marshals to (job.Running, job.Final).
type AggregateConfig struct {
	Aggregates []job.Aggregate `json:"aggregates"`
	// Emit is EmitUpdates (the default) or EmitFinal.
	Emit string `json:"emit,omitempty"`
}

// BuildAggregate is the factory of aggregate operators.
func BuildAggregate(c Context) (Built, error) {
	b, err := buildAggregate(c)
	b.State = true
	return b, err
}

// KeyColumn checks an operator's key_field against its input schema and
// returns the column index.
func KeyColumn(c Context) (int, error) {
	if c.Op.KeyField == "" {
		return -1, Errf("key_field", "the %s operator needs key_field", c.Op.Kind)
	}
	idx := c.Input.FieldIndices(c.Op.KeyField)
	if len(idx) == 0 {
		return -1, Errf("key_field", "%s", UnknownColumn(c.Op.KeyField, c.Input))
	}
	t := c.Input.Field(idx[0]).Type
	if !keys.Supported(t) {
		return -1, Errf("key_field", "column %q has type %s, which cannot be a key", c.Op.KeyField, t)
	}
	if !c.Keyed {
		return -1, Errf("key_field", "rows of one key must all reach the same subtask: make every input edge of %q partitioned, give it parallelism 1, or (when the input is already partitioned by this key) declare the source's keyed_by %q", c.Op.ID, c.Op.KeyField)
	}
	return idx[0], nil
}

func buildAggregate(c Context) (Built, error) {
	var errs Errors
	var cfg AggregateConfig
	if err := connectors.DecodeConfig(c.Op.Config, &cfg); err != nil {
		return Built{}, PrefixErrors("config", err)
	}
	switch cfg.Emit {
	case "":
		cfg.Emit = EmitUpdates
	case EmitUpdates, EmitFinal:
	default:
		errs = append(errs, Errf("config.emit", "must be %q or %q (got %q)", EmitUpdates, EmitFinal, cfg.Emit))
	}
	if c.Input == nil {
		if c.Op.KeyField == "" {
			errs = append(errs, Errf("key_field", "the %s operator needs key_field", c.Op.Kind))
		}
		errs = append(errs, PrefixErrors("", agg.Check(cfg.Aggregates, "config.aggregates"))...)
		return Built{}, errs.Err()
	}
	keyCol, err := KeyColumn(c)
	if err != nil {
		errs = append(errs, err)
	}
	set, err := agg.Compile(cfg.Aggregates, c.Input, "config.aggregates")
	if err != nil {
		errs = append(errs, PrefixErrors("", err)...)
	}
	if err := errs.Err(); err != nil {
		return Built{}, err
	}
	keyField := c.Input.Field(keyCol)
	fields := append([]arrow.Field{{Name: keyField.Name, Type: keyField.Type, Nullable: true}}, set.Fields()...)
	for i, f := range set.Fields() {
		if f.Name == keyField.Name {
			return Built{}, Errf(fmt.Sprintf("config.aggregates[%d].as", i), "output column %q collides with the key column", f.Name)
		}
	}
	out := arrow.NewSchema(fields, nil)
	meta := MetaColumnsOf(c.Input)
	return Built{Output: out, New: func(t Task) (Instance, error) {
		tbl, err := keys.NewTable(keyField.Type)
		if err != nil {
			return nil, err
		}
		meta := meta
		meta.Key, meta.MaxParallelism = keyCol, t.MaxParallelism
		a := &aggregate{op: c.Op.ID, keyCol: keyCol, set: set, state: set.NewState(), keys: tbl, out: out, final: cfg.Emit == EmitFinal, meta: meta, groups: t.Grouper(), now: t.Now, groupsOwned: t.KeyGroups}
		if err := a.open(t); err != nil {
			return nil, fmt.Errorf("operator %q: restoring state: %w", c.Op.ID, err)
		}
		return a, nil
	}, Query: &QueryShape{Key: keyField.Type, Schema: out}}, nil
}

// aggNamespace holds a running aggregate's accumulators, by key.
const aggNamespace = "aggregate"

// open restores the committed accumulators of the subtask's key groups.
func (a *aggregate) open(t Task) error {
	j, err := statestore.NewJournal(t.State, t.JobID, t.OperatorID, t.KeyGroups)
	if err != nil {
		return err
	}
	a.journal, a.committed = j, j.ReadCommitted()
	return j.Scan(aggNamespace, statestore.Scope{Groups: t.KeyGroups}, t.Now(), func(e statestore.Entry) error {
		id, err := a.keys.IDOfBytes(e.Key.User)
		if err != nil {
			return err
		}
		a.state.Grow(a.keys.Len())
		return a.state.Decode(int(id), e.Value)
	})
}

type aggregate struct {
	op      string
	keyCol  int
	set     *agg.Set
	state   *agg.State
	keys    *keys.Table
	out     *arrow.Schema
	final   bool
	held    []*ack.Node
	ids     []int32
	seen    []bool
	journal *statestore.Journal
	// committed reads what journal has committed, for queries.
	committed *statestore.Journal
	meta      MetaColumns
	groups    keys.Grouper
	now       func() int64
	buf       []byte
	// groupsOwned are the subtask's key groups.
	groupsOwned job.KeyGroupRange
}

// Lookup implements Queryable: the committed accumulators of key (what
// the sinks have acknowledged), as the row the operator emits for it.
func (a *aggregate) Lookup(key []byte) (arrow.RecordBatch, error) {
	v, ok, err := a.committed.Get(aggNamespace, a.groups.Of(key), key, a.now())
	if err != nil || !ok {
		return EmptyRecord(a.out), err
	}
	r := a.newRows()
	if err := r.add(key, v); err != nil {
		return nil, err
	}
	return r.record(), nil
}

// Scan implements Scanner over the committed accumulators.
func (a *aggregate) Scan(q ScanRequest) (ScanPage, error) {
	r := a.newRows()
	page := ScanPage{}
	scope := statestore.Scope{Groups: a.groupsOwned}
	scope.Groups.Start = max(scope.Groups.Start, q.AfterGroup)
	err := a.committed.Scan(aggNamespace, scope, a.now(), func(e statestore.Entry) error {
		if !q.After(e.Key.KeyGroup, e.Key.User) || !q.Match(e.Key.User) {
			return nil
		}
		if err := r.add(e.Key.User, e.Value); err != nil {
			return err
		}
		page.Keys, page.LastGroup, page.LastKey = page.Keys+1, e.Key.KeyGroup, append([]byte(nil), e.Key.User...)
		if page.Keys == q.Limit {
			return errPageFull
		}
		return nil
	})
	if err != nil && err != errPageFull {
		return ScanPage{}, err
	}
	page.Rec = r.record()
	return page, nil
}

// errPageFull stops a scan whose page is full.
var errPageFull = errors.New("page full")

// aggRows builds a query's answer from committed accumulators.
type aggRows struct {
	a   *aggregate
	st  *agg.State
	tbl *keys.Table
	ids []int32
}

func (a *aggregate) newRows() *aggRows {
	tbl, _ := keys.NewTable(a.keys.Type()) // the operator's own key type
	return &aggRows{a: a, st: a.set.NewState(), tbl: tbl}
}

// add decodes one key's accumulators.
func (r *aggRows) add(key, value []byte) error {
	id, err := r.tbl.IDOfBytes(key)
	if err != nil {
		return err
	}
	r.st.Grow(len(r.ids) + 1)
	if err := r.st.Decode(len(r.ids), value); err != nil {
		return fmt.Errorf("operator %q: the state of key %x: %w", r.a.op, key, err)
	}
	r.ids = append(r.ids, id)
	return nil
}

func (r *aggRows) record() arrow.RecordBatch {
	groups := make([]int32, len(r.ids))
	for i := range groups {
		groups[i] = int32(i)
	}
	cols := append([]arrow.Array{r.tbl.Build(r.ids)}, r.st.Build(groups)...)
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	return array.NewRecordBatch(r.a.out, cols, int64(len(r.ids)))
}

func (a *aggregate) Process(ctx context.Context, b Batch, out Emitter) error {
	// Rows already in committed state (a replay after a restart) are
	// skipped: their effect is committed, and must not count twice.
	b, epoch, err := Replayed(a.journal, a.meta, b)
	if err != nil {
		return fmt.Errorf("operator %q: %w", a.op, err)
	}
	if b.Rec == nil {
		return nil
	}
	rows := int(b.Rec.NumRows())
	if cap(a.ids) < rows {
		a.ids = make([]int32, rows)
	}
	ids := a.ids[:rows]
	if err := a.keys.IDs(b.Rec.Column(a.keyCol), ids); err != nil {
		b.Rec.Release()
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", a.op, err)
	}
	a.state.Grow(a.keys.Len())
	err = a.state.Update(b.Rec, ids)
	b.Rec.Release()
	if err != nil {
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", a.op, err)
	}
	// The touched keys, each once, in order of first appearance: their new
	// accumulators are staged in this batch's epoch, which commits when the
	// batch's output is acknowledged.
	if len(a.seen) < a.keys.Len() {
		a.seen = make([]bool, a.keys.Len()+a.keys.Len()/2)
	}
	touched := make([]int32, 0, 16)
	for _, id := range ids {
		if !a.seen[id] {
			a.seen[id] = true
			touched = append(touched, id)
		}
	}
	for _, id := range touched {
		a.seen[id] = false
		a.buf = a.state.Encode(a.buf[:0], int(id))
		epoch.Put(aggNamespace, a.keys.GroupWith(id, a.groups), a.keys.Bytes(id), a.buf, 0)
	}
	if a.final {
		// The rows are folded into state, but their results are not out
		// yet: hold the acknowledgement until they are.
		a.held = append(a.held, b.Ack)
		return nil
	}
	return out.Emit(ctx, Batch{Rec: a.build(touched), Ack: b.Ack})
}

func (a *aggregate) build(groups []int32) arrow.RecordBatch {
	cols := append([]arrow.Array{a.keys.Build(groups)}, a.state.Build(groups)...)
	rec := array.NewRecordBatch(a.out, cols, int64(len(groups)))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// maxOutputRows bounds the rows of one emitted batch.
const maxOutputRows = 4096

func (a *aggregate) Watermark(ctx context.Context, wm int64, out Emitter) error {
	if !a.final || wm != eventtime.EndOfTime || a.keys.Len() == 0 {
		return nil
	}
	n := a.keys.Len()
	node := ack.Derive(a.held...)
	a.held = nil
	chunks := (n + maxOutputRows - 1) / maxOutputRows
	node.Retain(chunks - 1)
	for start := 0; start < n; start += maxOutputRows {
		end := min(start+maxOutputRows, n)
		groups := make([]int32, end-start)
		for i := range groups {
			groups[i] = int32(start + i)
		}
		if err := out.Emit(ctx, Batch{Rec: a.build(groups), Ack: node}); err != nil {
			return err
		}
	}
	return nil
}

func (a *aggregate) Close() error {
	for _, h := range a.held {
		h.Release(ErrAbandoned)
	}
	a.held = nil
	return nil
}
