package streambuf

import (
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
)

// queue is the entries a buffer holds, in arrival order.
type queue struct {
	alloc   memory.Allocator
	entries []Entry
	rows    int64
}

func (q *queue) push(e Entry) {
	q.entries = append(q.entries, e)
	if e.Rec != nil {
		q.rows += e.Rec.NumRows()
	}
}

func (q *queue) empty() bool { return len(q.entries) == 0 }

// take removes and returns every entry.
func (q *queue) take() []Entry {
	es := q.entries
	q.entries, q.rows = nil, 0
	return es
}

// emitAll takes every entry and emits them as one batch, none when the
// queue is empty.
func (q *queue) emitAll() ([]Emission, error) {
	if q.empty() {
		return nil, nil
	}
	return emit(q.alloc, q.take())
}

// drop releases every entry, failing its acknowledgement with err.
func (q *queue) drop(err error) { release(q.take(), err) }

// release releases the records of es and one reference of each of their
// acknowledgements, with err.
func release(es []Entry, err error) {
	for _, e := range es {
		if e.Rec != nil {
			e.Rec.Release()
		}
		e.Ack.Release(err)
	}
}

// emit turns es, whose records and acknowledgement references it takes
// over, into one emission of their rows in order. When the rows cannot
// be put together it fails their acknowledgements with the error.
func emit(alloc memory.Allocator, es []Entry) ([]Emission, error) {
	rec, err := concat(alloc, records(es))
	if err != nil {
		release(es, err)
		return nil, err
	}
	for _, e := range es {
		if e.Rec != nil {
			e.Rec.Release()
		}
	}
	return []Emission{{Rec: rec, Ack: ack.Derive(acks(es)...)}}, nil
}

func records(es []Entry) []arrow.RecordBatch {
	recs := make([]arrow.RecordBatch, 0, len(es))
	for _, e := range es {
		if e.Rec != nil {
			recs = append(recs, e.Rec)
		}
	}
	return recs
}

func acks(es []Entry) []*ack.Node {
	out := make([]*ack.Node, len(es))
	for i, e := range es {
		out[i] = e.Ack
	}
	return out
}

// concat returns a record with the rows of recs in order, which the
// caller releases; recs are left as they are. Records whose schemas
// differ (other names or types) are refused, as ArkFlow's "Merge batches
// failed".
func concat(alloc memory.Allocator, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("merge batches failed: no batch")
	}
	schema := recs[0].Schema()
	for _, r := range recs[1:] {
		if !batch.SameSchema(schema, r.Schema()) {
			return nil, fmt.Errorf("merge batches failed: schemas differ: %s and %s", fieldList(schema), fieldList(r.Schema()))
		}
	}
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	parts := make([]arrow.Array, len(recs))
	for i := range cols {
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		c, err := array.Concatenate(parts, alloc)
		if err != nil {
			return nil, fmt.Errorf("merge batches failed: column %s: %w", schema.Field(i).Name, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}

// fieldList is a schema on one line: (name type, …).
func fieldList(s *arrow.Schema) string {
	parts := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		parts[i] = f.Name + " " + f.Type.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// periodic is a deadline every period from a start.
type periodic struct {
	next   time.Time
	period time.Duration
}

// due reports whether the deadline has come at now.
func (p *periodic) due(now time.Time) bool { return !now.Before(p.next) }

// skip moves the deadline to the first one after now.
func (p *periodic) skip(now time.Time) {
	if p.due(now) {
		n := now.Sub(p.next)/p.period + 1
		p.next = p.next.Add(n * p.period)
	}
}

// restart starts the periods again at now.
func (p *periodic) restart(now time.Time) { p.next = now.Add(p.period) }

// Concat returns a record with the rows of recs in order (one schema, or
// ArkFlow's "merge batches failed"), which the caller releases; recs are
// left as they are. The Stream runtime's batch processor joins with it.
func Concat(recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	return concat(memory.DefaultAllocator, recs)
}
