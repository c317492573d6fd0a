package ops

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// The tests drive instances the way the runtime does: built through the
// factory registered for their kind, instantiated with a Task over a
// memory state backend, and fed batches that each own one reference of
// an acknowledgement whose completions the test counts.

// clicks is the input schema of most tests.
var clicks = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// rec makes a record of schema from a JSON array of row objects.
func rec(t *testing.T, schema *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	r, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema, strings.NewReader(rows))
	if err != nil {
		t.Fatalf("record from %s: %v", rows, err)
	}
	return r
}

// rowsOf renders a record as a JSON array of row objects (keys sorted;
// colsOf gives the column order).
func rowsOf(t *testing.T, r arrow.RecordBatch) string {
	t.Helper()
	var b strings.Builder
	if err := array.RecordToJSON(r, &b); err != nil {
		t.Fatal(err)
	}
	return "[" + strings.ReplaceAll(strings.TrimSpace(b.String()), "\n", ",") + "]"
}

// colsOf renders a schema as "name:type" pairs.
func colsOf(s *arrow.Schema) string {
	parts := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		parts[i] = f.Name + ":" + f.Type.String()
	}
	return strings.Join(parts, " ")
}

// acks counts the completions of the acknowledgements it makes.
type acks struct {
	mu   sync.Mutex
	errs []error // one per completion
}

func (a *acks) node() *ack.Node {
	return ack.New(func(err error) {
		a.mu.Lock()
		a.errs = append(a.errs, err)
		a.mu.Unlock()
	})
}

// done returns how many nodes completed and how many of them with an error.
func (a *acks) done() (n, failed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, err := range a.errs {
		if err != nil {
			failed++
		}
	}
	return len(a.errs), failed
}

// emitter records what an instance emits.
type emitter struct{ got []Batch }

func (e *emitter) Emit(_ context.Context, b Batch) error {
	e.got = append(e.got, b)
	return nil
}

// take returns the emitted batches and forgets them.
func (e *emitter) take() []Batch {
	got := e.got
	e.got = nil
	return got
}

// deliver plays a sink: it releases the batches' records and acks.
func deliver(bs []Batch) {
	for _, b := range bs {
		Drop(b)
	}
}

// opSpec is one operator to build.
type opSpec struct {
	kind, config, keyField string
	input                  *arrow.Schema
	keyed                  bool
	bound                  any
}

func (o opSpec) build() (Built, error) {
	f, ok := map[string]Factory{job.KindMap: BuildMap, job.KindUDF: BuildMap, job.KindFilter: BuildFilter, job.KindAggregate: BuildAggregate}[o.kind]
	if !ok {
		panic("no factory for " + o.kind)
	}
	if o.config == "" {
		o.config = "{}"
	}
	op := &job.Operator{ID: "op", Kind: o.kind, KeyField: o.keyField, Config: json.RawMessage(o.config)}
	return f(Context{JobID: "j", Spec: &job.Spec{ID: "j", MaxParallelism: 128}, Op: op, Input: o.input, Keyed: o.keyed, Bound: o.bound})
}

// task is one subtask owning every key group, over backend b.
func task(b statestore.Backend) Task {
	return Task{
		TaskInfo:       connectors.TaskInfo{JobID: "j", OperatorID: "op", Parallelism: 1},
		State:          b,
		KeyGroups:      keys.RangeFor(128, 1, 0),
		MaxParallelism: 128,
		Now:            func() int64 { return 1_000 },
	}
}

// instance builds o and makes its instance over a fresh memory backend.
func instance(t *testing.T, o opSpec) (Instance, *arrow.Schema) {
	t.Helper()
	built, err := o.build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	in, err := built.New(task(statestore.NewMemory()))
	if err != nil {
		t.Fatalf("new instance: %v", err)
	}
	t.Cleanup(func() { in.Close() })
	return in, built.Output
}
