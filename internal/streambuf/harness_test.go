package streambuf

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
)

// epoch is the start of every buffer in the tests: times are offsets
// from it.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// harness drives one buffer and keeps what it emitted until the test
// releases it, and which entries' acknowledgements completed.
type harness struct {
	t     *testing.T
	mem   *memory.CheckedAllocator
	buf   Buffer
	nodes []*ack.Node
	// done[i] is every completion of entry i's acknowledgement.
	done [][]error
	// reported is how many completions have been printed.
	reported int
	order    []int // entries in order of completion
	pending  []held
	emitted  int
}

// held is an emission the test has not released yet.
type held struct {
	n int
	Emission
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, mem: memory.NewCheckedAllocator(memory.DefaultAllocator)}
}

// open makes the buffer.
func (h *harness) open(typ string, config string, opts Options) error {
	opts.alloc = h.mem
	b, err := New(typ, json.RawMessage(config), epoch, opts)
	if err != nil {
		return err
	}
	h.buf = b
	return nil
}

// entry is a new entry of rec (which it takes) from input, whose
// acknowledgement records its completions.
func (h *harness) entry(input string, rec arrow.RecordBatch) Entry {
	i := len(h.nodes)
	h.done = append(h.done, nil)
	n := ack.New(func(err error) {
		h.done[i] = append(h.done[i], err)
		h.order = append(h.order, i)
	})
	h.nodes = append(h.nodes, n)
	return Entry{Rec: rec, Input: input, Ack: n}
}

// keep numbers and holds emissions, returning their numbers.
func (h *harness) keep(es []Emission) []held {
	var out []held
	for _, e := range es {
		h.emitted++
		hd := held{n: h.emitted, Emission: e}
		h.pending = append(h.pending, hd)
		out = append(out, hd)
	}
	return out
}

// release releases the held emissions for which pick is true.
func (h *harness) release(pick func(held) bool, err error) {
	var rest []held
	for _, e := range h.pending {
		if !pick(e) {
			rest = append(rest, e)
			continue
		}
		e.Rec.Release()
		e.Ack.Release(err)
	}
	h.pending = rest
}

// finish closes the buffer, releases what is held and checks that no
// memory is left and every acknowledgement completed exactly once.
func (h *harness) finish() {
	if h.buf != nil {
		h.buf.Close()
	}
	h.release(func(held) bool { return true }, nil)
	for i, d := range h.done {
		if len(d) != 1 {
			h.t.Errorf("entry %d: acknowledgement completed %d times", i+1, len(d))
		}
	}
	h.mem.AssertSize(h.t, 0)
}

// completions prints the acknowledgements completed since the last call.
func (h *harness) completions() string {
	var parts []string
	for _, i := range h.order[h.reported:] {
		s := fmt.Sprintf("#%d", i+1)
		if err := h.done[i][len(h.done[i])-1]; err != nil {
			s += fmt.Sprintf(" (%v)", err)
		}
		parts = append(parts, s)
	}
	h.reported = len(h.order)
	if len(parts) == 0 {
		return ""
	}
	return "acked: " + strings.Join(parts, ", ") + "\n"
}

// ints is a batch of one int64 column named col.
func ints(mem memory.Allocator, col string, vals []int64) arrow.RecordBatch {
	s := arrow.NewSchema([]arrow.Field{{Name: col, Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(vals, nil)
	return b.NewRecordBatch()
}

// texts is a batch of one string column named col.
func texts(mem memory.Allocator, col string, vals []string) arrow.RecordBatch {
	s := arrow.NewSchema([]arrow.Field{{Name: col, Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(vals, nil)
	return b.NewRecordBatch()
}

// int64s is the values of rec's only int64 column.
func int64s(t *testing.T, rec arrow.RecordBatch) []int64 {
	t.Helper()
	if rec.NumCols() != 1 {
		t.Fatalf("emission has %d columns", rec.NumCols())
	}
	a, ok := rec.Column(0).(*array.Int64)
	if !ok {
		t.Fatalf("emission column is %s", rec.Column(0).DataType())
	}
	return a.Int64Values()
}

// render is an emission's rows: "[cols]: row row …", each row its cells
// joined by "|".
func render(rec arrow.RecordBatch) string {
	names := make([]string, rec.NumCols())
	for i, f := range rec.Schema().Fields() {
		names[i] = f.Name
	}
	rows := make([]string, rec.NumRows())
	for r := range rows {
		cells := make([]string, rec.NumCols())
		for c, col := range rec.Columns() {
			cells[c] = cellText(col, r)
		}
		rows[r] = strings.Join(cells, "|")
	}
	return "[" + strings.Join(names, " ") + "]: " + strings.Join(rows, " ")
}

func cellText(col arrow.Array, i int) string {
	if col.IsNull(i) {
		return "null"
	}
	switch a := col.(type) {
	case *array.Int64:
		return fmt.Sprint(a.Value(i))
	case *array.Float64:
		return fmt.Sprint(a.Value(i))
	case *array.String:
		return a.Value(i)
	}
	return col.ValueStr(i)
}

// decodeJSON is the decoder joins get in the tests: every value of the
// string column field is a JSON object; the table has a column per key
// (sorted), int64 for whole numbers and utf8 for the rest, null where an
// object lacks the key.
func decodeJSON(rec arrow.RecordBatch, field string) (arrow.RecordBatch, error) {
	idx := rec.Schema().FieldIndices(field)
	if len(idx) == 0 {
		return nil, fmt.Errorf("no column %s", field)
	}
	col, ok := rec.Column(idx[0]).(*array.String)
	if !ok {
		return nil, fmt.Errorf("column %s is %s, not utf8", field, rec.Column(idx[0]).DataType())
	}
	objs := make([]map[string]any, col.Len())
	types := map[string]arrow.DataType{}
	for i := range objs {
		d := json.NewDecoder(strings.NewReader(col.Value(i)))
		d.UseNumber()
		if err := d.Decode(&objs[i]); err != nil {
			return nil, err
		}
		for k, v := range objs[i] {
			isInt := false
			if n, ok := v.(json.Number); ok {
				_, err := n.Int64()
				isInt = err == nil
			}
			if isInt && types[k] != arrow.BinaryTypes.String {
				types[k] = arrow.PrimitiveTypes.Int64
			} else {
				types[k] = arrow.BinaryTypes.String
			}
		}
	}
	var fields []arrow.Field
	for k, typ := range types {
		fields = append(fields, arrow.Field{Name: k, Type: typ, Nullable: true})
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].Name < fields[j].Name })
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for _, o := range objs {
		for i, f := range fields {
			v, ok := o[f.Name]
			switch {
			case !ok || v == nil:
				b.Field(i).AppendNull()
			case f.Type == arrow.PrimitiveTypes.Int64:
				n, _ := v.(json.Number).Int64()
				b.Field(i).(*array.Int64Builder).Append(n)
			default:
				b.Field(i).(*array.StringBuilder).Append(fmt.Sprint(v))
			}
		}
	}
	return b.NewRecordBatch(), nil
}
