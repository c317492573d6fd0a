package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
	"github.com/arkflow-rs/arkflow-go/internal/streambuf"
)

// processor is one processor of one worker: it turns a batch into
// batches (none: the rows are filtered away). rec stays the caller's;
// the caller owns the results.
type processor interface {
	name() string
	process(ctx context.Context, rec arrow.RecordBatch) ([]arrow.RecordBatch, error)
	close()
}

// buildProcessors builds a chain of processors (from position first of
// the pipeline on).
func buildProcessors(r *runner, cs []Component, first int) ([]processor, error) {
	var out []processor
	for k := range cs {
		p, err := buildProcessor(r, &cs[k], first+k)
		if err != nil {
			for _, p := range out {
				p.close()
			}
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func buildProcessor(r *runner, c *Component, i int) (processor, error) {
	label := fmt.Sprintf("pipeline.processors[%d] (%s)", i, c.Type)
	switch c.Type {
	case "sql":
		var cfg struct {
			Query         string    `json:"query"`
			TableName     string    `json:"table_name"`
			TemporaryList []tempRef `json:"temporary_list"`
		}
		if err := json.Unmarshal(c.Config, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		if cfg.TableName == "" {
			cfg.TableName = sqlengine.DefaultTable
		}
		e := sqlengine.Lookup()
		if e == nil {
			return nil, fmt.Errorf("%s: no SQL engine is linked into this program", label)
		}
		p := &sqlProcessor{label: label, engine: e, query: cfg.Query, table: cfg.TableName}
		if len(cfg.TemporaryList) > 0 {
			j, ok := e.(sqlengine.Joiner)
			if !ok {
				return nil, fmt.Errorf("%s: the SQL engine %s cannot query several tables", label, e.Name())
			}
			p.temps = &withTemporaries{query: cfg.Query, table: cfg.TableName, refs: cfg.TemporaryList, lookups: r.lookups, joiner: j, engine: e}
		}
		return p, nil
	case "json_to_arrow", "arrow_to_json":
		var cfg fieldsConfig
		if err := json.Unmarshal(c.Config, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		if cfg.ValueField == "" {
			cfg.ValueField = valueField
		}
		return newJSONProcessor(label, c.Type, cfg), nil
	}
	return nil, fmt.Errorf("%s: processor type %q cannot run here", label, c.Type)
}

// sqlProcessor runs a query on each batch. The query is compiled for the
// schema of the batches it gets, again when that changes (rows decoded
// from JSON have the schema their values give).
type sqlProcessor struct {
	label, query, table string
	engine              sqlengine.Engine
	q                   sqlengine.Query
	schema              *arrow.Schema
	temps               *withTemporaries // temporary_list, if any
}

func (p *sqlProcessor) name() string { return p.label }

func (p *sqlProcessor) process(ctx context.Context, rec arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	if p.temps != nil {
		out, err := p.temps.run(ctx, rec)
		for i := range out {
			out[i] = renameLikeDataFusion(out[i], p.table)
		}
		return out, err
	}
	if p.q == nil || !p.schema.Equal(rec.Schema()) {
		if p.q != nil {
			p.q.Close()
			p.q = nil
		}
		q, err := p.engine.Compile(p.query, p.table, rec.Schema())
		if err != nil {
			return nil, err
		}
		p.q, p.schema = q, rec.Schema()
	}
	out, err := p.q.Run(ctx, rec)
	for i := range out {
		out[i] = renameLikeDataFusion(out[i], p.table)
	}
	return out, err
}

func (p *sqlProcessor) close() {
	if p.q != nil {
		p.q.Close()
	}
}

// item is what moves between serial stages: batches and their
// acknowledgement, or a processor's error with the batch it got.
type item struct {
	recs []arrow.RecordBatch
	ack  *ack.Node
	in   arrow.RecordBatch // with err: the batch the failing stage got
	err  error
}

// stage is a step of the serial part of a pipeline.
type stage interface {
	add(now time.Time, it item) []item
	deadline() (time.Time, bool)
	tick(now time.Time) []item
	flush() []item
	close()
}

// buildStages builds the serial part: batch processors, and the others
// wrapped as stages.
func buildStages(r *runner, cs []Component, first int) ([]stage, error) {
	var out []stage
	for k := range cs {
		c := &cs[k]
		if c.Type == "batch" {
			var cfg struct {
				Count     int   `json:"count"`
				TimeoutMS int64 `json:"timeout_ms"`
			}
			if err := json.Unmarshal(c.Config, &cfg); err != nil {
				return nil, fmt.Errorf("pipeline.processors[%d] (batch): %w", first+k, err)
			}
			out = append(out, &batcher{count: cfg.Count, timeout: time.Duration(cfg.TimeoutMS) * time.Millisecond})
			continue
		}
		p, err := buildProcessor(r, c, first+k)
		if err != nil {
			for _, s := range out {
				s.close()
			}
			return nil, err
		}
		out = append(out, &procStage{p: p})
	}
	return out, nil
}

// procStage runs a processor as a serial stage.
type procStage struct{ p processor }

func (s *procStage) add(_ time.Time, it item) []item {
	out, err := runChainAll(s.p, it.recs)
	if err != nil {
		in, cerr := concat(it.recs)
		releaseAll(it.recs)
		if cerr != nil {
			err = fmt.Errorf("%w (and its rows could not be joined for error_output: %v)", err, cerr)
		}
		return []item{{ack: it.ack, in: in, err: err}}
	}
	releaseAll(it.recs)
	return []item{{recs: out, ack: it.ack}}
}

// runChainAll runs p over every batch of recs (which stay the caller's).
func runChainAll(p processor, recs []arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	for _, rec := range recs {
		res, err := runChain(context.Background(), []processor{p}, rec)
		if err != nil {
			releaseAll(out)
			return nil, err
		}
		out = append(out, res...)
	}
	return out, nil
}

func (s *procStage) deadline() (time.Time, bool) { return time.Time{}, false }
func (s *procStage) tick(time.Time) []item       { return nil }
func (s *procStage) flush() []item               { return nil }
func (s *procStage) close()                      { s.p.close() }

// batcher is ArkFlow's batch processor: it holds batches until count of
// them are held or timeout_ms has passed since the first, then emits them
// as one. Unlike ArkFlow's, the held batches stay unacknowledged until
// they are emitted and written, a timer emits them without waiting for
// the next batch, and the end of input emits the rest.
type batcher struct {
	count   int
	timeout time.Duration
	held    []item
	since   time.Time
}

func (b *batcher) add(now time.Time, it item) []item {
	if len(it.recs) == 0 {
		it.ack.Release(nil)
		return nil
	}
	if len(b.held) == 0 {
		b.since = now
	}
	b.held = append(b.held, it)
	if len(b.held) >= b.count {
		return b.flush()
	}
	return nil
}

func (b *batcher) deadline() (time.Time, bool) {
	if len(b.held) == 0 || b.timeout <= 0 {
		return time.Time{}, false
	}
	return b.since.Add(b.timeout), true
}

func (b *batcher) tick(now time.Time) []item {
	if d, ok := b.deadline(); ok && !now.Before(d) {
		return b.flush()
	}
	return nil
}

func (b *batcher) flush() []item {
	if len(b.held) == 0 {
		return nil
	}
	var recs []arrow.RecordBatch
	nodes := make([]*ack.Node, 0, len(b.held))
	for _, it := range b.held {
		recs = append(recs, it.recs...)
		nodes = append(nodes, it.ack)
	}
	b.held = nil
	node := ack.Derive(nodes...)
	rec, err := concat(recs)
	releaseAll(recs)
	if err != nil {
		return []item{{ack: node, err: fmt.Errorf("batch: %w", err)}}
	}
	return []item{{recs: []arrow.RecordBatch{rec}, ack: node}}
}

func (b *batcher) close() {
	for _, it := range b.held {
		releaseAll(it.recs)
		it.ack.Release(fmt.Errorf("the stream stopped"))
	}
	b.held = nil
}

// concat joins batches of one schema into one.
func concat(recs []arrow.RecordBatch) (arrow.RecordBatch, error) { return streambuf.Concat(recs) }

// aggName is an unaliased aggregate's column name as DuckDB writes it:
// sum("value"), avg(value), count_star().
var aggName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\((.*)\)$`)

var plainArg = regexp.MustCompile(`^"?([A-Za-z_][A-Za-z0-9_]*)"?$`)

// dataFusionName is the name DataFusion (ArkFlow's SQL engine) gives the
// column DuckDB names name: an unaliased call over plain columns names
// them by table (sum(flow.value), count(*)); any other name is kept.
func dataFusionName(name, table string) string {
	if name == "count_star()" {
		return "count(*)"
	}
	m := aggName.FindStringSubmatch(name)
	if m == nil {
		return name
	}
	args := strings.Split(m[2], ", ")
	for i, a := range args {
		am := plainArg.FindStringSubmatch(a)
		if am == nil {
			return name
		}
		args[i] = table + "." + am[1]
	}
	return m[1] + "(" + strings.Join(args, ", ") + ")"
}

// renameLikeDataFusion returns rec with dataFusionName's column names
// (rec itself when none changes); it takes over rec.
func renameLikeDataFusion(rec arrow.RecordBatch, table string) arrow.RecordBatch {
	schema := rec.Schema()
	var fields []arrow.Field
	for i, f := range schema.Fields() {
		if n := dataFusionName(f.Name, table); n != f.Name {
			if fields == nil {
				fields = append([]arrow.Field(nil), schema.Fields()...)
			}
			fields[i].Name = n
		}
	}
	if fields == nil {
		return rec
	}
	defer rec.Release()
	md := schema.Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), rec.Columns(), rec.NumRows())
}
