package streambuf

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
)

// defaultValueField is the column a join decodes when value_field is not
// given, ArkFlow's.
const defaultValueField = "__value__"

// join is the join block of a window buffer: at the end of a window it
// decodes each input's rows into a table named after the input and runs
// its query over them.
type join struct {
	query      string
	valueField string
	inputs     []string
	decode     func(arrow.RecordBatch, string) (arrow.RecordBatch, error)
	engine     sqlengine.Joiner
}

func newJoin(typ string, raw json.RawMessage, opts Options) (*join, error) {
	var cfg struct {
		Query      *string                    `json:"query"`
		Codec      map[string]json.RawMessage `json:"codec"`
		ValueField *string                    `json:"value_field"`
		ThreadNum  *int64                     `json:"thread_num"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s buffer: join: %v", typ, err)
	}
	if cfg.Query == nil || *cfg.Query == "" {
		return nil, fmt.Errorf("%s buffer: join.query: missing: the SQL query over the inputs' tables", typ)
	}
	if cfg.Codec == nil {
		return nil, fmt.Errorf("%s buffer: join.codec: missing (codec: {type: json})", typ)
	}
	var codec string
	if t, ok := cfg.Codec["type"]; ok && (json.Unmarshal(t, &codec) != nil || codec != "json") {
		return nil, fmt.Errorf("%s buffer: join.codec.type: codec %s is not available here; only json is", typ, t)
	}
	j := &join{query: *cfg.Query, valueField: defaultValueField, inputs: opts.Inputs, decode: opts.Decode}
	if cfg.ValueField != nil {
		j.valueField = *cfg.ValueField
	}
	if len(opts.Inputs) == 0 {
		return nil, fmt.Errorf("%s buffer: join: needs a multiple_inputs input, whose inputs it joins", typ)
	}
	if opts.Decode == nil {
		return nil, fmt.Errorf("%s buffer: join: not available here (no decoder for the inputs' rows)", typ)
	}
	e := sqlengine.Lookup()
	if e == nil {
		return nil, fmt.Errorf("%s buffer: join.query: no SQL engine is linked in (import github.com/arkflow-rs/arkflow-go/connectors/duckdb, with cgo)", typ)
	}
	jn, ok := e.(sqlengine.Joiner)
	if !ok {
		return nil, fmt.Errorf("%s buffer: join.query: the SQL engine %s cannot query several tables", typ, e.Name())
	}
	j.engine = jn
	return j, nil
}

// accepts fails for an input the join has no table for.
func (j *join) accepts(input string) error {
	if !slices.Contains(j.inputs, input) {
		return fmt.Errorf("join: a batch from input %q, which is not one of the joined inputs %q", input, j.inputs)
	}
	return nil
}

// run joins the window's entries, whose records and acknowledgement
// references it takes over. When an input has no rows in the window it
// emits nothing and acknowledges the entries.
func (j *join) run(alloc memory.Allocator, gs []group) (out []Emission, err error) {
	node := windowAck(gs)
	tables := map[string]arrow.RecordBatch{}
	defer func() {
		for _, g := range gs {
			for _, e := range g.entries {
				if e.Rec != nil {
					e.Rec.Release()
				}
			}
		}
		for _, t := range tables {
			t.Release()
		}
		if err != nil {
			node.Release(err)
		}
	}()
	rows := map[string]int64{}
	for _, g := range gs {
		for _, r := range records(g.entries) {
			rows[g.input] += r.NumRows()
		}
	}
	for _, in := range j.inputs {
		if rows[in] == 0 {
			node.Release(nil)
			return nil, nil
		}
	}
	for _, g := range gs {
		t, err := j.table(alloc, g)
		if err != nil {
			return nil, err
		}
		tables[g.input] = t
	}
	res, err := j.exec(tables)
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		node.Release(nil)
		return nil, nil
	}
	node.Retain(len(res) - 1)
	for _, r := range res {
		out = append(out, Emission{Rec: r, Ack: node})
	}
	return out, nil
}

// table is the decoded rows of one input's entries, of which there is
// at least one with rows.
func (j *join) table(alloc memory.Allocator, g group) (arrow.RecordBatch, error) {
	rec, err := concat(alloc, records(g.entries))
	if err != nil {
		return nil, fmt.Errorf("join: input %s: %w", g.input, err)
	}
	defer rec.Release()
	t, err := j.decode(rec, j.valueField)
	if err != nil {
		return nil, fmt.Errorf("join: input %s: decoding %s: %w", g.input, j.valueField, err)
	}
	if t == nil {
		return nil, fmt.Errorf("join: input %s: decoding %s gave no table", g.input, j.valueField)
	}
	return t, nil
}

// exec compiles the query over the tables' schemas (which the decoded
// rows decide, window by window) and runs it.
func (j *join) exec(tables map[string]arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	schemas := make(map[string]*arrow.Schema, len(tables))
	for name, t := range tables {
		schemas[name] = t.Schema()
	}
	q, err := j.engine.CompileTables(j.query, schemas)
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	defer q.Close()
	res, err := q.Run(context.Background(), tables)
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	return res, nil
}
